"""How a notebook says which variant it shows and for whom: one wording, which the grader reads back as evidence.

The task cell (``checks.task``) opens with ``task_head``; a verdict names the variant it assessed with
``verdict_line``. The grader never believes these words (it derives the variant from the file's owner),
but a notebook whose stored outputs name another student or variant is evidence a reviewer can read
(``marks``). Torch-free: the grader's reading of a submission needs no checks.
"""
from __future__ import annotations

import re

TASK_MARK = re.compile(r"Variant `([\w-]{1,40})` of `(\w{1,60})`")
STUDENT_MARK = re.compile(r"for student `([^`\s]{1,100})`")
VERDICT_MARK = re.compile(r"(?<![\w`])variant `([\w-]{1,40})`")


def task_head(grade_id: str, key: str, size: int, student: str | None, off: bool = False) -> str:
    """The first line of a task cell: which variant, of how many, for whom (or why the default)."""
    head = f"**Variant `{key}` of `{grade_id}`**"
    if off:
        return (f"{head}: variants are off for this assignment, so every student solves this one (the default "
                f"of {size}).")
    if student:
        return f"{head} (one of {size}), for student `{student}`."
    return (f"{head} (one of {size}, the default): no student id is set. Your instructor grades the variant of "
            "your own id: run `remember(\"your-id\")` once in a new cell (as the set-up cell says), then run this "
            "notebook again.")


def verdict_line(key: str, student: str | None = None) -> str:
    """The verdict's short line naming the variant it assessed (and, in a notebook, for whom)."""
    return f"variant `{key}`" + (f", for student `{student}`" if student else "")


def marks(text: str) -> tuple[list[str], list[str]]:
    """(the variant keys, the student ids) a cell's stored output names, in order, without repeats."""
    keys = [m.group(1) for m in TASK_MARK.finditer(text)] + VERDICT_MARK.findall(text)
    return list(dict.fromkeys(keys)), list(dict.fromkeys(STUDENT_MARK.findall(text)))
