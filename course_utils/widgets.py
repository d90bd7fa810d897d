"""Interactive gradient comparison for elementwise scalar-to-scalar Functions.

Two explorers, each a set of ipywidgets controls above one figure:

* ``GradientExplorer``: over an x range, the function, the gradient from its custom
  ``backward``, PyTorch's reference gradient, a central finite difference, and the error of
  each against the reference. Controls: function, x range, dtype, step h.
* ``StepSizeExplorer``: finite-difference error against step size on log-log axes in
  float32 and float64 (truncation error falls with h, round-off grows).

The data comes from ``course_utils.gradients`` and the figures from ``course_utils.figures``
(names re-exported here). The figure is an ordinary display output that the controls update
in place (``display_id``), so it also appears where no widget front end exists (static
HTML, nbval) and its text form is a short deterministic summary.

Keeping up with a slider: a figure is created once and only its data changes (see
``figures``), and redraws go through a ``Throttle``. A lone change is drawn at once; changes
that arrive while the previous drawing is still fresh (a slider being dragged, or a burst of
messages queued in the kernel) are merged into one later redraw of the latest values, so no
backlog of redraws builds up. Works with ipywidgets 7 (Colab) and 8.
"""
from __future__ import annotations

import asyncio
import contextlib
import html
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from .errors import CourseError
from .figures import ERROR_FLOOR, ComparisonView, Plot, SweepView, comparison_plot, sweep_plot
from .gradients import BUILTIN, DTYPES, Case, Comparison, best_step, cases, compare_gradients, finite_difference, step_size_errors

__all__ = ["BUILTIN", "DTYPES", "ERROR_FLOOR", "Case", "Comparison", "GradientExplorer", "Plot",
           "StepSizeExplorer", "Throttle", "best_step", "cases", "compare_gradients", "comparison_plot",
           "finite_difference", "step_size_errors", "sweep_plot"]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running this code (a Jupyter kernel's), or None in plain Python."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Throttle:
    """Runs ``work`` for a lone request at once and merges requests that come too fast.

    After a run, requests within one run's duration (at least ``min_gap`` seconds) do not
    run ``work`` again; they schedule a single later run on the event loop, which then sees
    the latest control values. Without a running event loop (plain Python, tests) every
    request runs at once. ``clock`` and ``loop`` can be replaced to test it without waiting.
    """

    def __init__(self, work: Callable[[], None], min_gap: float = 0.02,
                 clock: Callable[[], float] = time.monotonic,
                 loop: Callable[[], asyncio.AbstractEventLoop | None] = _running_loop) -> None:
        self._work, self.min_gap, self.clock, self.loop = work, min_gap, clock, loop
        self._gap = min_gap
        self._last_end = float("-inf")
        self._timer: asyncio.TimerHandle | None = None
        self._held = 0
        self.pending = False
        self.requests = 0
        self.runs = 0

    def request(self) -> None:
        """Ask for ``work`` to run with the current state, now or soon."""
        self.requests += 1
        self.pending = True
        if self._held or self._timer is not None:
            return  # the batch's end, or the scheduled run, will see the latest state
        wait = self._last_end + self._gap - self.clock()
        loop = self.loop() if wait > 0 else None
        if loop is None:
            self.flush()
        else:
            self._timer = loop.call_later(wait, self.flush)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Several changes made inside count as one request at the end."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
        if not self._held and self.pending:
            self.pending = False
            self.request()

    def flush(self) -> None:
        """Run pending work now (nothing happens when nothing is pending)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.pending:
            return
        self.pending = False
        start = self.clock()
        try:
            self._work()
        finally:
            self._last_end = self.clock()
            self._gap = max(self.min_gap, self._last_end - start)
            self.runs += 1


class _Explorer:
    """Controls plus one figure that is redrawn in place whenever a control changes."""

    controls: object
    status: Any  # an ipywidgets HTML (imported lazily)

    def __init__(self) -> None:
        self._handle = None
        self._plot: Plot | None = None
        self._last: Any = None
        self.throttle = Throttle(self._redraw)

    def _draw(self) -> Plot:
        raise NotImplementedError

    def _redraw(self) -> None:
        try:
            self._plot = self._draw()
        except Exception as exc:  # e.g. a reference gradient that cannot be computed: say so, keep going
            if self._plot is None:  # nothing to show yet: the caller gets the error
                raise
            self.status.value = f'<span style="color:#b00020">⚠ {type(exc).__name__}: {exc}</span>'
            return
        if self._handle is not None:
            self._handle.update(self._plot)

    def _changed(self, _change=None) -> None:
        self.throttle.request()

    def _watch(self, *controls) -> None:
        for control in controls:
            control.observe(self._changed, names="value")

    def flush(self) -> None:
        """Draw now if a redraw is still waiting (only happens while a kernel is running)."""
        self.throttle.flush()

    def update(self) -> None:
        """Recompute from the current control values and redraw in place, now."""
        self.throttle.pending = True
        self.flush()

    @property
    def last(self):
        """What the figure shows for the current control values (tests read it)."""
        self.flush()
        return self._last

    @property
    def plot(self) -> Plot:
        """The current figure as PNG + text."""
        self.flush()
        if self._plot is None:
            raise CourseError("nothing is drawn yet: show the explorer (or call flush()) first.")
        return self._plot

    SUMMARY = ""

    def show(self) -> None:
        """Display a one-line summary, the controls and the figure (the figure then updates in place).

        The summary is plain HTML and text, not a widget: screen readers read it, and the
        static site (where widgets cannot run) keeps it above the stored figure.
        """
        from IPython.display import display

        display({"text/html": f'<p class="widget-summary" role="note">{html.escape(self.SUMMARY)}</p>',
                 "text/plain": self.SUMMARY}, raw=True)
        display(widget_bundle(self.controls), raw=True)
        self._handle = display(self.plot, display_id=True)

    def _set_limits(self, slider, limits: tuple[float, float], value) -> None:
        """Slider bounds for the function shown, then its value (widened first, so nothing is clamped)."""
        lo, hi = limits
        slider.min, slider.max = min(slider.min, lo), max(slider.max, hi)
        slider.value = value
        slider.min, slider.max = lo, hi

    def _ipython_display_(self) -> None:
        self.show()


def widget_bundle(widget: Any) -> dict:
    """A widget's display data without its text form.

    ipywidgets puts the widget's repr ("VBox(children=(HBox(children=(Dropdown(...") beside its view;
    JupyterLab shows that text until its widget manager has loaded and drawn the controls (about
    1.5 s the first time), so the controls appeared as a line of code first. Empty text shows
    nothing until the controls are drawn (ipywidgets 7, Colab's, and 8 alike).
    """
    return {"text/plain": "", "application/vnd.jupyter.widget-view+json": {
        "version_major": 2, "version_minor": 0, "model_id": widget.model_id}}


def _span(known) -> tuple[float, float]:
    """Slider bounds covering every function's default x range (from -10: negative x is always of interest)."""
    return min(-10.0, *(c.x_range[0] for c in known)), max(10.0, *(c.x_range[1] for c in known))


def _known_start(start: str, known: Mapping[str, Case]) -> None:
    if start not in known:
        raise CourseError(f"start={start!r} is not one of the functions: {', '.join(known)}.")


def _problems_html(problems: list[str]) -> str:
    return "<br>".join(f'<span style="color:#b00020">⚠ {p}</span>' for p in problems)


class GradientExplorer(_Explorer):
    """Controls + an updating figure comparing custom, reference and finite-difference gradients.

    ``GradientExplorer(functions={"my exp": (MyExp.apply, torch.exp)})`` adds your own
    Function next to the built-in examples. ``.show()`` displays it; ``.last`` is the
    ``Comparison`` the figure shows.
    """

    SUMMARY = ("Gradient comparison: the gradient from a Function's backward, PyTorch's reference gradient and "
               "a finite difference over an x range, with their errors on a log scale below.")

    def __init__(self, functions: Mapping[str, object] | None = None, start: str | None = None,
                 dtype: str = "float64", h: float = 1e-3) -> None:
        import ipywidgets as W

        super().__init__()
        self.cases = cases(functions)
        start = start or (next(iter(functions)) if functions else "exp")
        _known_start(start, self.cases)
        lo, hi = self.cases[start].x_range
        self.function = W.Dropdown(options=list(self.cases), value=start, description="function")
        # one span for every function (the x range itself follows the function): a range slider whose bounds
        # are narrowed to the function stopped JupyterLab's redraws after a dtype change (tests/test_browser.py)
        limits = _span(self.cases.values())
        self.x_range = W.FloatRangeSlider(value=(lo, hi), min=limits[0], max=limits[1], step=0.5,
                                          description="x range", layout=W.Layout(width="480px"))
        self.dtype = W.ToggleButtons(options=list(DTYPES), value=dtype, description="dtype")
        self.h = W.FloatLogSlider(value=h, base=10, min=-12, max=0, step=1, description="FD step h",
                                  readout_format=".0e")
        self.status = W.HTML()
        self.view = ComparisonView()
        self.function.observe(self._on_function, names="value")
        self._watch(self.x_range, self.dtype, self.h)
        self.controls = W.VBox([W.HBox([self.function, self.dtype]), W.HBox([self.x_range, self.h]), self.status])
        self.update()

    def _on_function(self, change) -> None:
        case = self.cases[change["new"]]
        with self.throttle.batch():  # a new range and a new function: one redraw
            self.x_range.value = case.x_range
            self.throttle.request()

    def _draw(self) -> Plot:
        name = self.function.value
        lo, hi = self.x_range.value
        self._last = compare_gradients(self.cases[name], lo, hi, self.dtype.value, self.h.value, name=name)
        self.status.value = _problems_html(self._last.problems)
        return self.view.update(self._last)


class StepSizeExplorer(_Explorer):
    """Finite-difference error against step size (log-log), float32 vs float64, for one function.

    ``.last`` is the sweep the figure shows (``step_size_errors``'s arrays).
    """

    SUMMARY = ("Finite-difference error against the step size h (log-log), in float32 and float64, for one "
               "function at one point x: too large an h is inexact, too small an h drowns in rounding.")

    def __init__(self, functions: Mapping[str, object] | None = None, start: str = "exp", x0: float = 1.0) -> None:
        import ipywidgets as W

        super().__init__()
        self.cases = cases(functions)
        _known_start(start, self.cases)
        self.function = W.Dropdown(options=list(self.cases), value=start, description="function")
        limits = self.cases[start].limits
        self.x0 = W.FloatSlider(value=min(max(x0, limits[0]), limits[1]), min=limits[0], max=limits[1], step=0.25,
                                description="at x =")
        self.status = W.HTML()
        self.view = SweepView(np.logspace(-12, 0, 49))
        self.function.observe(self._on_function, names="value")
        self._watch(self.x0)
        self.controls = W.VBox([W.HBox([self.function, self.x0]), self.status])
        self.update()

    def _on_function(self, change) -> None:
        limits = self.cases[change["new"]].limits
        with self.throttle.batch():  # the point stays where it was when the new function allows it
            self._set_limits(self.x0, limits, min(max(self.x0.value, limits[0]), limits[1]))
            self.throttle.request()

    def _draw(self) -> Plot:
        self.status.value = ""
        self._last = step_size_errors(self.cases[self.function.value], self.x0.value, self.view.hs)
        return self.view.update(self._last, self.function.value, self.x0.value)
