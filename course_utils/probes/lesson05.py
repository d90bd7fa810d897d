"""Lesson 05 probes: ``KillHead`` and ``ClipGrad`` are Function exercises (forward, backward)."""
from . import functions as f

PROBES = {"killhead": f.STAGES, "clip_grad": f.STAGES}
