"""course_utils.kernels: each kernel against its plain-torch reference (values, gradients, gradcheck).

The Triton kernels run in Triton's interpreter here (conftest sets TRITON_INTERPRET=1 without a
GPU), so shapes stay small. Every tensor a Function makes follows its input's device: the tests
run under another default device ("meta") and still compute on the inputs' device.
"""
from __future__ import annotations

import logging

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.kernels import cpp_silu
from course_utils.kernels import triton_rmsnorm as rn
from course_utils.kernels import triton_swiglu as sw

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
    # the fake says what the C++ returns for a transposed input: a contiguous tensor (empty_like would not)
    torch.library.opcheck(silu, (torch.randn(4, 5, generator=torch.Generator().manual_seed(5)).t().requires_grad_(),))
    x32 = torch.randn(1027, generator=torch.Generator().manual_seed(6))  # not a multiple of the vector width
    torch.testing.assert_close(torch.ops.course_cpp.silu_scalar(x32), torch.nn.functional.silu(x32))
    torch.testing.assert_close(silu(x32[::2]), torch.nn.functional.silu(x32[::2]))
    # larger than one thread's share, transposed: a contiguous result; the gradient of a sum arrives expanded
    xt = torch.randn(300, 220, generator=torch.Generator().manual_seed(7)).t()
    y = silu(xt)
    assert y.is_contiguous() and y.shape == xt.shape
    torch.testing.assert_close(y, torch.nn.functional.silu(xt))
    leaf = xt.detach().requires_grad_()
    silu(leaf).sum().backward()
    torch.testing.assert_close(leaf.grad, torch.func.grad(lambda v: torch.nn.functional.silu(v).sum())(xt.detach()))
    t = torch.randn(4, 3, generator=torch.Generator().manual_seed(4), requires_grad=True)
    (silu(t).t() * torch.arange(12.0).view(3, 4)).sum().backward()  # grad_output arrives transposed
    torch.testing.assert_close(t.grad, torch.autograd.grad((torch.nn.functional.silu(t).t() *
                                                            torch.arange(12.0).view(3, 4)).sum(), t)[0])


def test_each_torch_installation_keeps_its_own_cpp_build(monkeypatch):
    """Two virtual environments sharing one build directory rebuilt the extension whenever the other had loaded it
    (its build file records torch's paths): every checkout or ``--torch`` venv paid half a minute of compiling."""
    here = cpp_silu.build_name()
    assert here.startswith(f"{cpp_silu.NAME}_{cpp_silu.capability().lower()}_") and cpp_silu.build_name() == here
    monkeypatch.setattr(torch, "__file__", "/elsewhere/venv/torch/__init__.py")
    elsewhere = cpp_silu.build_name()
    monkeypatch.setattr(torch, "__version__", "2.11.0+cpu")
    assert len({here, elsewhere, cpp_silu.build_name()}) == 3


def test_the_cpp_extension_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(cpp_silu, "_loaded", False)
    monkeypatch.setattr(cpp_silu.shutil, "which", lambda tool: None if tool == "ninja" else "/usr/bin/" + tool)
    with pytest.raises(RuntimeError, match=r"needs ninja: run \./course lab"):
        cpp_silu.load()


def test_loading_the_cpp_extension_hides_only_the_cuda_home_warning(caplog):
    """A CUDA wheel on a machine without a GPU (``./course test --torch 2.15.0`` here) logs "No CUDA runtime is
    found, using CUDA_HOME=..." when cpp_extension is imported: noise for a CPU-only extension, and lesson 10's cell
    gained a stderr output. load() imports it with that one message dropped; every other message of the logger stays."""
    logger = logging.getLogger("torch.utils.cpp_extension")
    with caplog.at_level(logging.WARNING, logger=logger.name), cpp_silu._without_cuda_home_warning():
        logger.warning("No CUDA runtime is found, using CUDA_HOME='/usr/local'")
        logger.warning("something else about the build")
    logger.warning("No CUDA runtime is found, using CUDA_HOME='/usr/local'")  # only inside load()'s import
    assert [r.getMessage() for r in caplog.records] == ["something else about the build",
                                                        "No CUDA runtime is found, using CUDA_HOME='/usr/local'"]


# ---- every layout and dtype a model gives the kernels (issue 30) ----

HALF_TOL = {torch.bfloat16: 3e-2, torch.float16: 4e-3, torch.float32: 2e-5, torch.float64: 1e-12}


class Recorder:
    """Stands in for a kernel: records the layout of every tensor a launch receives, then launches."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append([t for t in args if isinstance(t, torch.Tensor)])
            return self.kernel[grid](*args, **kwargs)
        return launch


def record(monkeypatch, module, *names):
    recorders = [Recorder(getattr(module, name)) for name in names]
    for name, r in zip(names, recorders):
        monkeypatch.setattr(module, name, r)
    return recorders


def assert_kernels_saw_contiguous_memory(recorders):
    launched = [t for r in recorders for launch in r.launches for t in launch]
    assert launched, "no kernel was launched"
    assert all(t.is_contiguous() for t in launched), [t.stride() for t in launched]


def layouts(shape, gen, dtype):
    """(name, tensor) pairs of equal values in the layouts models produce: contiguous, transposed, sliced, expanded."""
    base = torch.randn(shape, generator=gen, device=DEVICE, dtype=torch.float64).to(dtype)
    flipped = base.transpose(0, -1).contiguous().transpose(0, -1)  # same values, strides reversed
    wide = torch.randn(*shape[:-1], 2 * shape[-1] + 1, generator=gen, device=DEVICE, dtype=dtype)
    wide[..., 1::2] = base  # same values, every other column of a wider tensor
    row = base.reshape(-1)[: shape[-1]]
    return [("contiguous", base), ("transposed", flipped), ("sliced", wide[..., 1::2]),
            ("expanded", row.expand(shape))]


def reference_grads(fn, inputs, g):
    leaves = [t.detach().double().requires_grad_() for t in inputs]
    out = fn(*leaves)
    return [out] + list(torch.autograd.grad(out, leaves, g.double()))


def assert_close_to_float64(got, want, dtype):
    for p, q in zip(got, want):
        assert p.dtype == dtype and p.is_contiguous()
        torch.testing.assert_close(p.double(), q, atol=HALF_TOL[dtype], rtol=HALF_TOL[dtype])


SHAPES = [(1030,), (5, 37), (3, 4, 21), (2, 3, 2, 9)]  # 1-D to 4-D, none a multiple of a block
DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.float64]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_swiglu_kernels_see_contiguous_memory_whatever_the_layout(monkeypatch, shape):
    recorders = record(monkeypatch, sw, "swiglu_forward_kernel", "swiglu_backward_kernel")
    gen = torch.Generator(device=DEVICE).manual_seed(len(shape))
    g_base = torch.randn(shape, generator=gen, device=DEVICE)
    for (_name_a, a), (_name_b, b) in zip(layouts(shape, gen, torch.float32), reversed(layouts(shape, gen, torch.float32))):
        for g in (g_base, g_base.transpose(0, -1).contiguous().transpose(0, -1), torch.ones((), device=DEVICE).expand(shape)):
            assert_close_to_float64(grads(sw.SwiGLU.apply, (a, b), g), reference_grads(sw.swiglu_reference, (a, b), g),
                                    torch.float32)
    assert_kernels_saw_contiguous_memory(recorders)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_rmsnorm_kernels_see_contiguous_memory_whatever_the_layout(monkeypatch, shape):
    recorders = record(monkeypatch, rn, "rmsnorm_forward_kernel", "rmsnorm_backward_kernel")
    gen = torch.Generator(device=DEVICE).manual_seed(10 + len(shape))
    w_wide = torch.randn(2 * shape[-1], generator=gen, device=DEVICE)
    g = torch.randn(shape, generator=gen, device=DEVICE).transpose(0, -1).contiguous().transpose(0, -1)
    for _name, x in layouts(shape, gen, torch.float32):
        for w in (w_wide[: shape[-1]], w_wide[::2]):  # a contiguous and a strided weight
            assert_close_to_float64(grads(lambda x, w: rn.RMSNorm.apply(x, w, 1e-6), (x, w), g),
                                    reference_grads(lambda x, w: rn.rmsnorm_reference(x, w, 1e-6), (x, w), g),
                                    torch.float32)
    assert_kernels_saw_contiguous_memory(recorders)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_swiglu_in_every_dtype_matches_a_float64_reference(dtype):
    gen = torch.Generator(device=DEVICE).manual_seed(5)
    a, b, g = (torch.randn(3, 700, generator=gen, device=DEVICE).mul(3).to(dtype) for _ in range(3))
    assert_close_to_float64(grads(sw.SwiGLU.apply, (a.t(), b.t()), g.t()),
                            reference_grads(sw.swiglu_reference, (a.t(), b.t()), g.t()), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rmsnorm_in_every_dtype_accumulates_in_float32(dtype):
    gen = torch.Generator(device=DEVICE).manual_seed(6)
    x = (torch.randn(6, 2048, generator=gen, device=DEVICE) + 4).to(dtype)  # a bfloat16 sum of squares would be off
    w, g = torch.randn(2048, generator=gen, device=DEVICE).to(dtype), torch.randn(6, 2048, generator=gen, device=DEVICE).to(dtype)
    got = grads(lambda x, w: rn.RMSNorm.apply(x, w, 1e-6), (x, w), g)
    want = reference_grads(lambda x, w: rn.rmsnorm_reference(x, w, 1e-6), (x, w), g)
    tol = HALF_TOL[dtype]
    assert_close_to_float64(got[:2], want[:2], dtype)
    # grad_weight sums 6 rows of rounded products: compare relative to its size
    torch.testing.assert_close(got[2].double(), want[2], atol=tol * want[2].abs().max().item(), rtol=tol)


def test_empty_inputs_give_empty_outputs_without_a_launch():
    y = sw.SwiGLU.apply(torch.zeros(0, 3, device=DEVICE, requires_grad=True), torch.zeros(0, 3, device=DEVICE))
    assert y.shape == (0, 3)
    x, w = torch.zeros(0, 4, device=DEVICE, requires_grad=True), torch.ones(4, device=DEVICE, requires_grad=True)
    rn.RMSNorm.apply(x, w, 1e-6).sum().backward()
    assert x.grad.shape == (0, 4) and torch.equal(w.grad, torch.zeros(4, device=DEVICE))


def test_rmsnorm_backward_runs_one_program_per_multiprocessor(monkeypatch):
    assert rn.bands(1000, torch.device("cpu")) == rn.CPU_BANDS and rn.bands(3, torch.device("cpu")) == 3
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: type("P", (), {"multi_processor_count": 132}))
    assert rn.bands(4096, torch.device("cuda")) == 132 and rn.bands(40, torch.device("cuda")) == 40
    assert [rn.num_warps(b) for b in (128, 4096, 8192, 65536)] == [4, 8, 16, 32]


def test_rmsnorm_refuses_a_mismatched_weight_in_one_sentence():
    with pytest.raises(ValueError, match="weight of shape"):
        rn.RMSNorm.apply(torch.zeros(2, 4, device=DEVICE), torch.zeros(3, device=DEVICE), 1e-6)


def test_rmsnorm_backward_handles_short_and_empty_bands():
    """9 rows over 8 bands: 2 rows a band, so band 4 holds one row and bands 5 to 7 none (the loop's end)."""
    gen = torch.Generator(device=DEVICE).manual_seed(9)
    x, w = torch.randn(9, 5, generator=gen, device=DEVICE, dtype=torch.float64), torch.randn(5, generator=gen, device=DEVICE,
                                                                                            dtype=torch.float64)
    assert rn.bands(9, torch.device("cpu")) == 8
    assert_matches(lambda x, w: rn.RMSNorm.apply(x, w, 1e-6), lambda x, w: rn.rmsnorm_reference(x, w, 1e-6), (x, w),
                   torch.randn(9, 5, generator=gen, device=DEVICE, dtype=torch.float64), torch.float64)


def _refuse_like_torch_2_11(kernel):
    raise RuntimeError("wrap_triton only works on functions annotated with triton.jit or triton.autotune")


@pytest.mark.skipif(torch.cuda.is_available(), reason="compiled kernels are JITFunctions: every release wraps them")
def test_a_triton_op_launches_an_interpreted_kernel_where_wrap_triton_refuses_it(monkeypatch):
    """torch 2.11's wrap_triton refuses an InterpretedFunction; the launcher then launches the kernel itself."""
    from course_utils.kernels.wrapping import launcher, wrap_triton_gives

    monkeypatch.setattr(torch.library, "wrap_triton", _refuse_like_torch_2_11)
    assert wrap_triton_gives(sw.swiglu_forward_kernel) == "refuses it"
    assert launcher(sw.swiglu_forward_kernel) is sw.swiglu_forward_kernel

    @torch.library.triton_op("test_kernels::swiglu_refused", mutates_args=())
    def swiglu_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = torch.empty(a.shape, dtype=a.dtype, device=a.device)
        launcher(sw.swiglu_forward_kernel)[(1,)](a, b, y, a.numel(), BLOCK=64)
        return y

    gen = torch.Generator(device=DEVICE).manual_seed(3)
    a, b = (torch.randn(50, generator=gen, device=DEVICE) for _ in range(2))
    torch.testing.assert_close(swiglu_op(a, b), sw.swiglu_reference(a, b), atol=1e-6, rtol=1e-6)


def test_the_launcher_passes_on_any_other_refusal():
    from course_utils.kernels.wrapping import launcher, wrap_triton_gives

    with pytest.raises(RuntimeError, match=r"triton\.jit"):
        launcher(sw.swiglu_reference)  # a Python function, not a kernel: refused on every release
    assert wrap_triton_gives(sw.swiglu_reference) == "refuses it"
