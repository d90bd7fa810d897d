"""Similarity report: the answers of every pair of submissions, exercise by exercise.

    python -m course_utils.grade SUBMISSIONS --similarity report.html

Uses copydetect (winnowed fingerprints of tokenised code, Schleimer et al. 2003): comments
and whitespace are dropped and every identifier becomes one placeholder, so renamed
variables and reordered methods still match. Only answer cells are compared, and what
the course gave everyone (the answer cell's stub: imports, class and method headers) is
removed before comparing; an answer left as the stub is not compared at all. The report
flags pairs to read; it never changes a grade.
"""
from __future__ import annotations

import csv
import html
import io
import itertools
from dataclasses import dataclass
from pathlib import Path

from .collect import Assignment, NotebookError, UsageError, checksum, display_name, parse_notebook, read_submission
from .reports import neutral, page
from .store import atomic_write

THRESHOLD = 0.6  # flagged when this share of either answer's own code matches the other's
SHOWN = 200  # flagged pairs shown side by side in the HTML report (all of them are in the CSV)


@dataclass(frozen=True)
class Answer:
    submission: str
    source: str


@dataclass
class Pair:
    assignment: str
    exercise: str
    a: Answer
    b: Answer
    similarity: float  # the larger of the two shares
    shares: tuple[float, float]
    slices: tuple  # copydetect's (starts, ends) of the matching code in each source


def answers(files: list[Path], assignments: dict[str, Assignment]) -> dict[tuple[str, str], list[Answer]]:
    """(assignment, exercise) -> the submissions' answers that differ from the course's stub."""
    groups: dict[tuple[str, str], list[Answer]] = {}
    for path in files:
        try:
            name, cells = parse_notebook(read_submission(path), path.suffix)
        except (NotebookError, OSError, ValueError, RecursionError, MemoryError):
            continue  # the grade table already says why
        if name not in assignments:
            continue
        stubs = {c.nbgrader["grade_id"]: c.source for c in assignments[name].cells if c.nbgrader["solution"]}
        seen = set()
        for c in cells:
            gid = c.nbgrader["grade_id"]
            if not c.nbgrader["solution"] or gid not in stubs or gid in seen:
                continue
            seen.add(gid)
            if checksum(c.source) != checksum(stubs[gid]):
                groups.setdefault((name, gid.removesuffix("_answer")), []).append(Answer(display_name(path), c.source))
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


def compare(groups: dict[tuple[str, str], list[Answer]], stubs: dict[tuple[str, str], str]) -> list[Pair]:
    """Every pair of answers to the same exercise that share any code, most similar first."""
    from copydetect import compare_files

    pairs = []
    for (assignment, exercise), group in sorted(groups.items()):
        given = _given(stubs.get((assignment, exercise), ""))
        prints = [_fingerprint(a.source, given) for a in group]
        for (i, a), (j, b) in itertools.combinations(enumerate(group), 2):
            if not prints[i].token_coverage or not prints[j].token_coverage:
                continue
            _, shares, slices = compare_files(prints[i], prints[j])
            shares = (min(float(shares[0]), 1.0), min(float(shares[1]), 1.0))
            if max(shares) > 0:
                pairs.append(Pair(assignment, exercise, a, b, max(shares), shares, slices))
    return sorted(pairs, key=lambda p: (-p.similarity, p.assignment, p.exercise, p.a.submission, p.b.submission))


def stubs_of(assignments: dict[str, Assignment]) -> dict[tuple[str, str], str]:
    return {(name, c.nbgrader["grade_id"].removesuffix("_answer")): c.source for name, a in assignments.items()
            for c in a.cells if c.nbgrader["solution"] and c.nbgrader["grade_id"]}


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

    flagged = [p for p in pairs if p.similarity >= threshold]
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
                    "yes" if p.similarity >= threshold else "no")])
    return buf.getvalue()


def require() -> None:
    """Fail now, in one sentence, when copydetect is missing (the CLI calls this before grading starts)."""
    try:
        import copydetect  # noqa: F401
    except ImportError:
        raise UsageError("the similarity report needs copydetect: "
                         "pip install -r requirements-instructor.txt.") from None


def write(files: list[Path], assignments: dict[str, Assignment], out: str, threshold: float = THRESHOLD,
          root: str = "") -> tuple[list[Pair], list[Path]]:
    """Write OUT.html and OUT.csv (OUT without its suffix); returns the flagged pairs and the files written."""
    require()
    pairs = compare(answers(files, assignments), stubs_of(assignments))
    base = Path(out).with_suffix("") if Path(out).suffix in (".html", ".csv") else Path(out)
    written = [base.with_name(base.name + ".html"), base.with_name(base.name + ".csv")]
    atomic_write(written[0], html_report(pairs, threshold, root))
    atomic_write(written[1], csv_report(pairs, threshold))
    return [p for p in pairs if p.similarity >= threshold], written
