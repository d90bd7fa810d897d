"""The instructor's dashboard: one self-contained HTML page about a graded batch.

    python -m course_utils.grade SUBMISSIONS --out grades.csv --report report.html [--similarity sim]

It reads only the rows the grader produced (the ones the CSV and the feedback files are
written from) and, when a similarity report was asked for, its flagged pairs. The plots
are matplotlib figures inlined as SVG, so the page opens from a file, offline, with no
server; one inline script (``SORT_SCRIPT``, nothing fetched) sorts a table by the clicked
column. Everything a submission controls (its name, its hints) is escaped.
"""
from __future__ import annotations

import html
import io
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...status import Share
from .. import attention
from ..results import Batch, Pair, SubmissionResult, exercise_ids, variants_of
from ..store import atomic_write
from .reports import NOT_LATE, feedback_name, page
from .similarity import SHOWN

TOP_DIAGNOSES = 5  # most common diagnoses shown per exercise


def _whole(values: Sequence[float]) -> bool:
    return all(float(v).is_integer() for v in values)


def _points_bins(maximum: float, scores: Sequence[float] = ()) -> list[float]:
    """Histogram edges centred on every point (every half point when a score or the maximum is not whole)."""
    per = 1 if _whole([maximum, *scores]) else 2
    steps = round(maximum * per)
    return [(k - 0.5) / per for k in range(steps + 2)]


def histograms_svg(title: str, series: Sequence[tuple[str, list[float], float]]) -> str:
    """One row of small histograms (label, scores, max points) as an inline SVG string."""
    from matplotlib.figure import Figure  # a Figure object, not pyplot: no global state
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(2.6 * len(series), 2.3), layout="constrained")
    for i, (label, scores, maximum) in enumerate(series):
        ax = fig.add_subplot(1, len(series), i + 1)
        ax.hist(scores, bins=_points_bins(maximum, scores), color="#4c72b0" if i else "#dd8452", edgecolor="white")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("points", fontsize=8)
        ax.set_xlim(-0.5, maximum + 0.5)
        ax.tick_params(labelsize=7)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        if _whole([maximum, *scores]):  # integer scores: integer ticks, never 0.5
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title, fontsize=10)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]


def exercise_stats(scores: list[float], maximum: float) -> dict[str, float]:
    """Mean, median and how many earned full, partial and zero points."""
    return {"n": len(scores), "mean": statistics.fmean(scores) if scores else 0.0,
            "median": statistics.median(scores) if scores else 0.0,
            Share.FULL: sum(s >= maximum for s in scores), Share.PARTIAL: sum(0 < s < maximum for s in scores),
            Share.ZERO: sum(s <= 0 for s in scores)}


@dataclass(frozen=True)
class Diagnosis:
    """One mistake as the dashboard lists it: how many made it, its most common hint, how many other wordings."""

    count: int
    text: str
    wordings: int = 0  # other hints under the same code
    code: str = ""

    def html(self) -> str:
        more = f" <i>(and {self.wordings} other wording{'s' if self.wordings > 1 else ''})</i>" if self.wordings else ""
        return f"<li data-mistake='{html.escape(self.code)}'><b>{self.count}×</b> {html.escape(self.text)}{more}</li>"


def common_diagnoses(rows: list[SubmissionResult], gid: str, top: int = TOP_DIAGNOSES) -> list[Diagnosis]:
    """The most common mistakes made in ``gid`` by submissions that did not get full points, counted.

    Grouped by mistake code (one mistake, whatever each hint says of its place or values); a hint
    without a code is a group of its own. Each group is shown by its most common hint.
    """
    groups: dict[str, Counter[str]] = {}
    for r in rows:
        e = r.exercises.get(gid)
        if e is not None and e.share != Share.FULL and e.hint:
            groups.setdefault(e.code or f"\0{e.hint}", Counter())[e.hint] += 1
    found = [Diagnosis(sum(c.values()), min(c, key=lambda h: (-c[h], h)), len(c) - 1, "" if k[0] == "\0" else k)
             for k, c in groups.items()]
    return sorted(found, key=lambda d: (-d.count, d.text, d.code))[:top]


def _assignment_section(name: str, rows: list[SubmissionResult]) -> list[str]:
    gids = exercise_ids(rows)
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
           f"<table class='stats'><caption>Points per exercise of {html.escape(name)}</caption>"
           + _head("exercise", "max", "n", "mean", "median", *Share) + "<tbody>"]
    for g in gids:
        s = exercise_stats(series[gids.index(g) + 1][1], maxima[g])
        out.append(f"<tr data-exercise='{g}'><td>{g}</td><td>{maxima[g]:g}</td><td>{s['n']}</td>"
                   f"<td>{s['mean']:.2f}</td><td>{s['median']:g}</td>"
                   + "".join(f"<td>{s[share]}</td>" for share in Share) + "</tr>")
    out.append("</tbody></table><h3>Most common diagnoses</h3>")
    for g in gids:
        found = common_diagnoses(rows, g)
        items = "".join(d.html() for d in found) or "<li>none: all full</li>"
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
           "<table class='pairs'><caption>Pairs of submissions with similar answers, most similar first</caption>"
           + _head("similarity", "submission", "submission", "exercises") + "<tbody>"]
    for (a, b), found in order:
        links = ", ".join(
            f"<a href='{html.escape(report)}#pair{n}'>{html.escape(p.exercise)} {p.similarity:.0%}</a>"
            if n <= SHOWN else f"{html.escape(p.exercise)} {p.similarity:.0%} (in the CSV)" for n, p in found)
        out.append(f"<tr><td>{max(p.similarity for _, p in found):.0%}</td><td>{html.escape(a)}</td>"
                   f"<td>{html.escape(b)}</td><td>{links}</td></tr>")
    return out + ["</tbody></table></section>"]


def _why(row: SubmissionResult) -> str:
    """Everything in the row that still waits for a decision (a row may have a hold, a status and flags)."""
    return "; ".join(attention.open_items(row))


def _head(*columns: str) -> str:
    """A table's header row: column headers a screen reader announces with each cell."""
    return "<thead><tr>" + "".join(f"<th scope='col'>{html.escape(c)}</th>" for c in columns) + "</tr></thead>"


# Each heading of a sortable table becomes a button (Tab reaches it, Enter or Space sorts); the heading's
# aria-sort says the order to a screen reader, and the caption's live note says what just happened.
SORT_SCRIPT = """<script>
document.querySelectorAll('table.sortable thead th').forEach(function (th) {
  var col = Array.prototype.indexOf.call(th.parentNode.children, th);
  var button = document.createElement('button');
  button.type = 'button';
  button.className = 'sort';
  while (th.firstChild) { button.appendChild(th.firstChild); }
  th.appendChild(button);
  th.addEventListener('click', function () {  // the button's click (Enter, Space) bubbles here too
    var table = th.closest('table'), body = table.tBodies[0], rows = Array.from(body.rows);
    var up = th.getAttribute('aria-sort') !== 'ascending';
    table.querySelectorAll('thead th').forEach(function (o) { o.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', up ? 'ascending' : 'descending');
    var note = table.querySelector('caption .sorted');
    if (note) { note.textContent = ', sorted by ' + button.textContent + (up ? ', ascending' : ', descending'); }
    function key(tr) { var c = tr.children[col]; return c.dataset.sort !== undefined ? c.dataset.sort : c.textContent.trim(); }
    rows.sort(function (a, b) {
      var x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y);
      var r = (x === '' || y === '') ? (x === '') - (y === '') : (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return up ? r : -r;
    });
    rows.forEach(function (tr) { body.appendChild(tr); });
  });
});
</script>"""


def _feedback_link(row: SubmissionResult, batch: Batch | None, here: Path | None) -> str:
    name = html.escape(row.submission)
    if batch is None or batch.feedback_dir is None or here is None:
        return name
    target = Path(batch.feedback_dir).resolve() / feedback_name(row.submission, batch.root)
    try:
        href = target.relative_to(here.resolve()).as_posix()
    except ValueError:
        href = target.as_uri()
    return f"<a href='{html.escape(href)}'>{name}</a>"


def students_section(rows: list[SubmissionResult], batch: Batch | None = None, here: Path | None = None) -> list[str]:
    """One row per submission: its student, final total (empty until it counts), provisional, exercises, the
    variants judged, flags, decisions (last, in view at 1,400 px: issue 46)."""
    gids = exercise_ids(rows)
    late = (batch.late if batch is not None else None) or {}
    out = ["<section id='students'><h2>Submissions</h2><p>Click a column's heading (or Tab to it and press Enter) "
           "to sort by it. The total is empty while a submission is held or could not be graded: record a decision "
           "(<code>./course grade accept</code>) to make it count. The score is the total after the late policy "
           "(<code>--due</code>), as the export writes it.</p>",
           "<table class='students sortable'><caption>Every submission with its points per exercise"
           "<span class='sorted' aria-live='polite'></span></caption>"
           + _head("submission", "student", "assignment", "status", "total", "days late", "score", "provisional", "max",
                   *gids, "variants", "flags", "decisions")
           + "<tbody>"]
    for r in sorted(rows, key=lambda r: r.submission):
        cells = "".join(f"<td>{r.exercises[g].points:g}</td>" if g in r.exercises else "<td></td>" for g in gids)
        lr = late.get(r.submission, NOT_LATE)
        score = lr.score(r)
        out.append(f"<tr data-submission='{html.escape(r.submission)}'><td>{_feedback_link(r, batch, here)}</td>"
                   f"<td class='owner'>{html.escape(r.owner)}</td>"
                   f"<td>{html.escape(r.assignment)}</td><td>{html.escape(r.status)}</td>"
                   f"<td class='total'>{f'{r.total:g}' if r.graded else ''}</td><td class='late'>{lr.days}</td>"
                   f"<td class='score'>{'' if score is None else f'{score:g}'}</td><td>{r.provisional:g}</td>"
                   f"<td>{r.max:g}</td>{cells}<td class='variants'>{html.escape(variants_of(r, gids))}</td>"
                   f"<td>{html.escape(' | '.join(r.review + r.flags))}</td>"
                   f"<td>{html.escape(' | '.join(r.decisions))}</td></tr>")
    return out + ["</tbody></table></section>"]


def report_html(rows: list[SubmissionResult], pairs: list[Pair] | None = None, similarity_report: str = "",
                batch: Batch | None = None, here: Path | None = None) -> str:
    """The whole dashboard page for ``rows`` (and the flagged similarity ``pairs``, if any)."""
    graded = [r for r in rows if r.graded]
    others = attention.queue(rows)
    counts = Counter(r.status for r in rows)
    body = ["<h1>Grading report</h1>",
            f"<p id='summary'>{len(rows)} submission(s): "
            + ", ".join(f"{n} {html.escape(s)}" for s, n in sorted(counts.items())) + ".</p>"]
    unsandboxed = sum(1 for r in rows if r.sandbox == "none")  # only ever with --no-sandbox (grading/grade_file.py)
    if unsandboxed:
        body.append(f"<p id='no-sandbox' class='warning'>{unsandboxed} submission(s) were graded WITHOUT the sandbox "
                    "(--no-sandbox): their code was not isolated.</p>")
    body.append("<section id='attention'><h2>Needs your attention</h2>")
    if others:
        body.append("<table class='attention sortable'><caption>Submissions to read or decide on"
                    "<span class='sorted' aria-live='polite'></span></caption>"
                    + _head("submission", "status", "reason") + "<tbody>")
        body += [f"<tr><td>{_feedback_link(r, batch, here)}</td><td>{html.escape(r.status)}</td>"
                 f"<td>{html.escape(_why(r))}</td></tr>" for r in others]
        body.append("</tbody></table>")
    else:
        body.append("<p>Nothing waits for a decision.</p>")
    body.append("</section>")
    for name in sorted({r.assignment for r in graded if r.assignment}):  # an accepted unreadable file has none
        body += _assignment_section(name, [r for r in graded if r.assignment == name])
    body += students_section(rows, batch, here)
    if pairs is not None:
        body += similarity_section(pairs, similarity_report)
    return page("Grading report", "\n".join(body) + SORT_SCRIPT)


def write(batch: Batch, out: str) -> Path:
    """Write the dashboard to ``out`` (``--report``); links to the similarity report are relative to it."""
    target = Path(out)
    link = ""
    if batch.similarity_html is not None:
        try:
            link = str(Path(batch.similarity_html).resolve().relative_to(target.resolve().parent))
        except ValueError:
            link = Path(batch.similarity_html).resolve().as_uri()
    atomic_write(target, report_html(batch.rows, batch.pairs, link, batch, target.parent))
    return target
