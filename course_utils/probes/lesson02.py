"""Lesson 02 probes: ``Mul`` and ``Div`` are Function exercises (forward, backward)."""
from . import autograd_function as f

PROBES = {"mul": f.STAGES, "div": f.STAGES}
