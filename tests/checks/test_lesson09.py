"""Lesson 09's exercises: the laziest answers fail with their diagnosis, unusual correct answers pass."""
import pytest

from course_utils import checks
from check_helpers import assert_diagnosed, ns_from

LOG1MEXP = """
class Log1mExp(Function):
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
        gA = SIGN gb @ X.mT
        gb = gb.squeeze(-1) if col else gb
        return (gA if ctx.needs_input_grad[0] else None), (gb if ctx.needs_input_grad[1] else None)
"""


def solve(gb="torch.linalg.lu_solve(LU, piv, G, adjoint=True)", sign="-") -> str:
    return SOLVE.replace("GB", gb).replace("SIGN", sign)


BUGS = {
    "log1mexp_small_x": ("log1mexp", log1mexp(forward="torch.log1p(-torch.exp(-x))"),
                         ["x = 1e-30", "-torch.expm1(-x)"]),
    "log1mexp_large_x": ("log1mexp", log1mexp(forward="torch.log(-torch.expm1(-x))"),
                         ["log1p(-torch.exp(-x))", "for large x"]),
    "log1mexp_gradient": ("log1mexp", log1mexp(backward="grad_output * torch.exp(-x) / (1 - torch.exp(-x))"),
                          ["gradient for float", "1 / torch.expm1(x)"]),
    "lambert_not_converged": ("lambert_w", lambert(iterations="6"), ["x = 1e+", "relative change"]),
    "lambert_gradient": ("lambert_w", lambert(backward="(w,) = ctx.saved_tensors\n        return grad_output * w"),
                         ["exp(-W) / (1 + W)"]),
    "lambert_records_iterations": ("lambert_w", LAMBERT_RECORDING, ["records its iterations"]),
    "lambert_saves_iterates": ("lambert_w", lambert(save="ctx.save_for_backward(w, *iterates)"),
                               ["near 1e300", "keeps iterates"]),
    "lambert_reiterates": ("lambert_w", LAMBERT_REITERATES, ["re-running the iteration", "ctx.save_for_backward(w)"]),
    "rmsnorm_missing_mean_term": ("rmsnorm", rmsnorm(grad_x="u * rstd"), ["as if rstd were a constant", "mean(u * x_hat"]),
    "rmsnorm_saves_full": ("rmsnorm", rmsnorm(save="ctx.save_for_backward(x, weight, rstd, x * rstd)"),
                           ["512 elements", "one value per row, 16 here"]),
    "solve_refactorises": ("solve", solve(gb="torch.linalg.solve(A.mT, G)"), ["linalg_solve", "adjoint=True"]),
    "solve_grad_A": ("solve", solve(sign=""), ["wrong sign", "-g_b x^T"]),
    "solve_no_lu": ("solve", solve().replace("LU, piv = torch.linalg.lu_factor(A)",
                                             "LU, piv = torch.linalg.lu_factor(A)\n        Ainv = torch.linalg.inv(A)"),
                    ["linalg_inv", "lu_factor"]),
}


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
    src = rmsnorm().replace("if ctx.needs_input_grad[1] else None", "")
    assert checks.run_check("rmsnorm", ns_from(src)).mistakes == ["ignores_needs_input_grad"]


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
            gx, gw = torch.autograd.grad(y, (xx, ww), g)
        return (gx if ctx.needs_input_grad[0] else None), (gw if ctx.needs_input_grad[1] else None), None
"""
BUGS["autograd_in_backward"] = ("rmsnorm", RMSNORM_BY_AUTOGRAD, ["grad mode on", "vector-Jacobian product"])


def test_rmsnorm_letting_autograd_do_the_backward_fails():
    assert_diagnosed("autograd_in_backward", "rmsnorm", RMSNORM_BY_AUTOGRAD, ["torch.enable_grad()"])


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):  # last: BUGS is complete only here
    assert_diagnosed(code, *BUGS[code])
