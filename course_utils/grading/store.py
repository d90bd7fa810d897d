"""Per-submission results on disk, written atomically, so an interrupted batch resumes."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from .collect import Graded, UsageError

FIELDS = {f.name for f in dataclasses.fields(Graded)}


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
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return ""


def save(folder: Path, row: Graded, version: str) -> None:
    atomic_write(folder / result_key(row.sha256, row.submission, version), json.dumps(row.to_json(), indent=1))


def load(path: Path) -> Graded | None:
    """A stored row, or None when the file is not one (it is then graded again)."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or set(data) - FIELDS or not isinstance(data.get("submission"), str):
            return None
        return Graded(**data)
    except (OSError, ValueError, TypeError):
        return None


def load_results(folders: list[Path]) -> list[Graded]:
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
