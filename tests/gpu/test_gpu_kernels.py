"""Lesson 10's kernels on a GPU, compiled: every kernel in every dtype and layout, opcheck with
non-contiguous inputs, torch.compile, and large sizes. Skipped without CUDA.
"""
import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (Triton compiled)")

TOL = {torch.bfloat16: 3e-2, torch.float16: 4e-3, torch.float32: 2e-5, torch.float64: 1e-12}
DTYPES = list(TOL)
SHAPES = [(1030,), (5, 37), (3, 4, 21), (2, 3, 2, 9), (300, 200), (64, 4096)]


def layouts(shape, gen, dtype):
    base = torch.randn(shape, generator=gen, device="cuda", dtype=torch.float64).to(dtype)
    flipped = base.transpose(0, -1).contiguous().transpose(0, -1)
    wide = torch.zeros(*shape[:-1], 2 * shape[-1], device="cuda", dtype=dtype)
    wide[..., 1::2] = base
    return {"contiguous": base, "transposed": flipped, "sliced": wide[..., 1::2],
            "expanded": base.reshape(-1)[: shape[-1]].expand(shape)}


def run(fn, inputs, g):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    return [out, *torch.autograd.grad(out, leaves, g)]


def reference(fn, inputs, g):
    return run(fn, [t.double() for t in inputs], g.double())


def assert_close(got, want, dtype, relative=False):
    for p, q in zip(got, want):
        assert p.dtype == dtype and p.device.type == "cuda" and p.is_contiguous()
        scale = q.abs().max().item() if relative else 1.0
        torch.testing.assert_close(p.double(), q, atol=TOL[dtype] * max(scale, 1.0), rtol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_swiglu_every_dtype_and_layout(shape, dtype):
    from course_utils.kernels import triton_swiglu as sw

    gen = torch.Generator(device="cuda").manual_seed(len(shape))
    ones = torch.ones((), device="cuda", dtype=dtype).expand(shape)
    for a in layouts(shape, gen, dtype).values():
        for b in layouts(shape, gen, dtype).values():
            g = torch.randn(shape, generator=gen, device="cuda").to(dtype)
            for grad in (g, g.transpose(0, -1).contiguous().transpose(0, -1), ones):
                assert_close(run(sw.SwiGLU.apply, (a, b), grad), reference(sw.swiglu_reference, (a, b), grad), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_rmsnorm_every_dtype_and_layout(shape, dtype):
    from course_utils.kernels import triton_rmsnorm as rn

    gen = torch.Generator(device="cuda").manual_seed(10 + len(shape))
    w_wide = torch.randn(2 * shape[-1], generator=gen, device="cuda").to(dtype)
    for x in layouts(shape, gen, dtype).values():
        for w in (w_wide[: shape[-1]], w_wide[::2]):
            g = torch.randn(shape, generator=gen, device="cuda").to(dtype)
            got = run(lambda x, w: rn.RMSNorm.apply(x, w, 1e-6), (x, w), g)
            want = reference(lambda x, w: rn.rmsnorm_reference(x, w, 1e-6), (x, w), g)
            assert_close(got[:2], want[:2], dtype)
            assert_close(got[2:], want[2:], dtype, relative=True)  # grad_weight sums rows


def test_large_tensors_and_many_rows():
    from course_utils.kernels import triton_rmsnorm as rn
    from course_utils.kernels import triton_swiglu as sw

    gen = torch.Generator(device="cuda").manual_seed(3)
    a, b = (torch.randn(1 << 24, generator=gen, device="cuda") for _ in range(2))
    torch.testing.assert_close(sw.SwiGLU.apply(a, b), sw.swiglu_reference(a, b), atol=1e-5, rtol=1e-5)
    x = torch.randn(4096, 4096, generator=gen, device="cuda", requires_grad=True)
    w = torch.randn(4096, generator=gen, device="cuda", requires_grad=True)
    g = torch.randn(4096, 4096, generator=gen, device="cuda")
    got = torch.autograd.grad(rn.RMSNorm.apply(x, w, 1e-6), (x, w), g)
    want = torch.autograd.grad(torch.nn.functional.rms_norm(x.double(), (4096,), w.double(), 1e-6), (x, w), g.double())
    for p, q in zip(got, want):
        torch.testing.assert_close(p.double(), q.double(), atol=1e-3 * max(1.0, q.abs().max().item()), rtol=1e-4)
    assert rn.bands(4096, x.device) == torch.cuda.get_device_properties(x.device).multi_processor_count


def test_rmsnorm_backward_bands_that_are_short_or_empty():
    """One row more than the SMs: two rows a band, so about half the bands hold one row or none (the while loop's end)."""
    from course_utils.kernels import triton_rmsnorm as rn

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gen = torch.Generator(device="cuda").manual_seed(5)
    for rows in (sms + 1, 2 * sms - 1, 3):
        x = torch.randn(rows, 70, generator=gen, device="cuda", dtype=torch.float64)
        w = torch.randn(70, generator=gen, device="cuda", dtype=torch.float64)
        g = torch.randn(rows, 70, generator=gen, device="cuda", dtype=torch.float64)
        got = run(lambda x, w: rn.RMSNorm.apply(x, w, 1e-6), (x, w), g)
        want = reference(lambda x, w: rn.rmsnorm_reference(x, w, 1e-6), (x, w), g)
        assert_close(got, want, torch.float64, relative=True)


def test_the_launcher_wraps_a_compiled_kernel_and_the_triton_op_compiles():
    """On a GPU wrap_triton takes the JITFunction on every release: the launcher returns its wrapper."""
    import triton

    from course_utils.kernels import triton_swiglu as sw
    from course_utils.kernels.wrapping import launcher, wrap_triton_gives

    assert wrap_triton_gives(sw.swiglu_forward_kernel).startswith("wraps it in")
    assert launcher(sw.swiglu_forward_kernel) is not sw.swiglu_forward_kernel

    @torch.library.triton_op("gpu_tests::swiglu", mutates_args=())
    def swiglu_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = torch.empty(a.shape, dtype=a.dtype, device=a.device)
        launcher(sw.swiglu_forward_kernel)[(triton.cdiv(a.numel(), 256),)](a, b, y, a.numel(), BLOCK=256)
        return y

    gen = torch.Generator(device="cuda").manual_seed(6)
    a, b = (torch.randn(1000, generator=gen, device="cuda") for _ in range(2))
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: swiglu_op(a, b) + 1, fullgraph=True)
    torch.testing.assert_close(compiled(a, b), sw.swiglu_reference(a, b) + 1, atol=1e-5, rtol=1e-5)


def test_swiglu_compiles_fullgraph():
    from course_utils.kernels import triton_swiglu as sw

    gen = torch.Generator(device="cuda").manual_seed(4)
    a, b = (torch.randn(300, 200, generator=gen, device="cuda", requires_grad=True) for _ in range(2))
    torch._dynamo.reset()
    explained = torch._dynamo.explain(lambda a, b: sw.SwiGLU.apply(a, b).sin())(a, b)
    assert explained.graph_break_count == 0
    compiled = torch.compile(lambda a, b: sw.SwiGLU.apply(a.t(), b.t()), fullgraph=True)
    got = run(compiled, (a, b), torch.ones(200, 300, device="cuda"))
    want = run(lambda a, b: sw.swiglu_reference(a.t(), b.t()), (a, b), torch.ones(200, 300, device="cuda"))
    for p, q in zip(got, want):
        torch.testing.assert_close(p, q, atol=1e-5, rtol=1e-5)


def test_opcheck_with_non_contiguous_inputs():
    from course_utils.kernels import triton_swiglu as sw

    @torch.library.custom_op("course_gpu_test::swiglu", mutates_args=())
    def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return sw.swiglu_forward(a, b)

    @swiglu.register_fake
    def _(a, b):
        return a.new_empty(a.shape)

    @torch.library.custom_op("course_gpu_test::swiglu_backward", mutates_args=())
    def swiglu_backward(g: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return sw.swiglu_backward(g, a, b)

    @swiglu_backward.register_fake
    def _(g, a, b):
        return a.new_empty(a.shape), b.new_empty(b.shape)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    swiglu.register_autograd(lambda ctx, g: swiglu_backward(g, *ctx.saved_tensors), setup_context=setup_context)
    gen = torch.Generator(device="cuda").manual_seed(5)
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(30, 20, generator=gen, device="cuda").to(dtype).t().requires_grad_()
        b = torch.randn(40, 30, generator=gen, device="cuda").to(dtype)[::2].requires_grad_()
        torch.library.opcheck(swiglu, (a, b))
