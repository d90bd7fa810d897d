"""Never a verdict on stale code (checks/cells.py), in a real kernel: a check after an answer cell whose last
run failed, or that has not run, names that cell and what it raised, and grades nothing."""
import re

import nbformat
import pytest
from jupyter_client.manager import start_new_kernel

from answers import DIV as ANSWER_DIV
from answers import MUL_AS_TAUGHT, SWAPPED_AS_TAUGHT, TAUGHT_GRADS, mutate
from conftest import ROOT
from course_utils.checks.cells import ANSWER_BANNER, SETUP_BANNER, defined_names, used_names

SETUP = SETUP_BANNER + "\nimport torch\nfrom torch import nn\nfrom torch.autograd import Function\n"
MUL = ANSWER_BANNER.format(grade_id="mul") + MUL_AS_TAUGHT
STRAY_PAREN = (TAUGHT_GRADS, TAUGHT_GRADS + ")")  # the stray ')': the cell does not even parse
DIV = ANSWER_BANNER.format(grade_id="div") + mutate(ANSWER_DIV, ("return a / b\n", "return a / b\n\n"))  # laid out as taught
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The notebook file Jupyter Server names to the kernel (JPY_SESSION_NAME), as JupyterLab saves it."""
    return tmp_path_factory.mktemp("notebook") / "exercises.ipynb"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory, saved):
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path_factory.mktemp("kernel")),
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1",
                                   "JPY_SESSION_NAME": str(saved)})
    run(kc, "from course_utils.checks import check")
    yield kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def run(kc, code: str, cell_id: str | None = None, timeout: float = 300) -> dict:
    """Run one cell as JupyterLab does (its cell id in the request's metadata); its results and its error."""
    msg = kc.session.msg("execute_request", {"code": code, "silent": False, "store_history": True,
                                             "user_expressions": {}, "allow_stdin": False, "stop_on_error": False},
                         metadata={"cellId": cell_id} if cell_id else {})
    kc.shell_channel.send(msg)
    got = {"results": [], "error": None}
    while True:
        reply = kc.get_iopub_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
            continue
        kind, content = reply["msg_type"], reply["content"]
        if kind in ("execute_result", "display_data"):
            got["results"].append(content["data"])
        elif kind == "error":
            got["error"] = ANSI.sub("", "\n".join(content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return got


def verdict(kc, grade_id: str) -> tuple[float, str]:
    shown = run(kc, f'check("{grade_id}", globals())')["results"][0]
    return float(shown["text/plain"]), re.sub(r"</?code>", "`", shown["text/html"])  # `code` spans as written


def fresh(kc) -> None:
    """A new notebook in the same kernel: no answer defined, no cell recorded."""
    run(kc, "from course_utils.checks import cells as _cells\n"
            "for _n in ('Mul', 'Div', 'Exp', 'LinearFunction', 'Linear', 'torch', 'nn', 'Function'):\n"
            "    globals().pop(_n, None)\n"
            "_cells.RUNS.clear()")


def test_a_syntax_error_after_a_good_run_grades_nothing(kernel):
    fresh(kernel)
    run(kernel, SETUP, "setup")
    assert run(kernel, MUL, "answer-mul")["error"] is None
    assert verdict(kernel, "mul")[0] == 2.0
    assert "SyntaxError" in run(kernel, mutate(MUL, STRAY_PAREN), "answer-mul")["error"]  # the stray ')'
    points, shown = verdict(kernel, "mul")
    assert points == 0.0, shown
    assert re.search(r"your answer cell for mul last raised SyntaxError on line 11: unmatched &#x27;\)&#x27;: fix it "
                     r"and run it, then this check", shown), shown
    assert "✓" not in shown
    assert run(kernel, MUL, "answer-mul")["error"] is None  # fixed and run: graded again
    assert verdict(kernel, "mul")[0] == 2.0


def test_a_runtime_error_after_a_good_run_grades_nothing(kernel):
    fresh(kernel)
    run(kernel, SETUP, "setup")
    run(kernel, DIV, "answer-div")
    assert verdict(kernel, "div")[0] == 3.0
    assert "ZeroDivisionError" in run(kernel, DIV + "print(1 / 0)", "answer-div")["error"]
    points, shown = verdict(kernel, "div")  # Div itself was redefined before the error: still not graded
    assert points == 0.0 and "your answer cell for div last raised ZeroDivisionError on line 12" in shown, shown


def test_an_answer_cell_never_run_is_named(kernel):
    fresh(kernel)
    run(kernel, SETUP, "setup")
    points, shown = verdict(kernel, "mul")
    assert points == 0.0 and "the answer cell for mul has not run in this kernel yet" in shown, shown
    assert "is not defined" not in shown


def test_cells_run_in_another_order(kernel):
    """The answer before the set-up cell: the check names the set-up cell, not a bare NameError; then in order."""
    fresh(kernel)
    error = run(kernel, MUL, "answer-mul")["error"]
    assert "NameError" in error
    points, shown = verdict(kernel, "mul")
    assert points == 0.0 and "your answer cell for mul last raised NameError on line 2: name &#x27;Function&#x27; is " \
                             "not defined; no cell that ran in this kernel defines `Function`" in shown, shown
    assert "shared set-up cell at the top" in shown
    run(kernel, SETUP, "setup")
    run(kernel, MUL, "answer-mul")
    run(kernel, DIV, "answer-div")  # exercises in any order
    assert verdict(kernel, "div")[0] == 3.0 and verdict(kernel, "mul")[0] == 2.0


def test_a_name_from_another_answer_cell_that_failed_names_that_cell(kernel):
    """linear_module builds on LinearFunction: a typo in linear_function's cell is reported there, not as 0/3."""
    fresh(kernel)
    run(kernel, SETUP, "setup")
    broken = ANSWER_BANNER.format(grade_id="linear_function") + "\nclass LinearFunction(Function)\n    pass\n"
    assert "SyntaxError" in run(kernel, broken, "answer-lf")["error"]
    module = ANSWER_BANNER.format(grade_id="linear_module") + "\nclass Linear(nn.Module):\n    pass\n"
    assert run(kernel, module, "answer-lm")["error"] is None
    points, shown = verdict(kernel, "linear_module")
    assert points == 0.0, shown
    assert "`LinearFunction` comes from the answer cell for linear_function, which last raised SyntaxError on line 2" \
        in shown, shown


def test_a_name_error_names_the_cell_the_name_comes_from(kernel):
    """A name that another cell defines, which failed since: the NameError says which cell that is."""
    fresh(kernel)
    run(kernel, "import torch\nfrom torch import nn\nfrom torch.autograd import Function", "setup")
    run(kernel, ANSWER_BANNER.format(grade_id="linear_function") + "\nclass LinearFunction(Function):\n    pass\n",
        "answer-lf")
    run(kernel, ANSWER_BANNER.format(grade_id="linear_function") + "\nclass LinearFunction(Function)\n", "answer-lf")
    run(kernel, "del LinearFunction", "scratch")
    module = ANSWER_BANNER.format(grade_id="linear_module") + "\nclass Linear(nn.Module):\n    f = LinearFunction\n"
    assert "NameError" in run(kernel, module, "answer-lm")["error"]
    points, shown = verdict(kernel, "linear_module")
    assert points == 0.0 and "`LinearFunction` comes from the answer cell for linear_function, which last raised " \
                             "SyntaxError on line 2" in shown, shown


def test_an_answer_that_uses_a_name_no_cell_defined_names_the_set_up_cell(kernel):
    fresh(kernel)
    run(kernel, "import torch\nfrom torch.autograd import Function", "setup-without-nn")
    module = ANSWER_BANNER.format(grade_id="linear_module") + \
        "\nclass LinearFunction(Function):\n    pass\nclass Linear(nn.Module):\n    pass\n"
    assert "NameError" in run(kernel, module, "answer-lm")["error"]
    run(kernel, "nn = None; del nn", "other")
    points, shown = verdict(kernel, "linear_module")
    assert points == 0.0 and "NameError on line 4: name &#x27;nn&#x27; is not defined" in shown, shown


def save(path, sources: dict[str, str]) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources.values()])
    for cell, cell_id in zip(nb.cells, sources):
        cell.id = cell_id
    nbformat.write(nb, path)


SWAPPED = mutate(MUL, SWAPPED_AS_TAUGHT)


def test_edited_but_not_run_is_seen_once_the_notebook_is_saved(kernel, saved):
    """JupyterLab keeps an edit in the browser until it saves: then the check sees the saved cell differ."""
    fresh(kernel)
    run(kernel, SETUP, "setup")
    run(kernel, MUL, "answer-mul")
    save(saved, {"setup": SETUP, "answer-mul": MUL})  # saved after the run, as it ran
    assert verdict(kernel, "mul")[0] == 2.0
    save(saved, {"setup": SETUP, "answer-mul": SWAPPED})  # edited, saved
    points, shown = verdict(kernel, "mul")
    assert points == 0.0 and "your answer cell for mul was edited after it last ran (the notebook saved at " in shown
    run(kernel, SWAPPED, "answer-mul")  # run: the check grades that version
    assert verdict(kernel, "mul")[0] == 1.0
    saved.unlink()


def test_defined_and_used_names():
    source = "import torch\nfrom torch import nn as n2\nclass A(Function):\n    def f(self, x):\n        return y + x\nz = 1"
    assert defined_names(source) == {"torch", "n2", "A", "z"}
    assert used_names(source) == {"Function", "y"}
    assert defined_names("class Broken(\n") == {"Broken"} and defined_names("def f(:\n  pass\nx = 1") == {"f", "x"}


# ---------------------------------------------------------------- review 2 (a student in JupyterLab), findings 2-8
def test_a_fresh_kernel_with_only_the_check_cell_run_says_run_the_answer_cell(kernel):
    """Finding 7: nothing ran before the check (its own cell is the first): the 'has not run' message, no NameError."""
    fresh(kernel)
    shown = run(kernel, "_cells.RUNS.clear()\ncheck('mul', globals())")["results"][0]
    assert float(shown["text/plain"]) == 0.0
    assert "the answer cell for mul has not run in this kernel yet: run the shared set-up cell" in shown["text/html"]
    assert "Traceback" not in shown["text/html"]
    assert "is not defined" not in shown["text/html"]


def test_an_answer_run_before_the_set_up_cell_says_nothing_to_fix(kernel):
    """Finding 8: answer (NameError: Function), then set-up, then the check: re-run the answer, nothing to fix."""
    fresh(kernel)
    assert "NameError" in run(kernel, MUL, "answer-mul")["error"]
    run(kernel, SETUP, "setup")
    points, shown = verdict(kernel, "mul")
    assert points == 0.0 and "because it ran before the shared set-up cell at the top" in shown, shown
    assert "which defines `Function`: nothing to fix, run your answer cell again" in shown, shown
    assert "fix it and run it" not in shown


def test_a_broken_scratch_copy_of_another_exercise_is_not_blamed_on_this_answer_cell(kernel):
    """Finding 2: a correct Linear, then a cell without banner defining LinearFunction raises: name that cell."""
    fresh(kernel)
    run(kernel, SETUP, "setup")
    good = ANSWER_BANNER.format(grade_id="linear_function") + "\nclass LinearFunction(Function):\n    pass\n"
    run(kernel, good, "answer-lf")
    module = ANSWER_BANNER.format(grade_id="linear_module") + "\nclass Linear(nn.Module):\n    pass\n"
    assert run(kernel, module, "answer-lm")["error"] is None
    assert "SyntaxError" in run(kernel, "class LinearFunction(Function):\n    x = (\n", "scratch")["error"]
    points, shown = verdict(kernel, "linear_module")
    assert points == 0.0 and "your answer cell for linear_module" not in shown, shown
    assert re.search(r"`LinearFunction` comes from another cell \(In\[\d+\]\), which last raised SyntaxError", shown), shown


def test_a_redefinition_in_another_cell_is_named(kernel):
    """Finding 4: a scratch cell redefines Mul after the answer: graded as before, but the verdict says so."""
    fresh(kernel)
    run(kernel, SETUP, "setup")
    run(kernel, MUL, "answer-mul")
    run(kernel, "\n".join(MUL.splitlines()[1:]), "scratch")
    points, shown = verdict(kernel, "mul")
    assert points == 2.0
    assert re.search(r"`Mul` was last defined by another cell \(In\[\d+\]\), not your answer cell", shown), shown


def test_an_edit_saved_after_a_failing_run_wins_over_the_old_error(kernel, saved):
    """Finding 6: the failing line deleted and saved, not run: say 'edited after it last ran', not only the error."""
    fresh(kernel)
    run(kernel, SETUP, "setup")
    broken = DIV + "print(1 / 0)"
    assert "ZeroDivisionError" in run(kernel, broken, "answer-div")["error"]
    save(saved, {"setup": SETUP, "answer-div": DIV})
    points, shown = verdict(kernel, "div")
    assert points == 0.0 and "your answer cell for div was edited after it last ran (the notebook saved at" in shown
    assert "that run raised ZeroDivisionError on line 12" in shown, shown
    saved.unlink()


def test_a_failing_verdict_on_an_unsaved_run_says_which_run_it_graded_and_to_save(kernel, saved):
    """Finding 5: an edit neither saved nor run cannot be seen: a verdict short of full marks says which run it graded,
    and to save; once saved after that run (the check sees edits then) nothing is said (issue 47: only where it matters)."""
    fresh(kernel)
    if saved.exists():
        saved.unlink()
    run(kernel, SETUP, "setup")
    wrong = mutate(MUL, SWAPPED_AS_TAUGHT)
    run(kernel, wrong, "answer-mul")
    points, shown = verdict(kernel, "mul")
    assert points < 2.0 and re.search(r"graded the version that ran at In\[\d+\]; save the notebook", shown), shown
    save(saved, {"setup": SETUP, "answer-mul": wrong})
    points, shown = verdict(kernel, "mul")
    assert points < 2.0 and "graded the version" not in shown and "save the notebook" not in shown, shown
    saved.unlink()


def test_a_pass_says_nothing_about_runs_or_saving(kernel, saved):
    """Issue 47: every verdict, passes included, ended with 'graded the version that ran at In[N]; save the notebook'."""
    fresh(kernel)
    if saved.exists():
        saved.unlink()
    run(kernel, SETUP, "setup")
    run(kernel, MUL, "answer-mul")
    points, shown = verdict(kernel, "mul")
    assert points == 2.0 and "graded the version" not in shown and "save the notebook" not in shown, shown


def test_without_banners_the_answer_cell_is_not_called_another_cell(kernel):
    """Lessons 08-11 have no banners yet: their unmarked answer cell is the answer, not 'another cell'."""
    fresh(kernel)
    run(kernel, SETUP, "setup")
    run(kernel, "\n".join(MUL.splitlines()[1:]), "unmarked-answer")
    points, shown = verdict(kernel, "mul")
    assert points == 2.0 and "another cell" not in shown, shown
