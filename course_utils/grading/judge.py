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
import os
import queue
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .. import checks
from ..checks.engine import make_request
from ..paths import PACKAGE as COURSE_UTILS
from . import sandbox
from .collect import Assignment, NotebookError, clean, display_name, plan, read_submission
from .limits import MAX_PROCESSES, Limits
from .protocol import MAX_MESSAGES, MAX_TOTAL, ProtocolError, frame, read_frame, validate
from .results import HELD, ExerciseResult, Part, SubmissionResult

MAX_SUBMISSION_BYTES = 512 << 20  # from all runner starts of one submission together
JUDGE_MEMORY = 3 << 30  # the judge's own growth allowed beyond its size at start, plus JOB_MEMORY per job
JOB_MEMORY = 1 << 30
STARTUP = 45.0  # seconds for a runner to start (torch import) before its exercises' time counts
SCRATCH_BYTES = 256 << 20


@dataclass
class Options:
    timeout: float = 60.0
    memory: int = 4 << 30
    sandbox: sandbox.Sandbox = sandbox.Sandbox("none", "not detected")  # noqa: RUF009 - frozen: one shared default is safe
    slots: int = 1
    assignment: str | None = None  # the assignment every notebook of the batch must be (--assignment)


class Worker:
    """One runner start: the process, its limits, and the messages it sent."""

    def __init__(self, job: dict, options: Options, slot: int) -> None:
        self.messages: queue.Queue = queue.Queue()
        self.bytes = 0  # read from the runner's channel
        self.flood = False
        self.garbled = False
        self.scratch: str | None = None
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        pin = cpus[slot % len(cpus)] if cpus and options.slots <= len(cpus) else None
        self.limits = Limits(options.memory, pin)
        job = dict(job, memory=options.memory, processes=0 if self.limits.cgroups else MAX_PROCESSES)
        mode = options.sandbox.mode
        seccomp_fd = sandbox.seccomp_pipe() if mode != "none" else None
        try:
            if mode == "none":
                self.scratch = tempfile.mkdtemp(prefix="grade-")
                cmd = sandbox.plain_command()
                env = sandbox.runner_env({"HOME": self.scratch, "TMPDIR": self.scratch})
                cwd = self.scratch
            else:
                uid = sandbox.ROOT_MODE_FIRST_UID + slot if mode == "root" else None
                cmd = sandbox.bwrap_command(mode, COURSE_UTILS, SCRATCH_BYTES, seccomp_fd, uid)
                env, cwd = {"PATH": "/usr/bin:/bin"}, "/"
            self.proc = subprocess.Popen(self.limits.wrap(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, cwd=cwd, env=env, start_new_session=True,
                                         pass_fds=(seccomp_fd,) if seccomp_fd is not None else ())
        except BaseException:
            self.limits.close(None)
            if self.scratch:
                shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        self.started = time.monotonic()
        data = frame(job)
        threading.Thread(target=self._write, args=(data,), daemon=True).start()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _write(self, data: bytes) -> None:
        try:  # a runner that never reads its input only blocks this thread, which ends when it is killed
            stdin = self.proc.stdin
            assert stdin is not None  # started with stdin=PIPE
            stdin.write(data)
            stdin.close()
        except (OSError, ValueError):
            pass

    def _read(self) -> None:
        total = count = 0
        worker = self

        stdout = worker.proc.stdout
        assert stdout is not None  # started with stdout=PIPE
        channel: IO[bytes] = stdout

        class Counted:  # the channel, counting what the judge reads from it
            def read(self, n: int) -> bytes:
                data = channel.read(n)
                worker.bytes += len(data)
                return data

        stream = Counted()
        try:
            while True:
                message = read_frame(stream)
                if message is None:
                    break
                count += 1
                total += 1
                if count > MAX_MESSAGES or total > MAX_TOTAL:
                    self.flood = True
                    break
                self.messages.put(message)
        except (ProtocolError, OSError, ValueError):
            self.garbled = True  # nothing after this point can be read: stop the runner now

    def wait(self, deadline: dict, on_message) -> str:
        """Feed messages to ``on_message`` until the runner ends; return done | timeout | memory | flood | garbled | died.

        The runner is stopped at ``min(deadline["hard"], deadline["step"])``: the hard deadline is
        fixed at start; ``step`` (the per-exercise limit after the last sign of progress) can only
        be moved by ``on_message`` to a time that is still before the hard one.
        """
        outcome = "done"
        while True:
            self._drain(on_message)
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            if time.monotonic() > min(deadline["hard"], deadline["step"]):
                outcome = "timeout"
                break
            if self.flood or self.garbled:
                outcome = "flood" if self.flood else "garbled"
                break
            if self.limits.over_memory(self.proc.pid):
                outcome = "memory"
                break
            time.sleep(0.02)
        self.stop()
        self._drain(on_message)
        if outcome == "done" and self.proc.returncode != 0:
            outcome = "memory" if self.limits.oom_killed() else "died"
        return outcome

    def _drain(self, on_message) -> None:
        while True:
            try:
                on_message(self.messages.get_nowait())
            except queue.Empty:
                return

    def stop(self) -> None:
        self.limits.close(self.proc.pid if self.proc.poll() is None else None)
        try:
            self.proc.kill()
        except OSError:
            pass
        self.proc.wait()
        self.reader.join(timeout=5)
        for stream in (self.proc.stdout, self.proc.stdin):
            try:
                if stream is not None:
                    stream.close()
            except (OSError, ValueError):
                pass
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


REASONS = {
    "timeout": "did not finish within the time limit (endless loop?); it was stopped",
    "died": "made the Python process die while running it (os._exit, a signal, or a crash)",
    "done": "ended the process before this exercise was checked (sys.exit or os._exit?)",
    "memory": "used more memory than the grader allows per submission; it was stopped",
    "flood": "sent more data than the grader accepts; it was stopped",
    "garbled": "wrote bytes into the grader's channel; it was stopped",
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
        _zero(row, "refused", str(exc))
    except MemoryError:
        _zero(row, "refused", "refused: grading this submission needed more memory than the judge allows; "
              "its exercises got 0 points")
    except Exception as exc:  # a bug or a broken machine costs one row, not the batch
        _zero(row, "error", f"the grader failed on this submission ({type(exc).__name__}: {str(exc)[:160]}); "
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
        row.status = "skipped"
        row.flags.append(f"could not be read ({type(exc).__name__}: {exc.strerror or exc})")
        return
    if options.sandbox.mode == "none":
        row.flags.append("graded without sandbox (" + options.sandbox.reason + ")")
    _run_all(row, cells, options, slot)


def _run_all(row: SubmissionResult, cells: list[dict], options: Options, slot: int) -> None:
    order = list(row.exercises)
    requests = {gid: make_request(checks.EXERCISES[gid], secrets.randbelow(1 << 30) + 1) for gid in order}
    results: dict[str, checks.Result] = {}
    notes: dict[str, list[str]] = {}
    broken: set[str] = set()
    counts = {"forged": 0, "duplicate": 0, "bytes": 0}
    while len(results) < len(order):
        remaining = [g for g in order if g not in results]
        state: dict[str, Any] = {"current": None, "ready": False}
        budget = options.timeout * len(remaining)
        deadline = {"hard": 0.0, "step": 0.0}

        def progress(deadline=deadline):
            """Ready, or an exercise's first result: the next exercise gets --timeout from now (never past hard)."""
            deadline["step"] = time.monotonic() + options.timeout

        def on_message(raw, remaining=remaining, state=state, budget=budget, deadline=deadline, progress=progress):
            message = validate(raw, set(remaining))
            if message is None:
                counts["forged"] += 1
                return
            if message["kind"] == "ready" and not state["ready"]:  # the runner's own, before any student code
                state["ready"] = True
                deadline["hard"] = min(deadline["hard"], time.monotonic() + budget)
                progress()
            elif message["kind"] == "begin" and message["exercise"] not in results:
                state["current"] = message["exercise"]
            elif message["kind"] == "facts":
                gid = message["exercise"]
                verdict = _judge(gid, requests[gid], message)
                if gid not in results:
                    progress()  # at most once per exercise, so at most the hard budget in total
                if gid in results:  # only one is genuine; keep the lower score
                    counts["duplicate"] += 1
                    if verdict.points >= results[gid].points:
                        return
                results[gid] = verdict
                notes[gid] = message["cell_errors"]

        job = {"cells": cells, "grade": remaining, "skip_answers": sorted(broken), "time_limit": options.timeout,
               "cpu_seconds": int(STARTUP + options.timeout * len(remaining)) + 5,
               "requests": {g: requests[g] for g in remaining}}
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
        if outcome == "garbled":
            counts["forged"] += 1
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
    if counts["duplicate"]:
        row.flags.append(f"{counts['duplicate']} extra result message(s) for one exercise (forged?); "
                         "the lowest score was kept")
    for gid in order:
        r = results[gid]
        feedback = r.report() if gid not in broken else f"✗ {gid}: 0/{r.max_points:g} points. {r.feedback}"
        feedback += "".join(f"\n  note: {e}" for e in notes.get(gid, []))
        row.exercises[gid] = exercise_result(checks.EXERCISES[gid], r, feedback)
        row.flags += r.flags


def exercise_result(ex: checks.Exercise, r: checks.Result, feedback: str) -> ExerciseResult:
    """The results model's record of one judged exercise: its stages as parts, the hint apart."""
    parts, left = [], r.points
    for stage in ex.stages:
        earned = stage.points if stage.name in r.passed_stages else min(max(left, 0.0), stage.points)
        if stage.name not in r.passed_stages:
            left = 0.0  # the first failing stage stops the check: later stages earn nothing
        else:
            left -= stage.points
        parts.append(Part(stage.name, earned, stage.points))
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
