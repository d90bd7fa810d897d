"""course_utils.widgets without a browser: set control values, assert on the plotted data."""
import numpy as np
import pytest
import torch

from course_utils import widgets
from course_utils.errors import CourseError


class GoodSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def square(x):
    return x * x


def test_compare_gradients_data_for_a_correct_function():
    c = widgets.compare_gradients(widgets.Case(GoodSquare.apply, square), -2, 2, "float64", 1e-4, points=101)
    assert c.x.shape == (101,) and c.x[0] == -2 and c.x[-1] == 2
    np.testing.assert_allclose(c.y, c.x**2)
    np.testing.assert_allclose(c.grad_custom, 2 * c.x)
    np.testing.assert_allclose(c.grad_reference, 2 * c.x)
    assert c.err_custom.max() == 0
    assert c.err_fd.max() < 1e-9  # central differences are exact for quadratics up to round-off
    assert c.problems == []


def test_buggy_backward_shows_up_as_error_against_reference():
    c = widgets.compare_gradients(widgets.BUILTIN["tanh with a bug in backward"], -4, 4, "float64", 1e-3)
    assert c.err_custom.max() > 1.0  # 1 - y instead of 1 - y**2
    assert c.err_fd.max() < 1e-6  # the finite difference agrees with the reference


def test_float32_finite_difference_is_much_worse_than_float64():
    case = widgets.BUILTIN["exp"]
    e32 = widgets.compare_gradients(case, -3, 3, "float32", 1e-6).err_fd.max()
    e64 = widgets.compare_gradients(case, -3, 3, "float64", 1e-6).err_fd.max()
    assert e32 > 1e4 * e64


def test_step_size_sweep_has_truncation_and_roundoff_regimes():
    data = widgets.step_size_errors(widgets.BUILTIN["exp"], x0=1.0)
    assert set(data) == {"h", "float32", "float64"}
    h32, err32 = widgets.best_step(data, "float32")
    h64, err64 = widgets.best_step(data, "float64")
    assert h32 > h64  # less precision -> larger optimal step
    assert err64 < 1e-9 < 1e-6 < err32 < 1e-3
    e64 = data["float64"]
    assert e64[0] > 100 * err64 and e64[-1] > 100 * err64  # round-off left, truncation right


@pytest.mark.parametrize(
    "op, words",
    [
        (lambda x: x[:3], "returned shape (3,) for an input of shape (101,)"),
        (lambda x: (_ for _ in ()).throw(ValueError("boom")), "forward raised ValueError: boom"),
        (lambda x: x.detach().log(), "NaN"),
        (lambda x: 3, "returned a int, not a tensor"),
    ],
)
def test_broken_user_functions_become_messages(op, words):
    c = widgets.compare_gradients(widgets.Case(op, torch.exp), -1, 1, points=101)
    assert any(words in p for p in c.problems), c.problems
    assert "problem:" in c.summary()
    widgets.comparison_plot(c)  # still draws, with the message as title


def test_backward_that_raises_or_returns_wrong_shape():
    class Raises(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            raise ZeroDivisionError("oops")

    class WrongShape(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g[:2]

    c = widgets.compare_gradients(widgets.Case(Raises.apply, torch.clone), -1, 1, points=11)
    assert any("backward raised ZeroDivisionError: oops" in p for p in c.problems)
    c = widgets.compare_gradients(widgets.Case(WrongShape.apply, torch.clone), -1, 1, points=11)
    assert any("backward raised RuntimeError" in p for p in c.problems)


def test_explorer_controls_drive_the_plotted_data():
    tool = widgets.GradientExplorer(functions={"square": (GoodSquare.apply, square)})
    assert tool.function.value == "square" and tool.last.name == "square"
    tool.x_range.value = (0.0, 1.0)
    assert tool.last.x[0] == 0.0 and tool.last.x[-1] == 1.0
    tool.dtype.value = "float32"
    assert tool.last.dtype == "float32"
    tool.h.value = 1e-2
    assert tool.last.h == pytest.approx(1e-2)
    tool.function.value = "tanh with a bug in backward"
    assert tool.last.name == "tanh with a bug in backward"
    assert tool.x_range.value == widgets.BUILTIN["tanh with a bug in backward"].x_range
    assert tool.last.err_custom.max() > 1.0


def test_explorer_status_shows_problems_not_tracebacks():
    tool = widgets.GradientExplorer(functions={"broken": (lambda x: x[:1], torch.exp)})
    assert "an elementwise function must keep the shape" in tool.status.value
    assert "Traceback" not in tool.status.value
    tool.function.value = "exp"
    assert tool.status.value == ""


def test_step_size_explorer_updates():
    tool = widgets.StepSizeExplorer()
    first = tool.last["float64"].copy()
    tool.x0.value = 2.0
    assert not np.array_equal(first, tool.last["float64"])
    tool.function.value = "tanh"
    assert tool.last is not None


def test_plot_has_png_and_deterministic_text():
    c = widgets.compare_gradients(widgets.BUILTIN["exp"], -3, 3, "float64", 1e-3, name="exp")
    p1, p2 = widgets.comparison_plot(c), widgets.comparison_plot(c)
    assert p1._repr_png_().startswith(b"\x89PNG") and p1._repr_png_() == p2._repr_png_()
    assert repr(p1) == (
        "exp on [-3, 3], float64, finite-difference step h=1e-03\n"
        "  max |custom backward - reference| = 0.0e+00\n"
        "  max |finite difference - reference| = 3.3e-06"
    )


def test_bad_arguments_get_clear_sentences():
    case = widgets.BUILTIN["exp"]
    with pytest.raises(CourseError, match="x_min < x_max"):
        widgets.compare_gradients(case, 2, 1)
    with pytest.raises(CourseError, match="dtype must be one of"):
        widgets.compare_gradients(case, 0, 1, dtype="float16")
    with pytest.raises(CourseError, match="positive number"):
        widgets.compare_gradients(case, 0, 1, h=0)
    with pytest.raises(CourseError, match="should be a pair"):
        widgets.GradientExplorer(functions={"mine": torch.exp})
    with pytest.raises(CourseError, match="is not one of the functions"):
        widgets.GradientExplorer(start="nope")
