"""Errors shared by the grader's modules, in a module that imports nothing of the course (a leaf of the graph)."""
from __future__ import annotations


class UsageError(Exception):
    """Bad command-line input: reported as one sentence, exit status 2."""
