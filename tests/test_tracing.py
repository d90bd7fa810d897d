"""course_utils.tracing: short error summaries and the graphs recorded from torch.compile."""
import pytest
import torch

from course_utils import tracing
from course_utils.errors import CourseError


def test_error_summary_keeps_type_and_first_lines():
    def boom():
        raise RuntimeError("first line\n\nsecond line\nthird line (scroll up for stack trace)")

    assert tracing.error_summary(boom) == "RuntimeError: first line"
    assert tracing.error_summary(boom, lines=2) == "RuntimeError: first line\nsecond line"
    assert tracing.error_summary(lambda: 1) == "no error"


def test_error_summary_refuses_a_non_callable():
    with pytest.raises(CourseError, match="lambda"):
        tracing.error_summary(3)


def test_recorder_keeps_dynamo_forward_and_backward_graphs():
    torch._dynamo.reset()
    rec = tracing.GraphRecorder()
    with pytest.raises(CourseError, match="call the compiled function"):
        rec.ops("dynamo")
    f = torch.compile(lambda x: (x.sin() * 2).sum(), backend=rec, fullgraph=True)
    x = torch.tensor([0.5, 1.0], requires_grad=True)
    f(x).backward()
    assert torch.allclose(x.grad, 2 * torch.cos(x.detach()))
    assert "sin" in rec.ops("dynamo")
    assert "aten.sin" in rec.ops("forward")
    assert "aten.cos" in rec.ops("backward")
    with pytest.raises(CourseError, match="unknown graph"):
        rec.ops("inductor")
