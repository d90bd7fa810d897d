"""Per-submission results on disk, written atomically: resuming an interrupted batch and merging shards.

A result is stored under a key made of the submission's bytes (hashed once, here), its
path and the course version (which covers the exercises and the grading code), so a
changed file, a moved file or an upgraded grader is graded again, never served stale.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from .collect import UsageError
from .results import SubmissionResult


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


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


class Store:
    """The results folder of one grading run (``None`` folder: nothing is kept)."""

    def __init__(self, folder: Path | None, version: str) -> None:
        self.folder, self.version = folder, version

    def lookup(self, submission: str, digest: str) -> SubmissionResult | None:
        """The stored result of these exact bytes at this path under this course version, if any."""
        if self.folder is None:
            return None
        path = self.folder / result_key(digest, submission, self.version)
        return load(path) if path.exists() else None

    def save(self, row: SubmissionResult) -> None:
        if self.folder is not None and row.sha256:
            atomic_write(self.folder / result_key(row.sha256, row.submission, self.version),
                         json.dumps(row.to_json(), indent=1))


def merge(folders: list[Path]) -> list[SubmissionResult]:
    """Every stored result of the given folders (the shards of one batch)."""
    rows = []
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(f"{folder} is not a results folder (expected the --results folder of a grading run).")
        for path in sorted(folder.glob("*.json")):
            row = load(path)
            if row is None:
                print(f"warning: {path} is not a stored result; skipped", file=sys.stderr)
            else:
                rows.append(row)
    return rows
