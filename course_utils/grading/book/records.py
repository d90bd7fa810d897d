"""Whom each line of the instructor's times and due-dates CSVs names: never a guess, never silent.

A line's key is placed, in this order, on: the submission whose path it is; the roster student
whose id it is; the one submission whose path ends with it (``alice_7010106_02_exercises.ipynb``);
the one student whose id it is once leading zeros are ignored (``417`` for ``00417``, as a
spreadsheet writes it; said on stderr). A key that places nowhere, or on several submissions or
students, or a times line that applies to no graded submission, is a problem: the export lists
every one (one sentence each) and writes nothing. Two times lines that give one submission
different times are a problem too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..errors import UsageError
from .late import Extension, Policy, TimeRow
from .roster import Matched, Student


@dataclass(frozen=True)
class Placed:
    """Where one key lands: the students (ids) and the submissions it names, how, or why nowhere."""

    students: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    how: str = ""  # 'leading zeros' when matched only by ignoring them
    problem: str = ""


def _digits(text: str) -> str | None:
    return text.lstrip("0") or "0" if text.isdigit() else None


class Index:
    """The roster's ids and the submissions' paths, indexed once (a course's CSVs have a line per submission)."""

    def __init__(self, students: list[Student], matched: Matched, per_file: bool = False) -> None:
        self.matched, self.per_file = matched, per_file
        self.owner = {f: sid for sid, subs in matched.files.items() for f in subs}
        self.ids = {s.id for s in students}
        self.ends: dict[str, list[str]] = {}  # every end of a path after a '/' -> the paths with it
        for f in self.owner:
            for i, c in enumerate(f):
                if c == "/":
                    self.ends.setdefault(f[i + 1:], []).append(f)
        self.zeros: dict[str, list[str]] = {}
        for student in students:  # in the roster's order
            digits = _digits(student.id)
            if digits is not None:
                self.zeros.setdefault(digits, []).append(student.id)

    def place(self, key: str) -> Placed:
        """The students and submissions ``key`` names (see the module's order)."""
        if key in self.owner:
            return Placed((self.owner[key],), (key,))
        if key in self.ids:
            return Placed((key,), tuple(self.matched.files.get(key, [])))
        stray = [f for f in [*self.matched.unknown, *self.matched.ambiguous] if f == key or f.endswith("/" + key)]
        if stray:
            owners = [f"{f} (the patterns of {' and '.join(self.matched.ambiguous[f])} match it)"
                      if f in self.matched.ambiguous else f for f in stray]
            return Placed(problem=f"{key!r} names {', '.join(owners)}, which no single roster student owns "
                                  "(fix the roster's patterns)")
        ends = self.ends.get(key.lstrip("/"), [])
        if len(ends) == 1:
            return Placed((self.owner[ends[0]],), (ends[0],))
        if ends:
            return Placed(problem=f"{key!r} is the end of {len(ends)} submissions' paths ({', '.join(ends)}): "
                                  "give the whole path or the student's id")
        digits = _digits(key)
        zeros = self.zeros.get(digits, []) if digits is not None else []
        if len(zeros) == 1:
            return Placed((zeros[0],), tuple(self.matched.files.get(zeros[0], [])), "leading zeros")
        if zeros:
            return Placed(problem=f"{key!r} matches the ids {', '.join(zeros)} once leading zeros are ignored: "
                                  "write the id in full")
        return Placed(problem=f"{key!r} is neither a submission nor a student id" + (
            " (without --roster, a line names a submission by its path or the end of it)" if self.per_file
            else " of the roster"))


    def why_none(self, key: str, at: Placed, assignment: str) -> str:
        """Why a times line that places on students applies to no graded submission: the cause, where one is known.

        A file that the roster's patterns give to two students (one of them this line's) counts for
        neither: that is said, naming the file and both students, not "no graded submission".
        """
        shared = [(f, ids) for f, ids in self.matched.ambiguous.items() if set(ids) & set(at.students)]
        if shared:
            return f"{key!r} ({', '.join(at.students)}) owns no submission because " + "; ".join(
                f"{f} matches the roster patterns of {' and '.join(ids)}" for f, ids in shared) + \
                ": a file two students' patterns match counts for neither (make the roster's patterns tell them apart)"
        what = f"for {assignment}" if assignment else "at all"
        return f"{key!r} ({', '.join(at.students)}) has no graded submission {what}"


@dataclass
class Placement:
    """What the times and due-dates CSVs give each submission and student, and what they left unsaid."""

    times: dict[str, tuple[datetime, str]] = field(default_factory=dict)  # submission -> (time, CSV line)
    extensions: dict[tuple[str, str], tuple[Policy, str]] = field(default_factory=dict)  # (student, assignment)
    notices: list[str] = field(default_factory=list)  # matched, but worth a line on stderr


def place_all(times: list[TimeRow], extensions: list[Extension], students: list[Student], matched: Matched,
              assignment_of: dict[str, str], per_file: bool = False) -> Placement:
    """Place every line; UsageError listing every unmatched, ambiguous, unused or conflicting one.

    ``assignment_of``: each graded submission's assignment (a times line applies to those of its
    assignment, or to all of them when it names none).
    """
    out, problems, index = Placement(), [], Index(students, matched, per_file)
    for row in times:
        at = index.place(row.key)
        if at.problem:
            problems.append(f"{row.where}: {at.problem}.")
            continue
        hits = [f for f in at.files if f in assignment_of and row.assignment in ("", assignment_of[f])]
        if not hits:
            problems.append(f"{row.where}: {index.why_none(row.key, at, row.assignment)}.")
            continue
        if at.how:
            out.notices.append(f"{row.where}: {row.key!r} taken as student {at.students[0]} ({at.how} ignored).")
        for f in hits:
            if f in out.times and out.times[f][0] != row.when:
                problems.append(f"{row.where}: gives {f} the time {row.when.isoformat()}, but {out.times[f][1]} "
                                f"gave {out.times[f][0].isoformat()}: keep one.")
            out.times.setdefault(f, (row.when, row.where))
    for ext in extensions:
        at = index.place(ext.student)
        if at.problem or len(at.students) != 1:
            problems.append(f"{ext.where}: the extension's student {at.problem or repr(ext.student)}.")
            continue
        if at.how:
            out.notices.append(f"{ext.where}: {ext.student!r} taken as student {at.students[0]} ({at.how} ignored).")
        key = (at.students[0], ext.assignment)
        if key in out.extensions:
            problems.append(f"{ext.where}: a second extension of {ext.assignment} for {key[0]} "
                            f"({out.extensions[key][1]} gave one): keep one.")
            continue
        out.extensions[key] = (ext.policy, ext.where)
    if problems:
        raise UsageError(f"{len(problems)} line(s) of the times or due-dates CSV name nobody, several or conflict; "
                         "nothing was exported:\n  " + "\n  ".join(problems))
    return out
