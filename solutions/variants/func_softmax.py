"""Right answers to every variant of ``func_softmax`` (never shipped to students)."""

HEAD = '''import torch
from torch.autograd import Function


class FuncSoftmax(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        if x.shape[-1] == 0:
            return x.clone()
'''
SAVE = '''
    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.save_for_forward(output)
'''

ANSWERS = {
    "softmax": HEAD + '''        shifted = x - x.amax(dim=-1, keepdim=True)
        e = shifted.exp()
        return e / e.sum(dim=-1, keepdim=True)
''' + SAVE + '''
    @staticmethod
    def backward(ctx, grad_output):
        y, = ctx.saved_tensors
        inner = (grad_output * y).sum(dim=-1, keepdim=True)
        return y * (grad_output - inner)

    @staticmethod
    def jvp(ctx, x_tangent):
        y, = ctx.saved_tensors
        return y * x_tangent - y * (y * x_tangent).sum(dim=-1, keepdim=True)
''',
    "log_softmax": HEAD + '''        shifted = x - x.amax(dim=-1, keepdim=True)
        return shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
''' + SAVE + '''
    @staticmethod
    def backward(ctx, grad_output):
        logp, = ctx.saved_tensors
        return grad_output - logp.exp() * grad_output.sum(dim=-1, keepdim=True)

    @staticmethod
    def jvp(ctx, x_tangent):
        logp, = ctx.saved_tensors
        return x_tangent - (logp.exp() * x_tangent).sum(dim=-1, keepdim=True)
''',
    "softmin": HEAD + '''        shifted = -x - (-x).amax(dim=-1, keepdim=True)
        e = shifted.exp()
        return e / e.sum(dim=-1, keepdim=True)
''' + SAVE + '''
    @staticmethod
    def backward(ctx, grad_output):
        y, = ctx.saved_tensors
        return y * ((grad_output * y).sum(dim=-1, keepdim=True) - grad_output)

    @staticmethod
    def jvp(ctx, x_tangent):
        y, = ctx.saved_tensors
        return y * ((y * x_tangent).sum(dim=-1, keepdim=True) - x_tangent)
''',
    "log_softmin": HEAD + '''        shifted = -x - (-x).amax(dim=-1, keepdim=True)
        return shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
''' + SAVE + '''
    @staticmethod
    def backward(ctx, grad_output):
        logp, = ctx.saved_tensors
        return logp.exp() * grad_output.sum(dim=-1, keepdim=True) - grad_output

    @staticmethod
    def jvp(ctx, x_tangent):
        logp, = ctx.saved_tensors
        return (logp.exp() * x_tangent).sum(dim=-1, keepdim=True) - x_tangent
''',
    "sharpened": HEAD + '''        z = 2 * x
        e = (z - z.amax(dim=-1, keepdim=True)).exp()
        return e / e.sum(dim=-1, keepdim=True)
''' + SAVE + '''
    @staticmethod
    def backward(ctx, grad_output):
        y, = ctx.saved_tensors
        return 2 * y * (grad_output - (grad_output * y).sum(dim=-1, keepdim=True))

    @staticmethod
    def jvp(ctx, x_tangent):
        y, = ctx.saved_tensors
        return 2 * y * (x_tangent - (y * x_tangent).sum(dim=-1, keepdim=True))
''',
}
