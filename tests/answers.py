"""Student answers for the tests: one correct base answer per exercise, and wrong ones made from it by a named edit.

A wrong answer written out in full hides its one wrong line among ten right ones; ``mutate(MUL, SWAPPED)`` says
what it gets wrong. An edit replaces a piece of text that must stand exactly once in the answer: one that is not
found, is found twice or changes nothing raises, so a wrong answer can never silently be the base answer again.
"""
from __future__ import annotations

Edit = tuple[str, str]  # (text of the answer, what it becomes)


class MutationError(ValueError):
    """An edit that does not apply to the answer it is given."""


def mutate(base: str, *edits: Edit) -> str:
    """``base`` with each edit applied in turn: its text, found exactly once, replaced."""
    if not edits:
        raise MutationError("mutate needs at least one edit: without one the answer is the base answer")
    answer = base
    for old, new in edits:
        found = answer.count(old) if old else 0
        if found != 1:
            where = "is not in the answer" if not found else f"stands {found} times in the answer"
            raise MutationError(f"the edit of {old!r} {where}: name a piece of text that stands exactly once")
        if old == new:
            raise MutationError(f"the edit of {old!r} replaces it with itself: the answer would stay the same")
        answer = answer.replace(old, new)
    return answer


# --------------------------------------------------------------------------- base answers, right (lessons 02-06)
# written compactly (no blank line between methods, grad_output named g), as the catalogue of mistakes writes them
MUL = """
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b * b
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b * b, 2 * g * a * b
"""

# exp's default variant (decay, e^{-x}): lesson 03's worked e^x is no variant of it, so a student cannot copy it
EXP = """
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(-x)
        ctx.save_for_backward(y)
        return y
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return -g * y
"""

LINEAR_FUNCTION = """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        out = input.mm(weight)
        return out if bias is None else out + bias
    @staticmethod
    def backward(ctx, g):
        input, weight, bias = ctx.saved_tensors
        gi = g.mm(weight.t()) if ctx.needs_input_grad[0] else None
        gw = input.t().mm(g) if ctx.needs_input_grad[1] else None
        gb = g.sum(0) if bias is not None and ctx.needs_input_grad[2] else None
        return gi, gw, gb
"""  # linear_function's default variant (in-out): the weight stored (in, out)

KILLHEAD = """
class KillSlice(Function):
    @staticmethod
    def forward(ctx, input, n):
        ctx.n = n
        out = input.clone()
        out[:, input.shape[1] - n:] = 0
        return out
    @staticmethod
    def backward(ctx, g):
        gi = g.clone()
        gi[:, g.shape[1] - ctx.n:] = 0
        return gi, None
"""  # killhead's default variant (last-cols): the last n columns zeroed

ABS_PROD = """
class AbsKink(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return u.abs() * v
    @staticmethod
    def backward(ctx, g):
        u, v = ctx.saved_tensors
        s = torch.sign(u)
        return g * s * v, g * u.abs()
"""

DIV = """
class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a / b
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g / b, -g * a / b ** 2
"""

BASES = {"mul": MUL, "div": DIV, "exp": EXP, "linear_function": LINEAR_FUNCTION, "killhead": KILLHEAD, "abs_prod": ABS_PROD}

# --------------------------------------------------------------------------- edits more than one test file makes
MUL_GRADS = "return g * b * b, 2 * g * a * b"  # mul's backward line (its default, a * b * b), which most mistakes rewrite
SWAPPED: Edit = (MUL_GRADS, "return 2 * g * a * b, g * b * b")  # each input given the other input's gradient
TAUGHT_GRADS = "return grad_output * b * b, 2 * grad_output * a * b"  # the same line in MUL_AS_TAUGHT

# mul as the lessons lay a Function out (a blank line between the methods, grad_output spelled out): the cells of the
# tests that run a real kernel, where a student's cell looks like the lesson's
MUL_AS_TAUGHT = mutate(MUL, ("return a * b * b\n", "return a * b * b\n\n"),
                       ("def backward(ctx, g):", "def backward(ctx, grad_output):"), (MUL_GRADS, TAUGHT_GRADS))
DIV_GRADS = "return g / b, -g * a / b ** 2"  # div's backward line
SWAPPED_AS_TAUGHT: Edit = (TAUGHT_GRADS, "return 2 * grad_output * a * b, grad_output * b * b")


def recomputed_by(grad: str) -> Edit:
    """mul's gradients taken by autograd itself on a recomputed a * b * b, ``grad`` naming torch.autograd.grad: full
    points, but not the derivative the lesson asks for, so the grader remarks it."""
    return (MUL_GRADS, "with torch.enable_grad():\n"
                       "            a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()\n"
                       f"            return {grad}(a2 * b2 * b2, (a2, b2), g)")


# --------------------------------------------------------------------------- outside answers, issue 49 (second batch)
# research code and public answers, as edits of the bases: each passed a check that could not tell it was wrong
SQUEEZED_BIAS: Edit = ("gb = g.sum(0)", "gb = g.sum(0).squeeze(0)")  # LINEAR_FUNCTION's bias: 0-d at out_features 1
# MUL that saves b only when b needs a gradient, and so has no b for a's gradient when only a needs one
SAVES_B_ONLY_FOR_B: tuple[Edit, Edit] = (
    ("ctx.save_for_backward(a, b)", "ctx.save_for_backward(a, b) if b.requires_grad else ctx.save_for_backward(a)"),
    ("a, b = ctx.saved_tensors\n        " + MUL_GRADS,
     "a, *b = ctx.saved_tensors\n        return (g * b[0] * b[0], 2 * g * a * b[0]) if b else (None, None)"),
)
