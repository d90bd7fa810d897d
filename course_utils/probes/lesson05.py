"""Lesson 05 probes: ``KillHead``, ``ClipGrad`` and ``EmbeddingFunction`` are Function exercises (forward,
backward); the embedding's backward is also watched for the size of what it allocates."""
from . import autograd_function as f
from .recorded_ops import backward_ops

PROBES = {"killhead": f.STAGES, "clip_grad": f.STAGES, "embedding": {**f.STAGES, "backward_ops": backward_ops}}
