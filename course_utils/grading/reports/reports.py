"""What the instructor reads: the grade table (CSV), one feedback file per submission, and the
look shared by the HTML pages (the dashboard and the similarity report).

Each output format is a ``Writer`` (see ``results``); ``outputs`` lists them.
"""
from __future__ import annotations

import csv
import hashlib
import html
import io
import os
import re
from pathlib import Path

from ..attention import DISMISSED
from ..results import Batch, Lateness, SubmissionResult, exercise_ids, variants_of
from ..store import atomic_write

STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1400px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:.3em .6em;vertical-align:top}
th,td:first-child,td.owner,td.variants{overflow-wrap:anywhere}td:first-child{min-width:10em}
th{background:#f3f4f6;text-align:left}td{font-variant-numeric:tabular-nums}
table.pair{width:100%;table-layout:fixed}pre{white-space:pre-wrap;font-size:12px;margin:0}
mark{background:#ffd54f}figure{margin:1em 0;overflow-x:auto}figure svg{max-width:100%;height:auto}
figcaption{font-size:.85em;color:#555}ul.diagnoses li{margin:.2em 0}
caption{text-align:left;font-weight:600;padding:.3em 0}
th button.sort{font:inherit;font-weight:600;background:none;border:0;padding:0;cursor:pointer;color:inherit;
text-align:left;width:100%}
th button.sort:focus-visible{outline:2px solid #1a56db;outline-offset:2px}
th[aria-sort=ascending] button.sort::after{content:" \\25B2"}th[aria-sort=descending] button.sort::after{content:" \\25BC"}"""


def page(title: str, body: str) -> str:
    """A self-contained HTML page (no script, no network) in the reports' style."""
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><main>\n{body}\n</main></body></html>\n")


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


def feedback_text(row: SubmissionResult, late: Lateness | None = None) -> str:
    """What the student reads: the result as the grade book holds it (decisions and the late policy applied).

    An exercise whose points a decision set says so above the checks' own verdict, which is then
    labelled as what the checks found (never a stale score read as the result). A dismissed flag is
    gone from the flags and its dismissal is not listed: the accusation is withdrawn, not repeated.
    """
    result = f"Result: {row.status}, {row.total:g}/{row.max:g} points"
    if late is not None and late.days:
        score = late.score(row)
        result += (f"; {late.days} day(s) late (due {late.due}, submitted {late.submitted}): -{late.penalty:g} "
                   f"points" + (f", {score:g}/{row.max:g} after the late penalty" if score is not None else ""))
    lines = [f"Submission: {row.submission}", f"Assignment: {row.assignment or '-'}", result, ""]
    told = [d for d in row.decisions if DISMISSED not in d]  # a withdrawn accusation is not repeated to the student
    if told:
        lines[-1:-1] = ["Instructor's decisions:"] + [f"  - {d}" for d in told]
    if row.review and not row.graded:
        lines[-1:-1] = ["Held for review: an instructor looks at this submission before its points count, because "
                        "its answer code " + "; ".join(row.review) + "."]
    for gid, e in row.exercises.items():
        text = e.feedback or f"{gid}: {e.label}"
        if e.overridden:
            text = (f"{gid}: {e.points:g}/{e.max:g} points, set by the instructor (see the decisions above). "
                    "What the checks found:\n  " + text.replace("\n", "\n  "))
        lines += [text, ""]
    if row.flags:
        lines += ["Flags:"] + [f"  - {f}" for f in row.flags]
    return "\n".join(lines).rstrip() + "\n"


NOT_LATE = Lateness()
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def neutral(value: object) -> str:
    """A CSV cell a spreadsheet never reads as a formula (OWASP's rule: a leading quote before = + - @ tab CR)."""
    text = str(value)
    return "'" + text if text.lstrip(" ")[:1] in FORMULA_START else text


def table_csv(rows: list[SubmissionResult], late: dict[str, Lateness] | None = None) -> str:
    ids = exercise_ids(rows)
    late = late or {}
    buf = io.StringIO()
    w = csv.writer(buf)
    # total: only what counts (empty while held or ungradable, until a decision in the grade book);
    # score: the total after the late policy (as ``export`` writes it); provisional: what the checks gave
    w.writerow(["submission", "assignment", "status", "total", "days_late", "late_penalty", "score", "provisional",
                "max", *ids, "review", "flags", "decisions", "student", "variants"])
    for r in sorted(rows, key=lambda r: r.submission):
        lr = late.get(r.submission, NOT_LATE)
        score = lr.score(r)
        w.writerow([neutral(v) for v in [r.submission, r.assignment, r.status, f"{r.total:g}" if r.graded else "",
                    lr.days, f"{lr.penalty:g}", "" if score is None else f"{score:g}",
                    f"{r.provisional:g}", f"{r.max:g}", *[f"{r.exercises[g].points:g}" if g in r.exercises else "" for g in ids],
                    " | ".join(r.review), " | ".join(r.flags), " | ".join(r.decisions), r.owner,
                    variants_of(r, ids)]])
    return buf.getvalue()


def write_table(batch: Batch, out: str) -> Path:
    """The grade table: one row per submission, one column per exercise (``--out``)."""
    atomic_write(Path(out), table_csv(batch.rows, batch.late))
    return Path(out)


def write_feedback(batch: Batch, folder: str) -> Path:
    """One text file per submission, named after its path (``--feedback-dir``)."""
    for r in batch.rows:
        atomic_write(Path(folder) / feedback_name(r.submission, batch.root),
                     feedback_text(r, (batch.late or {}).get(r.submission)))
    return Path(folder)
