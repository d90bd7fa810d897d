"""Right answers to every variant of ``tanh_twice`` (``Smooth``, differentiable twice): key -> answer cell source."""

ANSWERS = {
    "tanh": '''
class Smooth(Function):
    @staticmethod
    def forward(ctx, x):
        t = torch.tanh(x)
        ctx.save_for_backward(t)  # an output: in double backward autograd knows t depends on x
        return t

    @staticmethod
    def backward(ctx, grad_output):
        t, = ctx.saved_tensors
        return grad_output * (1 - t * t)
''',
    "sigmoid": '''
class Smooth(Function):
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(s)
        return s

    @staticmethod
    def backward(ctx, grad_output):
        s, = ctx.saved_tensors
        return grad_output * s * (1 - s)
''',
    "sin": '''
class Smooth(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)  # the output alone cannot say the sign of cos(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output * torch.cos(x)
''',
    "gauss": '''
class Smooth(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(-x * x)
        ctx.save_for_backward(x, y)  # the input and the output: both known to double backward
        return y

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        return grad_output * (-2 * x * y)
''',
}
