"""One submission's runner session: the trust model as data, with no process in it.

The judge starts runners (``worker.Worker``) until every exercise has a result; this module
decides what their messages are worth. The rules, each a method:

- a message ``protocol.validate`` refuses is counted as forged and ignored;
- a result (``facts``) is held as *pending* and counts only once the runner moves on (its next
  ``begin``, or ``done``): one written by answer code just before it ends the process (a forged
  frame, then ``os._exit``) never counts (README "Trust model"); an unconfirmed one is counted;
- two results before the runner moved on, or two for one exercise: only one can be genuine, the
  lower score is kept and the extra is counted as a duplicate;
- time: the runner limits each exercise itself (``--timeout`` seconds of CPU time, ``RUNNER_WALL`` times
  that on the clock: ``runner.Budget``), and the judge's clock is only a backstop, ``BACKSTOP`` times
  ``--timeout``, so the runner's own limit fires first and a looping answer gets the same points on
  every run whatever the machine's load. The runner's process-wide ``RLIMIT_CPU`` (``cpu_seconds``) lies
  beyond the judge's latest hard deadline, and where a runner reaches it all the same (several threads on
  an unpinned slot) it reads as the same timeout (``ended_by``). Each runner start has one hard deadline
  (start-up plus the step per exercise) that only the runner's own first ``ready`` can lower and its first
  ``begin`` raise, by one step at most (``Deadline.restart``), and a per-exercise step
  from the last sign of progress; an exercise's first result grants ``CONFIRM_GRACE`` once, so a
  loaded machine can still confirm it;
- a message read after the judge stopped the runner (``on_late``) is late: it neither counts nor
  moves the runner to the next exercise, so the exercise that was running at the limit takes the blame;
- when a runner ends without finishing (``settle``), the exercise it was on scores 0 with the reason,
  and an answer cell that broke the runner after its result is skipped in the next start.
"""
from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from ...exercise_result import ExerciseResult
from ...status import CheckStatus
from .protocol import TIME_UP, validate


class Outcome(StrEnum):
    """How a runner start ended (``Worker.wait``)."""

    DONE = "done"  # the runner ended by itself with status 0
    TIMEOUT = "timeout"
    MEMORY = "memory"
    FLOOD = "flood"
    GARBLED = "garbled"
    UNREADABLE = "unreadable"
    DIED = "died"


STARTUP = 45.0  # seconds for a runner to start (torch import) before its exercises' time counts
RUNNER_WALL = 2.0  # the runner's own clock limit per exercise, in units of --timeout (its CPU-time limit is 1)
BACKSTOP = 3.0  # the judge's step per exercise, in units of --timeout: always after both of the runner's limits
CONFIRM_GRACE = 5.0  # seconds after an exercise's first result for the runner to move on (a result counts then)
CPU_MARGIN = 5.0  # CPU-seconds of the runner's RLIMIT_CPU beyond the judge's latest hard deadline (the judge's own delays)
CPU_SHOWN = 0.9  # the least share of its CPU limit that wait4 counts for a runner the limit killed (the kernel
#                  counts the two apart: wait4 showed 98.7% to 100.2% of a 1 s and a 2 s limit here)
MAX_AUDIT = 5  # run-time review reasons listed per submission

REASONS = {
    Outcome.TIMEOUT: "did not finish within the time limit (endless loop?); it was stopped",
    Outcome.DIED: "made the Python process die while running it (os._exit, a signal, or a crash)",
    Outcome.DONE: "ended the process before this exercise was checked (sys.exit or os._exit?)",
    Outcome.MEMORY: "used more memory than the grader allows per submission; it was stopped",
    Outcome.FLOOD: "sent more data than the grader accepts; it was stopped",
    Outcome.GARBLED: "wrote bytes into the grader's channel; it was stopped",
    Outcome.UNREADABLE: "sent data the grader could not read; it was stopped",
}
NOT_STARTED = "could not be run: the grading process did not start (is torch installed?)"


def step(timeout: float) -> float:
    """The judge's clock per exercise: a backstop after the runner's own limits (``BACKSTOP`` x ``--timeout``)."""
    return timeout * BACKSTOP


def cpu_seconds(timeout: float, exercises: int) -> int:
    """The runner's ``RLIMIT_CPU`` (its soft limit) for a start asked to run ``exercises``: past the judge's hard deadline.

    That deadline is ``STARTUP`` plus a step per exercise (``RunnerSession.start``), one step more from the start's
    first exercise (``Deadline.restart``), and each exercise's first result may push it ``CONFIRM_GRACE`` further,
    once. One thread on one CPU uses at most a CPU-second per second, so a loop that swallows the runner's own
    alarms always meets the judge's clock first and always reads "stopped". Several threads on an unpinned slot
    can reach this limit before: ``ended_by`` reads it alike.
    """
    return math.ceil(STARTUP + (exercises + 1) * step(timeout) + exercises * CONFIRM_GRACE + CPU_MARGIN)


def ended_by(returncode: int, cpu: float | None, cpu_limit: float) -> Outcome:
    """How a runner that ended by itself with a non-zero ``returncode`` (and not for memory) ended.

    Killed by its CPU limit (``SIGXCPU`` at the soft ``RLIMIT_CPU``, ``SIGKILL`` at the hard one) after using
    ``cpu_limit`` CPU-seconds (``CPU_SHOWN`` of them at least): a timeout, as the judge's backstop says it (the same
    points and feedback whichever fires first). ``cpu`` is the kernel's count, read by whoever reaped the runner
    (the judge's ``wait4``, or the zygote's; it includes children the runner waited for), never the runner's word:
    one that sends itself ``SIGXCPU`` without using that CPU time died. None: unknown (the zygote went away), so
    died. ``TIME_UP``: the runner ended itself after the exercise's time ran out (in a cell or its check): a timeout.
    """
    if returncode == TIME_UP:  # its own budget ran out (a runner that exits so itself only loses wording)
        return Outcome.TIMEOUT
    by_cpu_limit = returncode in (-signal.SIGXCPU, -signal.SIGKILL)
    return Outcome.TIMEOUT if by_cpu_limit and cpu is not None and cpu >= cpu_limit * CPU_SHOWN else Outcome.DIED


@dataclass
class Deadline:
    """When a runner start is stopped: ``min(hard, step)`` (``Worker.wait`` reads ``due``)."""

    hard: float
    step: float

    def due(self) -> float:
        return min(self.hard, self.step)

    def progress(self, now: float, step: float) -> None:
        """Ready, or an exercise's confirmed result: the next exercise gets ``step`` from now (never past hard)."""
        self.step = now + step

    def restart(self, now: float, step: float, budget: float) -> None:
        """A start's first exercise begins: the cells run before it (the set-up, and those of the exercises an earlier
        start graded, run again) are not its time. Once per start, after ``ready``: at most one step more in all."""
        self.progress(now, step)
        self.hard = max(self.hard, min(now + budget, self.hard + step))

    def lower(self, until: float) -> None:
        """The hard deadline no later than ``until`` (the runner's ready: start-up took less than allowed)."""
        self.hard = min(self.hard, until)

    def grace(self, until: float) -> None:
        """Both deadlines at least ``until``: time to confirm a result (once per exercise)."""
        self.hard = max(self.hard, until)
        self.step = max(self.step, until)


@dataclass
class Pending:
    """A result the runner sent and has not yet moved on from: it does not count yet."""

    exercise: str
    verdict: ExerciseResult
    notes: list[str]


@dataclass
class Counts:
    """What the session refused or doubted, for the row's flags."""

    forged: int = 0
    duplicate: int = 0
    unconfirmed: int = 0
    late: int = 0
    bytes: int = 0


Verdict = Callable[[dict], ExerciseResult]  # a valid facts message -> the judge's result for its exercise


@dataclass
class RunnerSession:
    """Every runner start of one submission: confirmed results, the pending one, counts, audit events.

    ``points``: each exercise's maximum, in the order the runner runs them; ``verdict`` judges a
    facts message; ``clock``: seconds (``time.monotonic``; a test passes its own).
    """

    points: dict[str, float]
    timeout: float
    verdict: Verdict
    clock: Callable[[], float] = time.monotonic
    results: dict[str, ExerciseResult] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    broken: set[str] = field(default_factory=set)  # answer cells the next start skips; their exercises score 0
    counts: Counts = field(default_factory=Counts)
    seen: set[tuple[str, str]] = field(default_factory=set)  # (exercise, reason) from the audit hook (audit.py)
    graced: set[str] = field(default_factory=set)  # exercises whose first result extended the deadlines
    # one runner start (``start`` resets them)
    remaining: list[str] = field(default_factory=list)
    current: str | None = None
    ready: bool = False
    pending: Pending | None = None
    deadline: Deadline = field(default_factory=lambda: Deadline(0.0, 0.0))

    @property
    def finished(self) -> bool:
        return len(self.results) == len(self.points)

    def todo(self) -> list[str]:
        """The exercises still without a result, in order (what the next runner start is asked to run)."""
        return [g for g in self.points if g not in self.results]

    def start(self, started: float) -> Deadline:
        """A runner started at ``started`` for ``todo()``: until it is ready, start-up time applies."""
        self.remaining, self.current, self.ready, self.pending = self.todo(), None, False, None
        hard = started + STARTUP + self.budget
        self.deadline = Deadline(hard, hard)
        return self.deadline

    @property
    def step(self) -> float:
        """The judge's clock per exercise: a backstop after the runner's own limits (``BACKSTOP``)."""
        return step(self.timeout)

    @property
    def budget(self) -> float:
        return self.step * len(self.remaining)

    def on_message(self, raw: object) -> None:
        """One message from the runner, in the order it was sent."""
        message = validate(raw, set(self.remaining))
        if message is None:
            self.counts.forged += 1
            return
        kind = message["kind"]
        if kind == "ready" and not self.ready:  # the runner's own, before any student code
            self.ready = True
            self.deadline.lower(self.clock() + self.budget)
            self.deadline.progress(self.clock(), self.step)
        elif kind == "done":
            self.confirm()
        elif kind == "audit":  # the runner's audit hook: never changes points, holds for review
            self.seen.add((message["exercise"], message["reason"]))
        elif kind == "begin" and message["exercise"] not in self.results:
            if self.pending is not None and self.pending.exercise != message["exercise"]:
                self.confirm()
            if self.current is None and self.ready:  # the start's first exercise: its time from here, as the runner's
                self.deadline.restart(self.clock(), self.step, self.budget)  # own budget (runner.run_job)
            self.current = message["exercise"]
        elif kind == "facts":
            self._facts(message)

    def _facts(self, message: dict) -> None:
        gid = message["exercise"]
        verdict = self.verdict(message)
        pending = self.pending
        if pending is not None:  # two results before the runner moved on: only one can be genuine
            self.counts.duplicate += 1
            if pending.exercise == gid and verdict.points < pending.verdict.points:
                self.pending = Pending(gid, verdict, message["cell_errors"])
            return
        self.pending = Pending(gid, verdict, message["cell_errors"])
        if gid not in self.graced:  # time to move on and confirm it, even on a loaded machine: once per exercise
            self.graced.add(gid)
            self.deadline.grace(self.clock() + CONFIRM_GRACE)

    def on_late(self, raw: object) -> None:
        """A message read after the judge stopped the runner: counted, never a result nor a move to the next exercise."""
        self.counts.late += 1

    def confirm(self) -> None:
        """The runner went on past a check (its next ``begin``, or ``done``): the result it sent counts now."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        gid = pending.exercise
        if gid not in self.results:
            self.deadline.progress(self.clock(), self.step)  # once per exercise: at most the hard budget in all
        else:  # only one is genuine; keep the lower score
            self.counts.duplicate += 1
            if pending.verdict.points >= self.results[gid].points:
                return
        self.results[gid] = pending.verdict
        self.notes[gid] = pending.notes

    def settle(self, outcome: Outcome) -> None:
        """The runner ended (``outcome``): the exercise it was on scores 0, or its broken cell is skipped next."""
        if self.finished:
            return
        if outcome in (Outcome.GARBLED, Outcome.UNREADABLE):
            self.counts.forged += 1
        if self.pending is not None:
            self.counts.unconfirmed += 1
            self.current = self.pending.exercise  # the exercise whose result was never followed: it scores 0
        current = self.current if self.current in self.remaining else None
        if current in self.results and current not in self.broken:
            self.broken.add(current)  # its answer cell broke the runner after its result: run the rest without it
            return
        culprit = current if current is not None and current not in self.results else self.todo()[0]
        reason = REASONS[outcome]
        if not self.ready and outcome in (Outcome.DIED, Outcome.DONE):
            reason = NOT_STARTED
        self.results[culprit] = ExerciseResult(culprit, 0.0, self.points[culprit], CheckStatus.FAILED,
                                               problem=f"Your code {reason}.",
                                               problem_codes=["timeout" if outcome == Outcome.TIMEOUT else "raised"])
        self.broken.add(culprit)

    def flags(self) -> list[str]:
        """The row's flags about the channel: forged, unconfirmed and duplicate messages."""
        c = self.counts
        texts = [(c.forged, "message(s) on the grader's channel were not valid and were ignored"),
                 (c.unconfirmed, "result message(s) were followed by the end of the process, not by the grader's "
                                 "next step (forged, then exit?): not counted"),
                 (c.duplicate, "extra result message(s) for one exercise (forged?); the lowest score was kept"),
                 (c.late, "message(s) arrived after the runner was stopped at a limit: not counted")]
        return [f"{n} {text}" for n, text in texts if n]

    def review(self) -> list[str]:
        """What the audit hook saw answer code do, for the instructor's review (at most ``MAX_AUDIT``, then a count)."""
        audited = [f"answer code of {where or 'the notebook'} {why} (seen at run time)" for where, why in sorted(self.seen)]
        more = [f"and {len(audited) - MAX_AUDIT} more seen at run time"] if len(audited) > MAX_AUDIT else []
        return audited[:MAX_AUDIT] + more
