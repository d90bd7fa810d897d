"""The instructor's dashboard: one self-contained HTML page about a graded batch.

    python -m course_utils.grade SUBMISSIONS --out grades.csv --report report.html [--similarity sim]

It reads only the rows the grader produced (the ones the CSV and the feedback files are
written from) and, when a similarity report was asked for, its flagged pairs. The plots
are matplotlib figures inlined as SVG, so the page opens from a file, offline, with no
server. Everything a submission controls (its name, its hints) is escaped.
"""
from __future__ import annotations

import html
import io
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from .reports import page
from .results import Batch, SubmissionResult
from .similarity import SHOWN, Pair
from .store import atomic_write

TOP_DIAGNOSES = 5  # most common diagnoses shown per exercise


def _points_bins(maximum: float) -> list[float]:
    """Histogram edges centred on every half point from 0 to ``maximum``."""
    steps = round(maximum * 2)
    return [(k - 0.5) / 2 for k in range(steps + 2)]


def histograms_svg(title: str, series: Sequence[tuple[str, list[float], float]]) -> str:
    """One row of small histograms (label, scores, max points) as an inline SVG string."""
    from matplotlib.figure import Figure  # a Figure object, not pyplot: no global state
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(2.6 * len(series), 2.3), layout="constrained")
    for i, (label, scores, maximum) in enumerate(series):
        ax = fig.add_subplot(1, len(series), i + 1)
        ax.hist(scores, bins=_points_bins(maximum), color="#4c72b0" if i else "#dd8452", edgecolor="white")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("points", fontsize=8)
        ax.set_xlim(-0.5, maximum + 0.5)
        ax.tick_params(labelsize=7)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title, fontsize=10)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]


def exercise_stats(scores: list[float], maximum: float) -> dict[str, float]:
    """Mean, median and how many earned full, partial and zero points."""
    return {"n": len(scores), "mean": statistics.fmean(scores) if scores else 0.0,
            "median": statistics.median(scores) if scores else 0.0,
            "full": sum(s >= maximum for s in scores), "partial": sum(0 < s < maximum for s in scores),
            "zero": sum(s <= 0 for s in scores)}


def common_diagnoses(rows: list[SubmissionResult], gid: str, top: int = TOP_DIAGNOSES) -> list[tuple[int, str]]:
    """The most common hints given for ``gid`` to submissions that did not get full points, counted."""
    counted = Counter(r.exercises[gid].hint for r in rows
                      if gid in r.exercises and r.exercises[gid].outcome != "full")
    return [(n, text) for text, n in sorted(counted.items(), key=lambda kv: (-kv[1], kv[0]))[:top] if text]


def _assignment_section(name: str, rows: list[SubmissionResult]) -> list[str]:
    from ..checks import EXERCISES

    gids = [g for g in EXERCISES if any(g in r.exercises for r in rows)]
    maxima = {g: max(r.exercises[g].max for r in rows if g in r.exercises) for g in gids}
    totals = [r.total for r in rows]
    full = max(r.max for r in rows)
    series = [("total", totals, full)] + [(g, [r.exercises[g].points for r in rows if g in r.exercises], maxima[g])
                                          for g in gids]
    t = exercise_stats(totals, full)
    out = [f"<section class='assignment' data-assignment='{html.escape(name)}'><h2>{html.escape(name)}</h2>",
           f"<p>{len(rows)} graded submission(s); total out of {full:g}: mean {t['mean']:.2f}, "
           f"median {t['median']:g}.</p>",
           f"<figure role='img' aria-label='Histograms of the points of {html.escape(name)}: the total, then each "
           f"exercise'>{histograms_svg(name, series)}<figcaption>Score distributions: total and per exercise "
           "(number of submissions per score).</figcaption></figure>",
           "<table class='stats'><tr><th>exercise</th><th>max</th><th>n</th><th>mean</th><th>median</th>"
           "<th>full</th><th>partial</th><th>zero</th></tr>"]
    for g in gids:
        s = exercise_stats(series[gids.index(g) + 1][1], maxima[g])
        out.append(f"<tr data-exercise='{g}'><td>{g}</td><td>{maxima[g]:g}</td><td>{s['n']}</td>"
                   f"<td>{s['mean']:.2f}</td><td>{s['median']:g}</td><td>{s['full']}</td><td>{s['partial']}</td>"
                   f"<td>{s['zero']}</td></tr>")
    out.append("</table><h3>Most common diagnoses</h3>")
    for g in gids:
        found = common_diagnoses(rows, g)
        items = "".join(f"<li><b>{n}×</b> {html.escape(text)}</li>" for n, text in found) or "<li>none: all full</li>"
        out.append(f"<h4>{g}</h4><ul class='diagnoses' data-exercise='{g}'>{items}</ul>")
    return out + ["</section>"]


def similarity_section(pairs: list[Pair], report: str) -> list[str]:
    """Each flagged pair of submissions once, most similar first, linking to the side-by-side views."""
    grouped: dict[tuple[str, str], list[tuple[int, Pair]]] = {}
    for n, p in enumerate(pairs, 1):
        a, b = sorted((p.a.submission, p.b.submission))
        grouped.setdefault((a, b), []).append((n, p))
    order = sorted(grouped.items(), key=lambda kv: (-max(p.similarity for _, p in kv[1]), kv[0]))
    out = ["<section id='similarity'><h2>Similar answers</h2>",
           f"<p>{len(order)} pair(s) of submissions flagged; a flag is a reason to read both, not a verdict. "
           f"Side by side: <a href='{html.escape(report)}'>{html.escape(report)}</a>.</p>",
           "<table class='pairs'><tr><th>similarity</th><th>submission</th><th>submission</th><th>exercises</th></tr>"]
    for (a, b), found in order:
        links = ", ".join(
            f"<a href='{html.escape(report)}#pair{n}'>{html.escape(p.exercise)} {p.similarity:.0%}</a>"
            if n <= SHOWN else f"{html.escape(p.exercise)} {p.similarity:.0%} (in the CSV)" for n, p in found)
        out.append(f"<tr><td>{max(p.similarity for _, p in found):.0%}</td><td>{html.escape(a)}</td>"
                   f"<td>{html.escape(b)}</td><td>{links}</td></tr>")
    return out + ["</table></section>"]


def report_html(rows: list[SubmissionResult], pairs: list[Pair] | None = None, similarity_report: str = "") -> str:
    """The whole dashboard page for ``rows`` (and the flagged similarity ``pairs``, if any)."""
    graded = [r for r in rows if r.graded]
    others = sorted((r for r in rows if not r.graded), key=lambda r: (r.status, r.submission))
    counts = Counter(r.status for r in rows)
    body = ["<h1>Grading report</h1>",
            f"<p id='summary'>{len(rows)} submission(s): "
            + ", ".join(f"{n} {html.escape(s)}" for s, n in sorted(counts.items())) + ".</p>"]
    for name in sorted({r.assignment for r in graded}):
        body += _assignment_section(name, [r for r in graded if r.assignment == name])
    body.append("<section id='attention'><h2>Needs your attention</h2>")
    if others:
        body.append("<table class='attention'><tr><th>submission</th><th>status</th><th>reason</th></tr>")
        body += [f"<tr><td>{html.escape(r.submission)}</td><td>{html.escape(r.status)}</td>"
                 f"<td>{html.escape(r.reason())}</td></tr>" for r in others]
        body.append("</table>")
    else:
        body.append("<p>Nothing: every submission was graded.</p>")
    body.append("</section>")
    if pairs is not None:
        body += similarity_section(pairs, similarity_report)
    return page("Grading report", "\n".join(body))


def write(batch: Batch, out: str) -> Path:
    """Write the dashboard to ``out`` (``--report``); links to the similarity report are relative to it."""
    target = Path(out)
    link = ""
    if batch.similarity_html is not None:
        try:
            link = str(Path(batch.similarity_html).resolve().relative_to(target.resolve().parent))
        except ValueError:
            link = Path(batch.similarity_html).resolve().as_uri()
    atomic_write(target, report_html(batch.rows, batch.pairs, link))
    return target
