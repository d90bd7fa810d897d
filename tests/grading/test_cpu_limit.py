"""Issue 48, item 5: an answer that swallows every alarm in a loop ends the same way on every run, whatever the load.

Such an answer (``while True: try: ... except BaseException: pass``) swallows the runner's own limits, so
only the judge's backstop or the runner's process-wide ``RLIMIT_CPU`` can end it. Before, that CPU limit
(``int(STARTUP + (timeout + 1) * (exercises + 1)) + 5``) lay before the backstop: on a quiet machine the
kernel killed the runner ("made the Python process die"), on a loaded one the judge stopped it ("did not
finish ... it was stopped"). Now the limit lies past the judge's latest hard deadline
(``session.cpu_seconds``), and a runner that reaches it all the same (several threads on an unpinned slot)
ends by ``SIGXCPU``, which the judge reads as the same timeout once the kernel's count of its CPU time,
never the runner's word, shows the limit used (``session.ended_by``).

The tests that run a runner drive a ``Worker`` (``runner_start``) with a tiny CPU limit in the machine's
sandbox mode and in the mode without one (the judge reaps the runner itself there: ``worker.reap``), and,
marked slow, in user mode and the uid sandbox; none spins for more than 2.5 CPU-seconds.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import runner_start
import test_sandbox_modes
from conftest import ROOT
from course_utils.grading import grade_file
from course_utils.grading.assignment import load_assignments
from course_utils.grading.sandbox import sandbox, session, worker, zygote
from course_utils.grading.sandbox.session import (
    CONFIRM_GRACE,
    CPU_SHOWN,
    REASONS,
    STARTUP,
    Outcome,
    RunnerSession,
    cpu_seconds,
    ended_by,
)
from grading_corpus import answer, submission
from runner_start import FAKE, SPIN
from test_session import DONE, READY, Clock, begin, facts

BACKSTOP_TEXT = f"Your code {REASONS[Outcome.TIMEOUT]}."


def old_cpu_seconds(timeout: float, exercises: int) -> int:
    """The limit before (grade_file): from the runner's own limit, not the judge's backstop."""
    return int(STARTUP + (timeout + 1) * (exercises + 1)) + 5


def latest_stop(timeout: float, exercises: int) -> float:
    """The latest the judge stops a runner start, in seconds from its start: a runner that sends each message
    at the last moment before the deadline (ready, then each exercise's begin and result), every grace taken."""
    clock = Clock()
    clock.now = 0.0
    points = {f"e{i}": 1.0 for i in range(exercises)}
    runs = RunnerSession(points, timeout, lambda m: grade_file.checks.Result(m["exercise"], 1.0, 1.0, "passed"),
                         clock)
    deadline = runs.start(0.0)
    latest = deadline.due()
    for message in [READY, *[m for g in points for m in (begin(g), facts(g, 1.0))], DONE]:
        clock.now = deadline.due() - 1e-6
        runs.on_message(message)
        latest = max(latest, deadline.due())
    assert runs.finished
    return latest


LIMITS = [(t, n) for t in (0.5, 1.0, 2.0, 10.0, 60.0, 300.0) for n in (1, 2, 5, 12)]


@pytest.mark.parametrize(("timeout", "exercises"), LIMITS)
def test_a_single_thread_never_reaches_its_cpu_limit_before_the_judges_hard_deadline(timeout, exercises):
    """One thread on one CPU uses at most a CPU-second per second since its start: its CPU limit must lie past
    the latest moment the judge stops it, with time for the judge to notice (a poll) and kill it."""
    assert cpu_seconds(timeout, exercises) >= latest_stop(timeout, exercises) + 2


def test_the_old_cpu_limit_fired_before_the_judges_backstop():
    """What the test above catches: at the default --timeout 60 with one exercise left the old limit was 172
    CPU-seconds, the judge's backstop at the latest 405 s (410 with the grace: a start's first exercise restarts
    the step once): a spin that swallowed the alarms died of the limit on a quiet machine."""
    failing = [(t, n) for t, n in LIMITS if old_cpu_seconds(t, n) < latest_stop(t, n) + 2]
    assert (60.0, 1) in failing and len(failing) > len(LIMITS) // 2
    assert latest_stop(60.0, 1) == pytest.approx(STARTUP + 2 * 180.0 + CONFIRM_GRACE) and old_cpu_seconds(60.0, 1) == 172


@pytest.mark.parametrize(("rc", "cpu", "outcome"), [
    (-signal.SIGXCPU, 2.0, Outcome.TIMEOUT), (-signal.SIGXCPU, 1.97, Outcome.TIMEOUT),  # wait4 counts a bit less
    (-signal.SIGKILL, 7.0, Outcome.TIMEOUT),  # SIGXCPU ignored: the hard limit's SIGKILL
    (-signal.SIGXCPU, 0.3, Outcome.DIED), (-signal.SIGXCPU, None, Outcome.DIED),  # sent itself; unknown
    (-signal.SIGKILL, 0.3, Outcome.DIED), (-signal.SIGSEGV, 9.0, Outcome.DIED), (1, 9.0, Outcome.DIED)])
def test_only_a_runner_that_used_its_cpu_limit_ended_in_a_timeout(rc, cpu, outcome):
    assert ended_by(rc, cpu, 2.0) == outcome


def _modes() -> list[sandbox.Sandbox]:
    box = sandbox.detect()
    return [box, sandbox.NO_SANDBOX] if box.mode in zygote.MODES else [sandbox.NO_SANDBOX]


@pytest.mark.parametrize("box", _modes(), ids=lambda b: b.mode)
def test_a_runner_that_spins_past_its_cpu_limit_ends_in_the_judges_timeout(box):
    """It dies of SIGXCPU (without a sandbox torch's import counts too: the limit is reached all the same)."""
    outcome, runs = runner_start.start(box, SPIN, 1)
    assert outcome == Outcome.TIMEOUT
    assert runs.results["mul"].problem == BACKSTOP_TEXT and runs.results["mul"].points == 0


@pytest.mark.parametrize("box", _modes(), ids=lambda b: b.mode)
def test_a_runner_that_sends_itself_sigxcpu_died(box):
    """The student's process is hostile: the signal alone proves nothing, the kernel's count of its CPU does."""
    outcome, runs = runner_start.start(box, FAKE, 60)
    assert outcome == Outcome.DIED
    assert "made the Python process die" in runs.results["mul"].problem


CHILD = [sys.executable, str(Path(runner_start.__file__))]
STARTS = json.dumps([["spin", SPIN, 1], ["fake", FAKE, 60]])


def _check_other_mode(proc: subprocess.CompletedProcess) -> None:
    out = test_sandbox_modes._result(proc)
    assert out["spin"] == ["timeout", BACKSTOP_TEXT], out
    assert out["fake"][0] == "died", out


@pytest.mark.slow  # a sandbox as another user, twice (~15 s): CI and COURSE_SLOW=1 run it
def test_user_mode_the_cpu_limit_reads_as_the_timeout_and_a_fake_as_a_death():
    """Bubblewrap as a normal user: the zygote reports the kernel's count (a runner shares its uid there)."""
    if os.geteuid() != 0:
        pytest.skip("not root: cannot become another user (the tests run as root in CI)")
    folder = test_sandbox_modes._shared_folder()
    try:
        proc = subprocess.run(test_sandbox_modes.as_user([*CHILD, "user"]), input=STARTS, capture_output=True,
                              text=True, env=test_sandbox_modes._env(folder), cwd=folder, timeout=300, check=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    _check_other_mode(proc)


@pytest.mark.slow  # two uid-mode runners, each importing torch (~10 s): CI and COURSE_SLOW=1 run it
def test_uid_mode_the_cpu_limit_reads_as_the_timeout_and_a_fake_as_a_death():
    """The uid sandbox (a container): the judge reaps its runner itself (``worker.reap``)."""
    _check_other_mode(test_sandbox_modes.in_container([CHILD[1], "uid"], STARTS))


def test_the_judge_reads_the_kernels_count_of_a_process_it_reaps():
    """``worker.reap`` (uid mode and no sandbox): the exit status and the CPU time, from ``wait4``."""
    spin = subprocess.Popen([sys.executable, "-c", "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (1, 3))"
                             "\nwhile True: pass"])
    fake = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGXCPU)"])
    for proc, at_least, at_most in ((spin, CPU_SHOWN, 3.0), (fake, 0.0, 0.5)):
        got = None
        while proc.returncode is None:
            got = worker.reap(proc)
        assert proc.returncode == -signal.SIGXCPU and got is not None and at_least <= got < at_most, got
        assert proc.wait() == -signal.SIGXCPU  # Popen keeps the code it was given


def test_the_cpu_limit_and_the_backstop_give_the_same_feedback(tmp_path, monkeypatch):
    """End to end: a catch-all spin graded at --timeout 0.5, once where its CPU limit fires first and once where
    the judge's backstop (1.5 s) does: the same points and feedback. The first is made as a runner with several
    threads on an unpinned slot makes it: a CPU limit of 1 s, and the backstop moved far enough that no load can
    let it fire first."""
    box = sandbox.detect()
    if box.mode not in zygote.MODES:
        pytest.skip(f"no bubblewrap here ({box.reason}): a runner's start would spend the CPU limit")
    path = tmp_path / "spin.ipynb"
    nbformat.write(submission("02", {"mul_answer": SPIN + answer("02", "mul_answer")}), path)
    options = grade_file.Options(sandbox=box, timeout=0.5)
    ends: list[Outcome] = []  # how each runner that ended by itself with a non-zero code ended (worker.ended_by)
    monkeypatch.setattr(worker, "ended_by", lambda *args: ends.append(ended_by(*args)) or ends[-1], raising=False)
    rows, seen = [], []
    for limit, backstop in ((lambda timeout, n: 1, 20.0), (cpu_seconds, session.BACKSTOP)):
        monkeypatch.setattr(grade_file, "cpu_seconds", limit)
        monkeypatch.setattr(session, "BACKSTOP", backstop)
        try:
            rows.append(grade_file.grade_submission(path, load_assignments(ROOT), options).exercises["mul"])
        finally:
            zygote.close_all()
        seen.append(list(ends))
        ends.clear()
    by_cpu_limit, by_backstop = rows
    assert by_cpu_limit.points == by_backstop.points == 0
    assert by_cpu_limit.feedback == by_backstop.feedback and BACKSTOP_TEXT in by_backstop.feedback
    assert by_cpu_limit.problem_codes == by_backstop.problem_codes == ["timeout"]
    assert seen == [[Outcome.TIMEOUT], []]  # the CPU limit ended the first (SIGXCPU), the judge's clock the second
