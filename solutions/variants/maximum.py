"""Right answers to every variant of ``maximum`` (``Extremum``): key -> answer cell source."""


def _answer(u_wins: str, sign: str) -> str:
    """An answer whose first competitor wins where ``u_wins`` holds, the second being ``sign`` v."""
    return f'''
class Extremum(Function):
    @staticmethod
    def forward(ctx, u, v):
        w = {sign}v
        u_wins, tie = {u_wins}, u == w
        ctx.save_for_backward(u_wins, tie)
        return torch.where(u_wins | tie, u, w)

    @staticmethod
    def backward(ctx, grad_output):
        u_wins, tie = ctx.saved_tensors
        grad_u = grad_output * u_wins + 0.5 * grad_output * tie
        return grad_u, {sign}(grad_output - grad_u)
'''


ANSWERS = {
    "max": _answer("u > w", ""),
    "min": _answer("u < w", ""),
    "max_neg": _answer("u > w", "-"),
    "min_neg": _answer("u < w", "-"),
}
