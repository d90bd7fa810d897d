"""Where the course lives and the names its parts agree on: each defined here, once.

``ROOT`` is the repository (in a Gradescope archive, its ``course/`` folder); ``PACKAGE`` is
``course_utils`` itself (what the grader's sandbox mounts parts of). The repository URL is
read from ``pyproject.toml`` ([project.urls] Repository), which pip and the site read too.
"""
from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent
ASSIGNMENT_KEY = "autograd_course"  # notebook metadata key naming the assignment an exercise notebook belongs to


@cache
def repo_url() -> str:
    """The course repository URL (pyproject.toml [project.urls] Repository)."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return data["project"]["urls"]["Repository"]
