"""Helpers for the course on writing custom PyTorch autograd Functions.

Modules: ``graph`` (draw backward graphs), ``widgets`` (gradient comparison tool, drawing
with ``figures`` the data of ``gradients``),
``measure`` (exact peak memory, saved bytes, timing ratios), ``checks`` (exercise checks:
probe beside the student's code, assess apart from it), ``wire`` (plain-bytes format of check data),
``release`` (exercises from solutions), ``grading`` (the instructors' grader; ``grade`` is its command),
``build`` (notebooks from their text sources), ``site`` (the course website),
``errors`` (one-sentence errors).
"""
import sys as _sys

__version__ = "0.1.0"
if "IPython" in _sys.modules:  # a Jupyter kernel: tracebacks through course code cut to the student's frames
    try:
        from .errors import install_notebook_tracebacks
    except ImportError:  # the grader's sandbox holds only the runner's files (see grading/sandbox/sandbox.py)
        pass
    else:
        install_notebook_tracebacks()
