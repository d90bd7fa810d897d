"""Right answers to every variant of ``log1mexp`` (never shipped to students)."""

HEAD = '''import math
import torch
from torch.autograd import Function


class StableLog(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
'''

ANSWERS = {
    "log1mexp": HEAD + '''        near_zero = x <= math.log(2)
        return torch.where(near_zero, torch.log(-torch.expm1(-x)), torch.log1p(-torch.exp(-x)))

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output / x.expm1()
''',
    "logexpm1": HEAD + '''        small = x < 1
        return torch.where(small, torch.log(torch.expm1(x)), x + torch.log1p(-torch.exp(-x)))

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return -grad_output / torch.expm1(-x)
''',
    "logsigmoid": HEAD + '''        return -(torch.relu(-x) + torch.log1p(torch.exp(-x.abs())))

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output * torch.sigmoid(-x)
''',
    "log1psq": HEAD + '''        big = x.abs() > 1
        safe = torch.where(big, x, torch.ones_like(x))
        return torch.where(big, 2 * torch.log(safe.abs()) + torch.log1p(1 / (safe * safe)), torch.log1p(x * x))

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output * 2 / (x + 1 / x)
''',
}
