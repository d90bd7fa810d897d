"""The class roster: who the students are and which submitted files are theirs.

    id,name,email,pattern
    s001,Ada Lovelace,ada@example.org,*lovelace*

``pattern`` is a shell-style pattern (``fnmatch``, case-sensitive) matched against a submission's
file name, or against its whole path when the pattern holds a ``/``. A file no pattern matches is
"unknown"; a file two students' patterns match is "ambiguous" and counts for neither (fail closed);
a student whom no file matches has "no submission". All three are listed, never guessed.
"""
from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from . import tables

REQUIRED = ("id", "name", "email", "pattern")


@dataclass(frozen=True)
class Student:
    id: str
    name: str
    email: str
    pattern: str
    extra: tuple[tuple[str, str], ...] = ()  # any other roster column (e.g. section), kept for the exports

    def get(self, column: str) -> str:
        return dict(self.extra).get(column, "")

    def owns(self, submission: str) -> bool:
        target = submission if "/" in self.pattern else os.path.basename(submission)
        return fnmatch.fnmatchcase(target, self.pattern)


@dataclass
class Matched:
    """Who owns which submission, and what the roster could not place."""

    files: dict[str, list[str]] = field(default_factory=dict)  # student id -> their submissions
    unknown: list[str] = field(default_factory=list)  # files no student's pattern matches
    ambiguous: dict[str, list[str]] = field(default_factory=dict)  # file -> the several students it matches
    missing: list[str] = field(default_factory=list)  # students with no submission

    def owner(self, submission: str) -> str | None:
        return next((sid for sid, subs in self.files.items() if submission in subs), None)

    def problems(self) -> list[str]:
        """One line per thing the instructor must sort out, for stderr and the export's notes."""
        return ([f"unknown file (no roster pattern matches it): {f}" for f in self.unknown]
                + [f"ambiguous file (matches {', '.join(ids)}): counted for nobody: {f}"
                   for f, ids in self.ambiguous.items()]
                + [f"no submission: {sid}" for sid in self.missing])


def read(path: str | Path) -> list[Student]:
    """The roster's students; UsageError naming the line of the first problem."""
    header, rows = tables.read(path, "the roster")
    lost = [c for c in REQUIRED if c not in header]
    if lost:
        raise UsageError(f"roster {path} lacks the column(s) {', '.join(lost)}: its first line must name "
                         f"{', '.join(REQUIRED)} (other columns are kept).")
    students: list[Student] = []
    seen: set[str] = set()  # ids so far: a set, so a roster of 1,000 is read in linear time
    for line, row in rows:
        if not row["id"] or not row["pattern"]:
            raise UsageError(f"roster {path} line {line}: every student needs an id and a file-name pattern.")
        if row["id"] in seen:
            raise UsageError(f"roster {path} line {line}: the id {row['id']!r} appears twice.")
        seen.add(row["id"])
        extra = tuple((k, v) for k, v in row.items() if k not in REQUIRED)
        students.append(Student(row["id"], row["name"], row["email"], row["pattern"], extra))
    return students


def _literal(pattern: str) -> str:
    """The longest run of plain characters in a file-name pattern: every name it matches contains it.

    A pattern with a bracket expression ([abc], [!x]) gives "": it is tried on every name.
    """
    return "" if "[" in pattern else max(re.split(r"[*?]", pattern), key=len)


def match(students: list[Student], submissions: list[str]) -> Matched:
    """Place every submission with the one student whose pattern matches it.

    Only the students whose pattern's literal part occurs in a name are tried on it (by substring
    lookup), so 1,000 students x 11,000 files costs about what 11,000 files alone do; the answer is
    the same as trying every pattern.
    """
    out = Matched(files={s.id: [] for s in students})
    by_literal: dict[str, list[Student]] = {}
    for s in students:
        by_literal.setdefault(_literal(s.pattern), []).append(s)
    always = by_literal.pop("", [])
    lengths = sorted({len(k) for k in by_literal})
    order = {s.id: i for i, s in enumerate(students)}
    paths = any("/" in s.pattern for s in students)  # such a pattern matches the whole path, others the file name
    for sub in sorted(submissions):
        name = sub if paths else os.path.basename(sub)
        keys = {name[i:i + k] for k in lengths for i in range(len(name) - k + 1)}
        tried = always + [s for key in keys & by_literal.keys() for s in by_literal[key]]
        owners = sorted({s.id for s in tried if s.owns(sub)}, key=order.__getitem__)
        if not owners:
            out.unknown.append(sub)
        elif len(owners) > 1:
            out.ambiguous[sub] = owners
        else:
            out.files[owners[0]].append(sub)
    out.missing = [sid for sid, subs in out.files.items() if not subs]
    return out
