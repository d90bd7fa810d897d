"""Right answers to every variant of ``div`` (``course_utils/checks/lesson02.py``): variant key -> answer cell."""

ANSWERS = {
    "quotient": '''
class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        quotient = a / b
        ctx.save_for_backward(b, quotient)  # the quotient serves d/db = -a / b^2 = -quotient / b
        return quotient
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        b, quotient = ctx.saved_tensors
        grad_a = grad_output / b
        return grad_a, -grad_a * quotient
        ### END SOLUTION
''',
    "flipped": '''
class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        out = b / a
        ctx.save_for_backward(a, out)
        return out
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, out = ctx.saved_tensors
        grad_b = grad_output / a  # d(b/a)/db = 1/a
        return -grad_b * out, grad_b  # d(b/a)/da = -b/a^2 = -(b/a)/a
        ### END SOLUTION
''',
    "squared": '''
class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return a / (b * b)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, b = ctx.saved_tensors
        inv_b2 = 1 / (b * b)
        return grad_output * inv_b2, -2 * grad_output * a * inv_b2 / b
        ### END SOLUTION
''',
    "smooth": '''
class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return a / (1 + b * b)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, b = ctx.saved_tensors
        denom = 1 + b * b
        grad_a = grad_output / denom
        return grad_a, -2 * grad_a * a * b / denom
        ### END SOLUTION
''',
    "share": '''
class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        total = a + b
        ctx.save_for_backward(a, b, total)
        return a / total
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, b, total = ctx.saved_tensors
        scale = grad_output / (total * total)
        return scale * b, -scale * a
        ### END SOLUTION
''',
}
