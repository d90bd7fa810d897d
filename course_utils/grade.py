"""Grade a folder of student submissions with one command, safely.

    python -m course_utils.grade SUBMISSION [SUBMISSION ...] --out grades.csv --feedback-dir feedback/

A SUBMISSION is a notebook or a folder (searched recursively). Each notebook is matched to
its exercise notebook by metadata, not file name. Only the students' answer cells are
taken from it; every other cell comes from the course's own copy in ``exercises/``, and
changes to locked cells are reported as flags (nbgrader-style checksums). Each submission
runs in a fresh worker process (``grade_worker``) in a scratch folder, sandboxed with
bubblewrap (read-only filesystem except the scratch folder, no network, capped memory and
time). Points come from the course's checks run by the worker, never from what the
notebook printed. A hang, crash, ``sys.exit`` or memory blow-up costs one exercise: the
worker is restarted for the remaining ones. Results are stored atomically per submission,
so an interrupted batch resumes where it stopped; shards split a batch across machines
and ``--merge`` combines their result folders.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import csv
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .release import ASSIGNMENT_KEY

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TIMEOUT = 60.0
DEFAULT_MEMORY = 4 << 30
SANDBOX_MISSING = ("bubblewrap (bwrap) was not found: student code runs WITHOUT a sandbox "
                   "(it can read and write your files and use the network). Install it: apt-get install bubblewrap.")
TAMPER_PATTERNS = [
    (re.compile(r"\btorch(\.\w+)+\s*=(?!=)"), "assigns to a torch attribute"),
    (re.compile(r"\bsetattr\s*\(\s*(torch|course_utils|checks|builtins)"), "setattr on the checking machinery"),
    (re.compile(r"\b(import|from)\s+course_utils"), "imports course_utils"),
    (re.compile(r"\bcourse_utils\b|\bchecks\.\w+\s*="), "refers to course_utils"),
    (re.compile(r"\bbuiltins\b|__builtins__"), "touches builtins"),
    (re.compile(r"\bsys\.modules\b"), "touches sys.modules"),
    (re.compile(r"\bgc\.get_objects\b|\bgc\.get_referrers\b"), "inspects live objects (gc)"),
]


class UsageError(Exception):
    """Bad command-line input: reported as one sentence, exit status 2."""


# --------------------------------------------------------------------------- course side
@dataclass(frozen=True)
class Assignment:
    name: str
    path: Path
    cells: list  # the course copy's cells (nbformat nodes)

    def exercises(self) -> list[str]:
        return [c.metadata["nbgrader"]["grade_id"] for c in self.cells
                if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")]


def checksum(source: str) -> str:
    """nbgrader-style cell checksum: of the source with trailing whitespace normalised."""
    text = "\n".join(line.rstrip() for line in source.strip().splitlines())
    return hashlib.sha256(text.encode()).hexdigest()


def load_assignments(course: Path = ROOT) -> dict[str, Assignment]:
    import nbformat

    found = {}
    for path in sorted((course / "exercises").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        name = nb.metadata.get(ASSIGNMENT_KEY, {}).get("assignment")
        if name:
            found[name] = Assignment(name, path, nb.cells)
    if not found:
        raise UsageError(f"no exercise notebooks with assignment metadata in {course / 'exercises'}; "
                         "run ./course build first.")
    return found


def course_version(assignments: dict[str, Assignment]) -> str:
    h = hashlib.sha256()
    for a in assignments.values():
        h.update(a.path.read_bytes())
    h.update((ROOT / "course_utils" / "checks.py").read_bytes())
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------- submission side
@dataclass
class Graded:
    """One row of the grade table."""

    submission: str
    assignment: str = ""
    status: str = "graded"  # graded | not a notebook | unknown assignment | no answer cells
    total: float = 0.0
    max: float = 0.0
    exercises: dict = field(default_factory=dict)
    flags: list = field(default_factory=list)
    sha256: str = ""
    course_version: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict:
        return asdict(self)


def _kind_and_exercise(cells) -> list[tuple[str, str | None]]:
    """For each code cell: 'answer' / 'check' / 'code', and the exercise whose span it is in."""
    out: list[tuple[str, str | None]] = []
    pending: list[int] = []
    for cell in cells:
        meta = cell.metadata.get("nbgrader", {}) if cell.cell_type == "code" else {}
        kind = "check" if meta.get("grade") else "answer" if meta.get("solution") else "code"
        out.append((kind, None))
        pending.append(len(out) - 1)
        if kind == "check":
            for i in pending:
                out[i] = (out[i][0], meta["grade_id"])
            pending = []
    return out


def prepare(path: Path, assignments: dict[str, Assignment]) -> tuple[Graded, list[dict] | None]:
    """Read a submission; return its row (with flags) and the worker's cell list, or None if ungradable."""
    import nbformat

    data = path.read_bytes()
    row = Graded(submission=str(path), sha256=hashlib.sha256(data).hexdigest())
    try:
        raw = json.loads(data.decode("utf-8"))
        if not isinstance(raw, dict) or "cells" not in raw:
            raise ValueError("no 'cells'")
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    except UnicodeDecodeError:
        row.status = "not a notebook"
        row.flags.append("not a notebook: the file is not UTF-8 text")
        return row, None
    except (json.JSONDecodeError, ValueError) as exc:
        row.status = "not a notebook"
        if not isinstance(exc, json.JSONDecodeError):
            kind = "JSON but not a notebook"
        elif path.suffix == ".ipynb":
            kind = "truncated or invalid JSON"
        else:
            kind = "not JSON"
        row.flags.append(f"not a notebook: {kind} ({str(exc)[:80]})")
        return row, None
    except Exception as exc:  # nbformat's own validation errors
        row.status = "not a notebook"
        row.flags.append(f"not a notebook: {type(exc).__name__}: {str(exc)[:80]}")
        return row, None
    name = nb.metadata.get(ASSIGNMENT_KEY, {}).get("assignment")
    if name not in assignments:
        row.status = "unknown assignment"
        row.flags.append(f"belongs to no known assignment (metadata says {name!r}; known: "
                         f"{', '.join(sorted(assignments))})")
        return row, None
    course = assignments[name]
    row.assignment = name
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    if not answers:
        row.status = "no answer cells"
        row.flags.append("has no answer cells (all cells with nbgrader solution metadata were deleted)")
        return row, None
    theirs = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    extra = sum(1 for c in nb.cells if "grade_id" not in c.metadata.get("nbgrader", {}))
    if extra:
        row.flags.append(f"{extra} cell(s) added by the student were ignored (only answer cells are graded)")
    cells = []
    for (kind, exercise), cell in zip(_kind_and_exercise(course.cells), course.cells):
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "code" and kind == "answer":
            if gid not in answers:
                row.flags.append(f"answer cell {gid} is missing from the submission (graded as not attempted)")
                source = cell.source
            else:
                source = answers[gid]
                for pattern, what in TAMPER_PATTERNS:
                    hit = pattern.search(source)
                    if hit:
                        row.flags.append(f"answer cell {gid} {what}: `{hit.group(0).strip()}`")
            cells.append({"kind": "answer", "exercise": exercise, "source": source})
            continue
        if cell.metadata.get("nbgrader", {}).get("locked"):
            mine = theirs.get(gid)
            if mine is None:
                row.flags.append(f"locked cell {gid} was deleted (the course's copy was used)")
            elif checksum(mine.source) != checksum(cell.source):
                row.flags.append(f"locked cell {gid} was modified (the course's copy was used)")
        if cell.cell_type == "code":
            cells.append({"kind": kind, "exercise": exercise, "source": cell.source})
    for gid in course.exercises():
        row.exercises[gid] = {"points": 0.0, "max": 0.0, "status": "not graded", "feedback": "", "mistakes": []}
    return row, cells


# --------------------------------------------------------------------------- running
def sandbox_available() -> bool:
    return shutil.which("bwrap") is not None and _bwrap_works()


_BWRAP_OK: bool | None = None


def _bwrap_works() -> bool:
    global _BWRAP_OK
    if _BWRAP_OK is None:
        try:
            _BWRAP_OK = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                        "--unshare-net", "--unshare-pid", "--die-with-parent", "true"],
                                       capture_output=True, timeout=20).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _BWRAP_OK = False
    return _BWRAP_OK


def worker_command(scratch: Path, sandbox: bool) -> list[str]:
    python = [sys.executable, "-m", "course_utils.grade_worker"]
    if not sandbox:
        return python
    # The whole filesystem read-only (the course and its Python may live anywhere, /tmp included),
    # the scratch folder writable, no network.
    return ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--bind", str(scratch), str(scratch), "--unshare-net", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--die-with-parent", "--new-session", "--chdir", str(scratch),
            "--setenv", "HOME", str(scratch), "--setenv", "TMPDIR", str(scratch), "--"] + python


def _run_worker(cells, grade, skip, scratch, options, on_message) -> str:
    """Run one worker; feed messages to on_message; return 'done', 'timeout' or 'died'."""
    nonce = secrets.token_hex(16)
    job = {"nonce": nonce, "cells": cells, "grade": grade, "skip_answers": sorted(skip),
           "time_limit": max(1.0, options.timeout / 3), "memory": options.memory}
    env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), MPLBACKEND="Agg")
    proc = subprocess.Popen(worker_command(scratch, options.sandbox), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=scratch, env=env, start_new_session=True, text=True)
    state = {"deadline": time.monotonic() + options.timeout + 60}  # start-up (torch import) gets extra time

    def reader():
        for line in proc.stdout:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            if message.get("nonce") != nonce:
                on_message({"event": "forged"})
                continue
            if message.get("event") in ("ready", "begin", "result"):
                state["deadline"] = time.monotonic() + options.timeout
            on_message(message)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
    except BrokenPipeError:
        pass
    outcome = "done"
    while proc.poll() is None:
        if time.monotonic() > state["deadline"]:
            outcome = "timeout"
            break
        time.sleep(0.05)
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        proc.wait()
    thread.join(timeout=5)
    if outcome == "done" and proc.returncode != 0:
        outcome = "died"
    return outcome


def grade_submission(path: Path, assignments: dict[str, Assignment], options) -> Graded:
    started = time.monotonic()
    row, cells = prepare(path, assignments)
    if not options.sandbox:
        row.flags.append("graded without sandbox (bubblewrap missing)")
    if cells is None:
        return row
    order = list(row.exercises)
    done: dict[str, dict] = {}
    broken: set[str] = set()
    scratch = Path(tempfile.mkdtemp(prefix="grade-"))
    try:
        while len(done) < len(order):
            remaining = [g for g in order if g not in done]
            current = {"exercise": None, "forged": 0, "ready": False}

            def on_message(message, current=current):
                event = message.get("event")
                if event == "forged":
                    current["forged"] += 1
                elif event == "ready":
                    current["ready"] = True
                elif event == "begin":
                    current["exercise"] = message["exercise"]
                elif event == "result" and message.get("exercise") in remaining and message["exercise"] not in done:
                    done[message["exercise"]] = message

            outcome = _run_worker(cells, remaining, broken, scratch, options, on_message)
            if current["forged"]:
                row.flags.append(f"{current['forged']} forged result line(s) on the grader's channel were ignored")
            if len(done) == len(order):
                break
            culprit = current["exercise"] if current["exercise"] not in (None, *done) else next(
                g for g in order if g not in done)
            if not current["ready"] and culprit == remaining[0] and outcome != "timeout":
                reason = "the grading process could not start (is torch installed?)"
            else:
                reason = {"timeout": f"did not finish within {options.timeout:g} s (endless loop?); it was stopped",
                          "died": "the Python process died while running it (os._exit, a signal, or a crash)",
                          "done": "the process ended before this exercise was checked (sys.exit or os._exit?)"}[outcome]
            done[culprit] = {"points": 0.0, "max": _max_points(culprit), "status": "failed",
                             "feedback": f"✗ {culprit}: 0/{_max_points(culprit):g} points. Your code {reason}.",
                             "mistakes": ["timeout" if outcome == "timeout" else "raised"], "cell_errors": [],
                             "patched": [], "fake_output": False, "printed": 0}
            broken.add(culprit)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for gid in order:
        r = done[gid]
        feedback = r["feedback"]
        if r.get("cell_errors"):
            feedback += "".join(f"\n  note: {e}" for e in r["cell_errors"])
        row.exercises[gid] = {"points": r["points"], "max": r["max"], "status": r["status"], "feedback": feedback,
                              "mistakes": r.get("mistakes", [])}
        if r.get("patched"):
            row.flags.append(f"{gid}: answer code patched the checking machinery "
                             f"({', '.join(r['patched'][:5])}); the originals were restored before checking")
        if r.get("fake_output"):
            row.flags.append(f"{gid}: answer code printed text that looks like a check result (ignored)")
        if r.get("printed", 0) > 1_000_000:
            row.flags.append(f"{gid}: answer code printed {r['printed']:,} characters (discarded)")
    row.total = sum(e["points"] for e in row.exercises.values())
    row.max = sum(e["max"] for e in row.exercises.values())
    row.seconds = round(time.monotonic() - started, 2)
    return row


def _max_points(gid: str) -> float:
    from .checks import EXERCISES

    return EXERCISES[gid].points if gid in EXERCISES else 0.0


# --------------------------------------------------------------------------- storage and reports
def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def result_key(row_or_path: Graded | Path, version: str) -> str:
    if isinstance(row_or_path, Graded):
        digest, name = row_or_path.sha256, row_or_path.submission
    else:
        digest, name = hashlib.sha256(row_or_path.read_bytes()).hexdigest(), str(row_or_path)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[-80:]
    return f"{hashlib.sha256((digest + name + version).encode()).hexdigest()[:20]}-{safe}.json"


def load_results(folders: list[Path]) -> list[Graded]:
    rows = []
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(f"{folder} is not a results folder (expected the --results folder of a grading run).")
        for path in sorted(folder.glob("*.json")):
            rows.append(Graded(**json.loads(path.read_text())))
    return rows


def _common_root(paths: list[str]) -> str:
    """The folder all submissions share, so feedback file names keep only what tells them apart."""
    try:
        return os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths]) if paths else ""
    except ValueError:  # different drives
        return ""


def feedback_name(submission: str, root: str) -> str:
    rel = os.path.relpath(os.path.abspath(submission), root) if root else submission
    return re.sub(r"[^A-Za-z0-9_.-]+", "__", rel.removesuffix(".ipynb")).strip("_") + ".txt"


def feedback_text(row: Graded) -> str:
    lines = [f"Submission: {row.submission}", f"Assignment: {row.assignment or '-'}",
             f"Result: {row.status}, {row.total:g}/{row.max:g} points", ""]
    for gid, e in row.exercises.items():
        lines += [e["feedback"] or f"{gid}: {e['status']}", ""]
    if row.flags:
        lines += ["Flags:"] + [f"  - {f}" for f in row.flags]
    return "\n".join(lines).rstrip() + "\n"


def table_csv(rows: list[Graded]) -> str:
    from .checks import EXERCISES

    ids = [g for g in EXERCISES if any(g in r.exercises for r in rows)]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["submission", "assignment", "status", "total", "max", *ids, "flags"])
    for r in sorted(rows, key=lambda r: r.submission):
        w.writerow([r.submission, r.assignment, r.status, f"{r.total:g}", f"{r.max:g}",
                    *[f"{r.exercises[g]['points']:g}" if g in r.exercises else "" for g in ids],
                    " | ".join(r.flags)])
    return buf.getvalue()


def write_reports(rows: list[Graded], options, root: str) -> None:
    if options.out:
        atomic_write(Path(options.out), table_csv(rows))
    if options.feedback_dir:
        for r in rows:
            atomic_write(Path(options.feedback_dir) / feedback_name(r.submission, root), feedback_text(r))


# --------------------------------------------------------------------------- command line
def collect(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found += sorted(f for f in path.rglob("*") if f.is_file() and not any(
                part.startswith(".") for part in f.relative_to(path).parts))
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"{p} does not exist: pass notebooks or folders of notebooks.")
    return sorted(dict.fromkeys(found))


def parse_shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)/(\d+)", text or "")
    if not m or not (1 <= int(m.group(1)) <= int(m.group(2))):
        raise UsageError(f"--shard must look like K/N with 1 <= K <= N (e.g. 2/4), got {text!r}.")
    return int(m.group(1)), int(m.group(2))


class _Progress:
    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, 0, enabled
        self.lock = threading.Lock()
        self.draw()

    def draw(self) -> None:
        if self.enabled and self.total:
            width = 30
            filled = int(width * self.done / self.total)
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} submissions")
            sys.stderr.flush()

    def step(self) -> None:
        with self.lock:
            self.done += 1
            self.draw()

    def close(self) -> None:
        if self.enabled and self.total:
            sys.stderr.write("\n")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m course_utils.grade", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("submissions", nargs="*", metavar="SUBMISSION", help="notebooks or folders of notebooks")
    p.add_argument("--out", help="write the grade table (CSV) here")
    p.add_argument("--feedback-dir", help="write one feedback file per submission here")
    p.add_argument("--results", help="folder of per-submission results, used to resume (default: OUT.results)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per exercise (default 60)")
    p.add_argument("--memory", type=float, default=DEFAULT_MEMORY / 2**30, help="GiB of memory per worker (default 4)")
    p.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object per submission on stdout")
    p.add_argument("--shard", help="grade only shard K of N (K/N), e.g. on separate machines; merge with --merge")
    p.add_argument("--merge", nargs="+", metavar="RESULTS", help="combine result folders of shards into one table")
    p.add_argument("--no-sandbox", action="store_true", help="run without bubblewrap even if it is installed")
    p.add_argument("--course", default=str(ROOT), help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    options = parser.parse_args(argv)
    try:
        return _main(options)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _main(options) -> int:
    if options.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {options.jobs}.")
    if options.timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {options.timeout:g}.")
    options.memory = int(options.memory * 2**30)
    if options.merge:
        if options.submissions:
            raise UsageError("give either submissions to grade or --merge RESULTS folders, not both.")
        rows = load_results([Path(f) for f in options.merge])
        write_reports(rows, options, _common_root([r.submission for r in rows]))
        for r in rows if options.json else []:
            print(json.dumps(r.to_json()))
        print(f"merged {len(rows)} results", file=sys.stderr)
        return 0
    if not options.submissions:
        raise UsageError("no submissions given: pass notebooks or folders (see --help).")
    files = collect(options.submissions)
    if options.shard:
        k, n = parse_shard(options.shard)
        files = [f for i, f in enumerate(files) if i % n == k - 1]
    assignments = load_assignments(Path(options.course))
    version = course_version(assignments)
    options.sandbox = not options.no_sandbox and sandbox_available()
    if not options.sandbox:
        print(f"WARNING: {SANDBOX_MISSING}" if not options.no_sandbox else
              "WARNING: --no-sandbox: student code runs without isolation.", file=sys.stderr)
    results_dir = Path(options.results) if options.results else (
        Path(options.out + ".results") if options.out else None)
    root = _common_root([str(f) for f in files])
    rows: list[Graded] = []
    todo: list[Path] = []
    for f in files:
        cached = results_dir / result_key(f, version) if results_dir else None
        if cached is not None and cached.exists():
            rows.append(Graded(**json.loads(cached.read_text())))
        else:
            todo.append(f)
    if rows:
        print(f"resuming: {len(rows)} submission(s) already graded, {len(todo)} to go", file=sys.stderr)
        for r in rows if options.json else []:
            print(json.dumps(r.to_json()), flush=True)
    progress = _Progress(len(todo), sys.stderr.isatty())
    lock = threading.Lock()

    def one(path: Path) -> Graded:
        row = grade_submission(path, assignments, options)
        row.course_version = version
        with lock:
            if results_dir is not None:
                atomic_write(results_dir / result_key(row, version), json.dumps(row.to_json(), indent=1))
            rows.append(row)
            if options.json:
                print(json.dumps(row.to_json()), flush=True)
        progress.step()
        return row

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=options.jobs) as pool:
            for future in [pool.submit(one, f) for f in todo]:
                future.result()
    except KeyboardInterrupt:
        progress.close()
        write_reports(rows, options, root)
        print(f"interrupted: {len(rows)} result(s) kept; run the same command again to resume", file=sys.stderr)
        return 130
    progress.close()
    write_reports(rows, options, root)
    graded = [r for r in rows if r.status == "graded"]
    print(f"graded {len(graded)} of {len(rows)} submission(s)"
          + (f"; table: {options.out}" if options.out else "")
          + (f"; feedback: {options.feedback_dir}" if options.feedback_dir else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
