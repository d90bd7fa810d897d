"""probes/machinery.py: lesson 08's shared set-up cell imports torch.func's and torch.compile's machinery before it
returns (issue 49, item 7: func_softmax's first check spent 1.0-1.3 s of its 1.4 s importing torch._dynamo, which
torch.func.grad imports on first use, and in "Run All" it waited for the warm-up doing it), so that no check of the
notebook imports it; never in the grader's runner, whose probes import what they use as before."""
import json
import subprocess
import sys

import nbformat

from conftest import ROOT

# the built notebook's cells, as a student's process without the warm-up runs them (a script, a front end that runs
# cells with stdin off): the set-up cell first, then the answers; each check then reports what it imported itself
CHECKS = """
import json, sys
import nbformat
from course_utils import markers
nb = nbformat.read("solutions/08_exercises.ipynb", as_version=4)
ns = {}
for cell in nb.cells:
    if cell.cell_type == "code" and not markers.CHECK_CALL.search(cell.source) and "google.colab" not in cell.source:
        exec(compile(cell.source, "<cell>", "exec"), ns)
        if "Shared set-up" in cell.source:
            print(json.dumps({"after set-up": "torch._dynamo" in sys.modules}))
from course_utils.checks import run_check
for gid in ("func_softmax", "row_norm_op"):
    before = set(sys.modules)
    status = str(run_check(gid, ns).status)
    new = sorted(m for m in set(sys.modules) - before
                 if not m.startswith("course_utils") and m.split(".")[0] not in sys.stdlib_module_names)
    print(json.dumps({gid: [status, new]}))
print(json.dumps(getattr(sys.modules.get("course_utils.probes.machinery"), "SAID", None)))
"""

# the grader's runner runs the same set-up cell: there it must import nothing more and say nothing
RUNNER = """
import sys
import nbformat
import course_utils.grading.sandbox.runner
nb = nbformat.read("solutions/08_exercises.ipynb", as_version=4)
setup = next(c.source for c in nb.cells if c.cell_type == "code" and "Shared set-up" in c.source)
exec(compile(setup, "<set-up cell>", "exec"), {})
from course_utils.grading.sandbox import sandbox
from course_utils.probes.machinery import RUNNER
print("torch._dynamo" in sys.modules, all(f"from {RUNNER} import {e};" in sandbox.boot(None, entry=e) for e in ("main", "serve")))
"""


def _run(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def _setup_cell(folder: str) -> nbformat.NotebookNode:
    nb = nbformat.read(ROOT / folder / "08_exercises.ipynb", as_version=4)
    return next(c for c in nb.cells if c.cell_type == "code" and "Shared set-up" in c.source)


def test_lesson_08s_set_up_cell_imports_what_its_checks_would_import():
    """It says so in one line, in both notebooks as built; each check after it imports nothing of torch's."""
    lines = _run(CHECKS)
    said = json.loads(lines[-1])
    assert lines[-3:-1] == ['{"func_softmax": ["passed", []]}', '{"row_norm_op": ["passed", []]}'], lines
    assert lines[:2] == [said, '{"after set-up": true}'], lines
    for folder in ("solutions", "exercises"):
        cell = _setup_cell(folder)
        assert "import course_utils.probes.machinery" in cell.source, folder
        assert [o.get("text", "").strip() for o in cell.outputs if o.output_type == "stream"] == [said], folder


def test_in_the_grader_runner_the_set_up_cell_imports_nothing_more():
    """It recognises the runner every sandbox boots (a renamed runner module would silently move seconds of imports
    into every graded lesson 08 notebook)."""
    assert _run(RUNNER) == ["False True"]
