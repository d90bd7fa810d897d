"""Grade one submission: start the sandboxed runner, read its facts, decide the points here.

The judge never runs student code. It chooses each exercise's inputs with a fresh seed,
sends them with the cells, and judges every facts message with the course's checks. Time
is the judge's: each runner start has one hard deadline (start-up plus the per-exercise
limit for every exercise it is asked to run) that no message can move; within it, each
exercise gets the per-exercise limit from the last sign of progress. A runner that
hangs, crashes, floods the channel or outgrows its memory is stopped and only the
exercise it was on loses its points; a fresh runner does the rest.
"""
from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import checks
from ..checks.engine import make_request
from . import sandbox
from .collect import Assignment, NotebookError, clean, display_name, plan, read_submission
from .protocol import validate
from .results import HELD, ExerciseResult, Part, Status, SubmissionResult
from .worker import Worker

__all__ = ["Options", "Worker", "grade_submission"]  # Worker: one runner start (grading/worker.py)

MAX_SUBMISSION_BYTES = 512 << 20  # from all runner starts of one submission together
JUDGE_MEMORY = 3 << 30  # the judge's own growth allowed beyond its size at start, plus JOB_MEMORY per job
JOB_MEMORY = 1 << 30
STARTUP = 45.0  # seconds for a runner to start (torch import) before its exercises' time counts
MAX_AUDIT = 5  # run-time review reasons listed per submission
CONFIRM_GRACE = 5.0  # seconds after an exercise's first result for the runner to move on (a result counts then)


@dataclass
class Options:
    timeout: float = 60.0
    memory: int = 4 << 30
    sandbox: sandbox.Sandbox = sandbox.Sandbox("none", "not detected")  # noqa: RUF009 - frozen: one shared default is safe
    slots: int = 1
    assignment: str | None = None  # the assignment every notebook of the batch must be (--assignment)
    feedback_fix: bool = False  # feedback shows each failing part's fix too (level 2 of help; --feedback-fix)


REASONS = {
    "timeout": "did not finish within the time limit (endless loop?); it was stopped",
    "died": "made the Python process die while running it (os._exit, a signal, or a crash)",
    "done": "ended the process before this exercise was checked (sys.exit or os._exit?)",
    "memory": "used more memory than the grader allows per submission; it was stopped",
    "flood": "sent more data than the grader accepts; it was stopped",
    "garbled": "wrote bytes into the grader's channel; it was stopped",
    "unreadable": "sent data the grader could not read; it was stopped",
}


def grade_submission(path: Path, assignments: dict[str, Assignment], options: Options, slot: int = 0,
                     sha256: str = "") -> SubmissionResult:
    """Grade one file; every failure becomes a row with a status and a reason, never an exception.

    ``sha256``: the digest of the file's bytes when the caller already computed it (the result store).
    """
    started = time.monotonic()
    row = SubmissionResult(submission=display_name(path), sha256=sha256)
    try:
        _grade(row, path, assignments, options, slot)
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
    row.seconds = round(time.monotonic() - started, 2)
    return sanitized(row)


class Refused(Exception):
    """A submission that would cost the judge more than it allows; the message is the row's reason."""


def _zero(row: SubmissionResult, status: str, reason: str) -> None:
    row.status = status
    row.flags.append(reason)
    for e in row.exercises.values():
        e.zeroed(status)


def sanitized(row: SubmissionResult) -> SubmissionResult:
    """Every text of the row without control sequences (ANSI colours, bells, lone surrogates)."""
    row.flags = [clean(str(f)) for f in row.flags]
    row.review = [clean(str(f)) for f in row.review]
    for e in row.exercises.values():
        e.feedback, e.hint = clean(str(e.feedback)), clean(str(e.hint))
    return row


def _grade(row: SubmissionResult, path: Path, assignments: dict[str, Assignment], options: Options, slot: int) -> None:
    try:
        data = read_submission(path)
        row.sha256 = row.sha256 or hashlib.sha256(data).hexdigest()
        cells = plan(row, data, path.suffix, assignments, options.assignment)
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
    _run_all(row, cells, options, slot)


def _run_all(row: SubmissionResult, cells: list[dict], options: Options, slot: int) -> None:
    order = list(row.exercises)
    requests = {gid: make_request(checks.EXERCISES[gid], secrets.randbelow(1 << 30) + 1) for gid in order}
    results: dict[str, checks.Result] = {}
    notes: dict[str, list[str]] = {}
    broken: set[str] = set()
    counts = {"forged": 0, "duplicate": 0, "bytes": 0, "unconfirmed": 0}
    seen: set[tuple[str, str]] = set()  # (exercise, reason) from the runner's audit hook (grading/audit.py)
    graced: set[str] = set()  # exercises whose first result extended the deadlines by CONFIRM_GRACE
    while len(results) < len(order):
        remaining = [g for g in order if g not in results]
        state: dict[str, Any] = {"current": None, "ready": False, "pending": None}
        budget = options.timeout * len(remaining)
        deadline = {"hard": 0.0, "step": 0.0}

        def progress(deadline=deadline):
            """Ready, or an exercise's first result: the next exercise gets --timeout from now (never past hard)."""
            deadline["step"] = time.monotonic() + options.timeout

        def confirm(state=state, progress=progress):
            """The runner went on past a check (its next ``begin``, or ``done``): the result it sent counts now.

            A result is held until then, so one written by the answer code just before it ends the
            process (a forged frame, then ``os._exit``) never counts: see README "Trust model".
            """
            pending, state["pending"] = state["pending"], None
            if pending is None:
                return
            gid, verdict, cell_notes = pending
            if gid not in results:
                progress()  # at most once per exercise, so at most the hard budget in total
            if gid in results:  # only one is genuine; keep the lower score
                counts["duplicate"] += 1
                if verdict.points >= results[gid].points:
                    return
            results[gid] = verdict
            notes[gid] = cell_notes

        def on_message(raw, remaining=remaining, state=state, budget=budget, deadline=deadline, progress=progress,
                       confirm=confirm):
            message = validate(raw, set(remaining))
            if message is None:
                counts["forged"] += 1
                return
            pending = state["pending"]
            if message["kind"] == "ready" and not state["ready"]:  # the runner's own, before any student code
                state["ready"] = True
                deadline["hard"] = min(deadline["hard"], time.monotonic() + budget)
                progress()
            elif message["kind"] == "done":
                confirm()
            elif message["kind"] == "audit":  # the runner's audit hook: never changes points, holds for review
                seen.add((message["exercise"], message["reason"]))
            elif message["kind"] == "begin" and message["exercise"] not in results:
                if pending is not None and pending[0] != message["exercise"]:
                    confirm()
                state["current"] = message["exercise"]
            elif message["kind"] == "facts":
                gid = message["exercise"]
                verdict = _judge(gid, requests[gid], message)
                if pending is not None:  # two results before the runner moved on: only one can be genuine
                    counts["duplicate"] += 1
                    if pending[0] == gid and verdict.points < pending[1].points:
                        state["pending"] = (gid, verdict, message["cell_errors"])
                    return
                state["pending"] = (gid, verdict, message["cell_errors"])
                if gid not in graced:  # time to move on and confirm it, even on a loaded machine: once per exercise
                    graced.add(gid)
                    deadline["hard"] = max(deadline["hard"], time.monotonic() + CONFIRM_GRACE)
                    deadline["step"] = max(deadline["step"], time.monotonic() + CONFIRM_GRACE)

        job = {"cells": cells, "grade": remaining, "skip_answers": sorted(broken), "time_limit": options.timeout,
               "cpu_seconds": int(STARTUP + options.timeout * len(remaining)) + 5,
               "requests": {g: public(requests[g]) for g in remaining}}
        worker = Worker(job, options, slot)
        deadline["hard"] = worker.started + STARTUP + budget
        deadline["step"] = deadline["hard"]  # until the runner is ready, start-up time applies
        outcome = worker.wait(deadline, on_message)
        counts["bytes"] += worker.bytes
        if counts["bytes"] > MAX_SUBMISSION_BYTES:
            raise Refused(f"refused: the answer code sent more than {MAX_SUBMISSION_BYTES >> 20} MiB to the grader; "
                          "its exercises got 0 points")
        if len(results) == len(order):
            break
        if outcome in ("garbled", "unreadable"):
            counts["forged"] += 1
        if state["pending"] is not None:
            counts["unconfirmed"] += 1
            state["current"] = state["pending"][0]  # the exercise whose result was never followed: it scores 0
        current = state["current"] if state["current"] in remaining else None
        if current in results and current not in broken:
            broken.add(current)  # its answer cell broke the runner after its result: run the rest without it
            continue
        culprit = current if current is not None and current not in results else next(
            g for g in order if g not in results)
        reason = REASONS[outcome]
        if not state["ready"] and outcome in ("died", "done"):
            reason = "could not be run: the grading process did not start (is torch installed?)"
        points = checks.EXERCISES[culprit].points
        results[culprit] = checks.Result(culprit, 0.0, points, "failed", f"Your code {reason}.",
                                         ["timeout" if outcome == "timeout" else "raised"])
        broken.add(culprit)
    if counts["forged"]:
        row.flags.append(f"{counts['forged']} message(s) on the grader's channel were not valid and were ignored")
    audited = [f"answer code of {where or 'the notebook'} {why} (seen at run time)" for where, why in sorted(seen)]
    row.review += audited[:MAX_AUDIT] + ([f"and {len(audited) - MAX_AUDIT} more seen at run time"]
                                         if len(audited) > MAX_AUDIT else [])
    if counts["unconfirmed"]:
        row.flags.append(f"{counts['unconfirmed']} result message(s) were followed by the end of the process, not by "
                         "the grader's next step (forged, then exit?): not counted")
    if counts["duplicate"]:
        row.flags.append(f"{counts['duplicate']} extra result message(s) for one exercise (forged?); "
                         "the lowest score was kept")
    for gid in order:
        r = results[gid]
        feedback = (r.report(fix=options.feedback_fix) if gid not in broken
                    else f"✗ {gid}: 0/{r.max_points:g} points. {r.feedback}")
        feedback += "".join(f"\n  note: {e}" for e in notes.get(gid, []))
        row.exercises[gid] = exercise_result(checks.EXERCISES[gid], r, feedback)
        row.flags += r.flags


def public(request: dict) -> dict:
    """What of a request the runner may see: its ``_`` keys are the judge's alone (e.g. which hidden Function is buggy)."""
    return {k: v for k, v in request.items() if not k.startswith("_")}


def exercise_result(ex: checks.Exercise, r: checks.Result, feedback: str) -> ExerciseResult:
    """The results model's record of one judged exercise: its stages' outcomes as parts, the diagnosis apart."""
    outcomes = {o.stage: o for o in r.stages}
    parts = [Part(s.name, outcomes[s.name].points if s.name in outcomes else 0.0, s.points) for s in ex.stages]
    hint = "" if r.status == "passed" else "Not attempted yet" if r.status == "not attempted" else r.feedback
    return ExerciseResult(r.grade_id, r.points, r.max_points, r.status, feedback, hint, list(r.mistakes), parts)


def _judge(gid: str, request: dict, message: dict) -> checks.Result:
    ex = checks.EXERCISES[gid]
    result = checks.judge(ex, request, message["facts"])
    if message["fake_output"]:
        result.flags.append(f"{gid}: answer code printed text that looks like a check result (ignored)")
    if message["printed"] > 1_000_000:
        result.flags.append(f"{gid}: answer code printed {message['printed']:,} characters (discarded)")
    return result
