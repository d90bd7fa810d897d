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


# --------------------------------------------------------------------------- keeping up with a slider
def test_explorer_updates_its_figure_in_place_and_reuses_the_artists():
    tool = widgets.GradientExplorer()
    view, lines, first = tool.view, [tool.view.f, *tool.view.grads, *tool.view.errors], tool.plot
    renders = view.renders
    tool.x_range.value = (0.0, 2.0)
    assert tool.view is view and [view.f, *view.grads, *view.errors] == lines
    assert view.renders == renders + 1, "one control change should draw the figure exactly once"
    assert tool.plot.png != first.png and tool.plot.text != first.text
    np.testing.assert_array_equal(view.grads[1].get_xdata(), tool.last.x)
    assert view.ax_f.get_xlim() == (0.0, 2.0)
    tool.function.value = "tanh"  # changes the function and the x range: still one redraw
    assert view.renders == renders + 2 and tool.last.name == "tanh"

    sweep = widgets.StepSizeExplorer()
    line, before = sweep.view.lines["float64"], sweep.plot.png
    sweep.x0.value = -1.0
    assert sweep.view.lines["float64"] is line and sweep.plot.png != before
    np.testing.assert_array_equal(line.get_ydata(), np.maximum(sweep.last["float64"], widgets.ERROR_FLOOR))


def test_a_reused_figure_draws_exactly_what_a_fresh_one_draws():
    tool = widgets.GradientExplorer(start="naive softplus", dtype="float32")
    tool.function.value = "abs (kink at 0)"
    tool.h.value = 1e-6
    assert tool.plot.png == widgets.comparison_plot(tool.last).png


class FakeLoop:
    """An event loop that only runs scheduled callbacks when told to; time stands still."""

    def __init__(self):
        self.scheduled = []

    def call_later(self, delay, callback):
        handle = FakeHandle(callback)
        self.scheduled.append(handle)
        return handle

    def run_scheduled(self):
        todo, self.scheduled = self.scheduled, []
        for handle in todo:
            if not handle.cancelled:
                handle.callback()


class FakeHandle:
    def __init__(self, callback):
        self.callback, self.cancelled = callback, False

    def cancel(self):
        self.cancelled = True


def test_a_burst_of_slider_changes_is_drawn_once_more_not_once_per_change():
    loop = FakeLoop()
    tool = widgets.StepSizeExplorer()
    tool.throttle.loop, tool.throttle.clock = (lambda: loop), (lambda: 1e9)
    renders = tool.view.renders
    for value in np.arange(-3.0, 3.01, 0.25):  # 25 changes while the kernel is busy
        tool.x0.value = float(value)
    assert tool.view.renders == renders + 1, "only the first change is drawn at once"
    assert len(loop.scheduled) == 1, "the others wait for one later redraw"
    loop.run_scheduled()
    assert tool.view.renders == renders + 2
    assert tool._last is not None and tool.plot.text.startswith("exp at x = 3:")
    loop.run_scheduled()
    assert tool.view.renders == renders + 2, "nothing left to draw"


def test_reading_last_draws_a_pending_change_first():
    loop = FakeLoop()
    tool = widgets.GradientExplorer()
    tool.throttle.loop, tool.throttle.clock = (lambda: loop), (lambda: 1e9)
    tool.x_range.value = (0.0, 1.0)  # drawn at once
    tool.x_range.value = (0.0, 2.0)  # waits for the loop
    assert tool.last.x[-1] == 2.0 and loop.scheduled[0].cancelled


def test_a_lone_change_after_a_quiet_moment_is_drawn_at_once():
    now = [1e9]
    loop = FakeLoop()
    tool = widgets.StepSizeExplorer()
    tool.throttle.loop, tool.throttle.clock = (lambda: loop), (lambda: now[0])
    renders = tool.view.renders
    for value in (0.5, 1.5, 2.5):
        now[0] += 10.0  # a student thinking between moves
        tool.x0.value = value
    assert tool.view.renders == renders + 3 and not loop.scheduled


def test_the_figure_is_a_static_display_where_no_widget_front_end_exists():
    from IPython.core.interactiveshell import InteractiveShell

    published = []

    class Recorder:
        def publish(self, data, metadata=None, **kwargs):
            published.append(data)

        def clear_output(self, wait=False):
            pass

    shell = InteractiveShell.instance()
    saved, shell.display_pub = shell.display_pub, Recorder()
    try:
        tool = widgets.StepSizeExplorer()
        tool.show()
        tool.x0.value = 2.0
    finally:
        shell.display_pub = saved
    figures = [d for d in published if "image/png" in d]
    assert len(figures) == 2 and all(d["image/png"] for d in figures)
    assert figures[0]["text/plain"].startswith("exp at x = 1: best central-difference step per dtype")
    assert figures[1]["text/plain"].startswith("exp at x = 2: best central-difference step per dtype")


def test_a_burst_of_slider_messages_in_a_real_kernel_does_not_queue_redraws(tmp_path):
    """A browser sends one comm message per slider position; 40 arrive at once here."""
    from jupyter_client.manager import start_new_kernel

    from widget_kernel import slider_burst

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        result = slider_burst(kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert result["ipywidgets"].startswith("8.")
    assert result["requests"] >= result["changes"] and result["x0"] == 3.0
    assert result["runs"] <= result["changes"] // 4, result  # without merging: one redraw per message
    assert result["figures"][-1].startswith("exp at x = 3:") and result["same_artists"]


def test_cached_text_is_pixel_identical_to_text_drawn_afresh():
    from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
    from matplotlib.figure import Figure

    from course_utils.textcache import TextCachingCanvas

    class WholePixels(RendererAgg):  # the reference: same whole-pixel anchors, nothing cached
        def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
            return super().draw_text(gc, round(x), round(y), s, prop, angle, ismath, mtext)

    class Reference(FigureCanvasAgg):
        def get_renderer(self):
            if getattr(self, "_made", None) is None:
                self._made = self.renderer = WholePixels(*self.get_width_height(physical=True), self.figure.dpi)
            return self._made

    def draw(canvas_class):
        fig = Figure(figsize=(3, 2), dpi=80)
        canvas = canvas_class(fig)
        for i, rotation in enumerate((0, 90, 30, 0)):
            fig.text(0.1 + 0.2 * i + 0.0123, 0.3 + 0.1 * i, "1e-08 x", rotation=rotation)
            fig.text(0.1 + 0.2 * i, 0.7, r"$x^2$")  # mathtext: drawn normally
        canvas.draw()
        return np.asarray(canvas.buffer_rgba()).copy(), canvas

    expected, _ = draw(Reference)
    cached, canvas = draw(TextCachingCanvas)
    np.testing.assert_array_equal(cached, expected)
    assert canvas.renderer.hits >= 1 and canvas.renderer.misses >= 3


@pytest.mark.parametrize("explorer", [widgets.GradientExplorer, widgets.StepSizeExplorer])
def test_each_explorer_says_in_one_line_what_it_shows(explorer):
    """Before its controls: plain HTML and text (read by screen readers, kept by the static site)."""
    from IPython.core.interactiveshell import InteractiveShell

    published = []

    class Recorder:
        def publish(self, data, metadata=None, **kwargs):
            published.append(data)

        def clear_output(self, wait=False):
            pass

    shell = InteractiveShell.instance()
    saved, shell.display_pub = shell.display_pub, Recorder()
    try:
        explorer().show()
    finally:
        shell.display_pub = saved
    first = published[0]
    assert first["text/plain"] == explorer.SUMMARY and "\n" not in explorer.SUMMARY and len(explorer.SUMMARY) > 60
    assert 'role="note"' in first["text/html"] and "application/vnd.jupyter.widget-view+json" not in first
    controls = published[1]  # issue 47: its repr ("VBox(children=...") showed in JupyterLab until the view was drawn
    assert controls["text/plain"] == "" and controls["application/vnd.jupyter.widget-view+json"]["model_id"]


def test_sliders_span_what_is_worth_seeing_for_the_function_shown():
    grad, step = widgets.GradientExplorer(), widgets.StepSizeExplorer()
    for name, case in widgets.BUILTIN.items():
        grad.function.value = step.function.value = name
        grad.flush(), step.flush()
        lo, hi = case.limits
        assert grad.x_range.value == case.x_range, name
        assert grad.x_range.min <= case.x_range[0] and case.x_range[1] <= grad.x_range.max, name
        assert lo <= case.x_range[0] < case.x_range[1] <= hi, name
        assert (step.x0.min, step.x0.max) == (lo, hi) and lo <= step.x0.value <= hi, name
        assert grad.last.name == name and grad.last.x[0] == case.x_range[0]
    exp = widgets.BUILTIN["exp"].limits
    assert exp[1] <= 20, "exp's slider should not run to x = 100, where float32 overflows long before"
    own = widgets.StepSizeExplorer(functions={"mine": (torch.sin, torch.sin)}, start="mine")
    assert (own.x0.min, own.x0.max) == (-9.0, 9.0)  # three times its default range
    assert (grad.x_range.min, grad.x_range.max) == (-10.0, 100.0)  # one span for all: naive softplus goes to 100
