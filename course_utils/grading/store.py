"""Per-submission results on disk, written atomically: resuming an interrupted batch and merging shards.

A result is stored under a key made of the submission's bytes (hashed once, here), its
path, the course version (which covers the exercises and the grading code) and every
option that changes a grade (``options_key``: time limit, memory, sandbox mode,
assignment), so a changed file, a moved file, an upgraded grader or another option is
graded again, never served stale. Nothing read back is trusted: a stored row (a resumed
one, or a shard's in ``--merge``) must pass ``problem`` (types, points within the course's
maximum, same version and options), else it is graded again (resume) or the merge is
refused with one sentence.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path

from .errors import UsageError
from .results import SubmissionResult


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def options_key(timeout: float, memory: int, sandbox: str, assignment: str | None) -> str:
    """Every grading option that can change a grade, as one canonical string (stored on each row)."""
    return f"timeout={float(timeout):g} memory={int(memory)} sandbox={sandbox} assignment={assignment or '*'}"


def result_key(digest: str, name: str, version: str) -> str:
    """File name of a stored result: changes when the file, its path or the course's checks change."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[-80:]
    return f"{hashlib.sha256((digest + name + version).encode()).hexdigest()[:20]}-{safe}.json"


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes ('' when it cannot be read: the judge then reports why)."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return ""


def load(path: Path) -> SubmissionResult | None:
    """A stored result, or None when the file is not one (it is then graded again)."""
    try:
        return SubmissionResult.from_json(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def _number(x: object) -> bool:
    return type(x) in (int, float) and math.isfinite(x)  # type: ignore[arg-type]


def _texts(x: object) -> bool:
    return isinstance(x, list) and all(isinstance(t, str) for t in x)


def _evidence(x: object) -> bool:
    """A list of ``copies.evidence`` records: texts and lists of texts under their keys."""
    return isinstance(x, list) and all(
        isinstance(e, dict) and set(e) == {"flag", "exercise", "student", "solution", "shown"}
        and isinstance(e["flag"], str) and isinstance(e["exercise"], str)
        and all(_texts(e[k]) for k in ("student", "solution", "shown")) for e in x)


def problem(row: SubmissionResult, maxima: dict[str, float] | None = None) -> str | None:
    """What is wrong with a row read back from disk (one clause), or None when it is well-formed.

    ``maxima``: each exercise's points in this course; a row may not claim more, nor another maximum.
    """
    if not all(isinstance(v, str) for v in (row.submission, row.assignment, row.status, row.sha256,
                                             row.course_version, row.sandbox, row.options, row.owner)):
        return "a field that should be text is not"
    if not (_texts(row.flags) and _texts(row.review) and _number(row.seconds) and isinstance(row.exercises, dict)
            and (row.checked is None or _number(row.checked)) and _evidence(row.evidence)):
        return "flags, review, seconds, checked or evidence have the wrong type"
    for gid, e in row.exercises.items():
        if not (all(isinstance(v, str) for v in (e.status, e.feedback, e.problem, e.output_note, e.title))
                and _texts(e.problem_codes) and _texts(e.flags) and isinstance(e.stages, list)):
            return f"exercise {gid!r} has fields of the wrong type"
        if not (_number(e.points) and _number(e.max) and 0 <= e.points <= e.max):
            return f"exercise {gid!r} has points outside [0, its maximum]"
        if maxima is not None and (gid not in maxima or e.max not in (0.0, maxima[gid])):  # 0: never judged
            return f"exercise {gid!r} is not one of this course's exercises with its maximum"
        for part in e.stages:
            if not all(isinstance(v, str) for v in (part.name, part.diagnosis, part.code, part.fix or "")):
                return f"exercise {gid!r} has a stage with fields of the wrong type"
            if not (_number(part.points) and _number(part.max) and 0 <= part.points <= part.max <= e.max):
                return f"exercise {gid!r} has a stage with points outside [0, its maximum]"
    return None


class Store:
    """The results folder of one grading run (``None`` folder: nothing is kept)."""

    def __init__(self, folder: Path | None, version: str, options: str = "") -> None:
        self.folder, self.version, self.options = folder, version, options

    def _path(self, submission: str, digest: str) -> Path:
        assert self.folder is not None
        return self.folder / result_key(digest, submission, self.version + "\0" + self.options)

    def lookup(self, submission: str, digest: str) -> SubmissionResult | None:
        """The stored result of these exact bytes at this path under this course version and options, if any."""
        if self.folder is None:
            return None
        path = self._path(submission, digest)
        row = load(path) if path.exists() else None
        if row is None or problem(row) or (row.submission, row.sha256) != (submission, digest):
            return None  # damaged, or not this submission's result: graded again
        return row

    def save(self, row: SubmissionResult) -> None:
        if self.folder is not None and row.sha256:
            atomic_write(self._path(row.submission, row.sha256), json.dumps(row.to_json(), indent=1))


def merge(folders: list[Path], version: str | None = None, maxima: dict[str, float] | None = None
          ) -> list[SubmissionResult]:
    """Every stored result of the given folders (the shards of one batch), each verified.

    UsageError (one sentence) for a row that is malformed, claims points outside its
    exercise's range, repeats a submission, or was graded under another course version
    (``version``: this course's) or other options than the first row's. A row of another version
    whose submission also has a row of this version (a shard graded again after an update) is skipped.
    """
    found: list[tuple[Path, SubmissionResult]] = []
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(f"{folder} is not a results folder (expected the --results folder of a grading run).")
        for path in sorted(folder.glob("*.json")):
            row = load(path)
            if row is None:
                print(f"warning: {path} is not a stored result; skipped", file=sys.stderr)
                continue
            found.append((path, row))
    # a shard graded again after the course changed still holds the old version's files: those are stale
    fresh = {row.submission for _, row in found if version is not None and row.course_version == version}
    stale = [(p, r) for p, r in found if r.submission in fresh and r.course_version != version]
    if stale:
        print(f"merge: skipped {len(stale)} result(s) of an earlier version of the course, graded again since "
              f"(e.g. {stale[0][0]})", file=sys.stderr)
    rows: list[SubmissionResult] = []
    seen: dict[str, Path] = {}
    skip = {p for p, _ in stale}
    for path, row in found:
        if path in skip:
            continue
        why = problem(row, maxima)
        if why is None and row.submission in seen:
            why = f"its submission was already merged from {seen[row.submission]}"
            if seen[row.submission].parent == path.parent:  # one folder, two versions of the file's bytes
                raise UsageError(f"refusing to merge {path}: {seen[row.submission]} holds another result of "
                                 f"{row.submission} (the file changed between two runs); empty {path.parent} "
                                 "and grade that shard again.")
        if why is None and version is not None and row.course_version != version:
            why = (f"it was graded by another version of the course ({row.course_version or 'unknown'}, "
                   f"this one is {version})")
        if why is None and rows and row.options != rows[0].options:
            why = f"it was graded with other options ({row.options or 'unknown'}, not {rows[0].options})"
        if why is not None:
            raise UsageError(f"refusing to merge {path}: {why}; regrade that shard with this course "
                             "and the same options.")
        seen[row.submission] = path
        rows.append(row)
    return rows
