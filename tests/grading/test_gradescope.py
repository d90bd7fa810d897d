"""The Gradescope autograder archive, run as Gradescope would run it, in a temporary root.

The archive is built with the documented command, unpacked into ROOT/source (what
Gradescope does with it), ``run_autograder`` copied to ROOT/run_autograder, a submission put
in ROOT/submission, and ``run_autograder`` run with ``AUTOGRADER_ROOT=ROOT``; its
``results/results.json`` must satisfy Gradescope's documented format.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import jsonschema
import nbformat
import pytest

from conftest import ROOT
from course_utils.grading import gradescope_archive
from grading_corpus import JUDGE_THREADS_SITE, SWAPPED_MUL, submission
from private_paths import python_paths, readable_view

VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
FORMAT = {"enum": ["text", "html", "simple_format", "md", "ansi"]}
# Gradescope's results.json, from the field list of its "Autograder Specifications", section
# "Output format" (gradescope-autograders.readthedocs.io/en/latest/specs/): top level score,
# execution_time, output, output_format, test_output_format, test_name_format, visibility,
# stdout_visibility, extra_data, tests, leaderboard; each test score, max_score, status,
# name, name_format, number, output, output_format, tags, visibility, extra_data. Unknown
# fields are refused here, so a typo cannot pass. We always send score, and per test the
# five fields the course relies on.
RESULTS_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "additionalProperties": False,
    "required": ["score", "tests"],
    "properties": {
        "score": {"type": "number", "minimum": 0},
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "output_format": FORMAT,
        "test_output_format": FORMAT,
        "test_name_format": FORMAT,
        "visibility": VISIBILITY,
        "stdout_visibility": VISIBILITY,
        "extra_data": {"type": "object"},
        "leaderboard": {"type": "array", "items": {"type": "object", "required": ["name", "value"]}},
        "tests": {"type": "array", "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "score", "max_score", "output", "visibility"],
            "properties": {
                "score": {"type": "number", "minimum": 0},
                "max_score": {"type": "number", "minimum": 0},
                "status": {"enum": ["passed", "failed"]},
                "name": {"type": "string", "minLength": 1},
                "name_format": FORMAT,
                "number": {"type": "string"},
                "output": {"type": "string"},
                "output_format": FORMAT,
                "tags": {"type": "array", "items": {"type": "string"}},
                "visibility": VISIBILITY,
                "extra_data": {"type": "object"},
            }}},
    },
}


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gs") / "autograder.zip"
    proc = subprocess.run([sys.executable, "-m", "course_utils.grade", "gradescope", "02_exercises", "--out", str(out)],
                          check=False, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def run_autograder(archive: Path, base: Path, notebook: nbformat.NotebookNode | None, site: str = "",
                   **extra_env: str) -> tuple[dict, str]:
    root = base / "autograder"
    with zipfile.ZipFile(archive) as z:
        z.extractall(root / "source")
    if site:  # a sitecustomize.py on run_autograder's PYTHONPATH: the judge imports it
        (root / "source" / "course" / "sitecustomize.py").write_text(site)
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    if notebook is not None:
        nbformat.write(notebook, root / "submission" / "my_work.ipynb")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable, AUTOGRADER_TIMEOUT="30", **extra_env)
    proc = subprocess.run([shutil.which("bash"), str(root / "run_autograder")], capture_output=True, text=True, env=env,
                          cwd=base, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(data, RESULTS_SCHEMA)
    return data, proc.stdout


def test_archive_has_what_gradescope_needs_and_no_solutions(archive):
    with zipfile.ZipFile(archive) as z:
        names = set(z.namelist())
        assert {"setup.sh", "run_autograder", "requirements.txt", "course/exercises/02_exercises.ipynb",
                "course/course_utils/grading/grade_file.py", "course/course_utils/checks/lesson02.py"} <= names
        assert not [n for n in names if "solution" in n or n.endswith(".pyc")], names
        assert z.getinfo("run_autograder").external_attr >> 16 & 0o111
        assert "BEGIN SOLUTION" not in z.read("course/exercises/02_exercises.ipynb").decode()
        setup = z.read("setup.sh").decode()
        requirements = z.read("requirements.txt").decode()
    pins = {line for line in (ROOT / "requirements.txt").read_text().splitlines() if "==" in line}
    assert "torch==2.13.0" in requirements.splitlines() and set(requirements.splitlines()) <= pins
    assert "bubblewrap" in setup and "whl/cpu" in setup and "requirements.txt" in setup


def test_a_correct_submission_gets_full_marks_from_a_judge_on_one_torch_thread(archive, tmp_path):
    """The judge's checks compute on one torch thread as the runner's do (``limits.one_torch_thread``): its module has
    imported torch by the time its entry runs, so the count is set on torch itself."""
    threads = tmp_path / "threads"
    data, stdout = run_autograder(archive, tmp_path, submission("02"), site=JUDGE_THREADS_SITE,
                                  JUDGE_THREADS_OUT=str(threads))
    assert [t["name"].split(":")[0] for t in data["tests"]] == ["mul", "div"]
    assert data["score"] == sum(t["max_score"] for t in data["tests"]) > 0
    assert all(t["score"] == t["max_score"] and "All checks passed" in t["output"] for t in data["tests"])
    assert data["stdout_visibility"] == "hidden" and "score" in stdout
    assert threads.read_text() == "1" or (os.cpu_count() or 1) < 2  # one CPU: torch's pool has one thread anyway


def test_a_wrong_submission_gets_our_diagnosis(archive, tmp_path):
    data, _ = run_autograder(archive, tmp_path, submission("02", {"mul_answer": SWAPPED_MUL}))
    mul, div = data["tests"]
    assert mul["score"] < mul["max_score"] and mul["status"] == "failed"
    assert "✗ mul" in mul["output"] and "backward" in mul["output"]  # the diagnosis, not just a number
    assert div["score"] == div["max_score"]
    assert data["score"] == mul["score"] + div["score"]


def test_no_notebook_is_a_zero_with_a_sentence(archive, tmp_path):
    data, _ = run_autograder(archive, tmp_path, None)
    assert data["score"] == 0 and data["tests"] == [] and "no notebook" in data["output"]


def test_without_a_sandbox_it_fails_closed_and_tells_the_instructor_why(archive, tmp_path):
    """A Gradescope image whose sandbox cannot start: nothing runs, a zero that says so, the fix on stdout."""
    data, stdout = run_autograder(archive, tmp_path, submission("02"), PATH="/nonexistent", AUTOGRADER_UID_SANDBOX="0")
    assert data["score"] == 0 and data["tests"] == [] and "could not start its sandbox" in data["output"]
    assert "sandbox cannot start" in stdout and "apt-get install bubblewrap" in stdout and "Nothing was graded" in stdout


def test_unsandboxed_only_when_asked_and_then_flagged_to_the_instructor_only(archive, tmp_path):
    data, stdout = run_autograder(archive, tmp_path, submission("02"), PATH="/nonexistent", AUTOGRADER_NO_SANDBOX="1")
    assert data["score"] == 5 and "WITHOUT the grader's sandbox" in stdout and "graded WITHOUT the sandbox" in stdout
    assert "sandbox" not in json.dumps(data)  # the student's view holds the verdicts only


def test_held_for_review_is_a_zero_that_says_why_and_shows_the_computed_points():
    from course_utils.grading.gradescope import results
    from course_utils.grading.results import ExerciseResult, SubmissionResult

    row = SubmissionResult(submission="s/02_exercises.ipynb", assignment="02_exercises", status="held for review",
                           exercises={"mul": ExerciseResult("mul", 2.0, 2.0, "passed", feedback="✓ mul: 2/2 points.")},
                           review=["answer cell mul_answer imports `gc`"])
    data = results(row, [row.submission], "02_exercises")
    assert data["score"] == 0 and all(t["score"] == 0 for t in data["tests"])
    assert "Held for review" in data["output"] and "imports `gc`" in data["output"] and "2/2" in data["output"]
    assert "computed 2/2" in data["tests"][0]["output"]


def test_a_notebook_of_another_assignment_is_named_not_graded():
    from course_utils.grading.gradescope import results
    from course_utils.grading.results import SubmissionResult
    from course_utils.grading.submission import wrong_assignment

    row = SubmissionResult(submission="s/03_exercises.ipynb", assignment="02_exercises", status="wrong assignment",
                           flags=[wrong_assignment("03_exercises", "02_exercises")])  # filed under the batch's
    data = results(row, [row.submission], "02_exercises")
    assert data["score"] == 0 and "notebook of 03_exercises, not of 02_exercises" in data["output"]
    assert "--assignment" not in data["output"]  # the instructor's part of the sentence is not the student's


def test_an_archive_for_the_triton_exercises_installs_the_pinned_triton(tmp_path):
    """Lesson 10's notebook launches Triton kernels: its archive pins triton as requirements.txt does; others do not."""
    triton_pin = next(line for line in (ROOT / "requirements.txt").read_text().splitlines() if line.startswith("triton=="))
    for assignment, wanted in (("10_exercises", True), ("02_exercises", False)):
        gradescope_archive.build(assignment, tmp_path / f"{assignment}.zip")
        with zipfile.ZipFile(tmp_path / f"{assignment}.zip") as z:
            assert (triton_pin in z.read("requirements.txt").decode().splitlines()) == wanted, assignment


DAEMON = SWAPPED_MUL + '''
import os, time
if os.fork() == 0:  # a double-forked setsid daemon: no descendant of the runner, holding the channel open
    os.setsid()
    if os.fork() == 0:
        open(MARK, "w").write(str(os.getuid()))
        for _ in range(400):
            for target in (RESULTS, RESULTS + ".tmp"):
                try:
                    with open(target, "w") as f:
                        f.write('{"score": 99.0, "tests": []}')
                except OSError:
                    pass
            time.sleep(0.05)
    os._exit(0)
'''
# in a container the Python installation is readable by every uid: a private folder on its way (/root here, a
# private checkout's mktemp -d folder: issue 48, item 7) is covered in this mount namespace (private_paths)
CONTAINER = 'PATH=/usr/bin:/bin; ' + (readable_view(python_paths()) or 'true') + ' && PATH=/nonexistent exec "$@"'



@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")
def test_uid_sandbox_in_a_container_without_bubblewrap_survives_the_daemon_attack(archive, tmp_path):
    """Issue 29, item 2: a private mount namespace, no bubblewrap on PATH, the grader as root (Gradescope's case).

    The answer leaves a setsid daemon that rewrites results.json and holds the channel open; it was
    'score 1' in the judge and 5.0 in the file, and the judge waited for every hard deadline.
    """
    root = tmp_path / "autograder"
    with zipfile.ZipFile(archive) as z:
        z.extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    (root / "results").mkdir(mode=0o777)
    os.chmod(root / "results", 0o777)  # a careless image: the judge must close it before grading
    # pytest's folders are root's alone: the uid writes here, outside the folders the uid sandbox takes back
    # when a runner ends (/tmp, /var/tmp, /dev/shm...: issue 38), so the mark stays as evidence
    drop = Path(tempfile.mkdtemp(prefix="course-test-daemon-", dir="/run" if os.access("/run", os.W_OK) else None))
    os.chmod(drop, 0o777)
    mark = drop / "ran"
    answer = DAEMON.replace("MARK", repr(str(mark))).replace("RESULTS", repr(str(root / "results" / "results.json")))
    nbformat.write(submission("02", {"mul_answer": answer}), root / "submission" / "my_work.ipynb")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable, AUTOGRADER_TIMEOUT="30")
    proc = subprocess.run(["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", CONTAINER, "sh",
                           shutil.which("bash"), str(root / "run_autograder")], check=False, capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(data, RESULTS_SCHEMA)
    assert data["score"] == 0 and "Held for review" in data["output"] and "(4/5)" in data["output"]  # the judge's
    assert "uses `os.fork` (seen at run time)" in data["output"]
    assert "score 0;" in proc.stdout and "separate uid" in proc.stdout
    assert mark.exists() and int(mark.read_text()) >= 62000  # the daemon ran, as the sandbox's uid
    uid = int(mark.read_text())
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) == uid]  # nothing of it is left
    assert data.get("execution_time", 0) < 30  # no wait for the hard deadline
    shutil.rmtree(drop, ignore_errors=True)


def _uid_of(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
