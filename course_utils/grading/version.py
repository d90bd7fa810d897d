"""The course version a stored result depends on: when it changes, every stored result is stale."""
from __future__ import annotations

import hashlib
from pathlib import Path

from .assignment import Assignment, lesson_code


def course_version(assignments: dict[str, Assignment], course_utils: Path) -> str:
    """What a stored result depends on: the exercise notebooks and their solutions and the lessons' code (the
    copies flags rest on them; read from the course whether loaded or not), all of course_utils' code and the torch
    version.

    An upgrade of the grader, of a check, of a solution or of torch makes every stored result stale.
    """
    from importlib import metadata

    h = hashlib.sha256()
    for a in assignments.values():
        h.update(a.path.read_bytes())
    for folder in sorted({a.path.parent.parent / "solutions" for a in assignments.values()}):
        for path in sorted(folder.glob("*.ipynb")):  # the copies flags stored with a result rest on them
            h.update(path.read_bytes())
    for course in sorted({a.path.parent.parent for a in assignments.values()}):
        for code in lesson_code(course):  # and on the lessons' code (not their outputs)
            h.update(code.encode() + b"\0")
    for path in sorted(course_utils.rglob("*.py")):
        h.update(str(path.relative_to(course_utils)).encode() + b"\0" + path.read_bytes())
    try:
        h.update(metadata.version("torch").encode())
    except metadata.PackageNotFoundError:
        h.update(b"no torch")
    return h.hexdigest()[:16]

