"""course_utils.kernels: each kernel against its plain-torch reference (values, gradients, gradcheck).

The Triton kernels run in Triton's interpreter here (conftest sets TRITON_INTERPRET=1 without a
GPU), so shapes stay small. Every tensor a Function makes follows its input's device: the tests
run under another default device ("meta") and still compute on the inputs' device.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from course_utils.kernels import cpp_silu, triton_rmsnorm as rn, triton_swiglu as sw

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
TOL = {torch.float32: 1e-5, torch.float64: 1e-12}


def grads(fn, inputs, g):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    return [out] + list(torch.autograd.grad(out, leaves, g))


def assert_matches(fn, reference, inputs, g, dtype):
    with torch.device("meta"):  # a tensor made without its input's device would land here and fail
        got = grads(fn, inputs, g)
    want = grads(reference, inputs, g)
    for p, q in zip(got, want):
        assert p.device == q.device and p.dtype == q.dtype
        torch.testing.assert_close(p, q, atol=TOL[dtype], rtol=TOL[dtype])


@settings(max_examples=12, deadline=None)
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=3), double=st.booleans(), seed=st.integers(0, 2**16),
       block=st.sampled_from([16, 64, 1024]))
def test_swiglu_matches_the_composite(shape, double, seed, block):
    dtype = torch.float64 if double else torch.float32
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    a, b, g = (torch.randn(shape, generator=gen, device=DEVICE, dtype=dtype) for _ in range(3))

    class Blocked(sw.SwiGLU):
        @staticmethod
        def forward(ctx, a, b):
            a, b = a.contiguous(), b.contiguous()
            ctx.save_for_backward(a, b)
            return sw.swiglu_forward(a, b, block)

        @staticmethod
        def backward(ctx, grad_y):
            return sw.swiglu_backward(grad_y, *ctx.saved_tensors, block=block)
    assert_matches(Blocked.apply, sw.swiglu_reference, (a, b), g, dtype)


def test_swiglu_handles_non_contiguous_inputs_and_an_expanded_grad_output():
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    a = torch.randn(7, 5, generator=gen, device=DEVICE, dtype=torch.float64).t()
    b = torch.randn(5, 7, generator=gen, device=DEVICE, dtype=torch.float64)
    assert_matches(sw.SwiGLU.apply, sw.swiglu_reference, (a, b), torch.ones(()).to(a).expand(5, 7), torch.float64)
    assert torch.autograd.gradcheck(sw.SwiGLU.apply, (a[:2].clone().requires_grad_(), b[:2].clone().requires_grad_()))


def test_swiglu_refuses_mismatched_inputs_in_one_sentence():
    with pytest.raises(ValueError, match="one shape, dtype and device"):
        sw.swiglu_forward(torch.zeros(3), torch.zeros(4))


@settings(max_examples=10, deadline=None)
@given(rows=st.lists(st.integers(1, 9), min_size=0, max_size=2), d=st.integers(1, 70), double=st.booleans(),
       seed=st.integers(0, 2**16), eps=st.sampled_from([1e-6, 0.1]))
def test_rmsnorm_matches_the_composite(rows, d, double, seed, eps):
    dtype = torch.float64 if double else torch.float32
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn([*rows, d], generator=gen, device=DEVICE, dtype=dtype)
    w = torch.randn(d, generator=gen, device=DEVICE, dtype=dtype)
    g = torch.randn([*rows, d], generator=gen, device=DEVICE, dtype=dtype)
    assert_matches(lambda x, w: rn.RMSNorm.apply(x, w, eps), lambda x, w: rn.rmsnorm_reference(x, w, eps), (x, w),
                   g, dtype)


def test_rmsnorm_saves_one_number_per_row_and_passes_gradcheck():
    from course_utils.measure import saved_tensors

    gen = torch.Generator(device=DEVICE).manual_seed(1)
    x = torch.randn(20, 3, 16, generator=gen, device=DEVICE, dtype=torch.float64, requires_grad=True)
    w = torch.randn(16, generator=gen, device=DEVICE, dtype=torch.float64, requires_grad=True)
    new = [s for s in saved_tensors(lambda: rn.RMSNorm.apply(x, w, 1e-6)) if s.new]
    assert [s.shape for s in new] == [(20, 3)]
    assert torch.autograd.gradcheck(lambda x, w: rn.RMSNorm.apply(x, w, 0.1), (x[:3, :1], w))


def test_the_cpp_extension_is_silu_with_its_own_backward():
    silu = cpp_silu.load()
    assert cpp_silu.load() is silu  # built and registered once per process
    x = torch.linspace(-30, 30, 1001, dtype=torch.float64)
    assert_matches(silu, torch.nn.functional.silu, (x,), torch.randn(1001, generator=torch.Generator().manual_seed(2),
                                                                      dtype=torch.float64), torch.float64)
    assert torch.autograd.gradcheck(silu, (x[::50].clone().requires_grad_(),))
    torch.library.opcheck(silu, (torch.randn(3, 4, generator=torch.Generator().manual_seed(3)).requires_grad_(),))
    t = torch.randn(4, 3, generator=torch.Generator().manual_seed(4), requires_grad=True)
    (silu(t).t() * torch.arange(12.0).view(3, 4)).sum().backward()  # grad_output arrives transposed
    torch.testing.assert_close(t.grad, torch.autograd.grad((torch.nn.functional.silu(t).t() *
                                                            torch.arange(12.0).view(3, 4)).sum(), t)[0])


def test_the_cpp_extension_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(cpp_silu, "_loaded", False)
    monkeypatch.setattr(cpp_silu.shutil, "which", lambda tool: None if tool == "ninja" else "/usr/bin/" + tool)
    with pytest.raises(RuntimeError, match="needs ninja: run ./course lab"):
        cpp_silu.load()
