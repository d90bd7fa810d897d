"""Colab, offline: its widget stack (ipywidgets 7.7.1) and its install path (the set-up cell).

Two Colab-like environments, made cheaply by tests/colab_env.py (the ipywidgets 7 packages
are installed once into .cache/; torch and the rest are reused from .venv):

* **ipywidgets 7**: both explorers driven headless in a kernel, from Python and with a burst
  of comm messages like a browser's slider sends.
* **The Colab path**: a kernel that has a stand-in ``google.colab`` module loaded at start-up
  and *no* course_utils. ``COURSE_UTILS_SOURCE`` points the set-up cell at a copy of this
  checkout, so it installs course_utils with pip exactly as in Colab, minus the network.

Trade-off, to keep ``./course test`` within its time budget: nbval already executes every
notebook once, so here (1) every lesson and exercise notebook is checked to start with the
identical set-up cell, (2) that cell is executed for real once, after which course_utils and
every one of its modules must import from the pip-installed copy (a module left out of the
package fails here, for every notebook), and (3) only notebooks that exercise something
this environment changes are run to the end, one after the other, each in a fresh kernel with an
empty working folder like Colab's /content: the first lesson that uses the widgets
(ipywidgets 7 inside a notebook) and its exercises notebook (the checks, imported from the
installed package). Each runs its own set-up cell again. Other notebooks would repeat
nbval's run with the same code and are not run again here: a notebook-specific Colab
problem other than these (say, a file read from the checkout) would go unnoticed.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

import colab_env
from conftest import ROOT
from course_utils import build
from widget_kernel import run, slider_burst

WIDGET_STACK = {"ipywidgets", "widgetsnbextension", "jupyterlab-widgets", "ipython-genutils"}
STANDIN = '''"""Stand-in for Colab's google.colab package: only its presence matters to the course."""
IN_COLAB_STANDIN = True
'''


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^\s*([A-Za-z0-9_.\-]+)==([^\s#]+)", line)
        if m:
            found[m.group(1).lower().replace("_", "-")] = m.group(2)
    return found


def test_colab_widget_stack_is_written_down_once():
    colab, main = pins(colab_env.REQUIREMENTS), pins(ROOT / "requirements.txt")
    assert colab["ipywidgets"] == "7.7.1", "Colab ships ipywidgets 7.7.1"
    assert main["ipywidgets"].startswith("8."), "the course itself pins ipywidgets 8"
    assert set(colab) <= WIDGET_STACK, f"only the widget stack belongs here, the rest is requirements.txt: {colab}"


# --------------------------------------------------------------------------- ipywidgets 7
@pytest.fixture(scope="module")
def widgets7_python(tmp_path_factory) -> Path:
    return colab_env.make_venv(tmp_path_factory.mktemp("widgets7") / "venv", [colab_env.widgets7_site()])


DRIVE_BOTH = """
import ipywidgets
from course_utils import widgets
assert ipywidgets.__version__ == "7.7.1", ipywidgets.__version__

tool = widgets.GradientExplorer()
tool.show()
view, first, renders = tool.view, tool.plot, tool.view.renders
for control, value in ((tool.x_range, (0.0, 2.0)), (tool.h, 1e-6), (tool.dtype, "float32"),
                       (tool.function, "tanh with a bug in backward")):
    control.value = value  # four changes in a row inside a running kernel: merged, not drawn four times
assert tool.last.name == "tanh with a bug in backward" and tool.last.dtype == "float32"  # reading draws
assert tool.view is view and renders < view.renders <= renders + 2, view.renders
assert tool.last.err_custom.max() > 1.0 and tool.plot.png != first.png

sweep = widgets.StepSizeExplorer()
sweep.show()
before = sweep.plot
sweep.x0.value = 2.0
sweep.function.value = "tanh"
assert sweep.plot.png != before.png and sweep.plot.text.startswith("tanh at x = 2:")
print("both explorers work")
"""


def test_both_explorers_work_with_ipywidgets_7(widgets7_python, tmp_path):
    km, kc = colab_env.start_kernel(widgets7_python, tmp_path, env={"PYTHONPATH": str(ROOT)})
    try:
        out, messages = run(kc, DRIVE_BOTH)
        assert "both explorers work" in out
        shown = [m["content"]["data"] for m in messages if m["msg_type"] in ("display_data", "update_display_data")]
        assert any("image/png" in d for d in shown) and any("application/vnd.jupyter.widget-view+json" in d
                                                           for d in shown)
        burst = slider_burst(kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert burst["ipywidgets"] == "7.7.1" and burst["x0"] == 3.0 and burst["same_artists"]
    assert burst["runs"] <= burst["changes"] // 4, burst  # without merging: one redraw per message


# --------------------------------------------------------------------------- the Colab path
LESSON_FOLDERS = ("notebooks", "exercises")  # what the Colab links open


def colab_notebooks() -> list[Path]:
    return [p for folder in LESSON_FOLDERS for p in sorted((ROOT / folder).glob("[0-9][0-9]_*.ipynb"))]


def run_to_the_end() -> list[Path]:
    """The first lesson that uses the widgets (ipywidgets 7 in a notebook) and its exercises
    (the checks, from the pip-installed package). Later widget lessons use the same explorers."""
    lessons = [p for p in colab_notebooks() if p.parent.name == "notebooks"
               and "course_utils import widgets" in p.with_suffix(".py").read_text()][:1]
    numbers = {p.name[:2] for p in lessons}
    exercises = [p for p in colab_notebooks() if p.parent.name == "exercises" and p.name[:2] in numbers]
    exercises = exercises or [p for p in colab_notebooks() if p.parent.name == "exercises"][:1]
    return lessons + exercises


def first_code_cell(nb) -> str:
    return next(c.source for c in nb.cells if c.cell_type == "code")


def test_every_colab_notebook_starts_with_the_same_setup_cell():
    wanted = build.setup_cell_source()
    assert build.repo_url() in wanted and build.SOURCE_VARIABLE in wanted
    stale = [str(p.relative_to(ROOT)) for p in colab_notebooks()
             if first_code_cell(nbformat.read(p, as_version=4)) != wanted]
    assert not stale, f"these notebooks do not start with the current set-up cell (./course build): {stale}"


@pytest.fixture(scope="module")
def colab(tmp_path_factory) -> dict:
    """A Colab-like venv (google.colab loaded, no course_utils) and the env its kernels need."""
    base = tmp_path_factory.mktemp("colab")
    standin = base / "standin" / "google" / "colab"
    standin.mkdir(parents=True)
    (standin / "__init__.py").write_text(STANDIN)
    python = colab_env.make_venv(base / "venv", [base / "standin", colab_env.widgets7_site()],
                                 startup="import google.colab")
    source = base / "checkout"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".venv-*", ".cache", "artifacts", "build", "_build", "node_modules", "*.egg-info", "__pycache__",
        ".pytest_cache", "*.ipynb"))
    env = {build.SOURCE_VARIABLE: str(source), "PIP_NO_BUILD_ISOLATION": "0",  # build with the env's setuptools
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONPATH": ""}
    return {"python": python, "env": env, "base": base}


IMPORT_EVERYTHING = """
import importlib, json, pkgutil, sys
import course_utils
names = [m.name for m in pkgutil.walk_packages(course_utils.__path__, "course_utils.")]
failed = {}
for name in names:
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"file": course_utils.__file__, "modules": names, "failed": failed,
                  "colab": "google.colab" in sys.modules}))
"""


def test_setup_cell_installs_course_utils_as_in_colab(colab, tmp_path):
    content = tmp_path / "content"
    content.mkdir()
    km, kc = colab_env.start_kernel(colab["python"], tmp_path, env=colab["env"], cwd=content)
    try:
        out, _ = run(kc, "import importlib.util; print(importlib.util.find_spec('course_utils') is None)")
        assert out.strip() == "True", "course_utils must not be importable before the set-up cell ran"
        run(kc, build.setup_cell_source(), timeout=600)
        report = json.loads(run(kc, IMPORT_EVERYTHING)[0])
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert report["colab"]
    assert str(colab["base"] / "venv") in report["file"], f"course_utils came from {report['file']}"
    expected = {f"course_utils.{p.stem}" for p in (ROOT / "course_utils").glob("*.py") if p.stem != "__init__"}
    expected |= {f"course_utils.{p.parent.name}" for p in (ROOT / "course_utils").glob("*/__init__.py")}
    missing = sorted(expected - set(report["modules"]))
    assert not missing, f"the pip-installed course_utils lacks {missing}: list them in pyproject.toml's packages"
    assert not report["failed"], report["failed"]


RUNNER = """
import sys, nbformat
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
path, specs, cwd = sys.argv[1:4]
nb = nbformat.read(path, as_version=4)
km = KernelManager(kernel_name="colab", kernel_spec_manager=KernelSpecManager(kernel_dirs=[specs]))
NotebookClient(nb, km=km, timeout=600, resources={"metadata": {"path": cwd}}).execute(cwd=cwd)
"""


def _run_notebook(path: Path, colab: dict) -> tuple[Path, str | None]:
    if first_code_cell(nbformat.read(path, as_version=4)) != build.setup_cell_source():
        return path, "its set-up cell is not the current one (it would install from GitHub): run ./course build"
    scratch = colab["base"] / f"run-{path.parent.name}-{path.stem}"
    content = scratch / "content"
    content.mkdir(parents=True)
    specs = colab_env.kernel_spec_dir(colab["python"], scratch)
    source = scratch / "checkout"  # one copy per run: two pip builds in one source folder collide in build/
    shutil.copytree(colab["env"][build.SOURCE_VARIABLE], source)
    env = {**os.environ, **colab["env"], build.SOURCE_VARIABLE: str(source)}
    done = subprocess.run([sys.executable, "-c", RUNNER, str(path), str(specs), str(content)],
                          check=False, env=env, capture_output=True, text=True, timeout=900)
    return path, None if done.returncode == 0 else done.stderr[-4000:]


def test_notebooks_run_to_the_end_in_colab(colab):
    todo = run_to_the_end()
    assert any(p.parent.name == "notebooks" for p in todo), "no lesson uses the widgets any more?"
    with ThreadPoolExecutor(max_workers=1) as pool:  # one venv: two pip installs into it at once collide
        results = list(pool.map(lambda p: _run_notebook(p, colab), todo))
    failures = {str(p.relative_to(ROOT)): err for p, err in results if err}
    assert not failures, "\n\n".join(f"{name} failed in the Colab-like environment:\n{err}"
                                     for name, err in failures.items())


# --------------------------------------------------------------------------- the student edition, as in Colab
EDITION_REPO = "https://github.com/my-uni/autograd-2027"
RIGHT_AND_WRONG = "exp", "sigmoid"  # lesson 03's exercises: one answered right, one with a wrong gradient


def _answer(number: str, cls: str, edit: tuple[str, str] | None = None) -> str:
    from check_helpers import solution_answer

    text = "\n".join(line for line in solution_answer(number, cls).splitlines()
                     if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
    if edit:
        assert edit[0] in text
        text = text.replace(*edit)
    return text


@pytest.mark.slow
def test_the_edition_in_a_colab_with_only_colabs_packages(tmp_path):
    """Issue 47: the edition's set-up cell installs course_utils from the students' repository (a local git URL here)
    into a fresh venv holding only what Colab preinstalls (torch, numpy, matplotlib, ipykernel, ipywidgets 7; no
    course repository, no jupytext or course tool on the path; torchviz from a local wheel, as pip would fetch it);
    lesson 03 (its widgets) and exercise notebook 03 run there, the checks giving the right verdicts."""
    from course_utils import publish

    bare = tmp_path / "students.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    dest = tmp_path / "edition"
    publish.release_repository(dest, EDITION_REPO, remote=str(bare), up_to=3)
    subprocess.run(["git", "-C", str(dest), "push", "-q", "origin", "main"], check=True, capture_output=True)
    clone = tmp_path / "clone"  # what Colab opens: the students' repository's notebooks
    subprocess.run(["git", "clone", "-q", str(bare), str(clone)], check=True)

    standin = tmp_path / "standin" / "google" / "colab"
    standin.mkdir(parents=True)
    (standin / "__init__.py").write_text(STANDIN)
    python = colab_env.make_venv(tmp_path / "venv", [tmp_path / "standin", colab_env.widgets7_site(),
                                                     colab_env.colab_only_site()], startup="import google.colab",
                                 main=False)
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; print([m for m in ('course_utils', "
                            "'jupytext', 'nbformat', 'torchviz') if u.find_spec(m)], __import__('torch').__version__)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path)
    assert probe.stdout.split("]")[0] == "[", f"beyond Colab's packages: {probe.stdout}"
    wheels = tmp_path / "wheels"
    colab_env.wheel_of_installed("torchviz", wheels)

    exercises = clone / "exercises" / "03_exercises.ipynb"
    nb = nbformat.read(exercises, as_version=4)
    answers = {"exp": _answer("03", "Exp"),
               "sigmoid": _answer("03", "Sigmoid", ("grad_output * s * (1 - s)", "grad_output * s"))}
    for cell in nb.cells:
        owner = next((gid for gid in answers if cell.source.startswith(f"# ✎ Your answer for `{gid}`")), None)
        if owner:
            cell.source = answers[owner]
    answered = tmp_path / "03_exercises.ipynb"
    nbformat.write(nb, answered)
    assert first_code_cell(nb) == build.setup_cell_source(EDITION_REPO)

    specs = colab_env.kernel_spec_dir(python, tmp_path)
    env = {**os.environ, build.SOURCE_VARIABLE: f"git+file://{bare}", "PIP_NO_INDEX": "1",
           "PIP_FIND_LINKS": str(wheels), "PIP_NO_BUILD_ISOLATION": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PYTHONPATH": ""}
    results = {}
    for path in (clone / "notebooks" / "03_exp_save_the_output.ipynb", answered):
        content = tmp_path / f"content-{path.stem}"  # Colab's empty /content
        content.mkdir()
        out = content / "executed.ipynb"
        runner = RUNNER + "nbformat.write(nb, sys.argv[4])\n"
        done = subprocess.run([sys.executable, "-c", runner, str(path), str(specs), str(content), str(out)],
                              check=False, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{path.name} failed in the Colab-like venv:\n{done.stderr[-4000:]}"
        results[path.name] = nbformat.read(out, as_version=4)

    from course_utils.checks import EXERCISES

    verdicts = {}  # exercise -> (points: the check cell's value, the verdict as shown)
    for cell in results["03_exercises.ipynb"].cells:
        called = re.search(r'check\("(\w+)"', cell.source) if cell.cell_type == "code" else None
        if called:
            data = next(o["data"] for o in cell.outputs if o.get("output_type") == "execute_result")
            verdicts[called.group(1)] = (float(data["text/plain"]), data.get("text/html", ""))
    assert verdicts["exp"][0] == EXERCISES["exp"].points, verdicts["exp"]
    points, shown = verdicts["sigmoid"]
    assert 0 < points < EXERCISES["sigmoid"].points and "gradient" in shown and "not attempted" not in shown, shown
    installed = subprocess.run([str(python), "-c", "import course_utils, torchviz; print(course_utils.__file__)"],
                               capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert str(tmp_path / "venv") in installed  # installed by the set-up cell, from the students' repository
