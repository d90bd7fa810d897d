"""The PyTorch behaviours lessons 01-07 state as facts, pinned.

Each test reproduces one claim a lesson makes (the lesson and section are named in the
docstring). If a PyTorch upgrade changes the behaviour, the test fails here, loudly,
instead of a lesson quietly teaching something that is no longer true.
"""
import gc
import math
import re
import weakref

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.autograd import Function, gradcheck, gradgradcheck
from torch.autograd.function import once_differentiable

from course_utils import graph

VERSION_ERROR = "modified by an inplace operation"
ONCE_ERROR = "trying to differentiate twice a function that was marked with @once_differentiable"


# --- lesson 01 --------------------------------------------------------------------------

def test_01_graph_is_drawn_leaves_on_top():
    """01 'What autograd recorded': arrows run from the leaves to the output, default top-down layout."""
    x1 = torch.tensor(2.0, requires_grad=True)
    x2 = torch.tensor(3.0, requires_grad=True)
    dot = graph.draw(x1 * x2 + torch.sin(x1), params={"x1": x1, "x2": x2}).dot_source
    assert "rankdir" not in dot  # Graphviz default: edges point downwards
    edges = re.findall(r"(n\d+) -> (n\d+)", dot)
    leaves = set(re.findall(r'(n\d+) \[label="x[12]', dot))
    output = re.search(r"(n\d+) \[label=\"\n", dot).group(1)
    assert leaves and all(any(tail == leaf for tail, _ in edges) for leaf in leaves)
    assert not any(head == leaf for _, head in edges for leaf in leaves)  # nothing points into a leaf
    assert not any(tail == output for tail, _ in edges)  # the output is only ever pointed at


def test_01_recursion_with_accumulation_is_correct_but_visits_every_path():
    """01 'Second attempt': += recursion is right and walks 2**(L+1) - 1 paths on L doubling layers."""
    visits = 0

    class Node:
        def __init__(self, parents=()):
            self.parents, self.grad = parents, 0.0

    def naive(node, adjoint=1.0):
        nonlocal visits
        visits += 1
        node.grad += adjoint
        for parent, local in node.parents:
            naive(parent, adjoint * local)

    x = s = Node()
    for _ in range(10):
        s = Node(((s, 1.0), (s, 1.0)))
    naive(s)
    assert x.grad == 2 ** 10 and visits == 2 ** 11 - 1


# --- lesson 02 --------------------------------------------------------------------------

class MulOnCtx(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.a, ctx.b = a, b
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.b, grad_output * ctx.a


class MulSaved(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return grad_output * b, grad_output * a


def test_02_ctx_attribute_has_no_version_check():
    """02 'Why tensors go through save_for_backward': an in-place change goes unnoticed on ctx."""
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0])
    y = MulOnCtx.apply(a, b)
    b.add_(10)
    y.sum().backward()
    assert a.grad.tolist() == [13.0, 14.0]  # silently uses the new b

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0])
    y = MulSaved.apply(a, b)
    b.add_(10)
    with pytest.raises(RuntimeError, match=VERSION_ERROR):
        y.sum().backward()


class ExpSaved(Function):  # lesson 02's, and lesson 03's Exp: the output saved
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.saved_tensors[0]


def test_02_output_on_ctx_is_a_reference_cycle():
    """02: the output stored on ctx stays alive after del until gc; save_for_backward frees it."""
    class ExpOnCtx(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.y = torch.exp(x)
            return ctx.y

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.y

    gc.disable()
    try:
        result = {}
        for fn in (ExpOnCtx, ExpSaved):
            y = fn.apply(torch.randn(10, requires_grad=True))
            ref = weakref.ref(y)
            del y
            after_del = ref() is not None
            gc.collect()
            result[fn.__name__] = (after_del, ref() is not None)
    finally:
        gc.enable()
    assert result == {"ExpOnCtx": (True, False), "ExpSaved": (False, False)}


def test_02_save_for_backward_twice_replaces_and_accepts_none():
    """02 'once, with everything' and 04: a second call replaces the first; None is kept as None."""
    class Twice(Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a)
            ctx.save_for_backward(b, None)
            return a * b

        @staticmethod
        def backward(ctx, grad_output):
            return None, None

    a = torch.ones(2, requires_grad=True)
    b = torch.full((2,), 5.0)
    out = Twice.apply(a, b)  # kept alive: the node's saved tensors are read while its output exists
    saved = out.grad_fn.saved_tensors
    assert len(saved) == 2 and torch.equal(saved[0], b) and saved[1] is None


def test_02_numerical_backward_is_differentiable_but_inherits_round_off():
    """02 'Higher derivatives': differentiating a finite-difference backward works, with its error."""
    h = 1e-6

    class FiniteDiffMul(MulSaved):  # MulSaved's forward; backward by central differences
        @staticmethod
        def backward(ctx, grad_output):
            a, b = ctx.saved_tensors
            return (grad_output * ((a + h) * b - (a - h) * b) / (2 * h),
                    grad_output * (a * (b + h) - a * (b - h)) / (2 * h))

    gen = torch.Generator().manual_seed(2)  # the lesson's inputs: uniform in [-2, 2)
    a, b = ((4 * torch.rand(1000, generator=gen) - 2).requires_grad_() for _ in range(2))
    (grad_a,) = torch.autograd.grad(FiniteDiffMul.apply(a, b).sum(), a, create_graph=True)
    assert grad_a.requires_grad
    (grad_ab,) = torch.autograd.grad(grad_a.sum(), b)
    assert (grad_ab - 1).abs().max().item() > 0.01  # float32: the lesson shows about 0.06


# --- lesson 03 --------------------------------------------------------------------------

def test_03_float32_gradcheck_fails_for_a_correct_exp_and_digits_per_step():
    """03: float32 gradcheck fails; at step 1e-6 float32 keeps ~1 digit, float64 ~10."""
    torch.manual_seed(0)
    x64 = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert gradcheck(ExpSaved.apply, (x64,))
    with pytest.warns(UserWarning):
        assert not gradcheck(ExpSaved.apply, (x64.detach().float().requires_grad_(),), raise_exception=False)

    def digits(dtype, step):
        x = x64.detach().to(dtype)
        estimate = (torch.exp(x + step) - torch.exp(x - step)) / (2 * step)
        exact = torch.exp(x64.detach())
        return -math.log10(((estimate.double() - exact) / exact).abs().max().item())

    assert digits(torch.float32, 1e-6) < 2 and 9 < digits(torch.float64, 1e-6) < 11
    assert 4 < digits(torch.float32, 1e-2) < 5.5 and 10 < digits(torch.float64, 1e-5) < 11.5


# --- lesson 05 --------------------------------------------------------------------------

def _killhead_returning(make_grads, in_place: bool = False):
    """KillHead.apply whose backward zeroes the first n columns of a copy of grad_output (or, ``in_place``, of
    grad_output itself) and returns ``make_grads`` of it."""
    class KillHeadVariant(Function):
        @staticmethod
        def forward(ctx, x, n):
            ctx.n = n
            out = x.clone()
            out[:, :n] = 0
            return out

        @staticmethod
        def backward(ctx, grad_output):
            g = grad_output if in_place else grad_output.clone()
            g[:, :ctx.n] = 0
            return make_grads(g)
    return KillHeadVariant.apply


@pytest.mark.parametrize("make_grads, error", [
    (lambda g: (g, None), None),
    (lambda g: (g, None, None), None),
    (lambda g: g, "expected 2, got 1"),
    (lambda g: (g, g), "the corresponding forward input was not a Variable"),
    (lambda g: (g, None, g), "expected 2, got 3"),
])
def test_05_backward_value_count_is_a_minimum_extra_values_must_be_none(make_grads, error):
    """05 'Mistake 1': fewer values raise, extra trailing Nones pass, extra gradients raise."""
    x = torch.randn(2, 5, requires_grad=True)
    if error is None:
        _killhead_returning(make_grads)(x, 2).sum().backward()
        assert x.grad is not None
    else:
        with pytest.raises(RuntimeError, match=re.escape(error)):
            _killhead_returning(make_grads)(x, 2).sum().backward()


def test_05_tensors_inside_a_list_are_not_tracked():
    """05 'Tensors inside a non-tensor argument are invisible'."""
    class WeightedSum(Function):
        @staticmethod
        def forward(ctx, tensors, weights):
            return sum(w * t for w, t in zip(weights, tensors))

        @staticmethod
        def backward(ctx, grad_output):
            raise AssertionError("never called")

    p = torch.ones(3, requires_grad=True)
    out = WeightedSum.apply([p, p * 2], [2.0, 3.0])
    assert not out.requires_grad and out.grad_fn is None
    bias = torch.zeros(3, requires_grad=True)
    (WeightedSum.apply([p], [2.0]) + bias).sum().backward()
    assert bias.grad is not None and p.grad is None  # silently no gradient


# --- lesson 06 --------------------------------------------------------------------------
TORCH = tuple(int(part) for part in torch.__version__.split(".")[:2])

@pytest.mark.parametrize("fn, expected", [
    (torch.relu, 0.0),
    (torch.abs, 0.0),
    (lambda x: x.clamp(min=0), 1.0 if TORCH < (2, 14) else 0.0),  # the convention changed in torch 2.14
    (lambda x: torch.maximum(x, torch.zeros_like(x)), 0.5),
    (F.leaky_relu, 0.01),
    (lambda x: torch.sqrt(x ** 2), math.nan),
], ids=["relu", "abs", "clamp_min0", "maximum", "leaky_relu", "sqrt_of_square"])
def test_06_derivative_at_the_kink_differs_between_ops(fn, expected):
    """06 'At the kink': there is no single convention."""
    x = torch.tensor(0.0, requires_grad=True)
    (d,) = torch.autograd.grad(fn(x), x)
    if math.isnan(expected):
        assert math.isnan(d.item())
    else:
        assert d.item() == pytest.approx(expected)


def _lesson_text(name: str) -> str:
    """A lesson's py:percent source as one line of prose (comment marks and line breaks gone)."""
    from pathlib import Path

    source = (Path(__file__).resolve().parent.parent / "notebooks" / name).read_text()
    return re.sub(r"\s+", " ", " ".join(line.lstrip("#").strip() for line in source.splitlines()))


def test_06_summary_states_clamps_kink_per_torch_version_as_the_body_does():
    """06 'What to take away' said `clamp` 1 while the body (and torch from 2.14) say 0: both per version now
    (the values themselves are pinned by the test above, on the torch that runs it)."""
    text = _lesson_text("06_abs_product.py")
    body, summary = text.split("## What to take away", 1)
    assert "**1** up to torch 2.13, **0** (like `relu`) from torch 2.14 on" in body
    assert "`clamp(min=0)` 1 up to torch 2.13 and 0 from torch 2.14 on" in summary
    assert "`clamp` 1," not in summary


def test_08_which_tool_table_points_at_the_demo_above_it():
    """08 'Which tool?': the NumPy-in-backward demo comes before the table, which said 'shown below'."""
    text = _lesson_text("08_torch_func_and_compile.py")
    table = text.index("## Which tool?")
    assert text.index("class NumpyCubicBothWays") < table
    assert "shown below" not in text[table:] and "forward` only: shown above)" in text[table:]


# --- lesson 07 --------------------------------------------------------------------------

class CubeOnce(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x * x)
        return x ** 3

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (square,) = ctx.saved_tensors
        return 3 * square * grad_output


def test_07_once_differentiable_is_silent_under_grad_and_raises_under_backward():
    """07 'once_differentiable': 12 instead of 48 via grad and hessian; .backward() raises."""
    x = torch.tensor(2.0, requires_grad=True)
    (first,) = torch.autograd.grad(CubeOnce.apply(x) * x, x, create_graph=True)
    assert first.item() == 32.0
    (second,) = torch.autograd.grad(first, x, retain_graph=True)
    assert second.item() == 12.0  # true value 48: silently wrong
    with pytest.raises(RuntimeError, match=re.escape(ONCE_ERROR)):
        first.backward()
    hessian = torch.autograd.functional.hessian(lambda t: CubeOnce.apply(t) * t, torch.tensor(2.0))
    assert hessian.item() == 12.0
    x64 = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert not gradgradcheck(CubeOnce.apply, (x64,), raise_exception=False)


def _numpy_reverse_cumsum(grad_output):
    g = grad_output.detach().numpy()
    return torch.from_numpy(np.cumsum(g[::-1])[::-1].copy())


class NumpyCumsumUnmarked(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.from_numpy(np.cumsum(x.detach().numpy()))

    @staticmethod
    def backward(ctx, grad_output):
        return _numpy_reverse_cumsum(grad_output)


class NumpyCumsum(NumpyCumsumUnmarked):
    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        return _numpy_reverse_cumsum(grad_output)


def _second_derivative_sums(cumsum):
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    (first,) = torch.autograd.grad((cumsum(x) * x).sum(), x, create_graph=True)
    first.sum().backward()
    return x.grad.tolist()


def test_07_numpy_backward_without_the_mark_is_silently_wrong_twice():
    """07 'The NumPy Function without the decorator'."""
    assert _second_derivative_sums(lambda t: torch.cumsum(t, 0)) == [4.0, 4.0, 4.0]
    assert _second_derivative_sums(NumpyCumsumUnmarked.apply) == [3.0, 2.0, 1.0]
    with pytest.raises(RuntimeError, match=re.escape(ONCE_ERROR)):
        _second_derivative_sums(NumpyCumsum.apply)
    x64 = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert gradcheck(NumpyCumsum.apply, (x64,))
    for fn in (NumpyCumsumUnmarked, NumpyCumsum):
        assert not gradgradcheck(fn.apply, (x64,), raise_exception=False)


def test_07_detach_trick_is_a_straight_through_estimator():
    """07 'Reason 2': w + (round(w) - w).detach() has round's values and the identity's gradient."""
    torch.manual_seed(0)
    w = (torch.randn(10_000) * 100).requires_grad_()
    w_q = w + (torch.round(w) - w).detach()
    assert torch.equal(w_q, torch.round(w))
    (g,) = torch.autograd.grad(w_q.sum(), w)
    assert torch.equal(g, torch.ones_like(w))


def test_07_mark_dirty_keeps_the_version_counter_honest():
    """07 'The main reason': NumPy in place is silently wrong unmarked, an error when marked."""
    def numpy_add_one(mark):
        class NumpyAddOne(Function):
            @staticmethod
            def forward(ctx, x):
                x.numpy()[...] += 1
                if mark:
                    ctx.mark_dirty(x)
                return x

            @staticmethod
            @once_differentiable
            def backward(ctx, grad_output):
                return grad_output
        return NumpyAddOne

    leaf = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    a = leaf.clone()
    b = a * a
    numpy_add_one(False).apply(a)
    assert a._version == 0
    b.backward()
    assert leaf.grad.item() == 8.0  # true value 6

    a = torch.tensor(3.0, dtype=torch.float64, requires_grad=True).clone()
    b = a * a
    numpy_add_one(True).apply(a)
    assert a._version == 1
    with pytest.raises(RuntimeError, match=VERSION_ERROR):
        b.backward()


def test_07_torch_func_needs_setup_context():
    """07 'The modern spelling': torch.func refuses ctx-in-forward and accepts setup_context."""
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * grad_output

    class CubeModern(Function):
        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        backward = Cube.backward

    assert torch.func.grad(CubeModern.apply)(torch.tensor(2.0)).item() == 12.0
    with pytest.raises(RuntimeError, match="setup_context"):
        torch.func.grad(Cube.apply)(torch.tensor(2.0))


def test_07_mark_non_differentiable_matters_for_float_outputs():
    """07 'mark_non_differentiable': integer outputs never require grad; a float mask does unless marked."""
    def with_mask(mark):
        class TimesTwoWithMask(Function):
            @staticmethod
            def forward(ctx, x):
                _, idx = torch.sort(x)
                mask = (x > 0).to(x.dtype)
                if mark:
                    ctx.mark_non_differentiable(mask)
                return x * 2, mask, idx

            @staticmethod
            def backward(ctx, grad_out, grad_mask, grad_idx):
                return grad_out * 2
        return TimesTwoWithMask

    x = torch.tensor([-1.0, 2.0], requires_grad=True)
    _, mask, idx = with_mask(False).apply(x)
    assert mask.requires_grad and not idx.requires_grad
    _, mask, idx = with_mask(True).apply(x)
    assert not mask.requires_grad and not idx.requires_grad


def test_05_an_in_place_write_into_an_expanded_grad_output_is_refused_then_silently_wrong():
    """05 'Mistake 2': up to torch 2.14 an error; from 2.15 no error and every column's gradient zeroed."""
    kill_head_in_place = _killhead_returning(lambda g: (g, None), in_place=True)  # grad_output[:, :n] = 0
    x = torch.ones(3, 4, requires_grad=True)
    if TORCH < (2, 15):
        with pytest.raises(RuntimeError, match="refers to a single memory location"):
            kill_head_in_place(x, 2).sum().backward()
    else:
        kill_head_in_place(x, 2).sum().backward()
        assert torch.equal(x.grad, torch.zeros(3, 4))
