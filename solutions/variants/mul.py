"""Right answers to every variant of ``mul`` (``course_utils/checks/lesson02.py``): variant key -> answer cell."""

ANSWERS = {
    "ab_b": '''
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return a * b * b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, b = ctx.saved_tensors
        grad_a = grad_output * b * b  # b * b is constant in a
        return grad_a, 2 * grad_output * a * b  # a * b**2: the power rule in b
        ### END SOLUTION
''',
    "a_ab": '''
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return a * a * b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, b = ctx.saved_tensors
        grad_b = grad_output * a * a
        return 2 * grad_output * a * b, grad_b
        ### END SOLUTION
''',
    "sum_b": '''
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return (a + b) * b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, b = ctx.saved_tensors
        # (a + b) * b = a * b + b * b
        return grad_output * b, grad_output * (a + 2 * b)
        ### END SOLUTION
''',
    "diff_sum": '''
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return (a - b) * (a + b)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, b = ctx.saved_tensors
        # (a - b) * (a + b) = a**2 - b**2
        return 2 * grad_output * a, -2 * grad_output * b
        ### END SOLUTION
''',
    "squared": '''
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        p = a * b
        ctx.save_for_backward(a, b, p)
        return p * p
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, b, p = ctx.saved_tensors
        twice = 2 * grad_output * p  # d(p * p)/dp = 2p, then p = a * b
        return twice * b, twice * a
        ### END SOLUTION
''',
}
