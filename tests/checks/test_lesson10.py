"""Lesson 10's exercise: the laziest answers fail with their diagnosis, unusual correct answers pass.

Every answer here runs its kernels in Triton's interpreter (conftest sets TRITON_INTERPRET=1 without a GPU).
"""
import pytest

from answers import mutate
from check_helpers import assert_diagnosed, ns_from
from course_utils import checks

PRELUDE = '''
import triton
import triton.language as tl

@triton.jit
def swiglu_packed_forward_kernel(x_ptr, y_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    valid = cols < d
    a = tl.load(x_ptr + row * 2 * d + cols, mask=valid)
    b = tl.load(x_ptr + row * 2 * d + d + cols, mask=valid)
    tl.store(y_ptr + row * d + cols, a * tl.sigmoid(a) * b, mask=valid)

BLOCK = 32
'''

KERNEL = '''
@triton.jit
def swiglu_packed_backward_kernel(x_ptr, g_ptr, dx_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < d
    a = tl.load(x_ptr + row * 2 * d + cols, mask=m)
    b = tl.load(x_ptr + row * 2 * d + d + cols, mask=m)
    g = tl.load(g_ptr + row * d + cols, mask=m)
    s = tl.sigmoid(a)
    tl.store(dx_ptr + row * 2 * d + cols, GRAD_A, mask=m)
    tl.store(dx_ptr + row * 2 * d + d + cols, GRAD_B, mask=m)
'''

FUNCTION = '''
class TritonSwiGLU(Function):
    @staticmethod
    def forward(ctx, x):
        FORWARD
    @staticmethod
    def backward(ctx, grad_y):
        BACKWARD
'''
GOOD_FORWARD = """x = x.contiguous()
        d = x.shape[-1] // 2
        y = x.new_empty(x.shape[:-1] + (d,))
        swiglu_packed_forward_kernel[(y.numel() // d, triton.cdiv(d, BLOCK))](x, y, d, BLOCK=BLOCK)
        ctx.save_for_backward(x)
        return y"""
GOOD_BACKWARD = """(x,) = ctx.saved_tensors
        d = x.shape[-1] // 2
        g = GRAD_Y
        dx = torch.empty_like(x)
        swiglu_packed_backward_kernel[(g.numel() // d, triton.cdiv(d, BLOCK))](x, g, dx, d, BLOCK=BLOCK)
        return dx"""
GRAD_A, GRAD_B = "g * b * s * (1 + a * (1 - s))", "g * a * s"


def answer(grad_a=GRAD_A, grad_b=GRAD_B, forward=GOOD_FORWARD, backward=GOOD_BACKWARD,
           grad_y="grad_y.contiguous()", kernel=KERNEL) -> str:
    kernel = kernel.replace("GRAD_A", grad_a).replace("GRAD_B", grad_b)
    body = FUNCTION.replace("FORWARD", forward).replace("BACKWARD", backward).replace("GRAD_Y", grad_y)
    return PRELUDE + kernel + body


TORCH_FORMULA = """(x,) = ctx.saved_tensors
        a, b = x.chunk(2, -1)
        s = torch.sigmoid(a)
        return torch.cat([grad_y * b * s * (1 + a * (1 - s)), grad_y * a * s], -1)"""
# the laziest: backward in torch, no kernel at all
TORCH_BACKWARD = answer(backward=TORCH_FORMULA)
# a kernel launched for show into a scratch buffer, the gradient from torch
SHOW_LAUNCH = answer(backward=mutate(
    GOOD_BACKWARD, ("return dx", "return " + TORCH_FORMULA.split("return ")[1]),
    ("(x,) = ctx.saved_tensors", "(x,) = ctx.saved_tensors\n        a, b = x.chunk(2, -1)\n        s = torch.sigmoid(a)")))
# the gradient in NumPy (invisible to torch's dispatcher); the real kernel runs into a buffer nobody returns
NUMPY_BACKWARD = answer(backward=mutate(GOOD_BACKWARD, ("return dx", """import numpy as np
        xn, gn = x.detach().cpu().numpy(), g.detach().cpu().numpy()
        a, b = xn[..., :d], xn[..., d:]
        s = 1 / (1 + np.exp(-a))
        return torch.from_numpy(np.concatenate([gn * b * s * (1 + a * (1 - s)), gn * a * s], -1))""")))
# the gradient in NumPy, then a Triton kernel that only copies it into the returned buffer (issue 29)
MEMCPY_KERNEL = PRELUDE + KERNEL.replace("GRAD_A", "a").replace("GRAD_B", "b") + '''
@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    k = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + k, tl.load(src_ptr + k, mask=k < n), mask=k < n)
''' + FUNCTION.replace("FORWARD", GOOD_FORWARD).replace("BACKWARD", """(x,) = ctx.saved_tensors
        import numpy as np
        d = x.shape[-1] // 2
        xn, gn = x.detach().cpu().numpy(), grad_y.detach().cpu().numpy()
        a, b = xn[..., :d], xn[..., d:]
        s = 1 / (1 + np.exp(-a))
        done = torch.from_numpy(np.ascontiguousarray(np.concatenate([gn * b * s * (1 + a * (1 - s)), gn * a * s], -1)))
        dx = torch.empty_like(x)
        copy_kernel[(triton.cdiv(dx.numel(), 128),)](done.to(x.device), dx, dx.numel(), BLOCK=128)
        return dx""")
# the kernel's row offset ignores the packed layout's stride: rows > 0 read and write other rows' memory
WRONG_ROWS = answer(kernel=mutate(KERNEL, ("row = tl.program_id(0).to(tl.int64)",
                                           "row = tl.program_id(0).to(tl.int64)\n    row = row - row % 2")))
TORCH_FORWARD = answer(forward="""ctx.save_for_backward(x)
        a, b = x.chunk(2, -1)
        return torch.nn.functional.silu(a) * b""", backward=mutate(GOOD_BACKWARD, (
    "(x,) = ctx.saved_tensors", "(x,) = ctx.saved_tensors\n        x = x.contiguous()")))

LOADS = ("a = tl.load(x_ptr + row * 2 * d + cols, mask=m)", "b = tl.load(x_ptr + row * 2 * d + d + cols, mask=m)")
UPCAST_ALL = mutate(KERNEL, (LOADS[0], LOADS[0] + ".to(tl.float32)"), (LOADS[1], LOADS[1] + ".to(tl.float32)"))
# correct: float32 math for float32 (a no-op) and narrower inputs, float64 kept: a constexpr flag picks
UPCAST_FLAG = answer(kernel=mutate(KERNEL, ("BLOCK: tl.constexpr):", "BLOCK: tl.constexpr, UP: tl.constexpr):"),
                                    ("    s = tl.sigmoid(a)", "    if UP:\n        a, b, g = a.to(tl.float32), b.to(tl.float32), "
                                     "g.to(tl.float32)\n    s = tl.sigmoid(a)")),
                     backward=mutate(GOOD_BACKWARD, ("d, BLOCK=BLOCK)", "d, BLOCK=BLOCK, UP=x.dtype != torch.float64)")))

BUGS = {
    "triton_no_kernel": ("triton_swiglu", TORCH_BACKWARD, ["backward launched no Triton kernel"]),
    "triton_torch_math": ("triton_swiglu", SHOW_LAUNCH, ["backward computes with torch", "sigmoid",
                                                          "swiglu_packed_backward_kernel"]),
    "triton_not_from_kernel": ("triton_swiglu", NUMPY_BACKWARD, ["does not come from its kernel", "NumPy"]),
    "triton_expanded_grad": ("triton_swiglu", answer(grad_y="grad_y"), ["expanded view", "raw memory"]),
    "triton_wrong_rows": ("triton_swiglu", WRONG_ROWS, ["grad_x is right in", "rows 1, 3", "row's offset"]),
    "triton_halves_swapped": ("triton_swiglu", answer(grad_a=GRAD_B, grad_b=GRAD_A), ["the other half", "the other way round"]),
    # review1 #10: "compute in float32" read literally: every load upcast, float64 included
    "triton_lost_precision": ("triton_swiglu", answer(kernel=UPCAST_ALL), ["only to float32 precision", "float64 input",
                                                                           "right for half types and float32"]),
}


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    assert_diagnosed(code, *BUGS[code])


def test_a_forward_in_torch_fails_even_with_a_right_backward_kernel():
    result = assert_diagnosed("triton_no_kernel", "triton_swiglu", TORCH_FORWARD, ["forward launched no Triton kernel",
                                                                                  "swiglu_packed_forward_kernel"])
    assert result.points == 1  # the forward values are right: only the kernel stage and what follows fail


def test_laziest_answers_earn_at_most_the_forward_point():
    # the fourth, MEMCPY_KERNEL (a NumPy gradient copied by a kernel), is checked once, by the next test: 1 point too
    for source in (TORCH_BACKWARD, SHOW_LAUNCH, NUMPY_BACKWARD):
        assert checks.run_check("triton_swiglu", ns_from(source)).points == 1


def test_a_numpy_gradient_copied_by_a_kernel_is_not_from_the_kernel():
    result = assert_diagnosed("triton_not_from_kernel", "triton_swiglu", MEMCPY_KERNEL, ["does not come from its kernel"])
    assert result.points == 1


def test_wrong_formulas_in_the_kernel_are_named():
    forgot = assert_diagnosed("forgot_grad_output", "triton_swiglu", answer(grad_a="b * s * (1 + a * (1 - s))",
                                                                            grad_b="a * s"), ["grad_output"])
    assert forgot.points == 2  # forward and the kernel stage
    assert_diagnosed("gradient_wrong", "triton_swiglu", answer(grad_a="g * b * s"), ["first (gate, a) half"])
    # b read from the wrong place: row * d instead of row * 2 * d; row 0 is right, the others are not
    assert_diagnosed("triton_wrong_rows", "triton_swiglu", answer(
        kernel=mutate(KERNEL, ("b = tl.load(x_ptr + row * 2 * d + d + cols", "b = tl.load(x_ptr + row * d + d + cols"))),
        ["rows 1, 2, 3", "offset"])


def test_rows_never_written_are_named_not_blamed_on_the_derivative():
    # half the rows are left as torch.empty made them: garbage or NaN there, right values elsewhere
    skip_odd = answer(kernel=mutate(KERNEL, ("m = cols < d", "m = (cols < d) & (cols * 0 + row % 2 == 0)")))
    result = assert_diagnosed("triton_wrong_rows", "triton_swiglu", mutate(skip_odd, ("torch.empty_like(x)",
                                                                                         "torch.full_like(x, float('nan'))")),
                              ["rows 1, 3", "NaN, inf or huge values"])
    assert "re-derive" not in result.report()
    skip_forward = answer(forward=mutate(GOOD_FORWARD, ("x.new_empty(", "x.new_full("), (
        "(d,))", "(d,), 1e33)"), ("(y.numel() // d,", "(y.numel() // d - 1,")))
    assert_diagnosed("triton_wrong_rows", "triton_swiglu", skip_forward, ["forward's output is right in", "huge values"])


# --------------------------------------------------------------------------- unusual but correct
ONE_PROGRAM_PER_ROW = PRELUDE + '''
@triton.jit
def row_kernel(x_ptr, g_ptr, dx_ptr, d, WIDTH: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * 2 * d
    j = tl.arange(0, WIDTH)
    keep = j < d
    a = tl.load(x_ptr + base + j, mask=keep, other=0.0)
    b = tl.load(x_ptr + base + d + j, mask=keep, other=0.0)
    g = tl.load(g_ptr + tl.program_id(0).to(tl.int64) * d + j, mask=keep, other=0.0)
    e = tl.exp(-a)
    s = 1 / (1 + e)
    tl.store(dx_ptr + base + j, g * b * (s + a * s * (1 - s)), mask=keep)
    tl.store(dx_ptr + base + d + j, g * a * s, mask=keep)

class TritonSwiGLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)  # the input as given; made contiguous in each pass
        xc = x.contiguous()
        d = xc.shape[-1] // 2
        y = torch.empty(xc.shape[:-1] + (d,), dtype=xc.dtype, device=xc.device)
        swiglu_packed_forward_kernel[(y.numel() // d, triton.cdiv(d, 16))](xc, y, d, BLOCK=16)
        return y
    @staticmethod
    def backward(ctx, grad_y):
        (x,) = ctx.saved_tensors
        xc = x.contiguous()
        d = xc.shape[-1] // 2
        rows = xc.numel() // (2 * d)
        dx = torch.zeros(rows, 2 * d, dtype=xc.dtype, device=xc.device)
        row_kernel[(rows,)](xc, grad_y.contiguous(), dx, d, WIDTH=triton.next_power_of_2(d))
        return dx.view(x.shape)
'''

TWO_BUFFERS = PRELUDE + '''
@triton.jit
def halves_kernel(x_ptr, g_ptr, da_ptr, db_ptr, n, d, BLOCK: tl.constexpr):
    k = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # flat over rows * d outputs
    inside = k < n
    row = k // d
    col = k % d
    a = tl.load(x_ptr + row * 2 * d + col, mask=inside)
    b = tl.load(x_ptr + row * 2 * d + d + col, mask=inside)
    g = tl.load(g_ptr + k, mask=inside)
    silu = a * tl.sigmoid(a)
    tl.store(da_ptr + k, g * b * (tl.sigmoid(a) + silu * (1 - tl.sigmoid(a))), mask=inside)
    tl.store(db_ptr + k, g * silu, mask=inside)

class TritonSwiGLU(Function):
    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        d = x.shape[-1] // 2
        y = x.new_empty(x.shape[:-1] + (d,))
        swiglu_packed_forward_kernel[(y.numel() // d, triton.cdiv(d, BLOCK))](x, y, d, BLOCK=BLOCK)
        ctx.save_for_backward(x)
        return y
    @staticmethod
    def backward(ctx, grad_y):
        (x,) = ctx.saved_tensors
        g = grad_y.contiguous()
        da, db = torch.empty_like(g), torch.empty_like(g)
        halves_kernel[(triton.cdiv(g.numel(), 128),)](x, g, da, db, g.numel(), g.shape[-1], BLOCK=128)
        return torch.cat([da, db], dim=-1)
'''


@pytest.mark.parametrize("source", [ONE_PROGRAM_PER_ROW, TWO_BUFFERS, UPCAST_FLAG],
                         ids=["one-program-per-row", "two-buffers", "upcast-below-float64"])
def test_unusual_correct_answers_pass(source):
    result = checks.run_check("triton_swiglu", ns_from(source))
    assert result.status == "passed", result.report()


def test_the_stub_is_not_attempted():
    result = checks.run_check("triton_swiglu", ns_from(answer(backward='raise NotImplementedError("not yet")')))
    assert result.status == "failed" and result.points == 1 and result.mistakes == ["not_attempted"], result.report()


def test_a_kernel_body_left_as_the_stub_is_not_attempted():
    stub = KERNEL.split("    row =")[0] + '    raise NotImplementedError("Exercise not attempted yet")\n'
    result = checks.run_check("triton_swiglu", ns_from(answer(kernel=stub)))
    assert result.mistakes == ["not_attempted"] and "kernel" in result.report(), result.report()


def test_the_check_hands_the_kernels_tensors_on_the_device_they_run_on(monkeypatch):
    """Where Triton compiles (a GPU), a CPU tensor cannot reach a kernel: every tensor the student's Function
    receives must be on probes.kernel_device. Simulated here with the meta device, which no kernel reads."""
    from course_utils.probes import lesson10 as probes

    devices = []
    source = PRELUDE + '''
class TritonSwiGLU(Function):
    @staticmethod
    def forward(ctx, x):
        DEVICES.append(x.device.type)
        ctx.save_for_backward(x)
        return x[..., : x.shape[-1] // 2] * 1.0
    @staticmethod
    def backward(ctx, grad_y):
        DEVICES.append(grad_y.device.type)
        (x,) = ctx.saved_tensors
        return torch.empty_like(x)
'''
    ns = ns_from(source)
    ns["DEVICES"] = devices
    monkeypatch.setattr(probes, "kernel_device", lambda ns: __import__("torch").device("meta"))
    checks.run_check("triton_swiglu", ns)
    assert devices and set(devices) == {"meta"}, devices


def test_the_kernel_device_is_the_gpu_only_where_triton_compiles(monkeypatch):
    import torch

    from course_utils.probes import lesson10 as probes

    ns = ns_from(answer())
    assert probes.kernel_device(ns).type == "cpu"  # interpreted kernels read CPU memory
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert probes.kernel_device(ns).type == "cpu"  # the student's kernels are interpreted ones
    monkeypatch.setattr(probes, "_interpreted", lambda ns: False)
    assert probes.kernel_device(ns).type == "cuda"
