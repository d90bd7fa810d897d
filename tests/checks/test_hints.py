"""Two levels of help over the whole hint catalogue (issue 32).

Every hint the checks build at run time is read: tests/conftest.py wraps the engine's ``assess`` for every test in
tests/checks, so each verdict any test's answer gets goes through ``check_helpers.leaks`` (issue 41, item 5):
the solution's formulas under any names and spellings, and the hint repeating its own fix, fail the test.
Each mistake code is reached through the catalogue's tests: ``BUGS`` in
tests/checks/test_autograd_function.py and in every test_lessonNN.py maps each mistake code to a wrong
answer, and ``check_helpers.assert_diagnosed`` (which each of them calls) fails when the level-1 hint
holds a code line or an expression of the reference solution (spaces ignored; what the task's own text
shows is allowed). The fix, where there is one, is level 2 (``Mistake(code, hint, fix=...)``). This
module tests the detector itself, on the cases the issue names.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from check_helpers import assert_diagnosed, code_in, gives_away, ns_from, repeats_fix, solution_fragments
from course_utils import checks
from course_utils.checks import engine


def test_the_detector_catches_the_solutions_code_whatever_the_spaces():
    assert gives_away("linear_function", "use x.t().mm( grad_output ), not grad_output.t() @ x")
    assert "-grad_a*quotient" in gives_away("div", "return grad_a, - grad_a*quotient")  # a line and an expression
    assert gives_away("div", "for a, return grad_output  /  b") == ["grad_output/b"]
    assert not gives_away("div", "the gradient for input 1 (`b`) has the wrong sign: re-derive d(a/b)/db")


def test_what_the_task_itself_says_is_no_give_away():
    """div's task shows a / b: a hint may repeat the task, not the answer."""
    assert "a/b" not in solution_fragments("div")
    assert not gives_away("mul", "forward should compute a * b")


def test_every_bugs_table_goes_through_the_detector():
    """Each lesson's catalogue test calls assert_diagnosed, so no hint escapes the check above."""
    here = Path(__file__).parent
    for path in [here / "test_autograd_function.py", *sorted(here.glob("test_lesson*.py"))]:
        module = importlib.import_module(path.stem)
        assert module.BUGS and "assert_diagnosed" in path.read_text(), path.name
        assert module.assert_diagnosed is assert_diagnosed, path.name


def test_the_fix_is_kept_apart_from_the_diagnosis():
    mistake = checks.Mistake("swapped_gradients", "the gradients look swapped", fix="return grad_output * b")
    assert (mistake.hint, mistake.fix) == ("the gradients look swapped", "return grad_output * b")
    assert checks.Mistake("swapped_gradients", "the gradients look swapped").fix is None  # Mistake(code, hint) still


# --------------------------------------------------------------------------- issue 41, item 5: formulas, whatever their names
def test_a_formula_of_the_solution_is_caught_under_other_names_and_spellings():
    """func_softmax's solution writes (y * x_tangent).sum(dim=-1, keepdim=True); a hint with t for the tangent
    and no dim= gives the same formula away."""
    hint = "the tangent is y * (t - (t * y).sum(-1, keepdim=True))"
    assert gives_away("func_softmax", hint)
    assert gives_away("func_softmax", "use torch.sum(t * y, dim=-1, keepdim=True)")
    assert not gives_away("func_softmax", "it is t * y * (1 - y), the diagonal of the Jacobian only")


def test_a_hint_that_repeats_its_own_fix_is_caught():
    """log1mexp's solution writes grad_output / x.expm1(); the hint printed 1 / expm1(x), its fix's formula."""
    fix = "1 / torch.expm1(x) (equal to exp(-x) / (1 - exp(-x))) is accurate at both ends."
    assert repeats_fix("log1mexp", "the gradient is 0, 1 / expm1(x) = 1e+20", fix) == ["(1Divexpm1(_))"]
    assert not repeats_fix("log1mexp", "the gradient is 0, the exact derivative there is 1e+20", fix)
    assert not repeats_fix("log1mexp", "1 - exp(-x) cancels", "use -expm1(-x) for 1 - exp(-x)")  # the task's own


def test_prose_math_is_not_code():
    assert not code_in("re-derive d(a/b)/db", size=1) and not code_in("the power of b in d(a / b)/db", size=1)


def test_every_verdict_assessed_in_a_check_test_is_read():
    """The guard is on in this very test: a hint built at run time that gives the answer away fails it."""
    assert engine._assess.__name__ == "assessed"


def test_the_wrong_tangent_and_the_log1mexp_gradient_are_named_without_their_formulas():
    """Issue 41, item 5: both hints gave the answer at level 1; the formula is the fix, on request."""
    tangent = """
class FuncSoftmax(torch.autograd.Function):
    generate_vmap_rule = True
    @staticmethod
    def forward(x):
        e = (x - x.amax(-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)
    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.save_for_forward(output)
    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return y * (g - (g * y).sum(-1, keepdim=True))
    @staticmethod
    def jvp(ctx, t):
        y, = ctx.saved_tensors
        return y * (t - (t * y).sum(-1, keepdim=True)) * 1.5
"""
    result = checks.run_check("func_softmax", ns_from(tangent))
    assert result.mistakes == ["jvp_wrong_tangent"] and "keepdim" not in result.diagnosis, result.report()
    assert "keepdim" in result.report(fix=True)
    log1mexp = """
class StableLog(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x < 0.6931, torch.log(-torch.expm1(-x)), torch.log1p(-torch.exp(-x)))
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.exp(-x) / (1 - torch.exp(-x))
"""
    result = checks.run_check("log1mexp", ns_from(log1mexp))
    assert result.mistakes == ["log1mexp_gradient"] and "expm1" not in result.diagnosis, result.report()


# --------------------------------------------------------------------------- issue 51: every variant's hints
def _answer_fragments(source: str, shown: str) -> tuple[set[str], set[str]]:
    """A variant answer's code lines and expressions (spaces removed), and its formulas (canonical forms), minus
    what ``shown`` (the task texts) holds: what a level-1 hint on that variant must not say."""
    import ast
    import textwrap

    from check_helpers import FORMULA, MIN_CHARS, _forms, _squash

    # the backward's lines: a forward hint may restate the forward, which the variant's task states anyway, so an
    # expression the answer's forward computes too (prescaled rmsnorm's x * weight) is the forward's, not the backward's
    code = textwrap.dedent(source)
    tree = ast.parse(code)

    def lines(text: str) -> list[str]:
        return [t for t in (ln.strip() for ln in text.splitlines())
                if t and not t.startswith(("#", "class ", "def ", "@")) and t not in ("return x",)]

    def body(part: str) -> list[str]:
        return lines("\n".join(ast.get_source_segment(code, node) or "" for node in ast.walk(tree)
                               if isinstance(node, ast.FunctionDef) and part in node.name))

    def expressions(code_lines: list[str]) -> tuple[set[str], set[str]]:
        pieces, forms = set(code_lines), set()
        for line in code_lines:
            try:
                parsed = ast.parse(line.removeprefix("return ").removeprefix("if ").rstrip(":"))
            except SyntaxError:
                continue
            pieces |= {ast.unparse(n) for n in ast.walk(parsed)
                       if isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Call, ast.Subscript))}
            forms |= _forms(parsed, FORMULA)
        return pieces, forms

    backward = body("backward")
    pieces, forms = expressions(backward or lines(code))
    forward = {_squash(p) for p in expressions(body("forward"))[0]} if backward else set()
    text = _squash(shown)
    return ({p for p in map(_squash, pieces) if len(p) >= MIN_CHARS and p not in text and p not in forward},
            forms - code_in(shown, size=1))


def _families_with_answers() -> list[str]:
    from conftest import ROOT
    from course_utils.checks import registry

    return [g for g in sorted(registry.FAMILIES) if (ROOT / "solutions" / "variants" / f"{g}.py").exists()]


# one test per family, so that ./course test --exercise ID runs its own family's only (course_utils/exercise_tests.py)
@pytest.mark.parametrize("grade_id", _families_with_answers())
def test_no_variants_level_one_hint_gives_its_answer_away(grade_id, variant_runs):
    """Every variant's hints, met by the other variants' answers (a student who solved the wrong variant): the
    level-1 hint holds none of this variant's own answer, under any names (the guard above knows the default's)."""
    import jupytext

    from check_helpers import EXERCISE_NOTEBOOK, _squash
    from conftest import ROOT
    from course_utils.checks import registry
    from test_variants import answers

    gid = grade_id
    nb = jupytext.read(ROOT / "solutions" / f"{EXERCISE_NOTEBOOK[gid]}_exercises.py")
    common = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    given = answers(gid)
    for variant in registry.family(gid):
        pieces, forms = _answer_fragments(given[variant.key], common + "\n" + variant.task)
        others = [k for k in given if k != variant.key][:2]  # two wrong answers per variant: the default's first
        for other in others:
            result = variant_runs.run(gid, given[other], variant.key)  # test_variants runs it too: once
            hint = result.diagnosis
            said = sorted(p for p in pieces if p in _squash(hint)) + sorted(forms & code_in(hint))
            assert not said, f"{gid} variant {variant.key}, {other}'s answer: {hint!r} gives away {said}"


def test_the_hints_issue_51_names_say_the_symptom_at_level_one():
    """Item 3: clamp_with_mask's boundary rule, maximum's mask and tanh_twice's saved tensor were fixes at level 1."""
    from answers import mutate
    from test_variants import answers

    cases = [
        ("clamp_with_mask", answers("clamp_with_mask")["both"].replace("at_ends[0] * (x == lo)", "(1 - at_ends[0]) * (x == lo)"),
         "strict comparisons", "how your comparisons treat the boundaries"),
        ("maximum", mutate(answers("maximum")["max"], ("0.5 * grad_output * tie", "grad_output * tie")),
         "a mask like", "look at how your mask treats ties"),
        ("tanh_twice", mutate(answers("tanh_twice")["tanh"], ("ctx.save_for_backward(t)", "ctx.save_for_backward(1 - t * t)"),
                              ("return grad_output * (1 - t * t)", "return grad_output * t")),
         "neither x nor the output", "look at what forward saves"),
    ]
    for gid, source, old, new in cases:
        result = checks.run_check(gid, ns_from(source))
        assert result.status == "failed" and result.fix, result.report()
        assert old not in result.diagnosis and new in result.diagnosis, result.report(fix=True)
        assert result.fix not in result.diagnosis
