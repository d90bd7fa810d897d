"""Similarity report: the answers of every pair of submissions, exercise by exercise.

    python -m course_utils.grade SUBMISSIONS --similarity report.html

Uses copydetect (winnowed fingerprints of tokenised code, Schleimer et al. 2003): comments
and whitespace are dropped and every identifier becomes one placeholder, so renamed
variables and reordered methods still match. Only answer cells are compared, and what
the course gave everyone (the answer cell's stub and every code cell of the exercise
notebook: copydetect's boilerplate) is removed before comparing; the answers are the ones the
judge grades (``ParsedSubmission.answers``). An answer left as the stub is not compared at all,
and a pair sharing less than ``MIN_SPAN`` of tokenised code is never flagged (short standard
answers look alike). Highlighting ends where the shared code ends
(``_raw_slices``). The report flags pairs to read; it never changes a grade. Answers copied
from ``solutions/`` are flagged on their own row by ``copies``.
"""
from __future__ import annotations

import csv
import html
import io
import itertools
from collections.abc import Iterable
from pathlib import Path

from ..assignment import Assignment
from ..checksums import checksum
from ..errors import UsageError
from ..results import MIN_SPAN as MIN_SPAN  # re-exported: the pairs live in the results model every output reads
from ..results import Answer, Pair
from ..store import atomic_write
from ..submission import ParsedSubmission
from .reports import neutral, page

THRESHOLD = 0.6  # flagged when this share of either answer's own code matches the other's
SHOWN = 200  # flagged pairs shown side by side in the HTML report (all of them are in the CSV)


def answers(submissions: Iterable[ParsedSubmission], assignments: dict[str, Assignment]
            ) -> dict[tuple[str, str], list[Answer]]:
    """(assignment, exercise) -> the submissions' answers (the ones the judge grades) that differ from the stub."""
    groups: dict[tuple[str, str], list[Answer]] = {}
    for sub in submissions:
        if sub.assignment not in assignments:
            continue
        stubs = assignments[sub.assignment].stubs()
        for gid, source in sub.answers.items():
            if checksum(source) != checksum(stubs[gid]):
                groups.setdefault((sub.assignment, gid.removesuffix("_answer")), []).append(Answer(sub.name, source))
    return groups


def _fingerprint(source: str, given: set):
    """copydetect's fingerprint of one answer, without the fingerprints of the code everyone was given."""
    from copydetect import CodeFingerprint, defaults
    from copydetect.utils import get_token_coverage

    fp = CodeFingerprint("answer.py", defaults.NOISE_THRESHOLD, defaults.GUARANTEE_THRESHOLD -
                         defaults.NOISE_THRESHOLD + 1, language="python", fp=io.StringIO(source))
    fp.hashes = fp.hashes - given
    fp.hash_idx = {h: i for h, i in fp.hash_idx.items() if h in fp.hashes}
    fp.token_coverage = get_token_coverage(fp.hash_idx, fp.k, len(fp.filtered_code))
    return fp


def _given(stub: str) -> set:
    """Every k-gram hash of the stub's tokenised code (not only the winnowed ones)."""
    from copydetect import defaults
    from copydetect.utils import filter_code, hashed_kgrams

    code, _ = filter_code(stub, "stub.py", "python")
    return set(hashed_kgrams(code, defaults.NOISE_THRESHOLD).tolist())


def _raw_slices(fp, source: str, starts, ends):
    """Map copied slices of the filtered code back to ``source``, each ending where its last token ends.

    copydetect maps an end through the shift of the position *after* it, so a slice took in the
    whitespace or comment that follows it (one character or more too many); here the last token
    is located, and a name, number or string is extended to its own end.
    """
    import numpy as np

    starts, ends = np.asarray(starts, dtype=int), np.asarray(ends, dtype=int)
    if len(fp.offsets) == 0 or len(starts) == 0:
        return np.array([starts, ends])

    def raw(p):
        return p + fp.offsets[:, 1][np.clip(np.searchsorted(fp.offsets[:, 0], p), 0, fp.offsets.shape[0] - 1)]

    out_ends = []
    for e, last in zip(ends, raw(ends - 1)):
        end = int(last) + 1
        if fp.filtered_code[e - 1] == "S" and e < len(fp.filtered_code):  # a string's body: up to its closing quote
            end = int(raw(np.array([e]))[0])
        elif source[last:last + 1].isidentifier() or source[last:last + 1].isdigit():
            while end < len(source) and (source[end].isalnum() or source[end] == "_"):
                end += 1
        out_ends.append(end)
    return np.array([raw(starts), np.array(out_ends, dtype=int)])


def _compare(fp1, fp2, source1: str, source2: str):
    """copydetect's ``compare_files`` (overlap, shares, slices) with the slices mapped by ``_raw_slices``."""
    from copydetect.utils import find_fingerprint_overlap, get_copied_slices

    idx1, idx2 = find_fingerprint_overlap(fp1.hashes, fp2.hashes, fp1.hash_idx, fp2.hash_idx)
    s1, s2 = get_copied_slices(idx1, fp1.k), get_copied_slices(idx2, fp2.k)
    if len(s1[0]) == 0:
        return 0, (0.0, 0.0), ((), ())
    overlap = int((s1[1] - s1[0]).sum())
    shares = (min(float((s1[1] - s1[0]).sum() / fp1.token_coverage), 1.0),
              min(float((s2[1] - s2[0]).sum() / fp2.token_coverage), 1.0))
    return overlap, shares, (_raw_slices(fp1, source1, *s1), _raw_slices(fp2, source2, *s2))


def compare(groups: dict[tuple[str, str], list[Answer]], stubs: dict[tuple[str, str], str],
            given: dict[str, str] | None = None) -> list[Pair]:
    """Every pair of answers to the same exercise that share any code, most similar first.

    What the course ships (the answer cell's stub and, in ``given``, every code cell of the
    assignment's exercise notebook) is copydetect's boilerplate: it never counts as shared.
    """
    pairs = []
    for (assignment, exercise), group in sorted(groups.items()):
        shipped = _given(stubs.get((assignment, exercise), "")) | _given((given or {}).get(assignment, ""))
        prints = [_fingerprint(a.source, shipped) for a in group]
        for (i, a), (j, b) in itertools.combinations(enumerate(group), 2):
            if not prints[i].token_coverage or not prints[j].token_coverage:
                continue
            overlap, shares, slices = _compare(prints[i], prints[j], a.source, b.source)
            if max(shares) > 0:
                pairs.append(Pair(assignment, exercise, a, b, max(shares), shares, slices, overlap))
    return sorted(pairs, key=lambda p: (-p.similarity, p.assignment, p.exercise, p.a.submission, p.b.submission))


def shipped_code(assignments: dict[str, Assignment]) -> dict[str, str]:
    """assignment -> every code cell of its exercise notebook as shipped (copydetect's boilerplate)."""
    return {name: "\n\n".join(c.source for c in a.cells if c.cell_type == "code") for name, a in assignments.items()}


def stubs_of(assignments: dict[str, Assignment]) -> dict[tuple[str, str], str]:
    """(assignment, exercise) -> its answer cell's stub (``Assignment.stubs``)."""
    return {(name, gid.removesuffix("_answer")): stub for name, a in assignments.items()
            for gid, stub in a.stubs().items()}


# --------------------------------------------------------------------------- reports
def _marked(source: str, slices) -> str:
    from copydetect.utils import highlight_overlap

    if len(slices[0]) == 0:
        return html.escape(source)
    text, _ = highlight_overlap(source, slices, "<mark>", "</mark>", escape_html=True)
    return text


def html_report(pairs: list[Pair], threshold: float, root: str = "") -> str:
    """Flagged pairs, most similar first, the two answers side by side with the matching code marked."""
    def short(p: str) -> str:
        return html.escape(p[len(root):].lstrip("/") if root and p.startswith(root) else p)

    flagged = [p for p in pairs if p.flagged(threshold)]
    parts = ["<h1>Similarity report</h1>",
             f"<p>{len(flagged)} pair(s) of answers at or above {threshold:.0%} similar (share of an answer's own "
             "code, after removing the stub, comments, whitespace and names, that also appears in the other). "
             "A flag is a reason to read both answers, not a verdict; grades are unchanged.</p>"]
    if len(flagged) > SHOWN:
        parts.append(f"<p>The {SHOWN} most similar are shown; the other {len(flagged) - SHOWN} are in the CSV "
                     "report.</p>")
    for n, p in enumerate(flagged[:SHOWN], 1):
        parts.append(f"<h2 id='pair{n}'>{n}. {html.escape(p.assignment)} · {html.escape(p.exercise)}: "
                     f"{p.similarity:.0%}</h2><table class='pair'><tr>"
                     f"<th>{short(p.a.submission)} ({p.shares[0]:.0%} of it matches)</th>"
                     f"<th>{short(p.b.submission)} ({p.shares[1]:.0%} of it matches)</th></tr><tr>"
                     f"<td><pre>{_marked(p.a.source, p.slices[0])}</pre></td>"
                     f"<td><pre>{_marked(p.b.source, p.slices[1])}</pre></td></tr></table>")
    return page("Similarity report", "\n".join(parts))


def csv_report(pairs: list[Pair], threshold: float) -> str:
    """Every pair that shares any code, most similar first, with whether it is flagged."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["assignment", "exercise", "submission_a", "submission_b", "similarity", "share_a", "share_b",
                "flagged"])
    for p in pairs:
        w.writerow([neutral(v) for v in (p.assignment, p.exercise, p.a.submission, p.b.submission,
                    f"{p.similarity:.3f}", f"{p.shares[0]:.3f}", f"{p.shares[1]:.3f}",
                    "yes" if p.flagged(threshold) else "no")])
    return buf.getvalue()


def require() -> None:
    """Fail now, in one sentence, when copydetect is missing (the CLI calls this before grading starts)."""
    try:
        import copydetect  # noqa: F401
    except ImportError:
        raise UsageError("the similarity report needs copydetect: "
                         "pip install -r requirements-instructor.txt.") from None


def write(submissions: Iterable[ParsedSubmission], assignments: dict[str, Assignment], out: str,
          threshold: float = THRESHOLD, root: str = "") -> tuple[list[Pair], list[Path]]:
    """Write OUT.html and OUT.csv (OUT without its suffix); returns the flagged pairs and the files written."""
    require()
    pairs = compare(answers(submissions, assignments), stubs_of(assignments), shipped_code(assignments))
    base = Path(out).with_suffix("") if Path(out).suffix in (".html", ".csv") else Path(out)
    written = [base.with_name(base.name + ".html"), base.with_name(base.name + ".csv")]
    atomic_write(written[0], html_report(pairs, threshold, root))
    atomic_write(written[1], csv_report(pairs, threshold))
    return [p for p in pairs if p.flagged(threshold)], written
