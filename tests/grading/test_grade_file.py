"""The judge's own bounds and its refusal to run anything unsandboxed by accident (issue 29, items 1, 7, 8).

The reader thread is driven with in-memory channels shaped like the red team's attacks,
scaled down (the byte cap is lowered for the test, so no test reads hundreds of MiB).
"""
import io
import queue
import struct
from types import SimpleNamespace

import nbformat
import pytest

from answers import MUL
from conftest import ROOT
from course_utils.grading import grade_file
from course_utils.grading.assignment import load_assignments
from course_utils.grading.sandbox import protocol, sandbox, session, worker
from grading_corpus import answer, submission


def reader(data: bytes | io.RawIOBase) -> worker.Worker:
    """A Worker whose runner wrote ``data`` and ended; only its reader thread's work is done (synchronously)."""
    w = worker.Worker.__new__(worker.Worker)
    w.messages, w.bytes, w.flood, w.garbled, w.unreadable = queue.Queue(), 0, False, False, ""
    w.channel = io.BytesIO(data) if isinstance(data, bytes) else data
    w._read()
    return w


def test_every_byte_counts_against_the_per_runner_cap(monkeypatch):
    """8 x 60 MiB was graded 5/5 (one per message was counted); here 8 x 300 KiB against a 1 MiB cap."""
    monkeypatch.setattr(worker, "MAX_TOTAL", 1 << 20)
    frames = b"".join(protocol.frame({"kind": "begin", "exercise": "x", "pad": ["y" * 100_000] * 3})
                      for _ in range(8))
    w = reader(frames)
    assert w.flood and w.messages.qsize() == 3 and w.bytes <= 1 << 20


def test_a_frame_that_would_pass_the_cap_is_refused_before_it_is_read(monkeypatch):
    monkeypatch.setattr(worker, "MAX_TOTAL", 1 << 20)
    w = reader(struct.pack(">I", 2 << 20) + b"\0" * (2 << 20))
    assert w.flood and w.bytes == 4


def test_container_amplification_stops_the_runner_as_a_flood():
    header = b"[" + b"{}," * protocol.MAX_NODES + b"{}]"
    body = struct.pack("<I", len(header)) + header
    w = reader(struct.pack(">I", len(body)) + body)
    assert w.flood and w.messages.empty()


@pytest.mark.parametrize("error", [MemoryError, RuntimeError, KeyError])
def test_the_reader_thread_survives_any_error_and_marks_the_row(error):
    class Broken(io.RawIOBase):
        def read(self, n=-1):
            raise error("allocator says no")

    w = reader(Broken())
    assert w.unreadable == error.__name__ and "unreadable" in session.REASONS


def test_a_broken_channel_decides_even_if_the_runner_ended_since():
    """A warm runner finishes the rest of its job in milliseconds after the judge stopped reading its broken
    channel: the row must say so (it said "ended the process before this exercise was checked", by timing)."""
    w = reader(struct.pack(">I", 8) + struct.pack("<I", 4) + b"{{{{")  # a header that is not JSON
    assert w.garbled
    w.reader, w.uid = SimpleNamespace(is_alive=lambda: False), None
    w.ended, w.returncode, w.stop = (lambda: True), (lambda: 0), (lambda **how: None)
    assert w.wait(session.Deadline(float("inf"), float("inf")), lambda message: None) == worker.Outcome.GARBLED


def test_honest_messages_are_all_read():
    w = reader(protocol.frame({"kind": "ready"}) + protocol.frame({"kind": "done"}))
    assert not (w.flood or w.garbled or w.unreadable) and w.messages.qsize() == 2


def test_no_points_without_a_sandbox_unless_asked(tmp_path, monkeypatch):
    """The sandbox that cannot start: the row is refused and nothing is run (no runner is even started)."""
    path = tmp_path / "a.ipynb"
    nbformat.write(submission("02"), path)
    assignments = load_assignments(ROOT)

    def no_runner(*args, **kwargs):
        raise AssertionError("a runner was started")

    monkeypatch.setattr(grade_file, "Worker", no_runner)
    for box in (sandbox.Sandbox("none", "bubblewrap (bwrap) was not found on PATH"), grade_file.Options().sandbox):
        row = grade_file.grade_submission(path, assignments, grade_file.Options(sandbox=box, timeout=5))
        assert row.status == "refused" and row.total == 0 and not row.graded
        assert "sandbox could not start" in row.flags[0] and box.reason in row.flags[0]
    assert sandbox.NO_SANDBOX.usable and not grade_file.Options().sandbox.usable


def test_the_cli_grades_nothing_when_the_sandbox_cannot_start(tmp_path, monkeypatch, capsys):
    from course_utils.grading import cli

    path = tmp_path / "a.ipynb"
    nbformat.write(submission("02"), path)
    monkeypatch.setattr(sandbox, "detect", lambda **kw: sandbox.Sandbox("none", "bubblewrap is installed but cannot "
                                                                   "create a sandbox here (x); allow namespaces"))
    assert cli.main([str(path), "--out", str(tmp_path / "g.csv")]) == 2
    err = capsys.readouterr().err
    assert "sandbox cannot start" in err and "allow namespaces" in err and "--no-sandbox" in err
    assert not (tmp_path / "g.csv").exists() and not (tmp_path / "g.csv.results").exists()


@pytest.mark.parametrize("stderr, fix", [
    ("bwrap: Can't find source path /opt/course/.venv/lib: No such file or directory", "real path"),
    ("bwrap: No permissions to creating new namespace, likely because the kernel does not allow", "namespaces"),
    ("bwrap: setting up uid map: Permission denied", "user namespaces"),
    ("bwrap: Creating new namespace failed: Operation not permitted", "namespaces"),
    ("something new", "bwrap --ro-bind / / true"),
])
def test_each_sandbox_failure_says_how_to_fix_it(stderr, fix):
    assert fix in sandbox.fix_for(stderr)


def test_missing_bubblewrap_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    box = sandbox.detect.__wrapped__()
    assert box.mode == "none" and not box.usable and "apt-get install bubblewrap" in box.reason


FRAME_WALK_FORGE_EXIT = '''
import os
import torch
from torch.autograd import Function
''' + MUL + '''
get = (lambda g=getattr: g)()
f = get(torch, "sys")._getframe(0)
while f is not None and "send" not in f.f_locals:  # up to the runner's main: its job, probes and channel
    f = get(f, "f_back")
here = f.f_locals
facts = here["probes"].run("mul", here["job"]["probes"]["mul"], globals(),
                          here["job"]["requests"]["mul"], 5.0)  # genuine-looking facts
here["send"](kind="facts", exercise="mul", facts=facts, cell_errors=[], printed=0, fake_output=False)
os._exit(0)  # before the real probe runs
'''


def test_the_dashboard_says_when_rows_were_graded_without_the_sandbox():
    from course_utils.grading.reports import dashboard
    from course_utils.grading.results import SubmissionResult

    page = dashboard.report_html([SubmissionResult("a.ipynb", "02_exercises", sandbox="none"),
                                  SubmissionResult("b.ipynb", "02_exercises", sandbox="root")])
    assert "1 submission(s) were graded WITHOUT the sandbox" in page
    assert "WITHOUT the sandbox" not in dashboard.report_html([SubmissionResult("b.ipynb", sandbox="root")])


ALIASES = '''
import torch
from collections import namedtuple
from dataclasses import dataclass
from typing import TypeVar

Pair = namedtuple("Pair", "a b")  # ordinary code that makes the standard library read frames and compile
T = TypeVar("T")

@dataclass
class Box:
    x: int = 0

listing = torch.os.listdir("/")
two = torch.builtins.eval("1 + 1")
'''


@pytest.mark.skipif(not sandbox.detect().usable, reason="no sandbox here")
def test_forged_result_then_exit_scores_nothing_and_aliases_are_seen_at_run_time(tmp_path):
    """Issue 29, items 3 and 5, in one batch of two runner starts.

    mul: the red team's frame walk (an aliased getattr, torch.sys._getframe), one valid facts frame, then
    os._exit: it was 2/2 with no flag. div: torch's re-exported os and builtins, which the static policy
    does not see (nor the getattr alias in mul); the audit hook does, and ordinary library code is not blamed.
    """
    from course_utils.grading.policy import review_reasons

    div_answer = answer("02", "div_answer") + ALIASES
    assert review_reasons(ALIASES) == []  # spelling alone sees nothing here
    path = tmp_path / "forge.ipynb"
    nbformat.write(submission("02", {"mul_answer": FRAME_WALK_FORGE_EXIT, "div_answer": div_answer}), path)
    row = grade_file.grade_submission(path, load_assignments(ROOT), grade_file.Options(sandbox=sandbox.detect(), timeout=20))
    mul, div = row.exercises["mul"], row.exercises["div"]
    assert mul.points == 0 and "ended the process" in mul.feedback, mul.feedback
    assert div.points == div.max > 0  # the rest of the notebook is still graded
    assert any("followed by the end of the process" in f and "not counted" in f for f in row.flags), row.flags
    assert row.status == "held for review"
    run_time = [r for r in row.review if "seen at run time" in r]
    assert run_time == ["answer code of div runs code built at run time (exec or eval) (seen at run time)",
                        "answer code of div uses `os.listdir` (seen at run time)",
                        "answer code of mul walks the interpreter's frames (sys._getframe) (seen at run time)"], row.review


def test_what_is_read_after_the_runner_was_stopped_at_its_limit_is_late():
    """A looping answer interrupted by the runner's own alarm just as the judge's limit passed: its result and the
    next exercise's begin are read after the judge stopped the runner. They go to on_late, so the session blames
    the exercise that ran at the limit (it confirmed its own result and the next, correct, exercise scored 0)."""
    w = reader(b"")
    last = [{"kind": "facts", "exercise": "a", "facts": 2, "cell_errors": [], "printed": 0, "fake_output": False},
            {"kind": "begin", "exercise": "b"}]
    w.reader, w.uid = SimpleNamespace(is_alive=lambda: True), None
    w.ended, w.over_memory = (lambda: False), (lambda: False)
    w.stop = lambda **how: [w.messages.put(m) for m in last]  # written before the kill, read after the decision
    counted: list = []
    late: list = []
    assert w.wait(session.Deadline(0.0, 0.0), counted.append, late.append) == worker.Outcome.TIMEOUT
    assert counted == [] and late == last
    s = session.RunnerSession({"a": 2.0, "b": 3.0}, 10.0, lambda m: grade_file.checks.Result(m["exercise"], 2.0, 2.0))
    s.start(0.0)
    for m in ({"kind": "ready"}, {"kind": "begin", "exercise": "a"}):
        s.on_message(m)
    for m in late:
        s.on_late(m)
    s.settle(worker.Outcome.TIMEOUT)
    assert s.results["a"].points == 0 and "time limit" in s.results["a"].problem and "b" not in s.results
    assert s.flags() == ["2 message(s) arrived after the runner was stopped at a limit: not counted"]
