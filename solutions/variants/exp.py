"""Right answers to every variant of ``exp`` (``course_utils/checks/lesson03.py``): variant key -> answer cell.

The default (``decay``) is also the answer cell of solutions/03_exercises.py."""

ANSWERS = {
    "decay": '''
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        y = torch.exp(-x)
        ctx.save_for_backward(y)
        return y
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (y,) = ctx.saved_tensors
        return -grad_output * y  # d e^{-x}/dx = -e^{-x}, the output negated
        ### END SOLUTION
''',
    "minus_one": '''
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        y = torch.exp(x) - 1
        ctx.save_for_backward(y)
        return y
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (y,) = ctx.saved_tensors
        return grad_output * (y + 1)  # the derivative is e^x = output + 1
        ### END SOLUTION
''',
    "half": '''
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        y = torch.exp(x / 2)
        ctx.save_for_backward(y)
        return y
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (y,) = ctx.saved_tensors
        return grad_output * y / 2  # chain rule: the inner x / 2 gives 1/2
        ### END SOLUTION
''',
    "times_x": '''
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        e = torch.exp(x)
        ctx.save_for_backward(x, e)
        return x * e
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        x, e = ctx.saved_tensors
        return grad_output * e * (1 + x)  # product rule: e^x + x e^x
        ### END SOLUTION
''',
    "bell": '''
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        y = torch.exp(-x * x / 2)
        ctx.save_for_backward(x, y)
        return y
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        x, y = ctx.saved_tensors
        return -grad_output * x * y  # chain rule: the inner -x^2/2 gives -x
        ### END SOLUTION
''',
}
