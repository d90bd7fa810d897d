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


def test_bad_arguments():
    with pytest.raises(CourseError, match="function with no arguments"):
        measure.peak_memory(3)
    with pytest.raises(CourseError, match="is not one of the variants"):
        measure.compare_costs({"a": lambda: None}, "b")


def test_saved_bytes_counts_what_backward_keeps():
    x = torch.randn(100, requires_grad=True)
    assert measure.saved_bytes(lambda: x.exp()) == 400          # exp saves its result
    assert measure.saved_bytes(lambda: x * x) == 800            # mul saves both operands
    assert measure.saved_bytes(lambda: x.detach() * 2) == 0     # nothing requires grad
    with pytest.raises(CourseError, match="function with no arguments"):
        measure.saved_bytes(None)
