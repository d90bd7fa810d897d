"""Issue 48, item 4: in every mode a runner reads no other student's submission, no solution and
none of the judge's arguments.

Mallory's answer looks for the submissions folder in every other user's ``/proc/PID/cmdline``,
tries the judge's ``environ``, ``fd`` and ``cwd``, looks for the judge among the listed processes,
lists the folder, reads Bob's notebook, and reads the course's ``solutions/``, checks and tests; it reports what
worked in its own feedback
(``Mul.forward`` raises ``REPORT ...``). Each mode is run for real through the command line:
root (bubblewrap as root), user (bubblewrap as a normal user) and the uid sandbox (root in a
private mount namespace without bubblewrap: a container, as the course's Kubernetes recipe grades).
In the uid sandbox the runner once read the folder from the judge's command line and copied
Bob's notebook into Mallory's feedback, and read ``solutions/``.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT
from course_utils.grading.sandbox import sandbox
from grading_corpus import REPORTER, constants, submission
from test_sandbox_modes import _env, _shared_folder, as_user, in_container

MARK = "bob-wrote-this-7c1f"
KERNEL = tuple(int(n) for n in re.findall(r"\d+", os.uname().release)[:2])  # hidepid per /proc mount: 5.8
LOOK = """
import os
found = []
me = os.getuid()
def tryit(name, fn):
    try:
        if fn():
            found.append(name)
    except BaseException:
        pass
def others():
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and os.stat(f"/proc/{p}").st_uid != me:
                yield p
        except OSError:
            pass
def in_cmdline():
    for p in others():
        try:
            data = open(f"/proc/{p}/cmdline", "rb").read()
        except OSError:
            continue
        if FOLDER.encode() in data:
            return True
def any_of(fn):
    for p in others():
        try:
            if fn(p):
                return True
        except OSError:
            pass
def judge_listed():
    for p in others():
        try:
            if b"course_utils.grade" in open(f"/proc/{p}/cmdline", "rb").read():
                return True
        except OSError:
            pass
tryit("cmdline", in_cmdline)
if LISTED_ONLY_OWN:  # no other process listed at all (the uid sandbox's own /proc, where the kernel has it)
    tryit("judge_listed", judge_listed)
tryit("environ", lambda: any_of(lambda p: open(f"/proc/{p}/environ", "rb").read()))
tryit("fd", lambda: any_of(lambda p: os.listdir(f"/proc/{p}/fd")))
tryit("cwd", lambda: any_of(lambda p: os.readlink(f"/proc/{p}/cwd")))
tryit("listing", lambda: os.listdir(FOLDER))
tryit("bob", lambda: MARK in open(os.path.join(FOLDER, "bob.ipynb")).read())
tryit("solutions", lambda: open(os.path.join(COURSE, "solutions", "02_exercises.py")).read())
tryit("checks", lambda: open(os.path.join(COURSE, "course_utils", "checks", "lesson02.py")).read())
tryit("tests", lambda: open(os.path.join(COURSE, "tests", "answers.py")).read())
tryit("results", lambda: os.listdir(RESULTS))
REPORT = f"found={','.join(found) or 'none'}"
"""


def write_batch(folder: Path, own_proc: bool = True) -> tuple[Path, Path]:
    """Mallory's and Bob's notebooks in ``folder/subs``; the results folder beside it.

    ``own_proc``: the runner's ``/proc`` lists no other process (False: a pod, where it cannot have its own).
    """
    subs, results = folder / "subs", folder / "results"
    subs.mkdir()
    look = constants(FOLDER=str(subs), COURSE=str(ROOT), RESULTS=str(results), MARK=MARK,
                     LISTED_ONLY_OWN=own_proc and KERNEL >= (5, 8)) + LOOK + REPORTER
    nbformat.write(submission("02", {"mul_answer": look}), subs / "mallory.ipynb")
    bob = submission("02")
    bob.cells[0].source += f"\n<!-- {MARK} -->"
    nbformat.write(bob, subs / "bob.ipynb")
    for path in (subs, *subs.iterdir()):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)  # as a careless copy leaves them: readable by all
    return subs, results


def found(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, (proc.stdout[-1000:], proc.stderr[-3000:])
    rows = {Path(r["submission"]).stem: r for r in map(json.loads, proc.stdout.splitlines())}
    assert rows["bob"]["total"] == rows["bob"]["max"], rows["bob"]
    feedback = rows["mallory"]["exercises"]["mul"]["feedback"]
    assert "REPORT found=" in feedback, feedback
    return feedback.split("REPORT found=")[1].split()[0].rstrip(".")


def grade_args(subs: Path, results: Path, *extra: str) -> list[str]:
    return ["-m", "course_utils.grade", str(subs), "--json", "--jobs", "2", "--timeout", "30",
            "--results", str(results), *extra]


@pytest.mark.skipif(os.geteuid() != 0 or sandbox.detect().mode != "root", reason="needs bubblewrap as root")
def test_root_mode_a_runner_reads_no_neighbour_no_solution_no_judge_argument(tmp_path):
    subs, results = write_batch(tmp_path)
    proc = subprocess.run([sys.executable, *grade_args(subs, results)], capture_output=True, text=True, timeout=600,
                          check=False, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert found(proc) == "none"


@pytest.mark.slow  # grades as another uid (~30 s): CI and COURSE_SLOW=1 run it
def test_user_mode_a_runner_reads_no_neighbour_no_solution_no_judge_argument():
    if os.geteuid() != 0:
        pytest.skip("not root: cannot become another user (the tests run as root in CI)")
    if not shutil.which("setpriv") or not shutil.which("bwrap"):
        pytest.skip("needs setpriv and bubblewrap")
    folder = _shared_folder()
    try:
        subs, results = write_batch(folder)
        proc = subprocess.run(as_user([sys.executable, *grade_args(subs, results)]), capture_output=True, text=True,
                              env=_env(folder), cwd=folder, timeout=600, check=False)
        if "cannot start" in proc.stderr:
            pytest.skip(f"no user-mode sandbox here: {proc.stderr.strip()[-200:]}")
        assert found(proc) == "none"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow  # grades as another uid (~30 s): CI and COURSE_SLOW=1 run it
def test_uid_mode_a_runner_reads_no_neighbour_no_solution_no_judge_argument():
    """The course's Kubernetes recipe: root in a container, --uid-sandbox, a shard of the class in one folder."""
    folder = _shared_folder()
    try:
        subs, results = write_batch(folder)
        proc = in_container([*grade_args(subs, results, "--uid-sandbox")], folder=folder, sealable=True)
        if proc.returncode == 121:  # the checkout must be overlaid: sealing changes the modes of the course's files
            pytest.skip("overlayfs cannot cover the checkout here, and the uid sandbox would seal the checkout itself")
        assert found(proc) == "none"
        assert not os.stat(subs).st_mode & 0o007  # sealed on the host too: the submissions are the grader's alone
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow  # grades as another uid (~30 s): CI and COURSE_SLOW=1 run it
def test_uid_mode_in_a_pod_without_cap_sys_admin_a_runner_reads_no_neighbour_no_solution_no_judge_argument():
    """As the Kubernetes recipe's pods (Docker's default capabilities): no mount namespace, so no /proc of the
    runner's own; every other process is listed, and still nothing of the batch, the course or the judge is read."""
    if not shutil.which("setpriv"):
        pytest.skip("needs setpriv")
    folder = _shared_folder()
    try:
        subs, results = write_batch(folder, own_proc=False)
        proc = in_container([*grade_args(subs, results, "--uid-sandbox")], folder=folder, sealable=True, admin=False)
        if proc.returncode == 121:
            pytest.skip("overlayfs cannot cover the checkout here, and the uid sandbox would seal the checkout itself")
        assert found(proc) == "none"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
