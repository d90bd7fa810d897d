"""The check engine, registry and notebook entry points, over every exercise: solutions pass under any
default device, released stubs are not attempted, malformed facts earn nothing, fresh seeds keep the verdict."""
import copy
import functools
import json
import re

import jupytext
import pytest

from answers import EXP, MUL, SWAPPED, mutate
from check_helpers import EXERCISE_NOTEBOOK, ns_from, run_code_cells, solution_namespace
from conftest import ROOT
from course_utils import checks, markers, release, wire
from course_utils.checks.engine import make_request
from course_utils.grading.results import SubmissionResult
from course_utils.status import CheckStatus


# --------------------------------------------------------------------------- reference solutions
def other_default_device(grade_id: str) -> str | None:
    """The default device the solution's check runs under: "meta" stands in for cuda on a GPU machine, so a
    tensor created without its input's device (a check's generator, reference, or the solution) lands there
    and fails. None where that is not the solution's business."""
    import torch

    if grade_id == "linear_module":  # a module's parameters follow the default device, like nn.Linear's
        return None
    if grade_id == "func_softmax" and tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13):
        return None  # before torch 2.13, jacrev(jacrev(...)) itself fails under a meta default device
    return "meta"


@pytest.mark.parametrize("grade_id", sorted(checks.EXERCISES))
def test_solutions_get_full_points_whatever_the_default_device(grade_id):
    import torch

    ns = solution_namespace(EXERCISE_NOTEBOOK[grade_id])
    torch.set_default_device(other_default_device(grade_id))
    try:
        result = checks.run_check(grade_id, ns)
    finally:
        torch.set_default_device(None)
    assert result.status == "passed", result.report()
    assert result.points == result.max == checks.EXERCISES[grade_id].points


@pytest.mark.parametrize("grade_id", sorted(checks.EXERCISES))
def test_released_stubs_are_not_attempted(grade_id):
    """On every variant: the edition ships one stub, with the default's signature, and a variant whose arguments
    differ (another count or order) still finds the untouched stub "not attempted", never a TypeError."""
    from course_utils.checks import registry

    nb = release.release_notebook(jupytext.read(ROOT / "solutions" / f"{EXERCISE_NOTEBOOK[grade_id]}_exercises.py"))
    namespace = run_code_cells(nb)
    for variant in registry.family(grade_id):
        result = checks.run_check(grade_id, namespace, variant=variant.key)
        if grade_id in SHIPS_BROKEN_CODE:
            assert result.status == "failed" and result.points == 0, result.report()
            continue
        assert result.status == "not attempted" and result.points == 0 and result.mistakes == ["not_attempted"], \
            (variant.key, result.report())
        assert "Not attempted yet" in result.report()


CONTRACT = {  # grade_id -> what the answer must define (the issues' tables)
    "scalar_engine": ("Scalar",), "scalar_ops": ("Scalar",), "mul": ("Mul",), "div": ("Div",), "exp": ("Exp",),
    "sigmoid": ("Sigmoid",), "linear_function": ("LinearFunction",), "linear_module": ("Linear", "LinearFunction"),
    "linear_nd": ("LinearND",), "killhead": ("KillSlice",), "clip_grad": ("ClipGrad",), "abs_prod": ("AbsKink",),
    "maximum": ("Extremum",), "relu_inplace": ("ReluInplace",), "clamp_with_mask": ("ClampWithMask",),
    "tanh_twice": ("Smooth",), "func_softmax": ("FuncSoftmax",), "row_norm_op": ("row_norm",),
    "log1mexp": ("StableLog",), "lambert_w": ("LambertW",), "rmsnorm": ("RMSNorm",), "embedding": ("EmbeddingFunction",),
    "gradient_test": ("backward_is_correct",), "normalize_fix": ("Normalize",), "solve": ("Solve",),
    "triton_swiglu": ("TritonSwiGLU",), "vocab_chunked_ce": ("VocabChunkedCrossEntropy",),  # issue 34
}
SHIPS_BROKEN_CODE = {"normalize_fix"}  # "find the bug": the released cell runs, and fails


def test_contract_names():
    """What each answer must define. Points have one home, the stages: tests/test_points.py checks every copy."""
    assert {g: e.names for g, e in checks.EXERCISES.items()} == CONTRACT


# --------------------------------------------------------------------------- the catalogue


def test_every_exercise_has_a_solution_notebook():
    assert set(EXERCISE_NOTEBOOK) == set(checks.EXERCISES)


def test_generic_wrong_gradient():
    ns = ns_from(mutate(EXP, ("return -g * y", "return -g * y * 2")))  # twice the gradient: no catalogued mistake
    result = checks.run_check("exp", ns)
    assert result.mistakes == ["gradient_wrong"]
    assert "the gradient for input 0 (`x`) is wrong for x of shape (6,)" in result.report()
    assert result.passed_stages == ["forward matches exp(-x)"] and result.points == 1


def test_endless_loop_is_interrupted():
    ns = ns_from("""
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        while True:
            pass
""")
    import time
    t0 = time.monotonic()
    result = checks.run_check("mul", ns, time_limit=0.5)
    assert result.mistakes == ["timeout"]
    assert "did not finish within 0.5 s" in result.report()
    assert time.monotonic() - t0 < 1.4  # review 2, finding 12: later stages do not wait again (3 stages)


def test_an_interrupted_check_says_nothing_was_graded(monkeypatch, capsys):
    """Review 2, finding 12: the stop button during a check is a sentence, not a traceback through course_utils."""
    from course_utils.checks import notebook

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(notebook, "run_check", interrupted)
    verdict = notebook.check("mul", {})
    assert float(verdict) == 0.0 and verdict.result.mistakes == ["interrupted"]
    assert "interrupted: nothing was graded" in capsys.readouterr().out


def test_printing_a_lot_is_summarised_not_shown(capsys):
    ns = ns_from(mutate(MUL, ("ctx.save_for_backward(a, b)", 'print("debug " * 1000)\n        ctx.save_for_backward(a, b)')))
    checks.check("mul", ns)
    shown = capsys.readouterr().out
    assert shown.startswith("✓ mul: 2/2 points.")
    assert "printed" in shown and "(hidden)" in shown and len(shown) < 400


def test_checks_leave_the_global_rng_alone():
    import torch

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    checks.run_check("mul", solution_namespace("02"))
    assert torch.equal(torch.rand(3), expected)


def test_requests_and_assessing_push_no_device_mode_where_the_cpu_is_the_default_already():
    """``torch.device("cpu")`` is a torch function mode (every torch call inside it goes through Python, tens of
    thousands per graded batch in the judge): where the CPU is the default already (the grader's judge) neither
    the request nor ``assess`` runs under one; under another default device both still build on the CPU."""
    import torch

    from course_utils.checks.engine import Exercise, Stage, assess, make_request

    seen = []

    def request(seed):
        seen.append(("request", torch._C._len_torch_function_stack(), torch.zeros(1).device.type))
        return {}

    def stage_assess(req, facts):
        seen.append(("assess", torch._C._len_torch_function_stack(), torch.zeros(1).device.type))

    ex = Exercise(grade_id="probe_cost", title="t", names=(),
                  stages=(Stage(name="s", points=1.0, probe="p", assess=stage_assess),), request=request)
    make_request(ex, 1)
    assert assess(ex, {}, {"stages": [{}]}).points == 1.0
    assert seen == [("request", 0, "cpu"), ("assess", 0, "cpu")]
    seen.clear()
    torch.set_default_device("meta")
    try:
        make_request(ex, 1)
        assess(ex, {}, {"stages": [{}]})
    finally:
        torch.set_default_device(None)
    assert [device for *_, device in seen] == ["cpu", "cpu"]


def test_unknown_exercise_and_bad_namespace():
    with pytest.raises(checks.CourseError, match="unknown exercise 'nope'"):
        checks.run_check("nope", {})
    with pytest.raises(checks.CourseError, match=r"globals\(\)"):
        checks.run_check("mul", None)


def test_check_cell_metadata_matches_exercise_points():
    for py in sorted((ROOT / "solutions").glob("*_exercises.py")):
        nb = jupytext.read(py)
        assert nb.metadata[release.ASSIGNMENT_KEY]["assignment"] == py.stem
        ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells]
        assert len(ids) == len(set(ids)), f"{py.name}: duplicate grade_id"
        for cell in nb.cells:
            meta = cell.metadata["nbgrader"]
            m = re.search(r'^check\("(\w+)"', cell.source, re.M)
            if m:
                assert meta["grade"] and meta["locked"] and meta["grade_id"] == m.group(1)
                assert meta["points"] == checks.EXERCISES[m.group(1)].points
            elif markers.BEGIN in cell.source:
                assert meta["solution"] and not meta["locked"] and meta["grade_id"].endswith("_answer")
            else:
                assert meta["locked"] and not meta["solution"] and not meta["grade"]


# --------------------------------------------------------------------------- probe / assess split
@functools.cache
def _solution_on_the_wire(grade_id: str, seed: int) -> bytes:
    """The solution's facts at ``seed`` as run_check probes them (the request through the wire), in the wire's bytes."""
    ex = checks.EXERCISES[grade_id]
    request = wire.loads(wire.dumps(make_request(ex, seed)))
    return wire.dumps(checks.probe(ex, solution_namespace(EXERCISE_NOTEBOOK[grade_id]), request))


def solution_facts(grade_id: str, seed: int) -> tuple[dict, object]:
    """The request and the solution's facts at ``seed``, as run_check passes them to assess. The probe runs once
    per worker: the malformed-facts and fresh-seed tests assess the same facts; each reader gets its own copy."""
    return make_request(checks.EXERCISES[grade_id], seed), wire.loads(_solution_on_the_wire(grade_id, seed))


@pytest.mark.parametrize("grade_id", sorted(checks.EXERCISES))
def test_assess_gives_zero_for_malformed_facts(grade_id):
    """Whatever arrives from beside the student's code, ``assess`` never crashes and never pays for garbage."""
    ex = checks.EXERCISES[grade_id]
    request, good = solution_facts(grade_id, 2)
    assert checks.assess(ex, request, good).status == "passed"
    junk = [None, 5, "lots", {"stages": "x"}, {"stages": [None] * len(ex.stages)},
            {"stages": [{"cases": [{"out": "x"}]}] * len(ex.stages)}, {"stages": good["stages"][:-1]},
            {"stages": [{"$error": {"code": "passed", "hint": "x"}}] * len(ex.stages)}]
    for facts in junk:
        result = checks.assess(ex, request, facts)
        assert result.points == 0, (facts, result.report())
        assert result.mistakes in (["malformed_result"], [result.mistakes[0]]) and "Traceback" not in result.report()


@pytest.mark.parametrize("grade_id", sorted(checks.EXERCISES))
def test_fresh_seeds_change_inputs_but_not_the_verdict(grade_id):
    ex = checks.EXERCISES[grade_id]
    assert wire.dumps(ex.request(1)) != wire.dumps(ex.request(2))
    for seed in (1, 2):  # run_check's probe and assess; seed 2's facts are the malformed-facts test's (probed once)
        request, facts = solution_facts(grade_id, seed)
        assert checks.assess(ex, request, facts).status == "passed"


def test_every_lesson_module_of_checks_has_its_test_module():
    """Tests mirror the modules: checks/lessonNN*.py is tested in tests/checks/test_lessonNN.py, or in a test module of
    its own name (test_lessonNN_ID.py, as ./course new-exercise writes)."""
    here = ROOT / "tests" / "checks"
    for module in checks.LESSON_MODULES:
        assert (here / f"test_{module}.py").exists() or (here / f"test_{module[:8]}.py").exists(), \
            f"no tests/checks/test_{module[:8]}.py for checks/{module}.py"


# --------------------------------------------------------------------------- one structured result
def test_the_result_keeps_every_stage_outcome_and_grading_reads_them_without_parsing():
    """Per-stage outcomes (points, diagnosis, fix, code) are the result; the grader stores that very result."""
    from course_utils.grading.grade_file import exercise_result

    ns = ns_from(mutate(MUL, SWAPPED))
    ex = checks.EXERCISES["mul"]
    result = checks.run_check("mul", ns)
    assert [(o.name, o.points, o.max, o.status, o.code) for o in result.stages] == [
        (ex.stages[0].name, 1, 1, "passed", ""), (ex.stages[1].name, 0.0, 1, "failed", "swapped_gradients")]
    assert result.stages[1].fix and result.stages[1].fix not in result.report()
    assert result.report(fix=True).endswith(f"fix: {result.stages[1].fix}\n  variant `{result.variant}`")
    checked = copy.deepcopy(result)
    record = exercise_result(ex, result, result.report())
    assert record.hint == result.summary and "fix:" not in record.feedback
    # one model: what the grader stores, and reads back, is what the check found, and more (feedback, title, place)
    stored = SubmissionResult.from_json(json.loads(json.dumps(SubmissionResult("a.ipynb", exercises={
        "mul": record}).to_json()))).exercises["mul"]
    assert stored == record and stored.stages == checked.stages and stored.title == ex.title
    assert (stored.fix, stored.code, stored.status) == (checked.fix, "swapped_gradients", CheckStatus.FAILED)


def test_a_problem_before_any_stage_earns_nothing_and_names_no_stage():
    from course_utils.grading.grade_file import exercise_result

    ex = checks.EXERCISES["div"]
    result = checks.Result("div", 0.0, ex.points, CheckStatus.FAILED, problem="Your code did not finish.",
                           problem_codes=["timeout"])
    assert result.mistakes == ["timeout"] and result.fix is None and result.diagnosis == "Your code did not finish."
    record = exercise_result(ex, result, result.report())
    assert [(s.points, s.status) for s in record.stages] == [(0.0, CheckStatus.NOT_REACHED)] * 2
    assert record.hint == "Your code did not finish." and record.code == "timeout"


def test_the_graders_feedback_shows_the_fix_only_when_asked():
    """The instructor's grader writes level 1 into feedback files; --feedback-fix adds level 2."""
    from course_utils.grading.cli import build_parser
    from course_utils.grading.grade_file import Options

    assert Options().feedback_fix is False
    assert build_parser().parse_args(["sub.ipynb", "--feedback-fix"]).feedback_fix is True
    assert build_parser().parse_args(["sub.ipynb"]).feedback_fix is False
