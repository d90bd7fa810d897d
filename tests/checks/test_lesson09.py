"""Lesson 09's exercises: the laziest answers fail with their diagnosis, unusual correct answers pass."""
import pytest

from answers import mutate
from check_helpers import assert_diagnosed, ns_from
from course_utils import checks

LOG1MEXP = """
class StableLog(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return FORWARD
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return BACKWARD
"""
GOOD_FORWARD = "torch.where(x < 0.6931, torch.log(-torch.expm1(-x)), torch.log1p(-torch.exp(-x)))"


def log1mexp(forward=GOOD_FORWARD, backward="grad_output / torch.expm1(x)") -> str:
    return LOG1MEXP.replace("FORWARD", forward).replace("BACKWARD", backward)


LAMBERT = """
class LambertW(Function):
    @staticmethod
    def forward(ctx, x):
        eps = torch.finfo(x.dtype).eps
        w = torch.log1p(x)
        iterates = []
        for _ in range(ITERATIONS):
            e = w.exp()
            step = (w * e - x) / (e * (w + 1))
            w = w - step
            iterates.append(w)
            if (step.abs() <= 4 * eps * w.abs()).all():
                break
        SAVE
        return w
    @staticmethod
    def backward(ctx, grad_output):
        BACKWARD
"""
LAMBERT_BACKWARD = "(w,) = ctx.saved_tensors[:1]\n        return grad_output * torch.exp(-w) / (1 + w)"


def lambert(iterations="200", save="ctx.save_for_backward(w)", backward=LAMBERT_BACKWARD) -> str:
    return LAMBERT.replace("ITERATIONS", iterations).replace("SAVE", save).replace("BACKWARD", backward)


EXP_FREE_STEP = "step = (w - x * torch.exp(-w)) / (w + 1)"  # the solution's Newton step, written without e^w


def lambert_from(start: str, step: str = "") -> str:
    """lambert with another start (and step): the iteration to eps with a cap stays as it is."""
    edits = [("w = torch.log1p(x)", f"w = {start}")]
    if step:
        edits.append(("e = w.exp()\n            step = (w * e - x) / (e * (w + 1))", step))
    return mutate(lambert(), *edits)


LAMBERT_REITERATES = lambert(save="ctx.save_for_backward(x)", backward="""(x,) = ctx.saved_tensors
        w = torch.log1p(x)
        for _ in range(200):
            e = w.exp()
            w = w - (w * e - x) / (e * (w + 1))
        return grad_output * torch.exp(-w) / (1 + w)""")

LAMBERT_RECORDING = lambert(save="ctx.save_for_backward(w)").replace(
    "w = torch.log1p(x)\n", "x = x.detach().requires_grad_()\n        w = torch.log1p(x)\n").replace(
    "for _ in", "with torch.enable_grad():\n          for _ in").replace("\n            ", "\n              ").replace(
    "\n        SAVE", "\n        SAVE")

RMSNORM = """
class RMSNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        SAVE
        return x * rstd * weight
    @staticmethod
    def backward(ctx, g):
        x, weight, rstd = ctx.saved_tensors[:3]
        x_hat = x * rstd
        u = g * weight
        gx = GRAD_X if ctx.needs_input_grad[0] else None
        gw = (g * x_hat).reshape(-1, x.shape[-1]).sum(0) if ctx.needs_input_grad[1] else None
        return gx, gw, None
"""
GOOD_GX = "rstd * (u - x_hat * (u * x_hat).mean(-1, keepdim=True))"


def rmsnorm(save="ctx.save_for_backward(x, weight, rstd)", grad_x=GOOD_GX) -> str:
    return RMSNORM.replace("SAVE", save).replace("GRAD_X", grad_x)


SOLVE = """
class Solve(Function):
    @staticmethod
    def forward(ctx, A, b):
        LU, piv = torch.linalg.lu_factor(A)
        x = torch.linalg.lu_solve(LU, piv, b.unsqueeze(-1) if b.dim() == 1 else b)
        x = x.squeeze(-1) if b.dim() == 1 else x
        ctx.save_for_backward(A, LU, piv, x)
        return x
    @staticmethod
    def backward(ctx, g):
        A, LU, piv, x = ctx.saved_tensors
        col = x.dim() == 1
        G = g.unsqueeze(-1) if col else g
        gb = GB
        X = x.unsqueeze(-1) if col else x
        gA = (SIGN gb @ X.mT) if ctx.needs_input_grad[0] else None
        gb = gb.squeeze(-1) if col else gb
        return gA, (gb if ctx.needs_input_grad[1] else None)
"""


def solve(gb="torch.linalg.lu_solve(LU, piv, G, adjoint=True)", sign="-") -> str:
    return SOLVE.replace("GB", gb).replace("SIGN", sign)


BUGS = {
    "log1mexp_small_x": ("log1mexp", log1mexp(forward="torch.log1p(-torch.exp(-x))"),
                         ["x = 1e-30", "cancellation"]),
    "log1mexp_large_x": ("log1mexp", log1mexp(forward="torch.log(-torch.expm1(-x))"),
                         ["for large x", "or as -expm1(-x)"]),
    "log1mexp_gradient": ("log1mexp", log1mexp(backward="grad_output * torch.exp(-x) / (1 - torch.exp(-x))"),
                          ["gradient for float", "neither cancels"]),
    "lambert_not_converged": ("lambert_w", lambert(iterations="6"), ["x = 1e+", "need more steps"]),
    # issue 49, item 6: public answers that iterate to eps with a cap, from a start far from W(x)
    "lambert_stagnates": ("lambert_w", lambert_from("torch.zeros_like(x)", EXP_FREE_STEP),
                          ["float32 x = 1e+30", "stands still", "w - 1 == w", "The start is the cause"]),
    "lambert_gradient": ("lambert_w", lambert(backward="(w,) = ctx.saved_tensors\n        return grad_output * w"),
                         ["the value instead of its derivative", "implicitly"]),
    "lambert_records_iterations": ("lambert_w", LAMBERT_RECORDING, ["records its iterations"]),
    "lambert_saves_iterates": ("lambert_w", lambert(save="ctx.save_for_backward(w, *iterates)"),
                               ["near 1e300", "keeps iterates"]),
    "lambert_reiterates": ("lambert_w", LAMBERT_REITERATES, ["re-running the iteration", "implicit differentiation"]),
    "rmsnorm_missing_mean_term": ("rmsnorm", rmsnorm(grad_x="u * rstd"), ["as if rstd were a constant", "a sum over the row"]),
    "rmsnorm_saves_full": ("rmsnorm", rmsnorm(save="ctx.save_for_backward(x, weight, rstd, x * rstd)"),
                           ["512 elements", "one value per row (16 here)"]),
    "solve_refactorises": ("solve", solve(gb="torch.linalg.solve(A.mT, G)"), ["linalg_solve", "reuse the factors"]),
    "solve_grad_A": ("solve", solve(sign=""), ["wrong sign", "dA x + A dx = 0"]),
    "solve_no_lu": ("solve", mutate(solve(), ("LU, piv = torch.linalg.lu_factor(A)",
                                              "LU, piv = torch.linalg.lu_factor(A)\n        Ainv = torch.linalg.inv(A)")),
                    ["linalg_inv", "one LU factorisation"]),
}


NUMPY_GB = "torch.from_numpy(np.linalg.solve(A.detach().numpy().T, G.numpy()))"
BUGS["solve_ignores_saved_factors"] = ("solve", "import numpy as np\n" + solve(gb=NUMPY_GB),
                                       ["did not change with them", "NumPy"])
ONE_D_FORWARD = """
class Solve(Function):
    @staticmethod
    def forward(ctx, A, b):
        LU, piv = torch.linalg.lu_factor(A)
        x = torch.linalg.lu_solve(LU, piv, b)
        ctx.save_for_backward(LU, piv, x)
        return x
    @staticmethod
    def backward(ctx, g):
        LU, piv, x = ctx.saved_tensors
        gb = torch.linalg.lu_solve(LU, piv, g, adjoint=True)
        return -gb @ x.mT, gb
"""
# issue 41, item 3: A y = g instead of A^T y = g; b's gradient is the first wrong one (A's is built from it)
BUGS["solve_grad_b_untransposed"] = ("solve", solve(gb="torch.linalg.lu_solve(LU, piv, G)"),
                                     ["gradient for b (input 1)", "a solve with A itself", "transpose",
                                      "adjoint=True"])
BUGS["solve_1d_b"] = ("solve", ONE_D_FORWARD, ["1-D b", "b may be a vector", "(n, k)"])


@pytest.mark.parametrize("start, step, code, says, never", [
    ("x.clone()", EXP_FREE_STEP, "lambert_stagnates", "stands still", "a fixed number of steps"),
    ("torch.zeros_like(x)", EXP_FREE_STEP, "lambert_stagnates", "stands still", "a fixed number of steps"),
    ("torch.ones_like(x)", "", "forward_not_finite", "from w = 1 it lands near x / (2e)", "for a large start value"),
])
def test_lambert_names_the_start_not_the_step_count(start, step, code, says, never):
    """Issue 49, item 6: iterating to eps with a cap from a start far from W(x) is not 'a fixed number of steps', and
    a start of 1 is not 'a large start value'; level 1 names the start as the cause, the log1p start only the fix."""
    result = checks.run_check("lambert_w", ns_from(lambert_from(start, step)))
    assert result.mistakes == [code], result.report()
    assert says in result.diagnosis and never not in result.diagnosis and "start" in result.diagnosis
    assert "log1p" not in result.diagnosis and "log1p(x)" in result.fix


def test_lambert_backward_written_from_the_implicit_form_with_x_is_diagnosed_at_zero():
    """W / (x (1 + W)) is right for x > 0 and 0/0 at x = 0, one of the test points: the hint says why."""
    src = lambert(save="ctx.save_for_backward(w, x)",
                  backward="w, x = ctx.saved_tensors\n        return grad_output * w / (x * (1 + w))")
    result = checks.run_check("lambert_w", ns_from(src))
    assert result.mistakes == ["lambert_gradient"] and result.points == 1, result.report()
    assert "0/0" in result.report() and "finite on the whole domain" in result.report()


def test_solve_refactorising_in_numpy_loses_only_the_factors_point():
    """The red team's answer (issue 29): NumPy solves with A again, invisible to PyTorch's op record: 3/4."""
    result = assert_diagnosed("solve_ignores_saved_factors", "solve", *BUGS["solve_ignores_saved_factors"][1:])
    assert result.points == 3


def test_solve_computing_g_a_and_dropping_it_fails_needs_input_grad():
    """g_A costs an outer product that b alone does not need; g_b is needed for g_A, so (A, not b) may cost as much."""
    src = mutate(solve(), ("gA = (- gb @ X.mT) if ctx.needs_input_grad[0] else None", "gA = - gb @ X.mT"), (
        "return gA, (gb", "return (gA if ctx.needs_input_grad[0] else None), (gb"))
    result = assert_diagnosed("ignores_needs_input_grad", "solve", src, ["(False, True)", "input 0 (`A`)", "as much work"])
    assert result.points == 2


def test_solve_saving_no_factors_fails():
    src = mutate(solve(gb="torch.linalg.lu_solve(LU, piv, G, adjoint=True)"), (
        "ctx.save_for_backward(A, LU, piv, x)", "ctx.save_for_backward(A, LU + 0, piv, x)"), (
        "A, LU, piv, x = ctx.saved_tensors", "A, _, piv, x = ctx.saved_tensors\n        LU = torch.linalg.lu_factor_ex(A)[0]"))
    assert checks.run_check("solve", ns_from(src)).mistakes in (["solve_refactorises"], ["solve_ignores_saved_factors"])


def test_solve_saving_only_the_factors_and_recomputing_x_passes():
    """Correct but unusual: x recomputed in backward from the saved factors and b, not saved."""
    src = """
class Solve(Function):
    @staticmethod
    def forward(ctx, A, b):
        LU, piv = torch.linalg.lu_factor(A)
        B = b[:, None] if b.ndim == 1 else b
        ctx.save_for_backward(LU, piv, b)
        return torch.linalg.lu_solve(LU, piv, B).reshape(b.shape)
    @staticmethod
    def backward(ctx, g):
        LU, piv, b = ctx.saved_tensors
        B, G = (b[:, None], g[:, None]) if b.ndim == 1 else (b, g)
        gb = torch.linalg.lu_solve(LU, piv, G, adjoint=True)
        gA = -gb @ torch.linalg.lu_solve(LU, piv, B).mT if ctx.needs_input_grad[0] else None
        return gA, (gb.reshape(b.shape) if ctx.needs_input_grad[1] else None)
"""
    result = checks.run_check("solve", ns_from(src))
    assert result.status == "passed", result.report()


def test_solve_backward_that_factorises_again_fails():
    src = solve(gb="torch.linalg.lu_solve(*torch.linalg.lu_factor(A.mT), G)")
    assert_diagnosed("solve_refactorises", "solve", src, ["linalg_lu_factor"])


def test_solve_backward_with_an_explicit_inverse_fails():
    src = solve(gb="torch.linalg.inv(A).mT @ G")
    assert_diagnosed("solve_refactorises", "solve", src, ["linalg_inv"])


NAIVE_LOG1MEXP = ["torch.log(1 - torch.exp(-x))", "torch.log(-torch.expm1(-x))", "torch.log1p(-torch.exp(-x))"]


@pytest.mark.parametrize("forward", NAIVE_LOG1MEXP)
def test_a_one_formula_log1mexp_fails(forward):
    result = checks.run_check("log1mexp", ns_from(log1mexp(forward=forward)))
    assert result.status == "failed" and result.mistakes[0].startswith("log1mexp_"), result.report()


def test_log1mexp_combining_the_two_naive_forms_is_told_the_large_x_end():
    """Issue 31: log(1 - exp(-x)) above ln 2 and log(-expm1(-x)) below fails for large x (at 40 both give 0.0), and
    the hint says that neither form of the argument helps there, without giving the form that does."""
    forward = "torch.where(x < 0.6931, torch.log(-torch.expm1(-x)), torch.log(1 - torch.exp(-x)))"
    result = assert_diagnosed("log1mexp_large_x", "log1mexp", log1mexp(forward=forward),
                              ["for large x", "or as -expm1(-x)"])
    assert "log1p" not in result.diagnosis and "log1p" in (result.fix or "")


def test_log1mexp_with_another_split_and_backward_passes():
    """Mächler's split at ln 2 is not the only one: 0.5 works too; exp(-x)/-expm1(-x) is the same derivative."""
    src = log1mexp(forward="torch.where(x < 0.5, (-torch.expm1(-x)).log(), torch.log1p(-torch.exp(-x)))",
                   backward="grad_output * torch.exp(-x) / -torch.expm1(-x)")
    assert checks.run_check("log1mexp", ns_from(src)).status == "passed"


def test_lambert_newton_with_a_while_loop_and_saved_output_copy_passes():
    """Newton (not Halley), a different start, W saved as a copy and the derivative written W / (x (1 + W))."""
    src = """
class LambertW(Function):
    @staticmethod
    def forward(ctx, x):
        w = torch.where(x < 3, x / (1 + x), torch.log(x) - torch.log(torch.log(x)))
        while True:
            e = torch.exp(w)
            nxt = w - (w * e - x) / (e * (w + 1))
            done = ((nxt - w).abs() <= 4 * torch.finfo(x.dtype).eps * nxt.abs()).all()
            w = nxt
            if done:
                break
        ctx.save_for_backward(x, w.clone())
        return w
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        safe = torch.where(x > 0, x, torch.ones_like(x))
        return g * torch.where(x > 0, w / (safe * (1 + w)), torch.ones_like(x))
"""
    result = checks.run_check("lambert_w", ns_from(src))
    assert result.status == "passed", result.report()


def test_rmsnorm_saving_rstd_squeezed_and_recomputing_passes():
    src = """
class RMSNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        ms = (x * x).sum(-1) / x.shape[-1]
        rstd = 1.0 / torch.sqrt(ms + eps)
        ctx.save_for_backward(x, weight, rstd)
        out = x.clone()
        out.mul_(rstd[..., None]).mul_(weight)
        return out
    @staticmethod
    def backward(ctx, g):
        x, weight, rstd = ctx.saved_tensors
        r = rstd[..., None]
        gw = torch.einsum("...d,...d->d", g, x * r) if ctx.needs_input_grad[1] else None
        if not ctx.needs_input_grad[0]:
            return None, gw, None
        u = g * weight
        dot = (u * x).sum(-1, keepdim=True)
        return r * u - x * r ** 3 * dot / x.shape[-1], gw, None
"""
    result = checks.run_check("rmsnorm", ns_from(src))
    assert result.status == "passed", result.report()


def test_rmsnorm_ignoring_needs_input_grad_fails():
    src = mutate(rmsnorm(), ("if ctx.needs_input_grad[1] else None", ""))
    assert checks.run_check("rmsnorm", ns_from(src)).mistakes == ["ignores_needs_input_grad"]


def test_rmsnorm_computing_both_gradients_and_returning_none_fails():
    """Issue 31: the right Nones are not enough; the work for the gradient not asked for must not be done."""
    src = mutate(rmsnorm(), (" if ctx.needs_input_grad[1] else None", ""), (
        "return gx, gw, None", "return gx, (gw if ctx.needs_input_grad[1] else None), None"))
    result = assert_diagnosed("ignores_needs_input_grad", "rmsnorm", src,
                              ["returned None for input 1 (`weight`)", "as much work"])
    assert result.points == 2


def test_rmsnorm_saving_the_output_fails():
    src = rmsnorm(save="y = x * rstd * weight\n        ctx.save_for_backward(x, weight, rstd, y)")
    assert checks.run_check("rmsnorm", ns_from(src)).mistakes == ["rmsnorm_saves_full"]


def test_solve_with_triangular_solves_on_the_saved_factors_passes():
    """lu_unpack + two triangular solves with A^T = U^T L^T P^T: no second factorisation."""
    P, L, U = "torch.lu_unpack(LU, piv)[0]", "torch.lu_unpack(LU, piv)[1]", "torch.lu_unpack(LU, piv)[2]"
    inner = f"torch.linalg.solve_triangular({U}.mT, G, upper=False)"
    gb = f"{P} @ torch.linalg.solve_triangular({L}.mT, {inner}, upper=True, unitriangular=True)"
    result = checks.run_check("solve", ns_from(solve(gb=gb)))
    assert result.status == "passed", result.report()


RMSNORM_BY_AUTOGRAD = """
class RMSNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        ctx.save_for_backward(x, weight)
        ctx.eps = eps
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        with torch.enable_grad():
            xx, ww = x.detach().requires_grad_(), weight.detach().requires_grad_()
            y = xx * torch.rsqrt(xx.pow(2).mean(-1, keepdim=True) + ctx.eps) * ww
            wanted = [t for t, n in zip((xx, ww), ctx.needs_input_grad) if n]
            grads = iter(torch.autograd.grad(y, wanted, g))
        return tuple(next(grads) if n else None for n in ctx.needs_input_grad[:2]) + (None,)
"""
BUGS["autograd_in_backward"] = ("rmsnorm", RMSNORM_BY_AUTOGRAD, ["grad mode on", "vector-Jacobian product"])


def test_rmsnorm_letting_autograd_do_the_backward_fails():
    assert_diagnosed("autograd_in_backward", "rmsnorm", RMSNORM_BY_AUTOGRAD, ["torch.enable_grad()"])


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):  # last: BUGS is complete only here
    assert_diagnosed(code, *BUGS[code])


def test_solve_without_the_transpose_is_blamed_on_b_not_a():
    """Issue 41, item 3: the gradients are assessed in dependency order, so A's is not named first."""
    result = checks.run_check("solve", ns_from(solve(gb="torch.linalg.lu_solve(LU, piv, G)")))
    assert result.mistakes == ["solve_grad_b_untransposed"] and "gradient for A is wrong" not in result.diagnosis


# --------------------------------------------------------------------------- variants (issue 51)
def variant_answer(grade_id: str, key: str) -> str:
    import importlib.util

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location(f"answers_{grade_id}", ROOT / "solutions" / "variants" / f"{grade_id}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ANSWERS[key]


VARIANT_BUGS = {  # (grade id, variant, the edit of its right answer, the mistake code it must get)
    "logsigmoid: 1 - sigmoid(x) cancels": ("log1mexp", "logsigmoid", ("torch.sigmoid(-x)", "(1 - torch.sigmoid(x))"),
                                           "imprecise_gradient"),
    "logsigmoid: log(sigmoid(x))": ("log1mexp", "logsigmoid", ("-(torch.relu(-x) + torch.log1p(torch.exp(-x.abs())))",
                                                               "torch.log(torch.sigmoid(x))"), "imprecise_value"),
    "log1psq: x * x overflows in the gradient": ("log1mexp", "log1psq", ("2 / (x + 1 / x)", "2 * x / (1 + x * x)"),
                                                 "imprecise_gradient"),
    "logexpm1: exp(x) / expm1(x)": ("log1mexp", "logexpm1", ("-grad_output / torch.expm1(-x)",
                                                             "grad_output * torch.exp(x) / torch.expm1(x)"),
                                    "imprecise_gradient"),
    "logexpm1: log(expm1(x)) alone": ("log1mexp", "logexpm1", (
        "torch.where(small, torch.log(torch.expm1(x)), x + torch.log1p(-torch.exp(-x)))", "torch.log(torch.expm1(x))"),
        "imprecise_value"),
    "centred: the RMS answer's gradient term": ("rmsnorm", "centred", (
        "grad_x = r * (u - u.mean(dim=-1, keepdim=True) - x_hat", "grad_x = r * (u - x_hat"), "gradient_wrong"),
    "eps_outside: the eps-inside answer's gradient": ("rmsnorm", "eps_outside", (
        "grad_x = r * u - r * r * x / rms * (u * x).mean(dim=-1, keepdim=True)",
        "grad_x = r * (u - x * r * (u * x * r).mean(dim=-1, keepdim=True))"), "gradient_wrong"),
    "transposed: g_b solved with A itself": ("solve", "transposed", ("adjoint=not TRANSPOSED)", "adjoint=TRANSPOSED)"),
                                             "gradient_wrong"),
    "right: g_A as for A x = b": ("solve", "right", ("g_b @ X.mT if LEFT else X.mT @ g_b", "g_b @ X.mT"), "wrong_shape"),
}


@pytest.mark.parametrize("name", VARIANT_BUGS)
def test_a_variants_typical_mistake_fails_its_check(name):
    grade_id, key, edit, code = VARIANT_BUGS[name]
    result = checks.run_check(grade_id, ns_from(mutate(variant_answer(grade_id, key), edit)), variant=key)
    assert result.points < result.max and code in result.mistakes, result.report()


@pytest.mark.parametrize("grade_id", ["log1mexp", "rmsnorm", "solve"])
def test_the_default_answer_fails_every_other_variant(grade_id, variant_runs):
    default = checks.registry.family(grade_id)[0].key
    for v in checks.registry.family(grade_id)[1:]:
        result = variant_runs.run(grade_id, variant_answer(grade_id, default), v.key)  # test_variants' runs: once
        assert result.points < result.max, (v.key, result.report())
