"""Grade one submission file: start the sandboxed runner, read its facts, decide the points here.

"The judge" is the grader's own process, which this module runs in: it never runs student code.
It chooses each exercise's inputs with a fresh seed, sends them with the cells, and has the
course's checks score every facts message (``checks.assess``). Time
is the judge's: each runner start has one hard deadline (start-up plus the per-exercise
limit for every exercise it is asked to run) that no message can move; within it, each
exercise gets the per-exercise limit from the last sign of progress. A runner that
hangs, crashes, floods the channel or outgrows its memory is stopped and only the
exercise it was on loses its points; a fresh runner does the rest. What each runner message is
worth (forged, duplicate, unconfirmed, late) is decided by ``session.RunnerSession``.
"""
from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from .. import checks
from ..checks import registry
from ..checks.engine import make_request
from ..checks.variants import Variant
from ..status import CheckStatus
from ..variant_text import verdict_line
from . import owners
from .assignment import Assignment
from .names import display_name
from .notebook import NotebookError, clean
from .options import Options, Stoppable
from .reports import copies
from .results import HELD, ExerciseResult, StageOutcome, Status, SubmissionResult
from .sandbox.session import RUNNER_WALL, Deadline, RunnerSession, cpu_seconds
from .sandbox.worker import Worker
from .submission import ParsedSubmission, plan, read

__all__ = ["Options", "Worker", "grade_submission"]  # Options: grading/options.py; Worker: one runner start (worker.py)

MAX_SUBMISSION_BYTES = 512 << 20  # from all runner starts of one submission together


def grade_submission(path: Path, assignments: dict[str, Assignment], options: Options, slot: int = 0,
                     sha256: str = "", seen: Callable[[ParsedSubmission], None] | None = None,
                     given: ParsedSubmission | Exception | None = None) -> SubmissionResult:
    """Grade one file; every failure becomes a row with a status and a reason, never an exception.

    ``sha256``: the digest of the file's bytes when the caller already computed it (the result store).
    ``seen``: handed the file's one parse, when it could be read (the similarity report reads it too).
    ``given``: that parse when the caller made it (the batch's queue, for its order), or the exception reading
    raised; None: read here.
    The "copied from the solutions" flags are the row's own, so they are stored with it in one write.
    """
    started = time.monotonic()
    row = SubmissionResult(submission=display_name(path), sha256=sha256)
    parsed: list[ParsedSubmission] = []
    try:
        _grade(row, path, assignments, options, slot, parsed, given)
    except Refused as exc:
        _zero(row, Status.REFUSED, str(exc))
    except MemoryError:
        _zero(row, Status.REFUSED, "refused: grading this submission needed more memory than the judge allows; "
              "its exercises got 0 points")
    except Exception as exc:  # a bug or a broken machine costs one row, not the batch
        _zero(row, Status.ERROR, f"the grader failed on this submission ({type(exc).__name__}: {str(exc)[:160]}); "
              "its exercises got 0 points")
    if row.review and row.graded:
        row.status = HELD
    for submission in parsed:
        copies.flag(row, submission, assignments)  # the flags and their evidence
        if seen is not None:
            seen(submission)
    row.seconds = round(time.monotonic() - started, 2)
    return sanitized(row)


class Refused(Exception):
    """A submission that would cost the judge more than it allows; the message is the row's reason."""


def _zero(row: SubmissionResult, status: Status, reason: str) -> None:
    row.status = status
    row.flags.append(reason)
    for e in row.exercises.values():
        e.zeroed(status)


def sanitized(row: SubmissionResult) -> SubmissionResult:
    """Every text of the row without control sequences (ANSI colours, bells, lone surrogates)."""
    row.flags = [clean(str(f)) for f in row.flags]
    row.review = [clean(str(f)) for f in row.review]
    for e in row.exercises.values():
        e.feedback, e.problem, e.output_note = clean(str(e.feedback)), clean(str(e.problem)), clean(str(e.output_note))
        e.flags = [clean(str(f)) for f in e.flags]
        for s in e.stages:
            s.diagnosis, s.fix = clean(str(s.diagnosis)), None if s.fix is None else clean(str(s.fix))
    return row


def _grade(row: SubmissionResult, path: Path, assignments: dict[str, Assignment], options: Options, slot: int,
           parsed: list[ParsedSubmission], given: ParsedSubmission | Exception | None = None) -> None:
    try:
        if isinstance(given, Exception):
            raise given
        submission = given or read(path, assignments)  # the file's one read and one parse
        parsed.append(submission)
        if row.sha256 and row.sha256 != submission.sha256:  # the store hashed other bytes than were graded
            row.flags.append(f"the file changed after the result store looked it up: the bytes graded (sha256 "
                             f"{submission.sha256[:12]}) are stored, not those looked up ({row.sha256[:12]})")
        row.sha256 = submission.sha256
        cells = plan(row, submission, assignments, options.assignment)
        for gid, e in row.exercises.items():  # what outputs show of each exercise (a refused row's too)
            e.title, e.order = described(gid)
    except NotebookError as exc:
        row.status = exc.status
        row.flags.append(str(exc))
        return
    except OSError as exc:
        row.status = Status.SKIPPED
        row.flags.append(f"could not be read ({type(exc).__name__}: {exc.strerror or exc})")
        return
    if not options.sandbox.usable:  # fail closed: nothing runs, nothing earns points
        raise Refused(f"refused: the grader's sandbox could not start ({options.sandbox.reason}); the "
                      "answers were not run and got 0 points")
    row.sandbox = options.sandbox.mode
    if options.sandbox.mode == "none":
        row.flags.append("graded WITHOUT the sandbox (" + options.sandbox.reason + "): its code was not isolated")
    chosen, notes = variants(row, path, submission, options, assignments)
    _run_all(row, cells, options, slot, chosen, notes)


def variants(row: SubmissionResult, path: Path, submission: ParsedSubmission, options: Options,
             assignments: dict[str, Assignment]) -> tuple[dict[str, Variant], dict[str, list[str]]]:
    """Each exercise's variant, from the file's owner (never from the notebook), and the notes its feedback carries.

    Outputs that show another student's variant raise a flag with their evidence (``owners.evidence``).
    """
    who, _ = owners.owner(path, options.owners, assignments)
    row.owner = who
    chosen = {gid: registry.pick(gid, who or None) for gid in row.exercises}
    varied = [gid for gid in row.exercises if registry.varied(gid)]
    notes = {gid: [owners.no_owner_note(chosen[gid].key)] for gid in varied if not who}
    if who and varied:
        found = owners.evidence(submission.cells, {gid: chosen[gid].key for gid in varied}, who)
        row.flags += [f["flag"] for f in found]
        row.evidence += found
    return chosen, notes


def _run_all(row: SubmissionResult, cells: list[dict], options: Options, slot: int, chosen: dict[str, Variant],
             notes: dict[str, list[str]]) -> None:
    """Start runners until every exercise has a result; the session decides what their messages are worth.

    Requests, judging and the stored result all follow ``chosen`` (each exercise's variant for the file's owner).
    """
    requests = {gid: make_request(chosen[gid].exercise, secrets.randbelow(1 << 30) + 1) for gid in row.exercises}
    session = RunnerSession({gid: chosen[gid].exercise.points for gid in row.exercises}, options.timeout,
                            lambda message: _check_facts(chosen[message["exercise"]].exercise,
                                                         requests[message["exercise"]], message))
    while not session.finished:
        if options.stop.is_set():  # Ctrl-C: no runner more; the batch keeps no row finished after it
            raise Refused("refused: grading was interrupted before this submission was finished")
        remaining = session.todo()
        job = {"cells": cells, "grade": remaining, "skip_answers": sorted(session.broken),
               # the runner's own limits per exercise (runner.Budget): CPU time, then the clock; the judge's is later,
               # and the process's CPU limit later still (a single thread never reaches it before the judge's clock)
               "time_limit": options.timeout, "wall_limit": options.timeout * RUNNER_WALL,
               "cpu_seconds": cpu_seconds(options.timeout, len(remaining)),
               "requests": {g: public(requests[g]) for g in remaining},
               "probes": {g: list(chosen[g].exercise.probe_names) for g in remaining}}  # what each stage pairs with
        worker = Worker(job, options, slot)
        deadline = cast(Deadline, Stoppable(session.start(worker.started), options.stop))  # due at once on Ctrl-C
        outcome = worker.wait(deadline, session.on_message, session.on_late)
        session.counts.bytes += worker.bytes
        if session.counts.bytes > MAX_SUBMISSION_BYTES:
            raise Refused(f"refused: the answer code sent more than {MAX_SUBMISSION_BYTES >> 20} MiB to the grader; "
                          "its exercises got 0 points")
        session.settle(outcome)
    row.flags += session.flags()
    row.review += session.review()
    for gid in row.exercises:
        r = session.results[gid]
        r.variant = chosen[gid].key if registry.has_family(gid) else ""  # the verdict and every output name it
        whose = (row.owner or None) if registry.varied(gid) else None
        feedback = (r.report(fix=options.feedback_fix, student=whose) if gid not in session.broken
                    else f"✗ {gid}: 0/{r.max:g} points. {r.summary}" + (f"\n  {verdict_line(r.variant, whose)}"
                                                                           if r.variant else ""))
        feedback += "".join(f"\n  note: {e}" for e in [*session.notes.get(gid, []), *notes.get(gid, [])])
        row.exercises[gid] = exercise_result(chosen[gid].exercise, r, feedback)
        row.flags += r.flags


def public(request: dict) -> dict:
    """What of a request the runner may see: its ``_`` keys are the judge's alone (e.g. which hidden Function is buggy)."""
    return {k: v for k, v in request.items() if not k.startswith("_")}


def exercise_result(ex: checks.Exercise, r: ExerciseResult, feedback: str) -> ExerciseResult:
    """The check's own result as stored: with the feedback the student reads, its title and place, every stage.

    A stage the check never assessed (its facts were unreadable, the runner broke) is listed, not reached, at 0.
    """
    outcomes = {o.name: o for o in r.stages}
    r.stages = [outcomes.get(s.name) or StageOutcome(s.name, 0.0, s.points, CheckStatus.NOT_REACHED) for s in ex.stages]
    r.feedback = feedback
    r.title, r.order = described(ex.grade_id)
    return r


def described(gid: str) -> tuple[str, int]:
    """An exercise's title and place in the course, which the results model carries for every output."""
    ex = checks.EXERCISES.get(gid)
    return (ex.title, list(checks.EXERCISES).index(gid)) if ex is not None else ("", 0)


def _check_facts(ex: checks.Exercise, request: dict, message: dict) -> checks.Result:
    """The check's verdict on one facts message (``checks.assess``), with the flags the message itself earns."""
    gid = ex.grade_id
    result = checks.assess(ex, request, message["facts"])
    if message["fake_output"]:
        result.flags.append(f"{gid}: answer code printed text that looks like a check result (ignored)")
    if message["printed"] > 1_000_000:
        result.flags.append(f"{gid}: answer code printed {message['printed']:,} characters (discarded)")
    return result
