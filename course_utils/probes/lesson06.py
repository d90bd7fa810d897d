"""Lesson 06 probes: ``AbsProd`` and ``Maximum`` are Function exercises (forward, backward)."""
from . import functions as f

PROBES = {"abs_prod": f.STAGES, "maximum": f.STAGES}
