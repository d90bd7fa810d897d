"""The grade book at scale: 10, 100 and 1,000 students x 11 assignments of synthetic rows (issue 39).

Each size gets a fresh book, filled and read through the documented paths: recording a batch
(``GradeBook.record``, what ``./course grade --book`` and ``--merge`` do), one decision per ten
students (``accept`` / ``override`` through ``book_cli.main``, as on the command line) and every
export format with a roster and due dates (``book_cli.main(["export", ...])``, the whole command:
reading the book, applying decisions, matching the roster, the late policy, writing the file).

After the exports, one more decision is timed: the book then remembers the four exports, and the
decision rewrites them all from the book (issue 46: every output agrees with the book after every
decision).

The rows are synthetic (``SubmissionResult`` with the course's 11 assignments and their real
exercise ids, seeded points, 1 in 20 held for review); no student code runs. What matters is the
cost per row, which should stay flat from 110 to 11,000 rows, and the export of 1,000 students
(target: under 2 s on 2 cores). Times are wall-clock medians of ``ROUNDS`` and depend on the machine's load,
which is reported with them.
"""
from __future__ import annotations

import contextlib
import csv
import io
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (10, 100, 1000)
ROUNDS = 3
TARGET_S = 2.0  # export of 1,000 students
FORMATS = ("csv", "canvas", "moodle", "nbgrader")


def course_assignments() -> dict[str, list[tuple[str, float]]]:
    """Each assignment of the course with its exercises' (grade id, points), from the exercise notebooks."""
    from course_utils.checks import EXERCISES
    from course_utils.grading.assignment import load_assignments

    return {name: [(gid, EXERCISES[gid].points) for gid in a.exercises()] for name, a in load_assignments(ROOT).items()}


def synthetic_rows(students: int, assignments: dict[str, list[tuple[str, float]]], seed: int = 0) -> list:
    """One graded submission per student and assignment, seeded points, 1 in 20 held for review."""
    from course_utils.grading.results import HELD, ExerciseResult, SubmissionResult

    rng = random.Random(seed)
    rows = []
    for s in range(students):
        for name, exercises in assignments.items():
            parts = {gid: ExerciseResult(gid, rng.choice((0.0, points / 2, points)), points, "passed")
                     for gid, points in exercises}
            held = rng.random() < 0.05
            rows.append(SubmissionResult(f"term/{name}/s{s:05d}_{name}.ipynb", name, HELD if held else "graded",
                                         sha256=f"{rng.getrandbits(256):064x}", exercises=parts,
                                         review=["calls autograd inside backward"] if held else []))
    return rows


def write_inputs(folder: Path, students: int, assignments: dict, rows: list) -> tuple[Path, Path, Path]:
    """The roster, due dates (1 h grace, 10% a day) and submission times (1 in 8 a day late)."""
    roster, due, times = folder / "roster.csv", folder / "due.csv", folder / "times.csv"
    with open(roster, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "name", "email", "pattern"])
        for s in range(students):
            w.writerow([f"{s:05d}", f"Student {s}", f"s{s}@example.edu", f"*s{s:05d}_*"])
    with open(due, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["assignment", "due", "grace_hours", "penalty_per_day"])
        for i, name in enumerate(sorted(assignments)):
            w.writerow([name, f"2027-03-{10 + i:02d}T23:59:00+01:00", "1", "0.1"])
    day = {name: 10 + i for i, name in enumerate(sorted(assignments))}
    with open(times, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", "assignment", "submitted_at"])
        for k, r in enumerate(rows):
            w.writerow([r.submission, r.assignment, f"2027-03-{day[r.assignment] + (k % 8 == 0):02d}T20:00:00+00:00"])
    return roster, due, times


def timed(fn) -> tuple[float, float]:
    """Wall-clock and process CPU medians of ROUNDS calls (stdout and stderr of the commands swallowed).

    On a loaded machine the wall clock also counts the time other processes held the cores; the CPU
    time is what the command itself cost.
    """
    wall, cpu = [], []
    for _ in range(ROUNDS):
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            start, start_cpu = time.perf_counter(), time.process_time()
            code = fn()
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        assert code in (None, 0), f"a book command failed (exit {code})"
    return statistics.median(wall), statistics.median(cpu)


def measure(students: int, assignments: dict) -> dict[str, tuple[float, float]]:
    from course_utils.grading.book import book_cli
    from course_utils.grading.book.gradebook import GradeBook

    rows = synthetic_rows(students, assignments)
    out: dict[str, tuple[float, float]] = {"rows": (len(rows), len(rows))}
    with tempfile.TemporaryDirectory(prefix="bench-book-") as tmp:
        folder = Path(tmp)
        roster, due, times = write_inputs(folder, students, assignments, rows)
        book = folder / "book.sqlite"

        def record() -> None:
            with GradeBook(book) as gb:
                gb.record(rows)

        out["record"] = timed(record)  # the first round creates, the others replace (a rerun or a merge)
        decided = rows[:: 10 * len(assignments)]
        start = time.perf_counter()
        with contextlib.redirect_stderr(io.StringIO()):
            for i, row in enumerate(decided):
                args = (["accept", row.submission] if i % 2 else
                        ["override", row.submission, next(iter(row.exercises)), "0"])
                assert book_cli.main([args[0], "--book", str(book), *args[1:], "--reason", "benchmark",
                                      "--who", "bench"]) == 0
        per = (time.perf_counter() - start) / max(len(decided), 1)
        out["decision"] = (per, per)
        for fmt in FORMATS:
            target = folder / f"export.{fmt}.csv"
            out[fmt] = timed(lambda fmt=fmt, target=target: book_cli.main(
                ["export", "--book", str(book), "--format", fmt, "--roster", str(roster), "--due", str(due),
                 "--times", str(times), "--out", str(target)]))
        row = rows[1]
        start, start_cpu = time.perf_counter(), time.process_time()
        with contextlib.redirect_stderr(io.StringIO()):
            assert book_cli.main(["accept", "--book", str(book), row.submission, "--reason", "benchmark",
                                  "--who", "bench"]) == 0
        out["refresh"] = (time.perf_counter() - start, time.process_time() - start_cpu)
    return out


def run() -> str:
    assignments = course_assignments()
    load_before = os.getloadavg()[0]
    results = {n: measure(n, assignments) for n in SIZES}
    load_after = os.getloadavg()[0]
    lines = ["## Grade book at scale: record, decide, export (synthetic rows)", "",
             f"{len(assignments)} assignments, {sum(len(e) for e in assignments.values())} exercises; one decision "
             f"per ten students; exports with a roster, due dates and submission times (the whole `export` command); "
             f"medians of {ROUNDS} rounds, wall clock and (in brackets) the process's CPU time. Load average (1 min) "
             f"{load_before:.1f} before, {load_after:.1f} after, on {os.cpu_count()} cores: above the core count, "
             "the wall clock counts other processes' time too.", "",
             "| students | rows | record | record per row | decision | " + " | ".join(f"export {f}" for f in FORMATS)
             + " | export CPU per row | decision, 4 exports rewritten |",
             "| ---: | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in FORMATS) + " | ---: | ---: |"]

    def slowest(r: dict, which: int) -> float:
        return max(r[f][which] for f in FORMATS)

    for n, r in results.items():
        rows = r["rows"][0]
        lines.append(f"| {n:,} | {int(rows):,} | {r['record'][0]:.3f} s ({r['record'][1]:.3f}) | "
                     f"{r['record'][1] / rows * 1e6:.0f} µs | {r['decision'][0] * 1e3:.0f} ms | "
                     + " | ".join(f"{r[f][0]:.2f} s ({r[f][1]:.2f})" for f in FORMATS)
                     + f" | {slowest(r, 1) / rows * 1e6:.0f} µs | {r['refresh'][0]:.2f} s ({r['refresh'][1]:.2f}) |")
    big, mid = results[SIZES[-1]], results[SIZES[1]]
    growth = (slowest(big, 1) / big["rows"][0]) / (slowest(mid, 1) / mid["rows"][0])
    lines += ["", f"Export of {SIZES[-1]:,} students, slowest format: {slowest(big, 0):.2f} s wall clock, "
              f"{slowest(big, 1):.2f} s CPU (target < {TARGET_S:g} s: {'met' if slowest(big, 0) < TARGET_S else 'not met'}"
              f" on the wall clock, {'met' if slowest(big, 1) < TARGET_S else 'not met'} in CPU time). Export CPU per "
              f"row at {SIZES[-1]:,} students is {growth:.2f}x that at {SIZES[1]:,} (flat: about 1x)."]
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    run()
