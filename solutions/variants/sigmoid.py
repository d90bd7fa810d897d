"""Right answers to every variant of ``sigmoid`` (``course_utils/checks/lesson03.py``): variant key -> answer cell."""

ANSWERS = {
    "sigmoid": '''
class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        s = 1 / (1 + torch.exp(-x))  # exp(-x) = inf for very negative x: 1 / inf = 0, never inf / inf
        ctx.save_for_backward(s)
        return s
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        s, = ctx.saved_tensors
        return grad_output * s * (1 - s)
        ### END SOLUTION
''',
    "tanh": '''
class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        t = torch.tanh(x)
        ctx.save_for_backward(t)
        return t
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (t,) = ctx.saved_tensors
        return grad_output * (1 - t * t)
        ### END SOLUTION
''',
    "falling": '''
class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        y = 1 / (1 + torch.exp(x))  # exp(x) = inf for large x: 1 / inf = 0
        ctx.save_for_backward(y)
        return y
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (y,) = ctx.saved_tensors
        return -grad_output * y * (1 - y)
        ### END SOLUTION
''',
    "centred": '''
class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        y = 2 / (1 + torch.exp(-x)) - 1
        ctx.save_for_backward(y)
        return y
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (y,) = ctx.saved_tensors
        return grad_output * (1 - y * y) / 2  # y = tanh(x / 2)
        ### END SOLUTION
''',
    "steep": '''
class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        y = 1 / (1 + torch.exp(-2 * x))
        ctx.save_for_backward(y)
        return y
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (y,) = ctx.saved_tensors
        return 2 * grad_output * y * (1 - y)
        ### END SOLUTION
''',
}
