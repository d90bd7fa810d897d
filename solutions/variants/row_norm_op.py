"""Right answers to every variant of ``row_norm_op`` (never shipped to students)."""

HEAD = '''import numpy as np
import torch
from torch import Tensor


@torch.library.custom_op("exercises::row_norm", mutates_args=())
def row_norm(x: Tensor) -> Tensor:
    norms = {numpy}
    return torch.as_tensor(norms).to(device=x.device, dtype=x.dtype)


@row_norm.register_fake
def _(x):
    return x.new_empty(x.shape[:-1])


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output)


def _backward(ctx, grad_output):
    x, norm = ctx.saved_tensors
{backward}

row_norm.register_autograd(_backward, setup_context=_setup_context)
'''
ARRAY = "x.detach().cpu().numpy()"
ANSWERS = {
    "l2": HEAD.format(numpy=f"np.linalg.norm({ARRAY}, axis=-1)", backward='''\
    safe = torch.where(norm == 0, torch.ones_like(norm), norm)
    return (grad_output / safe).unsqueeze(-1) * x
'''),
    "l1": HEAD.format(numpy=f"np.linalg.norm({ARRAY}, ord=1, axis=-1)", backward='''\
    return grad_output.unsqueeze(-1) * torch.sign(x)
'''),
    "l3": HEAD.format(numpy=f"np.linalg.norm({ARRAY}, ord=3, axis=-1)", backward='''\
    safe = torch.where(norm == 0, torch.ones_like(norm), norm)
    return (grad_output / safe ** 2).unsqueeze(-1) * x * x.abs()
'''),
    "sumsq": HEAD.format(numpy=f"({ARRAY} ** 2).sum(axis=-1)", backward='''\
    return 2 * grad_output.unsqueeze(-1) * x
'''),
}
