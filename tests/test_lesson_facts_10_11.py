"""The PyTorch and Triton behaviours lessons 10 and 11 state as facts, pinned (issue 50 #7, #8).

As in test_lesson_facts.py: if an upgrade changes one, the test fails here instead of a lesson
quietly teaching something no longer true. Triton runs in its interpreter without a GPU (conftest).
"""
import logging
import re
import warnings

import pytest
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable


def test_10_opcheck_passes_a_custom_op_whose_backward_is_wrong():
    """10 section 5: opcheck does not compare gradient values; gradcheck does."""
    @torch.library.custom_op("facts10::twice_wrong", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @twice.register_fake
    def _(x):
        return torch.empty_like(x)

    twice.register_autograd(lambda ctx, g: g * 3, setup_context=lambda ctx, inputs, output: None)
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert set(torch.library.opcheck(twice, (x,)).values()) == {"SUCCESS"}
    assert not torch.autograd.gradcheck(twice, (x,), raise_exception=False)


class HalveIfLarge(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.large = x.abs().max().item() > 1.0
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * 0.5 if ctx.large else grad


def _graphs(**config):
    torch._dynamo.reset()
    torch._logging.set_logs(dynamo=logging.ERROR)
    try:
        with torch._dynamo.config.patch(**config), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = torch._dynamo.explain(lambda x: HalveIfLarge.apply(x).sin())(torch.randn(3, 4, requires_grad=True))
        ops = [[n.target if isinstance(n.target, str) else n.target.__name__ for n in g.graph.nodes
                if n.op in ("call_function", "call_method")] for g in report.graphs]
        return report.graph_count, report.graph_break_count, ops
    finally:
        torch._dynamo.reset()


def test_10_item_in_a_functions_forward_and_capture_scalar_outputs():
    """10 section 6: apply runs eagerly, forward is compiled as ordinary code (cut at .item()), backward never;
    capture_scalar_outputs=True keeps .item() in forward's graph: 2 graphs, 1 break."""
    count, breaks, ops = _graphs()
    assert (count, breaks) == (3, 2) and ops[-1] == ["sin"] and "clone" in ops[1] and all("item" not in o for o in ops)
    count, breaks, ops = _graphs(capture_scalar_outputs=True)
    assert (count, breaks) == (2, 1) and "item" in ops[0] and "clone" in ops[0] and ops[1] == ["sin"]


def test_10_tl_sigmoid_takes_no_half_type_under_the_interpreter():
    """10 section 2: tl.sigmoid (tl.exp under it) refuses float16 and bfloat16: UPCAST exists for both."""
    pytest.importorskip("triton")
    if not torch.cuda.is_available():
        from triton.runtime.interpreter import InterpretedFunction

        from course_utils.kernels import triton_swiglu as sw
        assert isinstance(sw.swiglu_forward_kernel, InterpretedFunction)
    from course_utils.kernels import triton_swiglu as sw
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for dtype in (torch.float16, torch.bfloat16):
        a = torch.randn(8, device=device).to(dtype)
        with pytest.raises(Exception, match=r"Expected dtype \[.*fp32.*fp64.*\] but got (fp16|bf16)"):
            sw.swiglu_forward_kernel[(1,)](a, a, torch.empty_like(a), 8, BLOCK=8, UPCAST=False)


def test_10_wrap_triton_of_an_interpreted_kernel_follows_the_release_rule_the_lesson_states():
    """10 section 4: torch 2.11's wrap_triton refuses an interpreted kernel, 2.13 and later return it unwrapped
    (2.12 is not stated); the launcher ends with the bare kernel on every release."""
    pytest.importorskip("triton")
    if torch.cuda.is_available():
        pytest.skip("compiled kernels are JITFunctions, which wrap_triton wraps on every release")
    from course_utils.kernels import triton_swiglu as sw
    from course_utils.kernels.wrapping import launcher, wrap_triton_gives

    release = tuple(int(part) for part in torch.__version__.split(".")[:2])
    gives = wrap_triton_gives(sw.swiglu_forward_kernel)
    if release <= (2, 11):
        assert gives == "refuses it"
    elif release >= (2, 13):
        assert gives == "returns it unwrapped"
    assert launcher(sw.swiglu_forward_kernel) is sw.swiglu_forward_kernel


def test_11_once_differentiable_raises_under_backward_and_is_silent_under_grad():
    """11 section 6: with a graph-carrying grad_output, .backward() raises, torch.autograd.grad returns a wrong value."""
    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.5, -2.0], dtype=torch.float64, requires_grad=True)
    scale = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)

    def penalty(fn):
        (gx,) = torch.autograd.grad(fn(x).sum() * scale, x, create_graph=True)
        return (gx * x).sum()
    (got,) = torch.autograd.grad(penalty(Square.apply), x)
    (want,) = torch.autograd.grad(penalty(lambda t: t * t), x)
    assert not torch.allclose(got, want)
    with pytest.raises(RuntimeError, match=re.escape("marked with @once_differentiable")):
        penalty(Square.apply).backward()
