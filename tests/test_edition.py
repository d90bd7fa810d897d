"""course_utils.edition and ./course release's options: lesson by lesson, without fixes, its own README and ./course."""
import hashlib
import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, free_port
from course_utils import edition, publish, release
from course_utils.errors import CourseError

REPO = "https://github.com/my-uni/autograd-2027"
LATER = (10, 11)  # lessons an edition up to 09 leaves out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A graded course's edition: lessons up to 09, no fixes."""
    dest = tmp_path_factory.mktemp("graded") / "student"
    release.student_edition(dest, REPO, up_to=9, fixes=False)
    return dest


def in_edition(dest: Path, code: str) -> str:
    """Run ``code`` with the edition's course_utils (never this repository's); its stdout."""
    done = subprocess.run([sys.executable, "-c", code], cwd=dest, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(dest), "PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"}, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# ---- item 9: links --------------------------------------------------------------------------------

def test_a_release_without_the_students_repository_is_refused(tmp_path):
    with pytest.raises(CourseError, match="give --repository"):
        release.student_edition(tmp_path / "e")
    assert not (tmp_path / "e").exists()


def test_keep_links_releases_with_a_loud_warning(tmp_path, capsys):
    assert publish.main([str(tmp_path / "e"), "--keep-links", "--up-to", "2"]) == 0
    err = capsys.readouterr().err
    assert "WARNING: every Colab, Binder and install link" in err and release._repo_of(ROOT) in err
    assert publish.main([str(tmp_path / "f")]) == 2
    assert "give --repository" in capsys.readouterr().err


# ---- item 10: lesson by lesson, without fixes ---------------------------------------------------

@pytest.mark.parametrize("path, lesson", [
    ("notebooks/10_kernels_in_functions.ipynb", 10), ("exercises/09_exercises.py", 9),
    ("course_utils/checks/lesson07_twice.py", 7), ("course_utils/probes/lesson11.py", 11),
    ("course_utils/capstone/functions.py", 11), ("course_utils/kernels/triton_rmsnorm.py", 10),
    ("course_utils/checks/engine.py", None), ("notebooks/00_start_here.ipynb", 0), ("README.md", None),
])
def test_every_file_knows_its_lesson(path, lesson):
    assert edition.lesson_of(path) == lesson


def test_an_edition_up_to_a_missing_lesson_is_refused(tmp_path):
    with pytest.raises(CourseError, match="no lesson 12 with exercises"):
        release.student_edition(tmp_path / "e", REPO, up_to=12)


def test_up_to_leaves_out_every_later_lesson_and_the_grader(graded):
    files = [p.relative_to(graded).as_posix() for p in graded.rglob("*") if p.is_file()]
    later = [f for f in files if (edition.lesson_of(f) or 0) > 9]
    assert later == [] and not (graded / "course_utils" / "capstone").exists()
    assert not (graded / "course_utils" / "kernels").exists() and not (graded / "course_utils" / "grading").exists()
    assert not (graded / "course_utils" / "scaffold.py").exists()  # ./course new-exercise writes solutions and tests
    assert (graded / "exercises" / "09_exercises.ipynb").exists()
    assert (graded / "notebooks" / "09_numerics_memory_surgery.ipynb").exists()
    assert "class RMSNorm" not in "".join(p.read_text(errors="replace") for p in (graded / "course_utils").rglob("*.py")
                                    if "lesson09" not in p.name)
    for start in (graded / "notebooks").glob("00_start_here.*"):  # the start page links only to shipped lessons
        text = start.read_text()
        assert "09_numerics_memory_surgery.ipynb" in text and "10_kernels" not in text and "11_fused" not in text
    ids = in_edition(graded, "from course_utils.checks import EXERCISES\nprint(' '.join(EXERCISES))").split()
    from course_utils.checks import EXERCISES
    assert "rmsnorm" in ids and "triton_swiglu" not in ids and "vocab_chunked_ce" not in ids
    assert set(ids) < set(EXERCISES)


SCAN = """
import importlib, inspect, pkgutil, sys, json, warnings
warnings.filterwarnings("ignore")
import torch, course_utils
from course_utils.checks import EXERCISES, run_check
wanted = sys.argv[1].split(",")
found = {}
for info in pkgutil.walk_packages(course_utils.__path__, "course_utils."):
    if info.name.startswith(("course_utils.checks", "course_utils.probes")):
        continue  # the checks' own reference implementations: see test_the_checks_references_are_known
    module = importlib.import_module(info.name)
    for name, obj in vars(module).items():
        if inspect.isclass(obj) and issubclass(obj, torch.autograd.Function) and obj.__module__ == info.name:
            found[info.name + "." + name] = obj
hits = []
for gid in wanted:
    for where, cls in found.items():
        try:
            result = run_check(gid, {n: cls for n in EXERCISES[gid].names})
        except Exception:
            continue
        if result.points > 0:
            hits.append(f"{gid} <- {where} ({result.points:g}/{result.max:g})")
print(json.dumps({"candidates": sorted(found), "hits": hits}))
"""


@pytest.mark.slow
def test_no_package_function_answers_a_released_lesson09_exercise(graded, tmp_path):
    """Every autograd Function in the edition's package, tried as the answer of lesson 09's exercises: none earns a
    point. The full course fails this (capstone's RMSNorm earns 2/4 of rmsnorm), which is why it is released by lesson."""
    import json

    lesson09 = "rmsnorm,log1mexp,lambert_w,solve"
    report = json.loads(in_edition(graded, SCAN.replace("sys.argv[1]", repr(lesson09))).splitlines()[-1])
    assert len(report["candidates"]) >= 2 and report["hits"] == []
    full = tmp_path / "full"
    release.student_edition(full, REPO)
    report = json.loads(in_edition(full, SCAN.replace("sys.argv[1]", repr("rmsnorm"))).splitlines()[-1])
    assert any(h.startswith("rmsnorm <- course_utils.capstone.functions.RMSNorm") for h in report["hits"])


def scan_edition(dest: Path, ids: list[str], workers: int = 2) -> dict:
    """tests/edition_scan.py in the edition (its package only), the exercises split over ``workers`` processes."""
    import json

    scan = Path(__file__).with_name("edition_scan.py")
    env = {"PYTHONPATH": str(dest), "PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1",
           "MPLBACKEND": "Agg", "HOME": str(dest)}
    procs = [subprocess.Popen([sys.executable, str(scan), ",".join(ids[k::workers])], cwd=dest, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
             for k in range(workers)]
    parts = [json.loads(p.communicate(timeout=1800)[0].splitlines()[-1]) for p in procs]
    return {"candidates": parts[0]["candidates"], "full_marks": [h for p in parts for h in p["full_marks"]],
            "crashed": [c for p in parts for c in p["crashed"]]}


@pytest.mark.slow
def test_nothing_the_edition_ships_passes_an_exercise(tmp_path):
    """Issue 47 item 1: every class and function of the full edition's package, and every reference its checks hold,
    handed to every exercise's check as itself (a reference Function renamed and pasted earned log1mexp 3/3, lambert_w
    4/4, clip_grad 3/3) and as a Function's forward with autograd doing the backward: none earns full marks, except
    the autograd paste with the checks' flag for a backward that asks autograd (a reviewer sees it)."""
    from course_utils.checks import EXERCISES

    full = tmp_path / "full"
    release.student_edition(full, REPO)
    report = scan_edition(full, list(EXERCISES))
    names = set(report["candidates"])
    assert len(names) > 400 and {"course_utils.checks.references.clip_grad", "course_utils.checks.lesson05."
                                 "CLIP_GRAD.reference", "course_utils.checks.lesson09.LAMBERT.reference",
                                 "course_utils.gradients._BuggyTanh"} <= names
    unflagged = [h for h in report["full_marks"] if h["how"] != "forward, backward by autograd" or not h["flagged"]]
    assert unflagged == [], unflagged


def test_no_solution_text_of_a_released_exercise_is_anywhere_in_the_edition(graded):
    """No three lines of an answer (release.leaks), and no single long line an answer has that no lesson shows.

    The checks are left out of the single-line search: an ``assess`` function states what it compares with, such as lesson 07's
    ``x / vector_norm(x)``, the forward the exercise describes (its skill is the backward).
    """
    assert release.leaks(graded, release.solution_regions(ROOT)) == []
    shown = {release._norm(line.split("  #")[0]) for p in (ROOT / "notebooks").glob("*.py")
             for line in p.read_text().splitlines()}
    own = {n for _, lines in release.solution_regions(ROOT) for n in lines if len(n) > 30 and n not in shown}
    assert len(own) > 20
    text = re.sub(r"[ \t]+", " ", "\n".join(p.read_text(errors="replace") for p in graded.rglob("*")
                                            if p.is_file() and "checks" not in p.parts))
    assert [n for n in own if n in text] == []


FIXED = '''
HINT_FIX = ("use the constant " "that fixes it")
def assess(x):
    if x:  # a comment that stays
        raise Mistake("bad", "the hint stays", fix=f"cure {x}")
    raise Partial("bad", "half", 0.5, "positional cure")
    raise Mistake("bad", "also stays", "positional mistake cure")
    raise Mistake("bad", "named", fix=HINT_FIX)
    raise Mistake("bad", "none yet", fix=None)
'''


def test_without_fixes_replaces_every_fix_and_keeps_the_rest():
    out = edition.without_fixes(FIXED)
    assert edition.fix_texts(out) == []
    for gone in ("cure", "that fixes it", "positional"):
        assert gone not in out
    for kept in ("the hint stays", "# a comment that stays", '"half", 0.5', "also stays"):
        assert kept in out
    compile(out, "fixed", "exec")
    assert sorted(edition.fix_texts(FIXED)) == ["cure ", "positional cure", "positional mistake cure",
                                                "use the constant that fixes it"]


def test_a_graded_edition_holds_no_fix_text_and_check_fix_true_says_so(graded):
    texts = {t.strip() for folder in ("checks", "probes") for p in (ROOT / "course_utils" / folder).rglob("*.py")
             for t in edition.fix_texts(p.read_text()) if len(t.strip()) > 12}
    assert len(texts) > 50  # the course has fixes: this test can fail
    lessons = "\n".join(p.read_text() for p in (ROOT / "notebooks").glob("*.py"))
    texts = {t for t in texts if t not in lessons}  # a fix's fragment a lesson shows anyway (f-string pieces)
    shipped = "\n".join(p.read_text() for p in (graded / "course_utils").rglob("*.py"))
    assert [t for t in texts if t in shipped] == []
    out = in_edition(graded, "from course_utils.checks import run_check\nfrom torch.autograd import Function\n"
                     "class Mul(Function):\n    @staticmethod\n    def forward(ctx, a, b):\n"
                     "        ctx.save_for_backward(a, b)\n        return a * b * b\n    @staticmethod\n"
                     "    def backward(ctx, g):\n        a, b = ctx.saved_tensors\n        return 2 * g * a * b, g * b * b\n"
                     "print(run_check('mul', {'Mul': Mul}).report(fix=True))\n")
    assert "look swapped" in out and "no fix to show" in out  # the hint stays, the fix is gone
    readme = (graded / "README.md").read_text()
    assert "graded course: the checks give the hint only" in readme and "lessons up to 09" in readme


# ---- item 8: the edition's own README and ./course ----------------------------------------------

def test_the_edition_readme_is_for_students(graded):
    readme = (graded / "README.md").read_text()
    for words in ("Colab", "./course lab", 'check("mul", globals())', "git clone " + REPO + ".git", "cd autograd-2027"):
        assert words in readme
    for instructors in ("For instructors", "private", "./course grade", "./course test", "solutions/", "trust model"):
        assert instructors not in readme
    rows = re.findall(r"^\| (\d\d) \|", readme, re.M)
    assert rows == [f"{n:02d}" for n in range(1, 10)]
    assert "{{" not in readme and "colab.research.google.com/github/my-uni/autograd-2027/blob/main/" in readme


def test_the_full_edition_readme_explains_fix_true(tmp_path):
    release.student_edition(tmp_path / "e", REPO)
    readme = (tmp_path / "e" / "README.md").read_text()
    assert 'fix=True' in readme and "Show the fix" in readme and "lessons up to" not in readme
    assert "`g++` and `ninja` (lesson 10 builds a C++ extension)" in readme  # lesson 10 is in the full edition


def documented_commands(dest: Path) -> set[str]:
    return set(re.findall(r"\./course (\w+)", (dest / "README.md").read_text()))


def prepared_venv(dest: Path) -> None:
    """A .venv for the edition that reuses this one's packages (tests download nothing), set up as ./course leaves it."""
    venv = dest / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "course.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n{dest}\n")
    stamp = hashlib.sha256((dest / "requirements.txt").read_bytes() + (dest / "pyproject.toml").read_bytes())
    (venv / ".setup-stamp").write_text(stamp.hexdigest() + "\n")
    jupyter = venv / "bin" / "jupyter"
    jupyter.write_text(f"#!/bin/sh\nsub=$1\nshift\nexec {venv}/bin/python -m jupyter$sub \"$@\"\n")  # lab: jupyterlab
    jupyter.chmod(0o755)


def test_every_command_of_the_edition_readme_works_there(graded, tmp_path):
    import shutil

    graded = Path(shutil.copytree(graded, tmp_path / "student"))  # the module's edition stays as released
    commands = documented_commands(graded)
    assert commands == {"lab", "setup"}
    assert not (graded / "requirements-instructor.txt").exists()
    prepared_venv(graded)
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"))
    env.pop("DISPLAY", None)
    for name in ("test", "grade", "build"):  # the instructors' commands: refused with the usage line
        done = subprocess.run([str(graded / "course"), name], capture_output=True, text=True, env=env, check=False)
        assert done.returncode == 2 and "usage: ./course lab | setup" in done.stderr
    done = subprocess.run([str(graded / "course"), "setup"], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert done.returncode == 0 and "set up" in done.stderr and "installing" not in done.stderr, done.stderr
    port, log = free_port(), tmp_path / "lab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(graded / "course"), "lab", "--ip=127.0.0.1", f"--port={port}",
                                 "--IdentityProvider.token=t"], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    try:
        deadline = time.time() + 120
        while True:
            try:
                status = urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/exercises?token=t", timeout=5)
                break
            except OSError:
                assert proc.poll() is None, log.read_text()
                assert time.time() < deadline, "the edition's ./course lab did not start: " + log.read_text()
                time.sleep(1)
        import json
        listed = {item["name"] for item in json.loads(status.read())["content"]}
        assert "09_exercises.ipynb" in listed and "10_exercises.ipynb" not in listed
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
