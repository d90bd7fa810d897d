"""Line plots for lesson 11: memory ratios over sizes, and two loss curves on one set of axes."""
from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure

from ..figures import Plot


def lines(series: Mapping[str, tuple[Sequence[float], Sequence[float]]], title: str, xlabel: str, ylabel: str,
          logx: bool = False, styles: Sequence[str] = ("-o", "--s", ":^", "-.v")) -> Plot:
    """One line per ``name -> (xs, ys)``; the text view names the lines and the axes (no numbers)."""
    fig = Figure(figsize=(6.4, 3.6), dpi=80)
    ax = fig.add_subplot()
    for (name, (xs, ys)), style in zip(series.items(), list(styles) * len(series)):
        ax.plot(list(xs), list(ys), style, label=name, markersize=3 if len(xs) > 30 else 5)
    if logx:
        ax.set_xscale("log", base=2)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return Plot(buf.getvalue(), f"[plot: {title}; {ylabel} over {xlabel}; lines: {', '.join(series)}]")
