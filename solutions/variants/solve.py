"""Right answers to every variant of ``solve`` (never shipped to students)."""

TEMPLATE = '''import torch
from torch.autograd import Function

LEFT, TRANSPOSED = {left}, {transposed}


def _matrix(v):
    return (v[:, None] if LEFT else v[None, :]) if v.dim() == 1 else v


def _vector(m, like):
    return (m[:, 0] if LEFT else m[0]) if like.dim() == 1 else m


class Solve(Function):
    @staticmethod
    def forward(ctx, A, b):
        LU, pivots = torch.linalg.lu_factor(A)
        sol = _vector(torch.linalg.lu_solve(LU, pivots, _matrix(b), left=LEFT, adjoint=TRANSPOSED), b)
        ctx.save_for_backward(LU, pivots, sol)
        return sol

    @staticmethod
    def backward(ctx, grad_output):
        LU, pivots, x = ctx.saved_tensors
        g_b = torch.linalg.lu_solve(LU, pivots, _matrix(grad_output), left=LEFT, adjoint=not TRANSPOSED)
        g_A = None
        if ctx.needs_input_grad[0]:
            X = _matrix(x)
            g_A = -(g_b @ X.mT if LEFT else X.mT @ g_b)
            g_A = g_A.mT if TRANSPOSED else g_A
        return g_A, _vector(g_b, x) if ctx.needs_input_grad[1] else None
'''
ANSWERS = {
    "left": TEMPLATE.format(left=True, transposed=False),
    "transposed": TEMPLATE.format(left=True, transposed=True),
    "right": TEMPLATE.format(left=False, transposed=False),
    "right_transposed": TEMPLATE.format(left=False, transposed=True),
}
