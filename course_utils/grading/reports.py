"""What the instructor reads: the grade table (CSV) and one feedback file per submission."""
from __future__ import annotations

import csv
import hashlib
import io
import os
import re
from pathlib import Path

from .collect import Graded
from .store import atomic_write


def common_root(paths: list[str]) -> str:
    """The folder all submissions share, so feedback file names keep only what tells them apart."""
    try:
        return os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths]) if paths else ""
    except ValueError:  # different drives
        return ""


def feedback_name(submission: str, root: str) -> str:
    """Readable, unique and stable: the relative path made safe, plus a short hash of the full path."""
    full = os.path.abspath(submission)
    rel = os.path.relpath(full, root) if root else submission
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "__", rel.removesuffix(".ipynb")).strip("_.")[:100] or "submission"
    return f"{readable}--{hashlib.sha256(full.encode()).hexdigest()[:8]}.txt"


def feedback_text(row: Graded) -> str:
    lines = [f"Submission: {row.submission}", f"Assignment: {row.assignment or '-'}",
             f"Result: {row.status}, {row.total:g}/{row.max:g} points", ""]
    if row.review:
        lines[-1:-1] = ["Held for review: an instructor looks at this submission before its points count, because "
                        "its answer code " + "; ".join(row.review) + "."]
    for gid, e in row.exercises.items():
        lines += [e["feedback"] or f"{gid}: {e['status']}", ""]
    if row.flags:
        lines += ["Flags:"] + [f"  - {f}" for f in row.flags]
    return "\n".join(lines).rstrip() + "\n"


FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def neutral(value: object) -> str:
    """A CSV cell a spreadsheet never reads as a formula (OWASP's rule: a leading quote before = + - @ tab CR)."""
    text = str(value)
    return "'" + text if text.lstrip(" ")[:1] in FORMULA_START else text


def table_csv(rows: list[Graded]) -> str:
    from ..checks import EXERCISES

    ids = [g for g in EXERCISES if any(g in r.exercises for r in rows)]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["submission", "assignment", "status", "total", "max", *ids, "review", "flags"])
    for r in sorted(rows, key=lambda r: r.submission):
        w.writerow([neutral(v) for v in [r.submission, r.assignment, r.status, f"{r.total:g}", f"{r.max:g}",
                    *[f"{r.exercises[g]['points']:g}" if g in r.exercises else "" for g in ids],
                    " | ".join(r.review), " | ".join(r.flags)]])
    return buf.getvalue()


def write_reports(rows: list[Graded], out: str | None, feedback_dir: str | None, root: str) -> None:
    if out:
        atomic_write(Path(out), table_csv(rows))
    if feedback_dir:
        for r in rows:
            atomic_write(Path(feedback_dir) / feedback_name(r.submission, root), feedback_text(r))
