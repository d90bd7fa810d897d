"""The marks the course's sources carry, read by both the edition builder (``release``) and the grader.

Solution regions (``BEGIN``/``END``, a ``SHIPPED`` part), the stub an edition ships in their place, the
check and task calls that tie a cell to its exercise, and the one rewrite the edition applies to every text
(``retarget``: the instructors' repository -> the students'). Facts only: the grader reads them here and
never imports the edition builder, and the builder writes them from here.
"""
from __future__ import annotations

import re

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
SHIPPED = "### SHIPPED"  # inside a solution region: what follows (commented out) is released instead of the stub
STUB = 'raise NotImplementedError("Exercise \'{grade_id}\' is not attempted yet: replace this line with your code.")'


CHECK_CALL = re.compile(r'^check\("(\w+)"', re.M)
TASK_CALL = re.compile(r'^task\("(\w+)"\)', re.M)  # a varied exercise's task cell (``checks.task``): locked, shows only
TASK_IMPORT = "from course_utils.checks import task"


def is_task_cell(source: str) -> bool:
    """Whether a cell only shows a task (its import and ``task("...")`` calls): the grader never runs one."""
    lines = [line.split("#")[0].strip() for line in source.splitlines()]
    lines = [line for line in lines if line]
    return bool(lines) and all(line == TASK_IMPORT or TASK_CALL.fullmatch(line) for line in lines) and \
        any(TASK_CALL.fullmatch(line) for line in lines)


REPOSITORY = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+")  # what --repository accepts


def retarget(text: str, old: str, new: str) -> str:
    """``text`` with the instructors' repository ``old`` (URL and owner/name path) replaced by ``new``.

    What ``release --repository`` does to every text file; the grader derives the legitimate forms
    of its locked cells from it (``checksums.untouched``).
    """
    for a, b in ((old, new), (old.removeprefix("https://github.com/"), new.removeprefix("https://github.com/"))):
        text = text.replace(a, b)
    return text
