"""Right answers to every variant of ``abs_prod`` (``AbsKink``): key -> answer cell source."""

ANSWERS = {
    "absu_v": '''
class AbsKink(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return u.abs() * v

    @staticmethod
    def backward(ctx, grad_output):
        u, v = ctx.saved_tensors
        grad_u = grad_output * v * torch.sign(u)  # the kink: sign(0) = 0, as PyTorch's abs
        return grad_u, grad_output * u.abs()
''',
    "u_absv": '''
class AbsKink(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return u * v.abs()

    @staticmethod
    def backward(ctx, grad_output):
        u, v = ctx.saved_tensors
        return grad_output * v.abs(), grad_output * u * torch.sign(v)
''',
    "abs_sum": '''
class AbsKink(Function):
    @staticmethod
    def forward(ctx, u, v):
        s = u + v
        ctx.save_for_backward(s)
        return s.abs()

    @staticmethod
    def backward(ctx, grad_output):
        (s,) = ctx.saved_tensors
        grad = grad_output * torch.sign(s)
        return grad, grad
''',
    "abs_diff": '''
class AbsKink(Function):
    @staticmethod
    def forward(ctx, u, v):
        d = u - v
        ctx.save_for_backward(d)
        return d.abs()

    @staticmethod
    def backward(ctx, grad_output):
        (d,) = ctx.saved_tensors
        grad = grad_output * torch.sign(d)
        return grad, -grad
''',
}
