"""Due dates and the late policy, from submission times that were recorded.

    assignment,due,grace_hours,penalty_per_day
    04_exercises,2026-03-01T23:59:00+01:00,2,0.1

A submission later than ``due`` + grace loses ``penalty_per_day`` of the assignment's maximum
for every started day after the grace period (never below zero). Its time comes from, in order:
an instructor's CSV (``--times``: submission or student id, assignment, submitted_at), nbgrader's
exchange (the ``timestamp.txt`` beside a collected notebook), Gradescope's ``submission_metadata.json``
(its ``created_at``, beside the notebook or its ``submission/`` folder), or, only when asked for with
``--use-mtime``, the file's modification time, which the export then names as its source (a copy
or a checkout changes an mtime: it is not a record). Times without a time zone are refused,
except nbgrader's, which nbgrader writes in UTC.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from .collect import UsageError

DAY = timedelta(days=1)


@dataclass(frozen=True)
class Policy:
    due: datetime
    grace: timedelta = timedelta(0)
    per_day: float = 0.0  # share of the maximum lost per started day late


@dataclass(frozen=True)
class Late:
    """How late one submission was and what it costs."""

    submitted: datetime | None
    source: str  # where the time came from ('' when none was found)
    days: int = 0
    penalty: float = 0.0


def parse_time(text: str, where: str, assume_utc: bool = False) -> datetime:
    """An ISO 8601 time with its time zone (UsageError naming ``where`` otherwise)."""
    raw = text.strip()
    utc = raw.endswith((" UTC", "Z"))
    try:
        when = datetime.fromisoformat(raw.removesuffix(" UTC").removesuffix("Z"))
    except ValueError:
        raise UsageError(f"{where}: {text!r} is not a time; write it as 2026-03-01T23:59:00+01:00.") from None
    if when.tzinfo is None:
        if not (utc or assume_utc):
            raise UsageError(f"{where}: {text!r} has no time zone; add one (e.g. +01:00 or Z) so it means one instant.")
        when = when.replace(tzinfo=UTC)
    return when


def read_policies(path: str | Path) -> dict[str, Policy]:
    """assignment -> its due date, grace period and penalty, from the due-dates CSV."""
    out = {}
    with open(path, newline="", encoding="utf-8-sig") as f:
        for line, row in enumerate(csv.DictReader(f), 2):
            where = f"{path} line {line}"
            try:
                grace = timedelta(hours=float(row.get("grace_hours") or 0))
                per_day = float(row.get("penalty_per_day") or 0)
            except ValueError:
                raise UsageError(f"{where}: grace_hours and penalty_per_day must be numbers.") from None
            if not 0 <= per_day <= 1 or grace < timedelta(0):
                raise UsageError(f"{where}: penalty_per_day is a share of the maximum (0 to 1) and grace_hours "
                                 "is not negative.")
            if not row.get("assignment") or not row.get("due"):
                raise UsageError(f"{where}: every line needs an assignment and a due time.")
            out[row["assignment"].strip()] = Policy(parse_time(row["due"], where), grace, per_day)
    return out


def read_times(path: str | Path) -> dict[tuple[str, str], datetime]:
    """(submission or student id, assignment or '') -> when it was submitted, from an instructor's CSV."""
    out = {}
    with open(path, newline="", encoding="utf-8-sig") as f:
        for line, row in enumerate(csv.DictReader(f), 2):
            who = (row.get("submission") or row.get("student") or row.get("id") or "").strip()
            if not who or not row.get("submitted_at"):
                raise UsageError(f"{path} line {line}: each line needs a submission (or student id) and submitted_at.")
            out[(who, (row.get("assignment") or "").strip())] = parse_time(row["submitted_at"], f"{path} line {line}")
    return out


def recorded_time(submission: str, student: str, assignment: str, times: dict[tuple[str, str], datetime],
                  use_mtime: bool = False) -> tuple[datetime | None, str]:
    """When ``submission`` was handed in, and where that was read ('' and None when nowhere)."""
    for key in ((submission, assignment), (submission, ""), (student, assignment), (student, "")):
        if key in times:
            return times[key], "instructor's times CSV"
    stamp = Path(submission).parent / "timestamp.txt"  # nbgrader's exchange writes it beside the notebook
    try:
        return parse_time(stamp.read_text(encoding="utf-8"), str(stamp), assume_utc=True), "nbgrader timestamp.txt"
    except (OSError, UsageError, UnicodeDecodeError):
        pass
    for folder in (Path(submission).parent, Path(submission).parent.parent):  # Gradescope: beside submission/
        meta = folder / "submission_metadata.json"
        try:
            created = json.loads(meta.read_text(encoding="utf-8"))["created_at"]
            return parse_time(str(created), str(meta)), "Gradescope submission_metadata.json"
        except (OSError, UsageError, UnicodeDecodeError, ValueError, KeyError, TypeError):
            continue
    if use_mtime:
        try:
            mtime = Path(submission).stat().st_mtime
        except OSError:
            return None, ""
        return datetime.fromtimestamp(mtime, UTC), "file mtime (not a recorded time)"
    return None, ""


def lateness(policy: Policy | None, submitted: datetime | None, source: str, maximum: float) -> Late:
    """The days late after the grace period (each started day counts) and the points they cost."""
    if policy is None or submitted is None:
        return Late(submitted, source)
    over = submitted - (policy.due + policy.grace)
    days = math.ceil(over / DAY) if over > timedelta(0) else 0
    return Late(submitted, source, days, min(maximum, days * policy.per_day * maximum))
