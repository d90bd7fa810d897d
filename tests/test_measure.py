"""course_utils.measure and the benchmark: exact peak memory, ratio tables (no timers asserted)."""
import pytest
import torch
import torch.nn.functional as F

from benchmarks import linear as bench
from course_utils import measure
from course_utils.errors import CourseError


def test_peak_memory_counts_an_intermediate_exactly():
    x = torch.randn(100)  # created outside: not counted

    def one_big():
        y = x.repeat(1000)  # 100_000 floats
        return y.sum()

    assert measure.peak_memory(one_big) == 100_000 * 4 + 4


def test_peak_memory_sees_frees_and_backward():
    x = torch.randn(256, requires_grad=True)

    def chain():
        x.grad = None
        a = x * 2          # 1 KiB
        del a
        b = x * 3          # 1 KiB again: peak does not double because a was freed
        b.sum().backward()  # grad of x: 1 KiB

    peak = measure.peak_memory(chain)
    assert 2 * 1024 <= peak < 4 * 1024


def test_peak_memory_is_deterministic_and_orders_linear_variants():
    rows = measure.compare_costs(
        {k: bench.step(f, 32, 64, 48) for k, f in
         {"F.linear": F.linear, "mm": bench.MMLinear.apply, "broadcast": bench.BroadcastLinear.apply}.items()},
        "F.linear", timing=False)
    by = {r["variant"]: r for r in rows}
    assert by["mm"]["peak_bytes"] == by["F.linear"]["peak_bytes"]
    assert by["broadcast"]["peak_bytes"] >= 32 * 64 * 48 * 4  # the (N, out, in) intermediate
    again = measure.compare_costs({"F.linear": bench.step(F.linear, 32, 64, 48)}, "F.linear", timing=False)
    assert again[0]["peak_bytes"] == by["F.linear"]["peak_bytes"]
    table = measure.format_costs(rows, timing=False)
    assert table.splitlines()[2].startswith("| F.linear |") and "1.00x" in table


def test_benchmark_functions_match_native_gradients():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.randn(4, 3, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, generator=g, requires_grad=True)
    want = torch.autograd.grad(F.linear(x, w, b).sum(), (x, w, b))
    for fn in (bench.MMLinear.apply, bench.BroadcastLinear.apply):
        got = torch.autograd.grad(fn(x, w, b).sum(), (x, w, b))
        assert all(torch.allclose(a, c) for a, c in zip(got, want))
        assert torch.autograd.gradcheck(fn, (x, w, b))


def test_timing_reports_ratios_without_asserting_speed():
    rows = measure.compare_costs({"a": lambda: torch.ones(10).sum(), "b": lambda: torch.ones(10).sum()}, "a",
                                 repeat=2)
    assert rows[0]["time_ratio"] == 1.0 and rows[1]["time_ratio"] > 0
    assert "ms" in measure.format_costs(rows)


def test_a_round_is_sized_at_its_own_length_not_by_a_longer_autorange():
    """Rounds of at least ``min_time``, sized by calls adding up to a few of them: sizing them with
    ``Timer.autorange`` (0.2 s of calls, scaled down to 0.05 s) cost up to 0.5 s per variant in every notebook
    that times something, several times the rounds themselves (a 10 ms call: 38 calls to size rounds of 5)."""
    import time

    calls = {"a": 0, "b": 0}

    def sleeper(name):
        def call():
            calls[name] += 1
            time.sleep(0.01)
        return call

    times = measure.time_interleaved({"a": sleeper("a"), "b": sleeper("b")}, repeat=3, min_time=0.05)
    assert set(times) == {"a", "b"} and min(times.values()) >= 0.01
    # per variant: the warm-up, sizing (1, 2, 5 calls: at most 8 of 10 ms before 5 take 0.05 s) and 3 rounds of
    # at most 5 calls (fewer where a loaded machine sleeps longer)
    assert calls["a"] <= 1 + 8 + 3 * 5 and calls["b"] <= 1 + 8 + 3 * 5, calls
    calls["a"] = 0
    assert measure.time_per_call(sleeper("a"), repeat=3, min_time=0.05) >= 0.01
    assert calls["a"] <= 1 + 8 + 3 * 5, calls


def test_bad_arguments():
    with pytest.raises(CourseError, match="function with no arguments"):
        measure.peak_memory(3)
    with pytest.raises(CourseError, match="is not one of the variants"):
        measure.compare_costs({"a": lambda: None}, "b")


def test_saved_bytes_counts_unique_storages():
    x = torch.randn(100, requires_grad=True)
    assert measure.saved_bytes(x.exp) == 400                         # exp saves its result
    assert measure.saved_bytes(lambda: x * x) == 400                 # mul saves x twice: one storage
    assert measure.saved_bytes(lambda: x * x, new_only=True) == 0    # ... which the caller holds anyway
    assert measure.saved_bytes(lambda: x.detach() * 2) == 0          # nothing requires grad
    assert measure.saved_bytes(lambda: x[:10] * x[10:20]) == 400     # two views of one storage: the whole storage
    with pytest.raises(CourseError, match="function with no arguments"):
        measure.saved_bytes(None)


def test_saved_tensors_tells_shared_and_caller_held_storages_apart():
    x = torch.randn(100, requires_grad=True)
    saved = measure.saved_tensors(lambda: x * torch.sigmoid(x))
    assert len(saved) == 3  # sigmoid saves its result; mul saves both factors
    by_storage = {}
    for s in saved:
        by_storage.setdefault(s.storage, []).append(s)
    assert sorted(len(v) for v in by_storage.values()) == [1, 2]      # sigmoid(x) saved twice, one storage
    twice = next(v for v in by_storage.values() if len(v) == 2)[0]
    once = next(v for v in by_storage.values() if len(v) == 1)[0]
    assert twice.new and not once.new and twice.nbytes == once.nbytes == 400
    assert "held by the caller" in str(once) and "float32[100]" in str(twice)


class _RecomputingSiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return g * s * (1 + x * (1 - s))


def test_pass_memory_separates_held_between_passes_from_peak():
    n = 1000
    x = torch.randn(n, requires_grad=True)

    def run(fn):
        def forward():
            x.grad = None
            return fn(x)
        return measure.pass_memory(forward)

    composite = run(lambda t: t * torch.sigmoid(t))
    fused = run(_RecomputingSiLU.apply)
    native = run(F.silu)
    # held between the passes: output + sigmoid(x) for the composite, the output alone otherwise
    assert (composite.held, composite.output, composite.graph) == (8 * n, 4 * n, 4 * n)
    assert (fused.held, fused.output, fused.graph) == (4 * n, 4 * n, 0)
    assert native.held == 4 * n
    # the peak over forward + backward is not lower for the Function: backward recomputes sigmoid
    assert fused.peak == composite.peak > native.peak >= native.held + 4 * n  # + x.grad
    assert run(_RecomputingSiLU.apply) == fused  # deterministic


def test_pass_memory_takes_a_custom_backward_and_refuses_no_graph():
    x = torch.randn(10, requires_grad=True)
    calls = []
    measure.pass_memory(lambda: x * 2, lambda out: calls.append(out.shape))
    assert calls == [torch.Size([10])]
    with pytest.raises(CourseError, match="does not require grad"):
        measure.pass_memory(lambda: x.detach() * 2)
    with pytest.raises(CourseError, match="function with no arguments"):
        measure.pass_memory("x")


def test_silu_benchmark_variants_agree_and_the_low_memory_one_holds_half():
    from benchmarks import silu

    x = torch.randn(64, dtype=torch.float64, generator=torch.Generator().manual_seed(1), requires_grad=True)
    want = torch.autograd.grad(F.silu(x).sum(), x)[0]
    for name, fn in silu.VARIANTS.items():
        got = torch.autograd.grad(fn(x).sum(), x)[0]
        assert torch.allclose(fn(x), F.silu(x)) and torch.allclose(got, want), name
    assert torch.autograd.gradcheck(silu.SiLULowMemory.apply, (x[:8].detach().requires_grad_(),))
    rows = {r["variant"]: r for r in silu.measure_size(1000, timing=False)}
    assert rows["low-memory Function"]["held"] == 0.5 * rows["composite x * sigmoid(x)"]["held"] == 4000
    assert rows["low-memory Function"]["peak"] == rows["composite x * sigmoid(x)"]["peak"]
    assert rows["F.silu"]["held_ratio"] == 1.0 and "| F.silu |" in silu.format_rows(list(rows.values()), timing=False)


def test_kernels_benchmark_measures_the_extension_and_never_invents_a_gpu_figure():
    from benchmarks import kernels

    text = "\n".join(kernels.cpu_section([1000]))
    row = next(line for line in text.splitlines() if line.startswith("| C++ extension"))
    assert row.split("|")[3].strip() == "1.00x"  # holds between the passes what F.silu holds: x, nothing new
    assert "| composite x * sigmoid(x) | 0.01 MiB | 2.00x |" in text
    if not torch.cuda.is_available():
        assert kernels.gpu_section()[-3:] == ["SwiGLU: not measured (no GPU).", "", "RMSNorm: not measured (no GPU)."]


def test_fused_ce_benchmark_has_bfloat16_and_evaluation_rows_measured_against_the_composite():
    """issue 50: bfloat16 training and evaluation (forward under no_grad) rows, each ratio to the composite's."""
    from benchmarks import fused_ce as bench

    for dtype, evaluation in ((torch.bfloat16, False), (torch.float32, True)):
        rows = bench.measure_size(128, 16, 2048, repeat=1, dtype=dtype, evaluation=evaluation)
        assert rows[0]["variant"] == bench.REFERENCE and rows[0]["peak_ratio"] == 1.0 and len(rows) == 3
        assert all(r["peak_ratio"] < 0.5 for r in rows[1:])
        if evaluation:
            assert all(r["held"] <= 16 for r in rows)  # the loss, nothing kept for a backward
        table = bench.format_rows(rows, evaluation)
        assert ("peak fwd |" in table) == evaluation and table.count("\n") == 4
    verdict = bench._verdict(rows, None, 1.0, "float32, evaluation")
    assert verdict.startswith("Goal (wall-clock time <= 1.0x the composite's, float32, evaluation)")


def test_memory_traffic_counts_each_op_and_skips_views():
    a = torch.randn(100, generator=torch.Generator().manual_seed(5))
    ops = measure.memory_traffic(lambda: (a.view(10, 10).t() * 2).sum())  # noqa: PLW0108 (the mul must run inside the measurement)
    assert [(o.op, o.read, o.written) for o in ops] == [("mul", 400, 400), ("sum", 400, 4)]


def test_implicit_benchmark_is_flat_and_the_loop_grows():
    from benchmarks import implicit

    x = torch.linspace(0.5, 2.0, 7, dtype=torch.float64, requires_grad=True)
    assert torch.allclose(implicit.NewtonSqrt.apply(x, 8), torch.sqrt(x))
    assert torch.autograd.gradcheck(lambda t: implicit.NewtonSqrt.apply(t, 8), (x,))
    rows = implicit.measure_iterations(n=100, iterations=[1, 4, 8])
    assert len({r["implicit"].held for r in rows}) == 1
    held = [r["loop"].held for r in rows]
    assert held[0] < held[1] < held[2] and held[2] - held[1] == 4 * 400  # one tensor per iteration


def test_benchmark_sections_are_replaced_in_place():
    from benchmarks.__main__ import markers, update

    text = update("# results\n", "a", "## A\n1")
    text = update(text, "b", "## B\n2")
    text = update(text, "a", "## A\n3")
    assert text.count(markers("a")[0]) == 1 and "## A\n3" in text and "## A\n1" not in text
    assert text.index("## A") < text.index("## B\n2")


def test_views_and_in_place_results_are_not_new_memory():
    x = torch.randn(1000)
    assert measure.peak_memory(lambda: x.view(10, 100).t()) == 0
    assert measure.peak_memory(lambda: x.add_(1)) == 0
    assert measure.peak_memory(lambda: x.detach() + 1) == 4000
    xg = torch.randn(1000, requires_grad=True)
    mem = measure.pass_memory(lambda: xg.view(10, 100))
    assert (mem.held, mem.output) == (0, 0) and mem.peak >= 4000  # x.grad is new


def test_an_out_resize_and_resize_are_allocations():
    """issue 40 #6: an op that grows an out= tensor (or resize_) allocates, and measure counts it until it is freed."""
    a, b = torch.ones(64, 32), torch.ones(32, 128)
    product = 64 * 128 * 4
    assert measure.peak_memory(lambda: torch.mm(a, b, out=torch.empty(0))) == product == measure.peak_memory(lambda: a @ b)
    assert measure.peak_memory(lambda: torch.empty(0).resize_(1000)) == 4000
    held = torch.empty(0)
    assert measure.peak_memory(lambda: torch.mm(a, b, out=held)) == product  # the caller's tensor, grown inside
    assert measure.peak_memory(lambda: torch.mm(a, b, out=held)) == 0  # already large enough: nothing new

    def grow_then_free():
        x = torch.empty(0)
        torch.mm(a, b, out=x)
        del x
        return torch.ones(10)
    assert measure.pass_memory(grow_then_free, backward=lambda out: None).held == 40
