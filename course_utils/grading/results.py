"""One results model: what grading produced, built once per submission, read by every output.

A ``SubmissionResult`` holds its ``ExerciseResult``s: the very objects the checks produced
(``course_utils.exercise_result``: every stage's points, status, diagnosis, fix and mistake code).
Totals, outcomes and the reason a submission needs a person are properties computed there and
here, so the grade table, the feedback files, the JSON lines, the Gradescope results and the dashboard cannot disagree about them.
Results are stored as JSON (``to_json``/``from_json``) by ``store``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..exercise_result import ExerciseResult, StageOutcome
from ..status import SubmissionStatus

__all__ = ["Answer", "Batch", "ExerciseResult", "Lateness", "Pair", "StageOutcome", "Status", "SubmissionResult", "Writer",
           "exercise_ids", "variants_of"]


Status = SubmissionStatus  # what became of a submission (``course_utils.status``)
GRADED, HELD = Status.GRADED, Status.HELD


@dataclass
class SubmissionResult:
    """One submission: its exercises, and why (if so) its points do not simply count."""

    submission: str
    assignment: str = ""
    status: SubmissionStatus = GRADED
    exercises: dict[str, ExerciseResult] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)  # why a person must look before the points count
    decisions: list[str] = field(default_factory=list)  # the grade book's decisions applied (gradebook.final)
    sha256: str = ""
    course_version: str = ""
    seconds: float = 0.0
    sandbox: str = ""  # how its code ran: root | user | none (--no-sandbox) | "" (never ran)
    options: str = ""  # every grading option that changes a grade (store.options_key): merges compare it
    checked: float | None = None  # the total the checks gave, where an override changed it (gradebook.final)
    resolved: list[str] = field(default_factory=list)  # flags a decision settled (gradebook.final; never stored)
    # what each flag that accuses rests on (``copies``): {"flag", "exercise", "student", "solution", "shown"}
    evidence: list[dict] = field(default_factory=list)
    owner: str = ""  # the student the file belongs to (``owners.owner``: roster, platform), "" when unknown

    @property
    def total(self) -> float:
        return sum(e.points for e in self.exercises.values())

    @property
    def provisional(self) -> float:
        """What the checks gave, before any decision, whatever the status."""
        return self.total if self.checked is None else self.checked

    @property
    def max(self) -> float:
        return sum(e.max for e in self.exercises.values())

    @property
    def graded(self) -> bool:
        """Its points count as they are (not held, not refused, not unreadable)."""
        return self.status == GRADED

    def reason(self) -> str:
        """One line saying why a submission that is not simply graded needs the instructor."""
        if self.review:
            return "held for review: " + "; ".join(self.review)
        return "; ".join(self.flags) or self.status

    def to_json(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data.update(flags=list(self.flags), review=list(self.review), decisions=list(self.decisions),
                    resolved=list(self.resolved),
                    evidence=[dict(e) for e in self.evidence],
                    exercises={gid: e.to_json() for gid, e in self.exercises.items()}, total=self.total, max=self.max)
        return data

    @classmethod
    def from_json(cls, data: object) -> SubmissionResult:
        """Rebuild a stored result; ValueError when ``data`` is not one (it is then graded again)."""
        if not isinstance(data, dict) or not isinstance(data.get("submission"), str):
            raise ValueError("not a stored result")
        known = KNOWN
        if set(data) - known:
            raise ValueError(f"unknown fields {sorted(set(data) - known)}")
        exercises = data.get("exercises", {})
        if not isinstance(exercises, dict):
            raise ValueError("exercises is not a mapping")
        try:
            parsed = {gid: ExerciseResult.from_json(gid, e) for gid, e in exercises.items()}
            values = {k: v for k, v in data.items() if k not in ("total", "max", "exercises", "status")}
            return cls(**values, status=SubmissionStatus(data.get("status", GRADED)), exercises=parsed)
        except (TypeError, AttributeError) as exc:
            raise ValueError(str(exc)) from None


KNOWN = frozenset({f.name for f in fields(SubmissionResult)} | {"total", "max"})  # a stored row's keys, once


def exercise_ids(rows: list[SubmissionResult]) -> list[str]:
    """Every exercise of ``rows``, in the course's order (a result stored without one: where it first appears)."""
    seen: dict[str, int] = {}
    for r in rows:
        for gid, e in r.exercises.items():
            seen[gid] = min(seen.get(gid, e.order), e.order)
    return sorted(seen, key=seen.__getitem__)


def variants_of(row: SubmissionResult, gids: list[str]) -> str:
    """The variant each varied exercise of ``row`` was judged against ("killhead=rows-last ..."): CSV and dashboard."""
    return " ".join(f"{g}={row.exercises[g].variant}" for g in gids if g in row.exercises and row.exercises[g].variant)


MIN_SPAN = 50  # characters of tokenised code in common (a name is one) below which no pair is flagged: ~5 lines


@dataclass(frozen=True)
class Answer:
    """One submission's answer to one exercise (what the similarity report compares)."""

    submission: str
    source: str


@dataclass
class Pair:
    """Two submissions' answers to one exercise and how much of them match (``similarity``)."""

    assignment: str
    exercise: str
    a: Answer
    b: Answer
    similarity: float  # the larger of the two shares
    shares: tuple[float, float]
    slices: tuple  # copydetect's (starts, ends) of the matching code in each source
    overlap: int = MIN_SPAN  # tokenised characters in common (after removing what the course shipped)

    def flagged(self, threshold: float) -> bool:
        """Similar enough, over a span long enough to mean something (a short standard answer never is)."""
        return self.similarity >= threshold and self.overlap >= MIN_SPAN


@dataclass(frozen=True)
class Lateness:
    """How late one submission was by the late policy and what it cost (``book_outputs`` computes it as
    ``export`` does, so the grade table, the dashboard and the feedback show the exported score)."""

    days: int = 0
    penalty: float = 0.0
    submitted: str = ""  # ISO 8601, '' when no time was recorded
    source: str = ""  # where the time came from
    due: str = ""  # the due time that applied (an extension's, when the student has one)

    def score(self, row: SubmissionResult) -> float | None:
        """The points that count after the penalty (None while the row's points do not count)."""
        return max(0.0, row.total - self.penalty) if row.graded else None


@dataclass(frozen=True)
class Batch:
    """Everything an output format may read: the results, and what the run found beside them."""

    rows: list[SubmissionResult]
    root: str = ""  # the folder all submissions share (feedback file names keep what tells them apart)
    pairs: list[Pair] | None = None  # similar answers, when a similarity report was asked for
    similarity_html: Path | None = None  # that report's page
    feedback_dir: Path | None = None  # where the feedback files are (the dashboard links to them)
    late: dict[str, Lateness] | None = None  # submission -> its lateness, when due dates were given (--due)


Writer = Callable[[Batch, str], Path]  # every output format: (batch, where to) -> what it wrote
