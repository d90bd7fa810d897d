"""Right answers to every variant of ``rmsnorm`` (never shipped to students)."""

HEAD = '''import torch
from torch.autograd import Function


class RMSNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
'''
BACK = '''
    @staticmethod
    def backward(ctx, grad_output):
        x, weight, r = ctx.saved_tensors
        grad_x = grad_weight = None
        need_x, need_weight = ctx.needs_input_grad[:2]
'''
ANSWERS = {
    "rms": HEAD + '''        rstd = 1 / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return x * rstd * weight
''' + BACK + '''        x_hat = x * r
        if need_x:
            u = grad_output * weight
            grad_x = r * (u - x_hat * (u * x_hat).mean(dim=-1, keepdim=True))
        if need_weight:
            grad_weight = (grad_output * x_hat).reshape(-1, x.shape[-1]).sum(0)
        return grad_x, grad_weight, None
''',
    "centred": HEAD + '''        c = x - x.mean(dim=-1, keepdim=True)
        rstd = 1 / torch.sqrt((c * c).mean(dim=-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return c * rstd * weight
''' + BACK + '''        x_hat = (x - x.mean(dim=-1, keepdim=True)) * r
        if need_x:
            u = grad_output * weight
            grad_x = r * (u - u.mean(dim=-1, keepdim=True) - x_hat * (u * x_hat).mean(dim=-1, keepdim=True))
        if need_weight:
            grad_weight = (grad_output * x_hat).reshape(-1, x.shape[-1]).sum(0)
        return grad_x, grad_weight, None
''',
    "prescaled": HEAD + '''        z = x * weight
        rstd = 1 / torch.sqrt((z * z).mean(dim=-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return z * rstd
''' + BACK + '''        z_hat = x * weight * r
        grad_z = r * (grad_output - z_hat * (grad_output * z_hat).mean(dim=-1, keepdim=True))
        if need_x:
            grad_x = grad_z * weight
        if need_weight:
            grad_weight = (grad_z * x).reshape(-1, x.shape[-1]).sum(0)
        return grad_x, grad_weight, None
''',
    "eps_outside": HEAD + '''        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True))
        ctx.save_for_backward(x, weight, rms)
        ctx.eps = eps
        return x / (rms + eps) * weight
''' + BACK.replace("x, weight, r = ctx.saved_tensors",
                   "x, weight, rms = ctx.saved_tensors\n        r = 1 / (rms + ctx.eps)") + '''        if need_x:
            u = grad_output * weight
            grad_x = r * u - r * r * x / rms * (u * x).mean(dim=-1, keepdim=True)
        if need_weight:
            grad_weight = (grad_output * x * r).reshape(-1, x.shape[-1]).sum(0)
        return grad_x, grad_weight, None
''',
}
