"""Lesson 09 exercises, rows and matrices: ``RMSNorm`` (a row-wise VJP that saves one number per row)
and ``Solve`` (LU factors saved in forward, an adjoint solve in backward)."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from .autograd_function import (
    FunctionSpec,
    assess_forward,
    close,
    function_exercise,
    grad_output,
    request,
    tensor_arg,
    unwrap,
    value_arg,
)
from .engine import Exercise, Malformed, Mistake, Stage, catalogue
from .op_record import assess_own_backward, op_names
from .variants import Variant

catalogue({
    "rmsnorm_missing_mean_term": "RMSNorm's grad_x drops the term from differentiating the row's rms",
    "rmsnorm_saves_full": "RMSNorm saves a new tensor of x's size (normalised x, the output) instead of one value per row",
    "solve_refactorises": "Solve's backward factorises A again, inverts it or calls a solver instead of reusing the LU factors",
    "solve_no_lu": "Solve's forward does not use torch.linalg.lu_factor (or inverts A)",
    "solve_grad_A": "Solve's gradient for A is not -g_b x^T",
    "solve_ignores_saved_factors": "Solve's backward does not solve with the LU factors saved in forward "
                                   "(it solves with A again some other way, NumPy included)",
    "solve_1d_b": "Solve fails for a 1-D b: lu_solve wants b as a matrix (n, k)",
    "solve_grad_b_untransposed": "Solve's gradient for b solves A y = grad_output instead of A^T y = grad_output",
})


# --------------------------------------------------------------------------- rmsnorm
def rmsnorm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rms_cases(base: int):
    w = lambda d, k, dtype=torch.float64: tensor_arg((d,), base + k, dtype)  # noqa: E731
    return [
        ([tensor_arg((5, 8), base + 31), w(8, 32), value_arg(1e-6)], "x (5, 8), weight (8,), eps 1e-6"),
        ([tensor_arg((6,), base + 33), w(6, 34), value_arg(0.1)], "1-D x (6,), eps 0.1"),
        ([tensor_arg((2, 3, 4), base + 35, torch.float32), w(4, 36, torch.float32), value_arg(1e-5)],
         "float32 x (2, 3, 4)"),
        ([tensor_arg((2, 2, 3, 5), base + 37), w(5, 38), value_arg(0.5)], "4-D x (2, 2, 3, 5), eps 0.5"),
        ([tensor_arg((4, 3), base + 39, layout="t"), w(3, 40), value_arg(1e-6)], "a non-contiguous x (4, 3)"),
    ]


def _rms_diagnose(i, got, want, args, g):
    if i != 0 or got.shape != want.shape:
        return None
    x, w, eps = args[0].detach(), args[1].detach(), args[2]
    if close(got, g * w * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), want.dtype):
        return Mistake("rmsnorm_missing_mean_term", "rmsnorm: grad_x is rstd times weight times grad_output, as if "
                       "rstd were a constant; rstd depends on every x of its row, so each row's gradient needs a second "
                       "term, a sum over the row.", fix="with u = grad_output * weight and x_hat = x * rstd: "
                       "grad_x = rstd * (u - x_hat * mean(u * x_hat, dim=-1, keepdim=True)).")
    return None


RMSNORM = FunctionSpec(grade_id="rmsnorm", cls_name="RMSNorm", arg_names=("x", "weight", "eps"), reference=rmsnorm_reference,
                       cases=_rms_cases,
                       describe="x * rsqrt(mean(x**2, -1) + eps) * weight", diagnose=_rms_diagnose,
                       gradcheck_args=lambda base: [tensor_arg((3, 4), base + 41), tensor_arg((4,), base + 42),
                                                    value_arg(1e-3)],
                       patterns=((True, False), (False, True)))


RMSNORM_NATIVE = {"rms_norm", "_fused_rms_norm", "_fused_rms_norm_backward"}


def _assess_saved(req: dict, facts: dict) -> None:
    got = unwrap(facts)
    if got["node"] is not True:
        raise Mistake("no_graph", "rmsnorm: the output of RMSNorm.apply has no RMSNormBackward node.")
    x = req["saved_args"][0]["t"]
    rows = x.numel() // x.shape[-1]
    if not isinstance(got["saved"], list):
        raise Malformed("saved is not a list")
    assess_own_backward("rmsnorm", got["backward"], got.get("backward_with_grad"), RMSNORM_NATIVE)
    for s in got["saved"]:
        if s["input"] in (0, 1):
            continue
        if not isinstance(s["numel"], int):
            raise Malformed("numel is not a number")
        if s["numel"] > rows:
            raise Mistake("rmsnorm_saves_full", f"rmsnorm: forward saves a new tensor of {s['numel']} elements for "
                          f"x of shape {tuple(x.shape)} (the normalised x or the output?); the exercise allows x, "
                          f"weight and one value per row ({rows} here), and backward can recompute the rest.",
                          fix="save x, weight and rstd (shape (..., 1)); recompute x_hat = x * rstd in backward.")


def centred_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm without a bias: (x - mean) * rsqrt(var + eps) * weight, the variance biased (over d)."""
    c = x - x.mean(-1, keepdim=True)
    return c * torch.rsqrt(c.pow(2).mean(-1, keepdim=True) + eps) * weight


def prescaled_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The weight applied before the normalisation: z = x * weight, then z * rsqrt(mean(z**2) + eps)."""
    z = x * weight
    return z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + eps)


def eps_outside_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """eps added to the root mean square, outside the root: x / (sqrt(mean(x**2)) + eps) * weight."""
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * weight


_ROW_TASK = ("with `x` of shape $(\\dots, d)$ (1-D to 4-D), `weight` of shape $(d,)$ and `eps` a Python float, "
             "returns")
RMS_FAMILY = {  # key -> (reference, describe, task): issue 51's variants of rmsnorm
    "centred": (centred_reference, "(x - mean) * rsqrt(var + eps) * weight",
                f"`RMSNorm.apply(x, weight, eps)`, {_ROW_TASK} the **centred** normalisation (LayerNorm without a "
                "bias): with $\\mu = \\operatorname{mean}(x)$ and $r = \\big(\\operatorname{mean}((x - \\mu)^2) + "
                "\\varepsilon\\big)^{-1/2}$ over the last dim, one $\\mu$ and one $r$ per row,\n\n"
                "$$y = (x - \\mu) \\cdot r \\cdot w.$$"),
    "prescaled": (prescaled_reference, "z * rsqrt(mean(z**2, -1) + eps) with z = x * weight",
                  f"`RMSNorm.apply(x, weight, eps)`, {_ROW_TASK} the RMS normalisation of the **weighted** input: "
                  "with $z = x \\cdot w$ and $r = \\big(\\operatorname{mean}(z^2) + \\varepsilon\\big)^{-1/2}$ "
                  "over the last dim, one $r$ per row,\n\n$$y = z \\cdot r.$$"),
    "eps_outside": (eps_outside_reference, "x / (sqrt(mean(x**2, -1)) + eps) * weight",
                    f"`RMSNorm.apply(x, weight, eps)`, {_ROW_TASK} the RMS normalisation with $\\varepsilon$ "
                    "**outside** the root (as some implementations add it): with $\\rho = \\sqrt{\\operatorname{mean}"
                    "(x^2)}$ over the last dim, one $\\rho$ per row,\n\n$$y = \\frac{x}{\\rho + \\varepsilon} \\cdot w.$$"
                    "\n\nThe inputs the check draws have no row of zeros."),
}
RMS_TASK = (f"`RMSNorm.apply(x, weight, eps)`, {_ROW_TASK} $y = x \\cdot r \\cdot w$ with "
            "$r = \\big(\\operatorname{mean}(x^2, \\text{last dim}) + \\varepsilon\\big)^{-1/2}$, one $r$ per row. It "
            "is the normalisation of most current language models.")


def _rmsnorm_exercise(spec: FunctionSpec = RMSNORM) -> Exercise:
    base = function_exercise(spec=spec, title="RMSNorm", forward_points=1, backward_points=1, needs_input_grad_points=1)
    saved = Stage(name="saves only x, weight and one value per row (rstd); backward is its own VJP", points=1,
                  probe="saved_sizes", assess=_assess_saved)

    def req(seed: int) -> dict:
        b = 1000 * seed
        return dict(request(spec, seed), saved_args=[tensor_arg((16, 32), b + 43), tensor_arg((32,), b + 44),
                                                     value_arg(1e-6)])
    return Exercise(grade_id="rmsnorm", title="RMSNorm", names=("RMSNorm",), stages=base.stages + (saved,), request=req)


# --------------------------------------------------------------------------- solve
def _matrix(n: int, seed: int, dtype=torch.float64, layout: str = "c") -> dict:
    """A well-conditioned n x n matrix: random plus n on the diagonal."""
    arg = tensor_arg((n, n), seed, dtype, layout=layout)
    arg["t"] = arg["t"] + n * torch.eye(n, dtype=dtype)
    return arg


def _solve_cases(base: int):
    return [
        ([_matrix(4, base + 51), tensor_arg((4,), base + 52)], "A (4, 4), b (4,)"),
        ([_matrix(4, base + 53), tensor_arg((4, 3), base + 54)], "A (4, 4), b (4, 3)"),
        ([_matrix(3, base + 55, torch.float32), tensor_arg((3, 2), base + 56, torch.float32)], "float32 A (3, 3), b (3, 2)"),
        ([_matrix(5, base + 57, layout="t"), tensor_arg((5,), base + 58)], "a non-contiguous A (5, 5), b (5,)"),
    ]


def _solve_diagnose(i, got, want, args, g):
    if got.shape != want.shape:
        return None
    A, b = args[0].detach(), args[1].detach()
    if i == 1:
        if close(got, torch.linalg.solve(A, g.to(A.dtype)), want.dtype):
            return Mistake("solve_grad_b_untransposed", "solve: the gradient for b (input 1) is A^-1 grad_output, "
                           "a solve with A itself; the vector-Jacobian product of x = A^-1 b multiplies grad_output "
                           "by the transpose of the Jacobian A^-1, and A is not symmetric. (The gradient for A is "
                           "built from this one, so it is wrong too.)",
                           fix="solve A^T g_b = grad_output: torch.linalg.lu_solve(LU, pivots, grad, adjoint=True).")
        return None
    x = torch.linalg.solve(A, b)
    gb = torch.linalg.solve(A.mT, g.to(A.dtype))
    if close(got, gb.reshape(len(A), -1) @ x.reshape(len(A), -1).mT, want.dtype):
        return Mistake("solve_grad_A", "solve: the gradient for A has the wrong sign: differentiate A x = b "
                       "(dA x + A dx = 0) again and look at the sign of dx.", fix="g_A = -g_b x^T, with g_b = "
                       "A^-T grad_output.")
    return Mistake("solve_grad_A", "solve: the gradient for A is wrong; it is built from g_b (the gradient for b) and "
                   "the solution x, one outer product per column of b.",
                   fix="g_A = -g_b x^T: -torch.outer(g_b, x) for a 1-D b, -g_b @ x.mT for a 2-D one.")


SOLVE = FunctionSpec(grade_id="solve", cls_name="Solve", arg_names=("A", "b"), reference=torch.linalg.solve, cases=_solve_cases,
                     describe="x = A^-1 b", diagnose=_solve_diagnose,
                     gradcheck_args=lambda base: [_matrix(3, base + 59), tensor_arg((3, 2), base + 60)],
                     patterns=((True, False), (False, True)), same_work=((True, False),),  # g_A needs g_b
                     grad_order=(1, 0))  # so a wrong g_b is named before the g_A built from it
FACTORISE = {"linalg_lu_factor_ex", "linalg_lu_factor", "linalg_lu", "_lu_with_info", "lu", "linalg_cholesky_ex",
             "linalg_qr", "_linalg_svd", "linalg_eig", "linalg_eigh", "_linalg_eigh"}
INVERT = {"linalg_inv_ex", "linalg_inv", "inverse", "_linalg_solve_ex", "linalg_solve", "linalg_solve_ex",
          "linalg_pinv", "cholesky_solve", "cholesky_inverse", "linalg_lstsq"}


@dataclass(frozen=True)
class System:
    """A member of solve's family (issue 51): which linear system Solve.apply(A, b) solves with A's LU factors."""

    key: str
    left: bool  # A on the left of x (A x = b) or on its right (x A = b)
    transposed: bool  # the system holds A^T instead of A
    spec: FunctionSpec


def _g_b(system: System, LU: torch.Tensor, piv: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """The gradient for b that the factors LU, piv give: a solve with the transpose of the forward's system."""
    vector = g.dim() == 1
    G = (g.unsqueeze(-1) if system.left else g.unsqueeze(0)) if vector else g
    out = torch.linalg.lu_solve(LU, piv, G, left=system.left, adjoint=not system.transposed)
    return (out.squeeze(-1) if system.left else out.squeeze(0)) if vector else out


def _assess_ops(system: System, req: dict, facts: dict) -> None:
    ops = facts["ops"]
    for case in ops["cases"]:
        got = unwrap(case)
        if got["node"] is not True:
            raise Mistake("no_graph", "solve: the output of Solve.apply has no SolveBackward node.")
        assess_own_backward("solve", got["backward"], got.get("backward_with_grad"), set())
        forward, backward = op_names(got["forward"]), op_names(got["backward"])
        if forward & INVERT or not forward & {"linalg_lu_factor_ex", "linalg_lu_factor"}:
            used = ", ".join(sorted(forward & (INVERT | FACTORISE))) or "no factorisation"
            raise Mistake("solve_no_lu", f"solve: forward runs {used}, not one LU factorisation of A whose factors "
                          "backward can reuse.", fix="factorise A once with torch.linalg.lu_factor, solve with "
                          "torch.linalg.lu_solve, and save the factors (LU, pivots) for backward.")
        wrong = sorted(backward & (FACTORISE | INVERT))
        if wrong:
            raise Mistake("solve_refactorises", f"solve: backward runs {', '.join(wrong)}: it factorises, inverts or "
                          "solves with A again, the O(n^3) work forward already did; A^T's solve can reuse the "
                          "factors forward saved.", fix="torch.linalg.lu_solve(LU, pivots, grad, adjoint=True) with "
                          "the LU and pivots saved in forward solves with A^T.")
    if len(ops["cases"]) != len(req["op_cases"]):
        raise Malformed("missing cases")
    for case, got in zip(req["op_cases"], facts["factors"]):
        _assess_factors_followed(system, case, got)
    if len(facts["factors"]) != len(req["op_cases"]):
        raise Malformed("missing cases")


def _assess_factors_followed(system: System, case: list, got: dict) -> None:
    """Backward's gradient for b must follow the saved LU factors when they are changed (scaled by 1.01)."""
    A, b = case[0]["t"], case[1]["t"]
    LU, piv = torch.linalg.lu_factor(A)
    plain = unwrap(got["plain"])
    if plain["node"] is not True:
        raise Mistake("no_graph", "solve: the output of Solve.apply has no SolveBackward node.")
    saved = plain["saved"]
    if not isinstance(saved, list) or len(got["perturbed"]) != len(saved):
        raise Malformed("saved tensors")
    where = [k for k, t in enumerate(saved) if isinstance(t, torch.Tensor) and t.shape == LU.shape
             and close(t, LU, A.dtype)]
    shape = f"A {tuple(A.shape)}, b {tuple(b.shape)}"
    if not where:
        raise Mistake("solve_ignores_saved_factors", f"solve: for {shape} none of the tensors forward saves holds "
                      "the LU factors of A, so backward cannot solve with them.",
                      fix="save LU and pivots from torch.linalg.lu_factor with ctx.save_for_backward.")
    g = grad_output(b.shape, b.dtype, 11)  # the probe's grad_output for this output shape
    want = _g_b(system, LU * 1.01, piv, g)
    for k in where:
        after = unwrap(got["perturbed"][k])
        grads = after.get("grads")
        g_b = grads[1] if isinstance(grads, list) and len(grads) > 1 else None
        if isinstance(g_b, torch.Tensor) and g_b.shape == want.shape and \
                torch.allclose(g_b.double(), want, rtol=1e-8, atol=1e-10):
            return
    raise Mistake("solve_ignores_saved_factors", f"solve: for {shape}, when the LU factors forward saved were "
                  "changed (behind autograd's back), backward's gradient for b did not change with them: backward "
                  "does not solve with the saved factors but with A again, some other way (NumPy or Python "
                  "arithmetic included).", fix="solve A^T g_b = grad_output with torch.linalg.lu_solve(LU, pivots, "
                  "grad, adjoint=True) on the saved LU and pivots.")


def _assess_solve_forward(system: System, req: dict, facts: dict) -> None:
    """assess_forward, naming the cause of lu_solve's error for a 1-D b."""
    try:
        assess_forward(system.spec, req, facts)
    except Mistake as m:
        if m.code == "raised" and "must have at least 2 dimensions" in m.hint and system.key == "left":
            raise Mistake("solve_1d_b", "solve: Solve.apply(A, b) raised for a 1-D b of shape (n,): "
                          "torch.linalg.lu_solve wants the right-hand side as a matrix (n, k), and b may be a "
                          "vector; the result must then be a vector (n,) too.",
                          fix="solve with b.unsqueeze(-1) when b.dim() == 1 and squeeze the last dimension of the "
                          "result; backward needs the same treatment for grad_output.") from None
        raise


def _solve_exercise(system: System) -> Exercise:
    spec = system.spec
    base = function_exercise(spec=spec, title="Solve", forward_points=1, backward_points=1, needs_input_grad_points=1)
    forward = replace(base.stages[0], assess=lambda req, facts: _assess_solve_forward(system, req, facts))
    ops = Stage(name="factorises once: LU in forward; backward solves with the factors forward saved (its gradient "
                "follows them when they change) and runs no factorisation, inverse or solver of its own", points=1,
                probe="ops_and_factors", assess=lambda req, facts: _assess_ops(system, req, facts))

    def req(seed: int) -> dict:
        b = 1000 * seed
        return dict(request(spec, seed), op_cases=[[_matrix(6, b + 61), tensor_arg((6,), b + 62)],
                                                   [_matrix(6, b + 63), tensor_arg((6, 2) if system.left else (2, 6),
                                                                                   b + 64)]])
    return Exercise(grade_id="solve", title="Solve", names=("Solve",), stages=(forward,) + base.stages[1:] + (ops,),
                    request=req)


def _right_cases(base: int):
    return [
        ([_matrix(4, base + 51), tensor_arg((4,), base + 52)], "A (4, 4), b (4,)"),
        ([_matrix(4, base + 53), tensor_arg((3, 4), base + 54)], "A (4, 4), b (3, 4)"),
        ([_matrix(3, base + 55, torch.float32), tensor_arg((2, 3), base + 56, torch.float32)], "float32 A (3, 3), b (2, 3)"),
        ([_matrix(5, base + 57, layout="t"), tensor_arg((5,), base + 58)], "a non-contiguous A (5, 5), b (5,)"),
    ]


def _right_solve(A: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """x with x A = b (b a row (n,) or rows (k, n))."""
    return torch.linalg.solve(A.mT, b.mT).mT if b.dim() == 2 else torch.linalg.solve(A.mT, b)


def _right_t_solve(A: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """x with x A^T = b."""
    return torch.linalg.solve(A, b.mT).mT if b.dim() == 2 else torch.linalg.solve(A, b)


_RIGHT = replace(SOLVE, cases=_right_cases, diagnose=lambda *a: None,
                 gradcheck_args=lambda base: [_matrix(3, base + 59), tensor_arg((2, 3), base + 60)])
SYSTEMS = {
    "left": System("left", True, False, SOLVE),
    "transposed": System("transposed", True, True, replace(SOLVE, reference=lambda A, b: torch.linalg.solve(A.mT, b),
                                                           describe="x = A^-T b", diagnose=lambda *a: None)),
    "right": System("right", False, False, replace(_RIGHT, reference=_right_solve, describe="x = b A^-1")),
    "right_transposed": System("right_transposed", False, True, replace(_RIGHT, reference=_right_t_solve,
                                                                         describe="x = b A^-T")),
}
_SOLVE_API = ("Compute it with `torch.linalg.lu_factor(A)` and `torch.linalg.lu_solve(LU, pivots, B, left=..., "
              "adjoint=...)`: with `left=True` (the default) it solves $A X = B$, with `left=False` $X A = B$, and "
              "`adjoint=True` puts $A^\\top$ in place of $A$.")
SOLVE_TASKS = {
    "left": "`Solve.apply(A, b)`, with `A` an invertible $(n, n)$ matrix and `b` of shape $(n,)$ or $(n, k)$, returns "
            "the solution of $A x = b$, $x = A^{-1} b$ (values must match `torch.linalg.solve(A, b)`). " + _SOLVE_API,
    "transposed": "`Solve.apply(A, b)`, with `A` an invertible $(n, n)$ matrix and `b` of shape $(n,)$ or $(n, k)$, "
                  "returns the solution of the **transposed** system $A^\\top x = b$, $x = A^{-\\top} b$ (values must "
                  "match `torch.linalg.solve(A.mT, b)`); factorise $A$ itself. " + _SOLVE_API,
    "right": "`Solve.apply(A, b)`, with `A` an invertible $(n, n)$ matrix and `b` a row of shape $(n,)$ or $k$ rows "
             "$(k, n)$, returns the solution of $x A = b$, $x = b A^{-1}$, of `b`'s shape (values must match "
             "`torch.linalg.solve(A, b, left=False)` for a 2-D `b`). " + _SOLVE_API,
    "right_transposed": "`Solve.apply(A, b)`, with `A` an invertible $(n, n)$ matrix and `b` a row of shape $(n,)$ or "
                        "$k$ rows $(k, n)$, returns the solution of $x A^\\top = b$, $x = b A^{-\\top}$, of `b`'s "
                        "shape (values must match `torch.linalg.solve(A.mT, b, left=False)` for a 2-D `b`); "
                        "factorise $A$ itself. " + _SOLVE_API,
}
EXERCISES = [_rmsnorm_exercise(), _solve_exercise(SYSTEMS["left"])]
VARIANTS = {"rmsnorm": (Variant(key="rms", task=RMS_TASK, exercise=EXERCISES[0]),
                        *(Variant(key=key, task=task, exercise=_rmsnorm_exercise(
                            replace(RMSNORM, reference=ref, describe=describe, diagnose=lambda *a: None)))
                          for key, (ref, describe, task) in RMS_FAMILY.items())),
             "solve": (Variant(key="left", task=SOLVE_TASKS["left"], exercise=EXERCISES[1]),
                       *(Variant(key=key, task=SOLVE_TASKS[key], exercise=_solve_exercise(system))
                         for key, system in SYSTEMS.items() if key != "left"))}
