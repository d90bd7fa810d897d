"""Figures of the gradient explorers that are drawn once and then only updated.

A view owns one matplotlib figure. Its axes, lines, legends and texts are created once with
a fixed layout; ``update`` replaces the lines' data, the axis limits and the titles and
renders the figure exactly once, straight from the Agg buffer to PNG. Nothing is created
or laid out again, which is what made a redraw slow (constrained layout and a new figure
on every control change).

``Plot`` is what the notebook shows: a PNG plus a short deterministic text, so the figure
also appears, and nbval compares it, where no widget front end exists.
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullLocator

from .gradients import DTYPES, Comparison, best_step
from .textcache import TextCachingCanvas

ERROR_FLOOR = 1e-18  # errors of exactly 0 are drawn here on log axes
DPI = 80
PNG_LEVEL = 1  # zlib level: much faster than the default for ~15% larger files


@dataclass
class Plot:
    """A figure with a PNG view and a short deterministic text view."""

    png: bytes
    text: str

    def _repr_png_(self) -> bytes:
        return self.png

    def __repr__(self) -> str:
        return self.text

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(self.text)


def _png(rgba: np.ndarray) -> bytes:
    """PNG of an RGBA pixel array, as RGB without row filters: a plain figure compresses well
    enough with zlib alone, and skipping the filters halves the encoding time. Deterministic."""
    height, width = rgba.shape[:2]
    rows = np.zeros((height, 1 + 3 * width), dtype=np.uint8)  # each row: filter byte 0, then RGB
    rows[:, 1:] = rgba[:, :, :3].reshape(height, -1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), PNG_LEVEL)) + chunk(b"IEND", b""))


def _limits(arrays: Sequence[np.ndarray | None], pad: float = 0.05) -> tuple[float, float]:
    """Finite min and max of all arrays with a margin; (-1, 1) when there is nothing finite."""
    finite = [a[np.isfinite(a)] for a in arrays if a is not None]
    finite = [a for a in finite if a.size]
    if not finite:
        return -1.0, 1.0
    lo, hi = min(float(a.min()) for a in finite), max(float(a.max()) for a in finite)
    if hi - lo <= 1e-12 * max(abs(lo), abs(hi), 1e-300):
        half = max(abs(lo) * 0.5, 0.5)
        return lo - half, hi + half
    margin = (hi - lo) * pad
    return lo - margin, hi + margin


class _View:
    """One figure with a fixed layout, rendered to PNG on demand by blitting.

    Subclasses mark the artists that change with ``_animate``; everything else (figure
    background, legends, fixed guides) is drawn once, copied, and restored before each
    update, so an update draws only the changing artists.
    """

    def __init__(self, width: float, height: float, margins: dict[str, float]) -> None:
        self.figure = Figure(figsize=(width, height), dpi=DPI)
        self.canvas = TextCachingCanvas(self.figure)  # tick labels repeat: rasterise each once
        self.figure.subplots_adjust(**margins)
        self.renders = 0
        self.dynamic: list = []
        self._background = None

    def _animate(self, *artists) -> None:
        """Mark artists as the ones that change: the rest is drawn once and then copied."""
        for artist in artists:
            artist.set_animated(True)
        self.dynamic += artists

    def render(self) -> bytes:
        """Draw the changing artists over the cached background; encode as PNG (deterministic)."""
        if self._background is None:
            self.canvas.draw()  # everything but the animated artists
            self._background = self.canvas.copy_from_bbox(self.figure.bbox)
        self.canvas.restore_region(self._background)
        for artist in self.dynamic:
            self.figure.draw_artist(artist)
        self.renders += 1
        return _png(np.asarray(self.canvas.buffer_rgba()))


# "1e-08" as plain text: mathtext labels (10 to the power) cost several times more to draw
_POWER_OF_TEN = FuncFormatter(lambda value, _pos: f"1e{round(np.log10(value)):d}" if value > 0 else "")


def _set(line, x: np.ndarray, y: np.ndarray | None) -> None:
    line.set_visible(y is not None)
    line.set_data(x, y if y is not None else np.full_like(x, np.nan))


class ComparisonView(_View):
    """Three stacked panels: f(x); the three gradients; their errors against the reference.

    One legend above the panels names the three gradients; the error panel uses the same
    colours and dashes. The axes are redrawn on every update (their limits follow the
    data), the legend never is.
    """

    def __init__(self) -> None:
        super().__init__(7.5, 7.2, dict(left=0.12, right=0.975, top=0.91, bottom=0.075, hspace=0.16))
        # not sharex: the upper panels get no x ticks at all, which saves drawing them on every update
        self.ax_f, self.ax_g, self.ax_e = self.figure.subplots(3, 1)
        empty = np.zeros(0)
        (self.f,) = self.ax_f.plot(empty, empty, color="black")
        styles = {"reference (PyTorch ops)": dict(color="tab:gray", lw=4, alpha=0.5),
                  "custom backward": dict(color="tab:blue", lw=1.5),
                  "finite difference": dict(color="tab:orange", lw=1, ls="--")}
        self.grads = [self.ax_g.plot(empty, empty, label=label, **style)[0] for label, style in styles.items()]
        self.ax_e.set_yscale("log")
        self.errors = [self.ax_e.plot(empty, empty, **styles[label])[0]
                       for label in ("custom backward", "finite difference")]
        for ax, label in ((self.ax_f, "f(x)"), (self.ax_g, "df/dx"), (self.ax_e, "|df/dx - reference|")):
            ax.set_ylabel(label)
            ax.yaxis.set_label_coords(-0.1, 0.5)  # fixed: no search through tick labels per draw
            ax.set_autoscale_on(False)
        for ax in (self.ax_f, self.ax_g):
            ax.yaxis.set_major_locator(MaxNLocator(4))  # every tick label costs about a millisecond
            ax.xaxis.set_major_locator(NullLocator())
        self.ax_e.xaxis.set_major_locator(MaxNLocator(6))
        self.ax_e.yaxis.set_major_locator(LogLocator(numticks=4))
        self.ax_e.yaxis.set_major_formatter(_POWER_OF_TEN)
        self.ax_e.yaxis.set_minor_locator(NullLocator())
        self.ax_e.set_xlabel("x")
        self.ax_e.xaxis.set_label_coords(0.5, -0.13)
        self.title = self.ax_f.set_title("")
        self.problems = self.ax_f.text(0.01, 0.97, "", transform=self.ax_f.transAxes, va="top", ha="left",
                                       fontsize=9, color="tab:red", zorder=5,
                                       bbox=dict(facecolor="white", alpha=0.85, edgecolor="none"))
        self.figure.legend(handles=self.grads, loc="upper center", bbox_to_anchor=(0.55, 0.995), ncols=3,
                           fontsize=8, frameon=False)
        self._animate(self.ax_f, self.ax_g, self.ax_e)

    def update(self, c: Comparison) -> Plot:
        """Show comparison ``c``; returns the rendered Plot."""
        _set(self.f, c.x, c.y)
        for line, values in zip(self.grads, (c.grad_reference, c.grad_custom, c.grad_fd)):
            _set(line, c.x, values)
        errors = [None if e is None else np.maximum(e, ERROR_FLOOR) for e in (c.err_custom, c.err_fd)]
        for line, values in zip(self.errors, errors):
            _set(line, c.x, values)
        for ax in (self.ax_f, self.ax_g, self.ax_e):
            ax.set_xlim(float(c.x[0]), float(c.x[-1]))
        self.ax_f.set_ylim(*_limits([c.y]))
        self.ax_g.set_ylim(*_limits([c.grad_reference, c.grad_custom, c.grad_fd]))
        finite = [e[np.isfinite(e)] for e in errors if e is not None]
        top = max([float(e.max()) for e in finite if e.size] + [ERROR_FLOOR])
        self.ax_e.set_ylim(ERROR_FLOOR / 10, top * 10)
        self.title.set_text(f"{c.name} ({c.dtype}, h = {c.h:.0e})")
        self.problems.set_text("\n".join(c.problems[:3]))
        self.problems.set_visible(bool(c.problems))
        return Plot(self.render(), c.summary())


class SweepView(_View):
    """Log-log finite-difference error against step size, one line per dtype, with guides."""

    def __init__(self, hs: np.ndarray) -> None:
        super().__init__(9.0, 4.5, dict(left=0.1, right=0.7, top=0.92, bottom=0.12))
        self.ax = ax = self.figure.subplots()
        self.hs = np.asarray(hs, dtype=float)
        self.lines = {}
        for label, color in (("float32", "tab:red"), ("float64", "tab:blue")):
            (self.lines[label],) = ax.loglog(self.hs, np.full_like(self.hs, np.nan), "o-", ms=3, color=color,
                                             label=label)
            eps = torch.finfo(DTYPES[label]).eps
            ax.loglog(self.hs, eps / self.hs, ":", color=color, lw=1, label=f"round-off ~ eps/h ({label})")
        ax.loglog(self.hs, self.hs**2, "--", color="tab:gray", lw=1, label="truncation ~ h²")
        ax.set_xlim(self.hs.min() / 2, self.hs.max() * 2)
        ax.set_ylim(ERROR_FLOOR, 1e2)
        ax.set_autoscale_on(False)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("finite-difference step h")
        ax.set_ylabel("|finite difference - exact|")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # outside: lines never cover it
        self.title = ax.set_title("")
        # only the two measured lines and the title change: the axes, guides and legend are drawn once
        self._animate(*self.lines.values(), self.title)

    def update(self, data: Mapping[str, np.ndarray], name: str, x0: float) -> Plot:
        """Show one sweep (from ``step_size_errors``); returns the rendered Plot."""
        if not np.array_equal(np.asarray(data["h"], dtype=float), self.hs):
            raise ValueError("SweepView: the sweep uses other step sizes than this view was made for.")
        for label, line in self.lines.items():
            line.set_ydata(np.maximum(data[label], ERROR_FLOOR))
        self.title.set_text(f"{name} at x = {x0:g}: central difference error")
        lines = [f"{name} at x = {x0:g}: best central-difference step per dtype"]
        for dtype in DTYPES:
            h, err = best_step(data, dtype)
            lines.append(f"  {dtype}: h ~ {h:.0e} gives error {err:.0e}")
        return Plot(self.render(), "\n".join(lines))


def comparison_plot(c: Comparison) -> Plot:
    """A one-off Plot of ``c`` (the explorers keep one view and update it instead)."""
    return ComparisonView().update(c)


def sweep_plot(data: Mapping[str, np.ndarray], name: str, x0: float) -> Plot:
    """A one-off Plot of a step-size sweep."""
    return SweepView(data["h"]).update(data, name, x0)
