"""``./course new-exercise`` (course_utils/scaffold.py): a new exercise is picked up everywhere, and bad input is refused.

The scaffold runs in a copy of the repository's code, solutions and tests (never in the working tree): the
new exercise must be in the registry with its probes paired by name, graded "not written yet" by a
check, found by pytest with its tests passing, listed in CONTRACT and given a points heading.
"""
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from course_utils import scaffold as new_exercise

NEW = ["sin_twice", "--lesson", "3", "--defines", "SinTwice", "--reference", "torch.sin(2 * x)"]
COS = ["cos", "--lesson", "3", "--defines", "Cos", "--reference", "torch.cos(x)"]  # refused for one thing each


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """course_utils, solutions and the checks' tests with their helpers, copied (what a new exercise touches), and
    the scaffold run there once: (the copy, what it said)."""
    root = tmp_path_factory.mktemp("repo")
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("course_utils", "solutions", "tests/checks"):
        shutil.copytree(ROOT / folder, root / folder, ignore=ignore)
    (root / "notebooks").mkdir()
    for lesson in (ROOT / "notebooks").glob("*.py"):  # the lessons' sources: the scaffold refuses their classes
        shutil.copy(lesson, root / "notebooks" / lesson.name)
    for name in ("pyproject.toml", "tests/conftest.py", "tests/check_helpers.py", "tests/answers.py",
                 "tests/test_points.py"):
        shutil.copy(ROOT / name, root / name)
    return root, scaffold(root, *NEW)


def scaffold(root, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_utils.scaffold", *argv], cwd=root, capture_output=True, text=True,
                          check=False)


def test_a_new_exercise_is_registered_paired_and_tested(copy):
    """The skeleton is registered and paired at once; once the solution's backward is written (the scaffold leaves a
    NotImplementedError there, graded "not attempted"), its tests pass (the solution, a forward_wrong made by
    mutate, a lazy backward) with the engine's contract tests, and the modules it wrote pass ruff."""
    copy, done = copy
    assert done.returncode == 0, done.stderr
    assert "wrote course_utils/checks/lesson03_sin_twice.py" in done.stdout
    said = done.stdout.splitlines()
    # what it pre-filled, and the full list of what ./course test --exercise runs (issue 52, item 3)
    assert "  - the solution's forward is pre-filled with `ctx.save_for_backward(x)` and `return torch.sin(2 * x)`: " \
        "rewrite its body as the lesson wants (e.g. save the output, not the input), but keep its line " \
        "`def forward(ctx, x):`, the only line the tests' forward_wrong edits (change FORWARD in the tests if you " \
        "change it)" in said
    listed = said[said.index(next(line for line in said if line.startswith("next: "))) + 1:]
    assert "./course test --exercise sin_twice" in done.stdout and listed == [
        "  tests/checks/test_lesson03_sin_twice.py", "  tests/checks/test_engine.py", "  tests/test_points.py",
        "  tests/checks/test_hints.py",
        "  tests/checks/test_variants.py", "  tests/checks/test_exercise_notebooks.py",
        "  tests/test_taught_before_asked.py", "  tests/test_variant_audit.py", "  tests/test_verbatim_share.py",
        "  tests/test_notebooks.py", "  tests/test_lint.py", "  solutions/03_exercises.ipynb",
        "  exercises/03_exercises.ipynb"], said
    for path in ("course_utils/checks/lesson03_sin_twice.py", "course_utils/probes/lesson03_sin_twice.py",
                 "tests/checks/test_lesson03_sin_twice.py"):
        assert (copy / path).exists(), path
    chosen = ["tests/checks/test_lesson03_sin_twice.py",
              "tests/checks/test_engine.py::test_contract_names",
              "tests/test_points.py::test_every_heading_and_nbgrader_points_are_what_the_stages_award[solutions/03_exercises.py]",
              "tests/checks/test_engine.py::test_every_exercise_has_a_solution_notebook",
              "tests/checks/test_engine.py::test_every_lesson_module_of_checks_has_its_test_module"]
    pytest_argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *chosen]
    solution = copy / "solutions" / "03_exercises.py"
    text = solution.read_text()
    raising = next(line for line in text.splitlines() if "raise NotImplementedError(\"sin_twice" in line)
    # the author writes backward and rewrites forward's pre-filled body as an author would (issue 52, item 3: the
    # generated forward_wrong edited `return torch.sin(2 * x)` and broke): the generated tests still hold
    prefilled = "        ctx.save_for_backward(x)\n        return torch.sin(2 * x)\n"
    assert text.count(prefilled) == 1
    text = text.replace(prefilled, "        two_x = 2 * x\n        ctx.save_for_backward(two_x)\n        return two_x.sin()\n")
    solution.write_text(text.replace(raising, "        (two_x,) = ctx.saved_tensors\n"
                                              "        return grad_output * 2 * two_x.cos()"))
    tests = subprocess.run(pytest_argv, check=False, cwd=copy, capture_output=True, text=True)
    assert tests.returncode == 0 and "\n8 passed" in tests.stdout, tests.stdout[-3000:] + tests.stderr[-2000:]
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "course_utils/checks/lesson03_sin_twice.py",
                           "course_utils/probes/lesson03_sin_twice.py"], check=False, cwd=copy, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout


def test_a_duplicate_id_is_refused_and_nothing_is_written(copy, capsys):
    copy, _ = copy
    before = {p: p.read_text() for p in (copy / "solutions").glob("*.py")}
    for argv, message in [
        (NEW, "exercise 'sin_twice' exists already (solutions/03_exercises.py): choose another id."),
        (["mul", *NEW[1:]], "exercise 'mul' exists already (solutions/02_exercises.py): choose another id."),
        (["cos", "--lesson", "12", *COS[3:]], "--lesson must name a lesson with an exercise notebook (01 to 11: "
                                               "solutions/NN_exercises.py), not '12'."),
        (["Cos", *NEW[1:]], "the exercise id must be lowercase letters, digits and underscores, starting with a "
                            "letter (it names the check, its modules and the grade column), not 'Cos'."),
        (["cos", *COS[1:5], "--reference", "torch.cos(y)"], "--reference uses y, which is neither an argument "
                                                             "(--args x) nor torch or math."),
        (["cos", *COS[1:], "--args", "x,x"], "--args names an argument twice (x,x): name each once."),
        (["cos", *COS[1:], "--args", "x,"], "--args has an empty name ('x,'): separate names by single commas, "
                                             "with none at the end."),
        (["cos", *COS[1:], "--args", "class"], "--args 'class' is a Python keyword: name forward's tensor "
                                                "arguments like x or x,y."),
        (["cos", *COS[1:3], "--defines", "1Cos", *COS[5:]], "--defines must be a Python class name (e.g. Sin), "
                                                             "not '1Cos'."),
        (["cos", *COS[1:3], "--defines", "Exp", *COS[5:]], "solutions/03_exercises.py defines Exp already (another "
                                                            "exercise's answer): choose another class name, or the "
                                                            "new answer cell would replace it."),
        (["cos", *COS[1:3], "--defines", "ExpSavingInput", *COS[5:]],
         "notebooks/03_exp_save_the_output.py, a lesson, defines class ExpSavingInput already: choose another class "
         "name (the exercise asks students to write a class of their own, not one a lesson shows them)."),
        (["cos", *COS[1:3], "--defines", "KillHead", *COS[5:]],
         "notebooks/05_killhead.py, a lesson, defines class KillHead already: choose another class name (the "
         "exercise asks students to write a class of their own, not one a lesson shows them)."),
        (["cos", *COS[1:5], "--reference", "3"], "--reference never uses x: every argument of --args must appear in "
                                                  "it (or leave that argument out of --args)."),
        (["cos", *COS[1:5], "--reference", "x.detach() * 0 + 3"],
         "--reference 'x.detach() * 0 + 3' gives a tensor autograd cannot trace: it must compute a tensor from the "
         "arguments with torch operations (the check differentiates it)."),
        (["cos", *COS[1:5], "--reference", "torch.nosuch(x)"], "--reference 'torch.nosuch(x)' fails on float64 "
                                                                "tensors of shape (4,): AttributeError: module "
                                                                "'torch' has no attribute 'nosuch'."),
        (["cos", *COS[1:5], "--reference", "torch.cos(x)", "--args", "x,y"],
         "--reference never uses y: every argument of --args must appear in it (or leave that argument out of --args)."),
    ]:
        status = new_exercise.main(list(argv), root=copy)  # in this process: each refusal is one call, no start-up
        assert (status, capsys.readouterr().err.strip()) == (2, f"./course new-exercise: {message}")
    assert {p: p.read_text() for p in (copy / "solutions").glob("*.py")} == before
    assert not (copy / "course_utils" / "checks" / "lesson03_cos.py").exists()


def test_the_course_script_offers_it_with_help():
    out = subprocess.run([str(ROOT / "course"), "new-exercise", "--help"], check=False, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and "--reference EXPR" in out.stdout and "Adding an exercise" in out.stdout
    out = subprocess.run([str(ROOT / "course"), "new-exercise", "sin"], check=False, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and out.stderr.strip().endswith(
        "the following arguments are required: --lesson, --defines, --reference (./course new-exercise --help shows "
        "the options)")


def test_help_contributing_and_the_scaffold_say_the_same_prefill_and_tests():
    """Issue 52, item 3: what the scaffold pre-fills is in its --help and in CONTRIBUTING, word for word, and
    CONTRIBUTING's step 6 lists exactly the files ./course test --exercise collects (course_utils/exercise_tests.py)."""
    import re

    from course_utils import exercise_tests
    from course_utils.scaffold_text import PREFILLED

    squash = lambda text: " ".join(text.replace("> ", " ").split())  # noqa: E731 - line breaks and quoting aside
    text = (ROOT / "CONTRIBUTING.md").read_text()
    steps = text[text.index("## Adding an exercise"):text.index("## Adding a family of variants")]
    helped = squash(subprocess.run([sys.executable, "-m", "course_utils.scaffold", "--help"], cwd=ROOT,
                                   capture_output=True, text=True, check=True).stdout.replace("\n    ", " "))
    for line in PREFILLED:
        assert squash(line) in squash(steps), line
        assert squash(line) in helped, line
    six = steps[steps.index("6. **Build and test**"):]
    listed = re.findall(r"^\s*- `([\w/.]+)`", six, re.M)
    assert listed == exercise_tests.listed("tests/checks/test_lessonNN_ID.py", "NN"), listed


def test_contributing_names_only_paths_that_exist_and_walks_through_the_scaffold():
    import re

    text = (ROOT / "CONTRIBUTING.md").read_text()
    named = set(re.findall(r"`((?:course_utils|tests|solutions|notebooks|benchmarks)/[\w/.]+)`", text))
    missing = sorted(p for p in named if not re.search(r"NN|_ID|ID\.|slug|myformat", p) and not (ROOT / p).exists())
    assert named and not missing, missing
    steps = text[text.index("## Adding an exercise"):text.index("## Adding an output format")]
    for needed in ("./course new-exercise", "CONTRACT", "probes/lessonNN_ID.py", "Stage(probe=", "./course build"):
        assert needed in steps, needed


def test_contributing_map_names_every_folder_and_module():
    """Every tracked top-level folder, course_utils folder and course_utils module has a row in the map."""
    import re

    text = (ROOT / "CONTRIBUTING.md").read_text()
    section = text[text.index("## Where things live"):text.index("## Running the suite fast")]
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    folders = {f.split("/")[0] for f in tracked if "/" in f} | \
        {"course_utils/" + f.split("/")[1] for f in tracked if f.startswith("course_utils/") and f.count("/") >= 2}
    modules = {f for f in tracked if re.fullmatch(r"course_utils/\w+\.py", f) and not f.endswith("__init__.py")}
    unnamed = sorted(f for f in folders if f"`{f}/" not in section and f"`{f}`" not in section and f"`{f}/`" not in section)
    unnamed += sorted(m for m in modules if f"`{m}`" not in section and f"`{m.rsplit('/', 1)[1]}`" not in section)
    assert unnamed == [], f"CONTRIBUTING's map has no row for {unnamed}"


PRECISION_PROBE = """
import json, torch
from torch.autograd import Function
from course_utils import checks
ex = checks.EXERCISES["logsigmoid"]
cell = '''
class LogSigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.nn.functional.logsigmoid(x)
        ctx.save_for_backward(y)
        return y
    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return BACKWARD
'''
out = {"stages": [s.name for s in ex.stages], "probes": list(ex.probe_names)}
for name, backward in (("cancelling", "grad_output * (1 - torch.exp(y))"), ("accurate", "-grad_output * torch.expm1(y)")):
    ns = {"torch": torch, "Function": Function}
    exec(cell.replace("BACKWARD", backward), ns)
    r = checks.run_check("logsigmoid", ns)
    out[name] = [r.points, r.max, r.mistakes]
print(json.dumps(out))
"""


def test_a_numerics_exercise_gets_the_precision_stage(copy, capsys):
    """Issue 49, item 5: `--precision=LOW,HIGH` gives the new exercise FunctionSpec's relative-precision stage; the
    cancelling logsigmoid backward grad_output * (1 - exp(y)) earns forward and backward but fails it, the accurate
    one passes."""
    import json

    copy, _ = copy
    argv = ["logsigmoid", "--lesson", "3", "--defines", "LogSigmoid", "--reference",
            "torch.nn.functional.logsigmoid(x)", "--precision=-1e4,1e4"]
    assert new_exercise.main(argv, root=copy) == 0, capsys.readouterr().err
    assert "## Exercise `logsigmoid` (3 points)" in (copy / "solutions" / "03_exercises.py").read_text()
    run = subprocess.run([sys.executable, "-c", PRECISION_PROBE], check=False, cwd=copy, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["probes"] == ["forward", "backward", "precision"] and "x from -10000 to 10000" in got["stages"][-1]
    assert got["cancelling"] == [2.0, 3, ["imprecise_gradient"]] and got["accurate"] == [3.0, 3, []], got


def test_precision_wants_one_argument_and_an_interval(copy, capsys):
    copy, _ = copy
    base = ["cos", "--lesson", "3", "--defines", "Cos", "--reference", "torch.cos(x) * y", "--args", "x,y"]
    assert new_exercise.main([*base, "--precision=-1,1"], root=copy) == 2
    assert "--precision assesses a function of one input" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        new_exercise.main([*COS, "--precision=1,-1"], root=copy)
    assert "needs finite LOW < HIGH" in capsys.readouterr().err
