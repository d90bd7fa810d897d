"""Honest answers written from the lessons (test_copies): none may be flagged "copied from the solutions".

Each is an answer cell as a student who read the lessons might write it, never the solution's
text: a lesson's own code typed with other names, with or without its comments, with type hints,
blank lines, other formatting (issue 46: the standard ``nn.Linear`` pattern of lesson 04); or
code of the student's own, as correct as a careful student makes it.
"""

HONEST = {  # name -> (assignment, answer cell id, source)
    "linear_module_lesson_typed": ("04_exercises", "linear_module_answer", '''
class Linear(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features)
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return LinearFunction.apply(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
'''),
    "linear_module_renamed": ("04_exercises", "linear_module_answer", '''
class Linear(nn.Module):
    """My linear layer: y = x W^T + b."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features))

        if bias:
            self.bias = nn.Parameter(torch.empty(out_features))
        else:
            # keep the attribute so forward can pass it
            self.register_parameter('bias', None)

        self.reset_parameters()

    def reset_parameters(self):
        # same init as nn.Linear
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            b = 1 / math.sqrt(self.in_features)
            nn.init.uniform_(self.bias, -b, b)

    def forward(self, x):
        return LinearFunction.apply(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
'''),
    "linear_module_fan_in": ("04_exercises", "linear_module_answer", '''
class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        if not bias:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1]
            limit = 1.0 / math.sqrt(fan_in)
            with torch.no_grad():
                self.bias.uniform_(-limit, limit)

    def forward(self, input):
        return LinearFunction.apply(input, self.weight, self.bias)

    def extra_repr(self):
        return "in_features={}, out_features={}, bias={}".format(self.in_features, self.out_features,
                                                                 self.bias is not None)
'''),
    "linear_function_lesson_typed": ("04_exercises", "linear_function_answer", '''
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output = output + bias
        return output

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias
'''),
    "linear_function_renamed": ("04_exercises", "linear_function_answer", '''
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, x, w, b=None):
        # keep all three for backward
        ctx.save_for_backward(x, w, b)
        y = x.mm(w.t())
        if b is not None:
            y = y + b   # broadcast over rows
        return y

    @staticmethod
    def backward(ctx, g):
        x, w, b = ctx.saved_tensors
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = g.mm(w)
        if ctx.needs_input_grad[1]:
            gw = g.t().mm(x)
        if b is not None and ctx.needs_input_grad[2]:
            gb = g.sum(0)
        return gx, gw, gb
'''),
    "linear_nd_own": ("04_exercises", "linear_nd_answer", '''
class LinearND(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        out = torch.matmul(input, weight.t())
        if bias is not None:
            out = out + bias
        return out

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        x2 = input.reshape(-1, input.shape[-1])
        g2 = grad_output.reshape(-1, grad_output.shape[-1])
        if ctx.needs_input_grad[0]:
            grad_input = torch.matmul(grad_output, weight)
        if ctx.needs_input_grad[1]:
            grad_weight = g2.t().mm(x2)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = g2.sum(0)
        return grad_input, grad_weight, grad_bias
'''),
    "mul_lesson": ("02_exercises", "mul_answer", '''
class Mul(Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, y)  # both inputs are needed
        return x * y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y, grad * x
'''),
    "div_own": ("02_exercises", "div_answer", '''
class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a / b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad_a = grad_output / b
        grad_b = -grad_output * a / (b * b)
        return grad_a, grad_b
'''),
    "exp_lesson": ("03_exercises", "exp_answer", '''
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = (-x).exp()
        ctx.save_for_backward(y)   # save the OUTPUT, like lesson 03
        return y

    @staticmethod
    def backward(ctx, grad_output):
        y, = ctx.saved_tensors
        return grad_output * (-y)   # chain rule: the -x inside gives a minus
'''),
    "sigmoid_own": ("03_exercises", "sigmoid_answer", '''
class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.sigmoid(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        (out,) = ctx.saved_tensors
        return grad_output * out * (1 - out)
'''),
    "killhead_own": ("05_exercises", "killhead_answer", '''
class KillSlice(Function):
    @staticmethod
    def forward(ctx, input, n):
        ctx.keep = input.shape[-1] - n
        y = input.clone()
        y[:, ctx.keep:] = 0.0
        return y

    @staticmethod
    def backward(ctx, grad_output):
        g = grad_output.clone()
        g[:, ctx.keep:] = 0.0
        return g, None
'''),
    "embedding_own": ("05_exercises", "embedding_answer", '''
class EmbeddingFunction(Function):
    @staticmethod
    def forward(ctx, indices, weight):
        ctx.save_for_backward(indices)
        ctx.weight_shape = weight.shape
        return weight.index_select(0, indices.reshape(-1)).reshape(*indices.shape, weight.shape[1])

    @staticmethod
    def backward(ctx, grad_output):
        indices, = ctx.saved_tensors
        grad = torch.zeros(ctx.weight_shape, dtype=grad_output.dtype, device=grad_output.device)
        flat = grad_output.reshape(-1, ctx.weight_shape[1])
        for row, i in enumerate(indices.reshape(-1).tolist()):
            grad[i] += flat[row]
        return None, grad
'''),
    "clip_grad_own": ("05_exercises", "clip_grad_answer", '''
class ClipGrad(Function):
    @staticmethod
    def forward(ctx, x, max_norm):
        ctx.max_norm = max_norm
        return x.view_as(x).clone()

    @staticmethod
    def backward(ctx, grad_output):
        norm = grad_output.norm()
        if norm > ctx.max_norm:
            grad_output = grad_output * (ctx.max_norm / norm)
        return grad_output, None
'''),
    "abs_prod_own": ("06_exercises", "abs_prod_answer", '''
class AbsKink(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return torch.abs(u) * v

    @staticmethod
    def backward(ctx, grad_output):
        u, v = ctx.saved_tensors
        return grad_output * torch.sign(u) * v, grad_output * torch.abs(u)
'''),
    "maximum_own": ("06_exercises", "maximum_answer", '''
class Extremum(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return torch.maximum(u, v)

    @staticmethod
    def backward(ctx, grad_output):
        u, v = ctx.saved_tensors
        share_u = (u > v).to(grad_output.dtype) + 0.5 * (u == v).to(grad_output.dtype)
        return grad_output * share_u, grad_output * (1 - share_u)
'''),
    "relu_inplace_own": ("07_exercises", "relu_inplace_answer", '''
class ReluInplace(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        x.relu_()
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * (y > 0).to(grad_output.dtype)
'''),
    "tanh_twice_own": ("07_exercises", "tanh_twice_answer", '''
class Smooth(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.tanh()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        y, = ctx.saved_tensors
        return grad_output * (1 - y.pow(2))
'''),
    "func_softmax_own": ("08_exercises", "func_softmax_answer", '''
class FuncSoftmax(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.softmax(x, dim=-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.save_for_forward(output)

    @staticmethod
    def backward(ctx, grad_output):
        p, = ctx.saved_tensors
        dot = torch.sum(p * grad_output, dim=-1, keepdim=True)
        return p * grad_output - p * dot

    @staticmethod
    def jvp(ctx, tangent):
        p, = ctx.saved_tensors
        return p * (tangent - torch.sum(p * tangent, dim=-1, keepdim=True))
'''),
    "log1mexp_own": ("09_exercises", "log1mexp_answer", '''
class StableLog(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        small = x < 0.6931
        big = torch.log1p(-torch.exp(-x))
        tiny = torch.log(-torch.expm1(-x))
        return torch.where(small, tiny, big)

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output / torch.expm1(x)
'''),
    "rmsnorm_own": ("09_exercises", "rmsnorm_answer", '''
class RMSNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        ms = x.pow(2).mean(-1, keepdim=True)
        inv = torch.rsqrt(ms + eps)
        ctx.save_for_backward(x, weight, inv)
        return weight * (x * inv)

    @staticmethod
    def backward(ctx, grad_output):
        x, weight, inv = ctx.saved_tensors
        n = x.shape[-1]
        xn = x * inv
        gx = gw = None
        if ctx.needs_input_grad[0]:
            gy = grad_output * weight
            gx = inv * gy - inv * xn * (gy * xn).sum(-1, keepdim=True) / n
        if ctx.needs_input_grad[1]:
            gw = (grad_output * xn).flatten(0, -2).sum(0) if x.dim() > 1 else grad_output * xn
        return gx, gw, None
'''),
    "solve_own": ("09_exercises", "solve_answer", '''
class Solve(Function):
    @staticmethod
    def forward(ctx, A, b):
        x = torch.linalg.solve(A, b)
        ctx.save_for_backward(A, x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        A, x = ctx.saved_tensors
        grad_b = torch.linalg.solve(A.mT, grad_output)
        grad_A = None
        if ctx.needs_input_grad[0]:
            if x.dim() == 1:
                grad_A = -torch.outer(grad_b, x)
            else:
                grad_A = -grad_b @ x.mT
        return grad_A, grad_b
'''),
    "lambert_w_own": ("09_exercises", "lambert_w_answer", '''
class LambertW(Function):
    @staticmethod
    def forward(ctx, x):
        w = torch.where(x > 1, torch.log(x), x / 2)
        for i in range(60):
            ew = torch.exp(w)
            w = w - (w * ew - x) / (ew * (w + 1))
        ctx.save_for_backward(x, w)
        return w

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        return grad_output * w / (x * (1 + w))
'''),
    "scalar_engine_lesson": ("01_exercises", "scalar_engine_answer", '''
class Scalar:
    """A number that remembers how it was computed."""

    def __init__(self, data, parents=()):
        self.data = float(data)
        self.grad = 0.0
        self._parents = parents

    def __repr__(self):
        return f"Scalar(data={self.data:.4f}, grad={self.grad:.4f})"

    @staticmethod
    def lift(other):
        return other if isinstance(other, Scalar) else Scalar(other)

    def __add__(self, other):
        other = Scalar.lift(other)
        return Scalar(self.data + other.data, ((self, 1.0), (other, 1.0)))

    def __mul__(self, other):
        other = Scalar.lift(other)
        return Scalar(self.data * other.data, ((self, other.data), (other, self.data)))

    __radd__ = __add__
    __rmul__ = __mul__

    def sin(self):
        return Scalar(math.sin(self.data), ((self, math.cos(self.data)),))

    def exp(self):
        e = math.exp(self.data)
        return Scalar(e, ((self, e),))

    def backward(self):
        topo = []
        visited = set()

        def build(v):
            if v not in visited:
                visited.add(v)
                for p, _ in v._parents:
                    build(p)
                topo.append(v)

        build(self)
        for v in topo:
            v.grad = 0.0
        self.grad = 1.0
        for v in reversed(topo):
            for p, d in v._parents:
                p.grad += d * v.grad
'''),
    "gradient_test_own": ("06_exercises", "gradient_test_answer", '''
def backward_is_correct(function_class, *inputs) -> bool:
    args = [x.detach().clone().double().requires_grad_() for x in inputs]
    try:
        ok = torch.autograd.gradcheck(function_class.apply, args, raise_exception=False)
    except Exception:
        return False
    if not ok:
        return False
    out = function_class.apply(*args)
    g = torch.randn_like(out)
    g_copy = g.clone()
    grads = torch.autograd.grad(out, args, g, allow_unused=True)
    if not torch.equal(g, g_copy):
        return False
    nc = [torch.stack([x, x], dim=-1)[..., 0].detach().requires_grad_() for x in args]
    try:
        return torch.autograd.gradcheck(function_class.apply, nc, raise_exception=False)
    except Exception:
        return False
'''),
}
