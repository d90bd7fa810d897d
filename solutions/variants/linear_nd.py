"""Right answers to every variant of `linear_nd` (``course_utils/checks/families/linear_nd.py``): LinearND."""

ANSWERS = {
    "rows": '''
class LinearND(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight)
        ctx.has_bias = bias is not None
        out = input @ weight.t()
        return out if bias is None else out + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad[:2]
        need_b = ctx.has_bias and ctx.needs_input_grad[2]
        flat_g = grad_output.reshape(-1, w.shape[0])
        gx = grad_output @ w if need_x else None
        gw = flat_g.t() @ x.reshape(-1, w.shape[1]) if need_w else None
        gb = flat_g.sum(0) if need_b else None
        return gx, gw, gb
''',
    "in-out": '''
class LinearND(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight)
        ctx.has_bias = bias is not None
        out = input @ weight
        return out if bias is None else out + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        fan_in, fan_out = w.shape
        rows = grad_output.reshape(-1, fan_out)
        gx = grad_output @ w.t() if ctx.needs_input_grad[0] else None
        gw = x.reshape(-1, fan_in).t() @ rows if ctx.needs_input_grad[1] else None
        gb = rows.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return gx, gw, gb
''',
    "features-first": '''
class LinearND(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight)
        ctx.has_bias = bias is not None
        fan_out, fan_in = weight.shape
        cols = weight @ input.reshape(fan_in, -1)
        if bias is not None:
            cols = cols + bias.reshape(fan_out, 1)
        return cols.reshape(fan_out, *input.shape[1:])

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        fan_out, fan_in = w.shape
        g = grad_output.reshape(fan_out, -1)
        gx = (w.t() @ g).reshape(x.shape) if ctx.needs_input_grad[0] else None
        gw = g @ x.reshape(fan_in, -1).t() if ctx.needs_input_grad[1] else None
        gb = g.sum(1) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return gx, gw, gb
''',
    "scaled": '''
class LinearND(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None, scale=1.0):
        ctx.save_for_backward(input, weight)
        ctx.has_bias, ctx.scale = bias is not None, scale
        out = (input @ weight.t()) * scale
        return out if bias is None else out + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        fan_out, fan_in = w.shape
        rows = grad_output.reshape(-1, fan_out)
        gx = (grad_output @ w) * ctx.scale if ctx.needs_input_grad[0] else None
        gw = (rows.t() @ x.reshape(-1, fan_in)) * ctx.scale if ctx.needs_input_grad[1] else None
        gb = rows.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return gx, gw, gb, None
''',
}
