"""Grading throughput against the floor of starting a Python process and importing torch.

The floor is measured the same way the grader starts its runners (inside the same sandbox,
limits and all). A batch of correct submissions of every assignment is graded with
``--jobs 1`` and ``--jobs 2``; we report seconds per submission, the ratio to the floor, and
the speed-up from the second job.
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from course_utils.grading.sandbox import sandbox, zygote
from course_utils.grading.sandbox.limits import Limits

ROOT = Path(__file__).resolve().parent.parent
COPIES = 3  # of each of the six solution notebooks


def floor_seconds(repeat: int = 5) -> float:
    box = sandbox.detect()
    times = []
    for _ in range(repeat):
        limits = Limits(4 << 30, None)
        fd = sandbox.seccomp_pipe() if box.mode != "none" else None
        if box.mode == "none":
            command = sandbox.plain_command()
        else:
            command = sandbox.bwrap_command(box.mode, sandbox.COURSE_UTILS, zygote.SCRATCH_BYTES, fd)
        command[-1] = "import torch"
        t0 = time.perf_counter()
        try:
            subprocess.run(limits.wrap(command), check=True, capture_output=True, cwd="/",
                           pass_fds=(fd,) if fd is not None else ())
        finally:
            times.append(time.perf_counter() - t0)
            limits.close(None)
            if fd is not None:
                os.close(fd)
    return statistics.median(times)


def kernel_floor_seconds(repeat: int = 3) -> float:
    """Start a Jupyter kernel, import torch in it, shut it down: what a notebook-based grader pays."""
    from jupyter_client.manager import start_new_kernel

    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            kc.execute_interactive("import torch", timeout=120)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


BASELINE = "2a1af78"  # the last commit before the judge/runner split


def make_batch(folder: Path, solutions: Path) -> int:
    folder.mkdir(parents=True)
    count = 0
    for nb in sorted(solutions.glob("*_exercises.ipynb")):
        for i in range(COPIES):
            shutil.copy(nb, folder / f"student{i}_{nb.name}")
            count += 1
    return count


def busy_core_seconds() -> float:
    """The machine's busy CPU time since boot, all cores (``/proc/stat``: user, nice, system, irq, softirq).

    Read before and after a batch: the sandboxes' runners are not the grader's children for ``rusage``."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def batch_run(folder: Path, jobs: int, course: Path = ROOT) -> tuple[float, float]:
    """(wall seconds, busy core-seconds of the whole machine) of grading ``folder`` with the grader (and course)
    found at ``course``."""
    env = dict(os.environ, PYTHONPATH=str(course))
    busy, t0 = busy_core_seconds(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "course_utils.grade", str(folder), "--jobs", str(jobs)],
                   check=True, capture_output=True, cwd=course, env=env)
    return time.perf_counter() - t0, busy_core_seconds() - busy


def batch_seconds(folder: Path, jobs: int, course: Path = ROOT) -> float:
    """Wall time of grading ``folder`` with the grader (and course) found at ``course``."""
    return batch_run(folder, jobs, course)[0]


def baseline_checkout(work: Path) -> Path | None:
    """The course as it was at BASELINE (a git worktree), or None outside a git checkout."""
    target = work / "baseline"
    done = subprocess.run(["git", "worktree", "add", "--detach", str(target), BASELINE], check=False, cwd=ROOT,
                          capture_output=True)
    return target if done.returncode == 0 else None


VERSUS = ("02_exercises", "03_exercises", "04_exercises", "05_exercises", "06_exercises", "07_exercises")


def versus_nbgrader(work: Path) -> tuple[int, float, float, float] | None:
    """(submissions, nbgrader autograde s, ours --jobs 1 s, ours --jobs 2 s) on the same 6 notebooks, or None.

    One correct student per assignment in VERSUS: nbgrader's course folder is made with its own
    generate_assignment; our grader reads the very files nbgrader autogrades.
    """
    import nbformat

    nbgrader = Path(sys.executable).parent / "nbgrader"
    if not nbgrader.exists():
        return None
    course = work / "nbgrader"
    (course / "jupyter").mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), JUPYTER_CONFIG_DIR=str(course / "jupyter"), PYTHONHASHSEED="0",
               PATH=f"{nbgrader.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    (course / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.root = {str(course)!r}\n"
        f"c.CourseDirectory.db_url = 'sqlite:///{course}/gradebook.db'\nc.Execute.timeout = 300\n")
    for name in VERSUS:
        (course / "source" / name).mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / f"{name}.ipynb", course / "source" / name)
    subprocess.run([str(nbgrader), "generate_assignment", "*", "--create"], cwd=course, env=env, check=True,
                   capture_output=True)
    ours = work / "versus"
    ours.mkdir()
    for name in VERSUS:
        released = nbformat.read(course / "release" / name / f"{name}.ipynb", as_version=4)
        solved = {c.metadata["nbgrader"]["grade_id"]: c.source
                  for c in nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4).cells
                  if c.metadata.get("nbgrader", {}).get("solution")}
        for cell in released.cells:
            if cell.metadata.get("nbgrader", {}).get("solution"):
                cell.source = solved[cell.metadata["nbgrader"]["grade_id"]]
        folder = course / "submitted" / "student" / name
        folder.mkdir(parents=True)
        nbformat.write(released, folder / f"{name}.ipynb")
        shutil.copy(folder / f"{name}.ipynb", ours / f"{name}.ipynb")
    t0 = time.perf_counter()
    subprocess.run([str(nbgrader), "autograde", "*", "--create"], cwd=course, env=env, check=True,
                   capture_output=True)
    theirs = time.perf_counter() - t0
    return len(VERSUS), theirs, batch_seconds(ours, 1), batch_seconds(ours, 2)


def run() -> str:
    work = Path(tempfile.mkdtemp(prefix="grade-bench-"))
    base = None
    try:
        n = make_batch(work / "subs", ROOT / "solutions")
        floor = floor_seconds()
        kernel_floor = kernel_floor_seconds()
        one = batch_seconds(work / "subs", 1)
        two, two_busy = batch_run(work / "subs", 2)
        versus = versus_nbgrader(work)
        base = baseline_checkout(work)
        same = None
        if base is not None:  # the old grader and the new one on the same (old) notebooks, back to back
            n_old = make_batch(work / "old", base / "solutions")
            old = batch_seconds(work / "old", 1, base)
            new_on_old = batch_seconds(work / "old", 1)
            same = (n_old, old, new_on_old)
    finally:
        if base is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], check=False, cwd=ROOT, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    box = sandbox.detect()
    probe = Limits(1 << 30, None)
    probe.close(None)
    where = {"root": "inside bubblewrap, dropped to an unprivileged uid", "user": "inside bubblewrap's user namespace",
             "uid": "as a separate uid without namespaces", "none": f"WITHOUT sandbox ({box.reason})"}[box.mode]
    from course_utils.checks import EXERCISES

    rows = [
        "## Grading throughput",
        "",
        f"{n} correct submissions ({COPIES} of every assignment, {len(EXERCISES)} exercises in all), runners {where}, "
        f"limits by {probe.kind}. The judge never runs student code. Under bubblewrap each slot's runners are "
        "forked from one zygote that imported torch once (`grading/sandbox/zygote.py`), so a runner start costs less than "
        "the process floor below: a bare process that imports torch, started the way a zygote is.",
        "",
        "| measurement | seconds per submission | vs kernel floor | vs process floor |",
        "| --- | ---: | ---: | ---: |",
        f"| floor: start a Jupyter kernel + import torch | {kernel_floor:.2f} | 1.00x | {kernel_floor / floor:.2f}x |",
        f"| floor: start a Python process + import torch | {floor:.2f} | {floor / kernel_floor:.2f}x | 1.00x |",
        f"| grading, --jobs 1 | {one / n:.2f} | {one / n / kernel_floor:.2f}x | {one / n / floor:.2f}x |",
        f"| grading, --jobs 2 | {two / n:.2f} | {two / n / kernel_floor:.2f}x | {two / n / floor:.2f}x |",
    ]
    if same is not None:
        n_old, old, new_on_old = same
        rows += [
            f"| before the split ({BASELINE}), its {n_old} solution notebooks, --jobs 1 | {old / n_old:.2f} | "
            f"{old / n_old / kernel_floor:.2f}x | {old / n_old / floor:.2f}x |",
            f"| now, the same {n_old} notebooks, --jobs 1 | {new_on_old / n_old:.2f} | "
            f"{new_on_old / n_old / kernel_floor:.2f}x | {new_on_old / n_old / floor:.2f}x |",
        ]
    cores = min(2, os.cpu_count() or 1)
    rows += ["", f"Speed-up from --jobs 2: {one / two:.2f}x (target: at least 1.7x). The --jobs 2 batch used "
             f"{two_busy:.1f} core-seconds of CPU (the whole machine's, from /proc/stat: judge, zygotes and runners), "
             f"{two_busy / (two * cores):.0%} of its {cores} cores for its {two:.1f} s. On {cores} cores that are never "
             f"idle that CPU takes {two_busy / cores:.1f} s at least: a speed-up of at most {one / (two_busy / cores):.2f}x "
             "with this work, whatever the order of the queue."]
    if versus is not None:
        k, theirs, mine1, mine2 = versus
        rows += ["", f"Against real nbgrader, the same {k} correct notebooks (one per assignment 02-07) in the same "
                 f"run: `nbgrader autograde` {theirs:.1f} s; this grader {mine1:.1f} s at --jobs 1 "
                 f"({theirs / mine1:.1f}x faster) and {mine2:.1f} s at --jobs 2 ({theirs / mine2:.1f}x faster; "
                 "target: at least 5x)."]
    else:
        rows += ["", "Against real nbgrader: not measured (nbgrader is not installed; `./course test` installs it)."]
    if same is not None:
        rows.append(f"Judge/runner split and sandbox, same notebooks, same run: {same[2] / same[1]:.2f}x the time "
                    "per submission of the grader before the split.")
    text = "\n".join(rows)
    print(text, flush=True)
    return text
