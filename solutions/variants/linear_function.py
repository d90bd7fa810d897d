"""Right answers to every variant of `linear_function` (``course_utils/checks/families/linear_function.py``): LinearFunction."""

_TEMPLATE = '''
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight)
        ctx.has_bias = bias is not None
        y = FORWARD
        return y + BIAS if ctx.has_bias else y

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        gx = GRAD_INPUT if ctx.needs_input_grad[0] else None
        gw = GRAD_WEIGHT if ctx.needs_input_grad[1] else None
        gb = GRAD_BIAS if ctx.has_bias and ctx.needs_input_grad[2] else None
        return gx, gw, gb
'''


def _answer(forward: str, bias: str, grad_input: str, grad_weight: str, grad_bias: str) -> str:
    return (_TEMPLATE.replace("GRAD_INPUT", grad_input).replace("GRAD_WEIGHT", grad_weight)
            .replace("GRAD_BIAS", grad_bias).replace("FORWARD", forward).replace("BIAS", bias))


ANSWERS = {
    "in-out": _answer("input.mm(weight)", "bias", "grad_output.mm(w.t())", "x.t().mm(grad_output)", "grad_output.sum(0)"),
    "columns": _answer("weight.mm(input)", "bias.unsqueeze(1)", "w.t().mm(grad_output)", "grad_output.mm(x.t())",
                       "grad_output.sum(1)"),
    "row-bias": _answer("input.mm(weight)", "bias.unsqueeze(1)", "grad_output.mm(w.t())", "x.t().mm(grad_output)",
                        "grad_output.sum(1)"),
    "scaled": '''
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None, scale=1.0):
        ctx.save_for_backward(input, weight)
        ctx.has_bias, ctx.scale = bias is not None, scale
        y = input.mm(weight.t()) * scale
        return y + bias if ctx.has_bias else y

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        g = grad_output * ctx.scale
        gx = g.mm(w) if ctx.needs_input_grad[0] else None
        gw = g.t().mm(x) if ctx.needs_input_grad[1] else None
        gb = grad_output.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return gx, gw, gb, None
''',
}
