"""Helpers for the course on writing custom PyTorch autograd Functions.

Modules: ``graph`` (draw backward graphs), ``widgets`` (gradient comparison tool),
``checks`` (exercise checks), ``release`` (exercises from solutions), ``grade`` (grading),
``build`` (notebooks from their text sources).
"""
__version__ = "0.1.0"
