"""Right answers to every variant of `linear_module` (``course_utils/checks/families/linear_module.py``): Linear, each after
the default variant's LinearFunction (weight (in, out)), which every module here calls."""

FUNCTION = '''
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight)
        ctx.has_bias = bias is not None
        y = input.mm(weight)
        return y + bias if ctx.has_bias else y

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        gx = grad_output.mm(w.t()) if ctx.needs_input_grad[0] else None
        gw = x.t().mm(grad_output) if ctx.needs_input_grad[1] else None
        gb = grad_output.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return gx, gw, gb
'''

_MODULE = '''
class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(SHAPE))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        INIT
        if self.bias is not None:
            BIAS

    def forward(self, input):
        return LinearFunction.apply(input, WEIGHT, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
'''


def _module(shape: str, init: str, bias: str, weight: str) -> str:
    return FUNCTION + (_MODULE.replace("SHAPE", shape).replace("INIT", init).replace("BIAS", bias)
                       .replace("WEIGHT", weight))


ANSWERS = {
    "in-out": _module("in_features, out_features", "drawn = torch.empty(self.out_features, self.in_features)\n"
                      "        nn.init.kaiming_uniform_(drawn, a=math.sqrt(5))\n"
                      "        with torch.no_grad():\n            self.weight[:] = drawn.t()",
                      "limit = 1 / math.sqrt(self.in_features)\n            nn.init.uniform_(self.bias, -limit, limit)",
                      "self.weight"),
    "xavier": _module("out_features, in_features", "nn.init.xavier_uniform_(self.weight)", "nn.init.zeros_(self.bias)",
                      "self.weight.t()"),
    "conv1d": _module("in_features, out_features", "nn.init.normal_(self.weight, std=0.02)", "nn.init.zeros_(self.bias)",
                      "self.weight"),
    "trunc": _module("out_features, in_features", "nn.init.trunc_normal_(self.weight, std=0.02, a=-0.04, b=0.04)",
                     "nn.init.zeros_(self.bias)", "self.weight.t()"),
}
