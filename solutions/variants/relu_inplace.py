"""Right answers to every variant of ``relu_inplace`` (``ReluInplace``, in place): key -> answer cell source.

Each reads the gradient back from the saved output, which has the sign of the input it overwrote.
"""

ANSWERS = {
    "relu": '''
class ReluInplace(Function):
    @staticmethod
    def forward(ctx, x):
        x.clamp_(min=0)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        out, = ctx.saved_tensors
        return grad_output * (out > 0)
''',
    "leaky": '''
class ReluInplace(Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(torch.where(x > 0, torch.ones_like(x), 0.1 * torch.ones_like(x)))
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)  # still > 0 exactly where x was
        return x

    @staticmethod
    def backward(ctx, grad_output):
        out, = ctx.saved_tensors
        return torch.where(out > 0, grad_output, 0.1 * grad_output)
''',
    "negative": '''
class ReluInplace(Function):
    @staticmethod
    def forward(ctx, x):
        x.clamp_(None, 0)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        out, = ctx.saved_tensors
        return grad_output * (out < 0)
''',
    "relu6": '''
class ReluInplace(Function):
    @staticmethod
    def forward(ctx, x):
        x.clamp_(0, 6)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        out, = ctx.saved_tensors
        return grad_output * ((out > 0) & (out < 6))
''',
}
