"""Lesson 02 probes: ``Mul`` and ``Div`` are Function exercises (forward, backward)."""
from . import functions as f

PROBES = {"mul": f.STAGES, "div": f.STAGES}
