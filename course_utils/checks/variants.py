"""Per-student variants: one exercise, several relatives of it, one of them chosen by the student's id.

A variant changes what the student must derive (a different function of the same kind, which
argument is the non-tensor one, which inputs are saved, a kink, an axis or a layout), never only a
constant that cancels. Every variant of an exercise keeps its grade id, the names its answer cell
defines, its points and its probes (the probes call the student's code on whatever inputs the
request holds), so the notebook's cells and the grader's sandbox are the same for every student:
only the task text, the request and the ``assess`` functions differ.

A lesson module lists its families in ``VARIANTS = {grade_id: (Variant(...), ...)}``; the first
variant is the default (no student id, or variants turned off) and is the exercise ``EXERCISES``
holds. ``registry`` collects and validates them (``FAMILIES``).

Which variant a student gets is a pure function of the grade id and the student's id
(``index``): the notebook and the grader compute it the same way, and the grader computes it
from the file's owner, never from what the notebook claims.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .engine import Exercise


@dataclass(frozen=True, kw_only=True)
class Variant:
    """One relative of an exercise: its stable ``key``, the ``task`` a student reads, and its ``exercise`` (check side)."""

    key: str  # short and stable (a grade book records it): "cols", "rows-last", ...
    task: str  # Markdown shown under the exercise's heading: what to build, never the backward it asks for
    exercise: Exercise


def index(grade_id: str, student: str | None, size: int) -> int:
    """The variant number of ``grade_id`` for ``student`` in a family of ``size``: 0 without an id.

    sha256 of the grade id and the id, so the choice is the same on every machine and Python, and one
    student's variants of different exercises are independent of each other.
    """
    if not student or size <= 1:
        return 0
    digest = hashlib.sha256(f"{grade_id}\0{student.strip()}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % size


def validate(grade_id: str, family: tuple[Variant, ...], default: Exercise) -> None:
    """Refuse (ValueError, one sentence) a family whose variants would not share the notebook's cells and probes."""
    if len(family) < 2:
        raise ValueError(f"exercise {grade_id!r}: a family needs at least two variants, it has {len(family)}.")
    keys = [v.key for v in family]
    if len(set(keys)) != len(keys) or not all(k and k.replace("-", "").replace("_", "").isalnum() for k in keys):
        raise ValueError(f"exercise {grade_id!r}: variant keys must be distinct short words, got {keys}.")
    if family[0].exercise is not default:
        raise ValueError(f"exercise {grade_id!r}: the first variant ({keys[0]!r}) must be the exercise EXERCISES lists.")
    for v in family:
        ex = v.exercise
        same = (ex.grade_id, ex.names, ex.probe_names, ex.points) == (default.grade_id, default.names,
                                                                      default.probe_names, default.points)
        if not same:
            raise ValueError(f"exercise {grade_id!r}: variant {v.key!r} differs from the default in its grade id, "
                             "names, probes or points; every variant must keep all four.")
        if not v.task.strip():
            raise ValueError(f"exercise {grade_id!r}: variant {v.key!r} has no task text.")
