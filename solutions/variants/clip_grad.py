"""Right answers to every variant of `clip_grad` (``course_utils/checks/families/clip_grad.py``): ClipGrad."""

_TEMPLATE = '''
class ClipGrad(Function):
    @staticmethod
    def forward(ctx, x, limit):
        ctx.limit = limit
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return CLIPPED, None
'''

ANSWERS = {
    "norm": _TEMPLATE.replace("CLIPPED", "grad_output * (ctx.limit / grad_output.norm()).clamp(max=1)"),
    "row": _TEMPLATE.replace("CLIPPED", "grad_output * (ctx.limit / grad_output.norm(dim=-1, keepdim=True)).clamp(max=1)"),
    "value": _TEMPLATE.replace("CLIPPED", "grad_output.clamp(min=-ctx.limit, max=ctx.limit)"),
    "largest": _TEMPLATE.replace("CLIPPED", "grad_output * (ctx.limit / grad_output.abs().max()).clamp(max=1)"),
}
