"""Whose file a submission is (so which variant of each exercise it is judged against), and what its outputs show.

The owner comes from what the instructor or the platform recorded, never from the notebook:

* the roster (``--roster``): the id of the one student whose pattern matches the file; with a roster, a
  file it cannot place (no pattern, or two) has no owner;
* Gradescope: ``submission_metadata.json`` beside the upload folder (``late`` reads its time there too):
  the submitter's SID, else their email (a group upload has no single owner);
* nbgrader: the course folder ``submitted/STUDENT/ASSIGNMENT/FILE`` (the outermost such ``submitted``, with
  ASSIGNMENT one of the course's), which nbgrader's exchange writes.

A file without an owner is judged against the default variants and its feedback says so.

``evidence``: a notebook's stored outputs (a task cell's first line, a verdict's variant line:
``variant_text``) that name another student than the owner, or another variant beside a student id, are
evidence that it ran someone else's variant. They never change which variant is judged; they raise a flag
that quotes them, for a reviewer to read.
"""
from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path

from ..markers import TASK_CALL
from ..variant_text import STUDENT_MARK, TASK_MARK, VERDICT_MARK, marks
from .book.late import META, upload_of
from .names import display_name
from .notebook import Cell, cell_kind, clean

FLAG = "ran another student's variant"
SUBMITTED = "submitted"  # nbgrader's folder of collected submissions: submitted/STUDENT/ASSIGNMENT/file.ipynb


def owner(path: Path, roster: Mapping[str, str] | None = None, assignments: Collection[str] = ()) -> tuple[str, str]:
    """(the id of the student ``path`` belongs to, where that came from), or ("", "") when nothing records it.

    ``roster``: each file's roster id (``roster.match``), None without ``--roster``. ``assignments``: the
    course's assignment names; nbgrader's folder counts only as ``submitted/STUDENT/<one of them>/FILE``.
    """
    if roster is not None:
        who = roster.get(display_name(path), "")
        return (who, "the roster") if who else ("", "")
    who = gradescope_owner(path)
    if who:
        return who, "Gradescope's submission metadata"
    parts = path.parts
    at = next((i for i, name in enumerate(parts) if name == SUBMITTED and len(parts) - i == 4
               and parts[i + 2] in assignments), None)
    return (parts[at + 1], "nbgrader's submitted folder") if at is not None else ("", "")


def gradescope_owner(path: Path) -> str:
    """The one submitter Gradescope's metadata names for the upload holding ``path`` (SID, else email), or ""."""
    upload = upload_of(path)
    if upload is None:
        return ""
    try:
        users = json.loads((upload.parent / META).read_text(encoding="utf-8")).get("users")
    except (OSError, ValueError, AttributeError):
        return ""
    if not isinstance(users, list) or len(users) != 1 or not isinstance(users[0], dict):
        return ""
    found = next((str(users[0][k]).strip() for k in ("sid", "email") if users[0].get(k)), "")
    return clean(found)[:100]


def no_owner_note(key: str) -> str:
    """The note an exercise's feedback carries when the file's owner is unknown."""
    return (f"no student id is known for this file (no roster entry, nbgrader folder or Gradescope metadata "
            f"names its owner), so it was graded against the default variant `{key}`")


def _cells_of(cells: tuple[Cell, ...], grade_id: str) -> list[tuple[str, Cell]]:
    """The cells whose outputs speak for ``grade_id``: its task cell and its check cell, with their role."""
    out = []
    for cell in cells:
        if cell.cell_type != "code" or not cell.shown:
            continue
        if cell_kind(cell) == "check" and cell.nbgrader["grade_id"] == grade_id:
            out.append(("check", cell))
        elif any(m.group(1) == grade_id for m in TASK_CALL.finditer(cell.source)):
            out.append(("task", cell))
    return out


def _quoted(text: str) -> list[str]:
    """The lines of an output that carry a variant or student mark: what the flag quotes."""
    return [line.strip() for line in text.splitlines()
            if TASK_MARK.search(line) or STUDENT_MARK.search(line) or VERDICT_MARK.search(line)][:3]


def evidence(cells: tuple[Cell, ...], expected: Mapping[str, str], who: str) -> list[dict]:
    """Flags, each with its evidence, for outputs showing another student than ``who`` or another variant.

    ``expected``: each varied exercise's key for ``who`` (what it is judged against).
    """
    found = []
    for gid, key in expected.items():
        for role, cell in _cells_of(cells, gid):
            keys, students = marks(cell.shown)
            others = [s for s in students if s != who]
            wrong = [k for k in keys if k != key] if students else []
            if not (others or wrong):
                continue
            quoted = _quoted(cell.shown)
            flag = (f"{FLAG}: the stored output of {gid}'s {role} cell says " + " / ".join(f'"{q}"' for q in quoted)
                    + f", but this file belongs to `{who}`, whose variant is `{key}`; it was graded against `{key}`")
            found.append({"flag": flag, "exercise": gid, "student": quoted, "solution": [], "shown": []})
    return found
