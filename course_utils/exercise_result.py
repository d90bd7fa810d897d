"""The one results model of an exercise: what its check found, stage by stage, as the grader stores it.

The check engine (``checks.engine.assess``) builds an ``ExerciseResult``; the notebook's verdict and
plain report read it; the grader (``grading.grade_file``) adds the feedback text the student reads and
the exercise's title and place, and stores that same object inside its ``SubmissionResult``. Every
stage keeps its points, status, diagnosis (level 1), fix (level 2) and mistake code, so no reader
parses text back and nothing is lost between the check and the grade book. Torch-free: outputs
(reports, dashboard, Gradescope) read it without importing the checks.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, asdict, dataclass, field, fields

from .status import OVERRIDDEN, CheckStatus, ExerciseStatus, Share, SubmissionStatus, exercise_status
from .variant_text import verdict_line

PASSED, FAILED, NOT_ATTEMPTED = CheckStatus.PASSED, CheckStatus.FAILED, CheckStatus.NOT_ATTEMPTED
NOT_ATTEMPTED_HINT = "Not attempted yet"  # the dashboard's and --json's diagnosis of an untouched exercise


@dataclass
class StageOutcome:
    """What one stage of a check found: its points, and for a failure the diagnosis, the fix and the mistake code."""

    name: str
    points: float
    max: float
    status: CheckStatus = CheckStatus.NOT_GRADED  # NOT_GRADED: read from a row stored before stages had one
    diagnosis: str = ""  # level 1: what is wrong and where
    fix: str | None = None  # level 2: how to cure it, only on request
    code: str = ""  # the mistake's catalogue code (checks.engine.MISTAKES)


@dataclass
class ExerciseResult:
    """The outcome of one exercise: its stages' outcomes, or a problem before any stage.

    ``problem`` is a failure that belongs to no stage (an answer cell that did not run, a time
    limit of the grader, unreadable facts), with its mistake codes in ``problem_codes``.
    ``feedback`` is the text the grader gave the student (the report with its notes); the checks
    leave it empty. ``status`` is the check's, or its submission's when that was zeroed;
    ``overridden``: a grade-book decision set its points (``grading.gradebook.final``).
    """

    grade_id: str
    points: float = 0.0
    max: float = 0.0
    status: ExerciseStatus = CheckStatus.NOT_GRADED
    _: KW_ONLY
    problem: str = ""
    problem_codes: list[str] = field(default_factory=list)
    stages: list[StageOutcome] = field(default_factory=list)
    output_note: str = ""
    flags: list[str] = field(default_factory=list)  # an assess function's remarks for the instructor
    feedback: str = ""
    title: str = ""  # the exercise's title, as its check names it: outputs need no checks (and no torch)
    order: int = 0  # its place in the course (the checks' order): outputs sort their columns by it
    overridden: bool = False
    variant: str = ""  # the key of the variant assessed, for an exercise with a family ("" for one without)

    @property
    def failing(self) -> StageOutcome | None:
        """The stage that stopped the check, if one did."""
        return next((o for o in self.stages if o.status in (FAILED, NOT_ATTEMPTED)), None)

    @property
    def mistakes(self) -> list[str]:
        return list(self.problem_codes) + [o.code for o in self.stages if o.code]

    @property
    def code(self) -> str:
        """The mistake that decided the exercise ("" when none was named): what the dashboard groups by."""
        return next(iter(self.mistakes), "")

    @property
    def passed_stages(self) -> list[str]:
        return [o.name for o in self.stages if o.status == PASSED]

    @property
    def diagnosis(self) -> str:
        """Level 1 alone: the problem, or the failing stage's diagnosis ("" when passed)."""
        failing = self.failing
        return self.problem or (failing.diagnosis if failing else "")

    @property
    def fix(self) -> str | None:
        failing = self.failing
        return None if self.problem or failing is None else failing.fix

    @property
    def summary(self) -> str:
        """One line: the problem, or "<stage>: <diagnosis>" (the stage's name omitted when not attempted)."""
        failing = self.failing
        if self.problem or failing is None:
            return self.problem
        return failing.diagnosis if failing.status == NOT_ATTEMPTED else f"{failing.name}: {failing.diagnosis}"

    @property
    def hint(self) -> str:
        """The diagnosis the instructor reads ("" when passed, "Not attempted yet" for an untouched answer)."""
        failing = self.failing
        return NOT_ATTEMPTED_HINT if not self.problem and failing and failing.status == NOT_ATTEMPTED else self.summary

    @property
    def share(self) -> Share:
        return Share.FULL if self.points >= self.max else Share.PARTIAL if self.points > 0 else Share.ZERO

    @property
    def label(self) -> str:
        """The status as text, with the override said (e.g. "failed, overridden")."""
        return f"{self.status}, {OVERRIDDEN}" if self.overridden else str(self.status)

    def zeroed(self, status: SubmissionStatus) -> None:
        self.points, self.status = 0.0, status
        for s in self.stages:
            s.points = 0.0

    def report(self, fix: bool = False, student: str | None = None) -> str:
        """The plain verdict; ``fix=True`` adds the failing stage's fix (level 2) where one exists.

        A varied exercise's verdict names the variant it assessed (and ``student``, whose variant it is, in a notebook).
        """
        head = f"{self.grade_id}: {self.points:g}/{self.max:g} points"
        if self.status == PASSED:
            text = f"✓ {head}. All checks passed."
        elif self.status == NOT_ATTEMPTED:
            text = f"· {head}. Not attempted yet: {self.summary}"
        else:
            done = "".join(f"\n  ✓ {s}" for s in self.passed_stages)
            text = f"✗ {head}.{done}\n  ✗ {self.summary}"
            if fix:
                text += f"\n  fix: {self.fix}" if self.fix else "\n  (no fix to show for this one: the hint is all)"
        text += f"\n  {verdict_line(self.variant, student)}" if self.variant else ""
        text += f"\n  note: {self.output_note}" if self.output_note else ""
        return text + "".join(f"\n  note: {flag}" for flag in self.flags)  # remarks from assess, as the grader flags them

    __str__ = report

    def to_json(self) -> dict:
        """Every field, and the derived ``hint`` and ``mistakes`` for readers of the JSON (ignored when read back)."""
        return dict(asdict(self), hint=self.hint, mistakes=self.mistakes)

    @classmethod
    def from_json(cls, grade_id: str, data: dict) -> ExerciseResult:
        """One stored exercise; TypeError or ValueError when ``data`` is not one.

        A row stored before stages carried their diagnosis (no ``problem`` key; its ``parts`` hold
        name, points and max) keeps its stored diagnosis and mistake codes as the exercise's problem,
        so ``hint`` and ``mistakes`` read back as they were stored.
        """
        values = {k: v for k, v in data.items() if k not in ("grade_id", "hint", "mistakes", "parts", "stages")}
        if "problem" not in data:  # stored before the one model (parts, hint and mistakes as fields)
            values.update(problem=data.get("hint", ""), problem_codes=data.get("mistakes", []))
        stages = data.get("stages", data.get("parts", []))
        if not isinstance(stages, list) or not all(isinstance(s, dict) for s in stages):
            raise ValueError(f"exercise {grade_id!r}: its stages are not a list of records")
        unknown = set(values) - FIELDS
        if unknown:
            raise ValueError(f"exercise {grade_id!r}: unknown fields {sorted(unknown)}")
        values["status"] = exercise_status(values.get("status", CheckStatus.NOT_GRADED))
        return cls(grade_id, **values, stages=[StageOutcome(**dict(s, status=CheckStatus(
            s.get("status", CheckStatus.NOT_GRADED)))) for s in stages])


FIELDS = frozenset(f.name for f in fields(ExerciseResult))  # once: a book's export reads every stored exercise
