"""Right answers to every variant of ``normalize_fix`` (``Normalize``, its four bugs fixed): key -> answer cell."""


def _answer(norm: str, project: str) -> str:
    """``norm``: the norm of x (keeping its dimension); ``project``: backward's return value, from x, y, n and g."""
    return f'''
class Normalize(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x / {norm}

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        n = {norm}  # recomputed: differentiable again
        y = x / n
        return {project}
'''


ANSWERS = {
    "l2_rows": _answer("x.norm(dim=-1, keepdim=True)", "(grad_output - y * (grad_output * y).sum(dim=-1, keepdim=True)) / n"),
    "l2_cols": _answer("x.norm(dim=0, keepdim=True)", "(grad_output - y * (grad_output * y).sum(dim=0, keepdim=True)) / n"),
    "l1_rows": _answer("x.abs().sum(dim=-1, keepdim=True)",
                       "(grad_output - x.sign() * (grad_output * y).sum(dim=-1, keepdim=True)) / n"),
    "rms_rows": _answer("((x * x).sum(dim=-1, keepdim=True) / x.shape[-1]).sqrt()",
                        "(grad_output - y * (grad_output * y).sum(dim=-1, keepdim=True) / x.shape[-1]) / n"),
}
