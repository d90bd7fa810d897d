"""Where a grading batch's time goes: a per-slot timeline, the serial fraction, CPU time per phase.

    python -m benchmarks.grading_timeline [--jobs 1 2] [--copies 3]

Wall-clock figures on a shared machine move with its load; this tool reports what the load moves
less: CPU time (the judge's threads, the runners' cgroups via ``RUSAGE_CHILDREN``) and the shape of
the timeline (when each slot is busy with what, when both are, what the parent does in between).
It grades the benchmark's batch (``grading.make_batch``: every solution notebook, ``--copies`` of
each) in this process through ``cli.main``, with the grader's functions wrapped to log events;
nothing of the grader is changed. Not part of ``./course bench``: a diagnosis, not a figure.
From outside, this tool's parent process samples how many of the batch's threads want a CPU (``sample_runnable``):
the core-seconds a quiet 2-core machine would leave idle, and where.
"""
from __future__ import annotations

import argparse
import functools
import importlib.abc
import importlib.util
import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.grading import ROOT, make_batch

EVENTS: list[tuple[float, str, str, float]] = []  # (monotonic, thread name, what, thread CPU seconds)
_lock = threading.Lock()


def log(what: str) -> None:
    with _lock:
        EVENTS.append((time.monotonic(), threading.current_thread().name, what, time.thread_time()))


def wrap(owner, name: str, label: str | None = None) -> None:
    """Log the start and end of ``owner.name`` (a function or method), with the calling thread's CPU time."""
    original = getattr(owner, name)
    label = label or name

    @functools.wraps(original)
    def logged(*args, **kwargs):
        log(f"{label}>")
        try:
            return original(*args, **kwargs)
        finally:
            log(f"{label}<")

    setattr(owner, name, logged)


def instrument() -> None:
    """Wrap the grader's steps (the judge's once it is imported: ``_JudgeImport``)."""
    from course_utils.grading import batch, cli  # none imports torch
    from course_utils.grading.sandbox import zygote

    wrap(batch, "Queue", "queue")
    wrap(cli, "load_assignments")
    wrap(cli, "_sandbox", "sandbox detect")
    wrap(cli, "_stored", "store lookup")
    wrap(cli, "_write", "outputs")
    wrap(cli, "course_version")
    wrap(zygote.Zygote, "__init__", "zygote")
    _count_sandbox_cpu()
    wrap(zygote, "warm_up")
    sys.meta_path.insert(0, _JudgeImport())


class _JudgeImport(importlib.abc.MetaPathFinder):
    """Wraps the judge's functions once the batch imports it (torch and the checks), not before: the start-up
    keeps its order (the zygotes first, then the judge's imports)."""

    def find_spec(self, name, path, target=None):
        if name != "course_utils.grading.grade_file":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            log("import judge>")
            run(module)
            log("import judge<")
            _wrap_judge(module)

        spec.loader.exec_module = exec_module
        return spec


def _wrap_judge(judge) -> None:
    original = judge.grade_submission

    def grade_submission(path, *args, **kwargs):
        log(f"submission> {path.name}")
        try:
            return original(path, *args, **kwargs)
        finally:
            log("submission<")

    judge.grade_submission = grade_submission
    wrap(judge, "_check_facts", "judge")
    wrap(judge, "variants")
    wrap(judge.copies, "flag", "copies")
    _late_wraps()


def _late_wraps() -> None:
    """What imports torch (the runner's channel): wrapped once the judge imported it."""
    from course_utils.grading.sandbox import session, worker

    wrap(worker.Worker, "__init__", "start")
    wrap(worker.Worker, "stop")
    original = session.RunnerSession.on_message

    def on_message(self, message):  # the runner's own events, as the judge reads them
        if isinstance(message, dict) and message.get("kind") in ("ready", "begin", "done"):
            log(f"runner:{message['kind']}")
        return original(self, message)

    session.RunnerSession.on_message = on_message
    _count_runner_cpu()


CPUACCT = Path("/sys/fs/cgroup/cpuacct")
SANDBOX_CPU: list[float] = []  # each slot sandbox's CPU seconds over its life (cgroup v1 cpuacct)
RUNNER_CPU: dict[int, float] = {}  # id(Worker) -> its sandbox's CPU seconds from the fork to stop (runner + sweep)


def _usage(dirs) -> float | None:
    for d in dirs:
        if d.parent == CPUACCT:
            try:
                return int((d / "cpuacct.usage").read_text()) / 1e9
            except OSError:
                return None
    return None


def _count_sandbox_cpu() -> None:
    """Put each runner slot's sandbox in a cpuacct cgroup too (cgroup v1); its total is read when it is removed."""
    from course_utils.grading.sandbox import limits

    if not (CPUACCT / "cpuacct.usage").exists() or not limits.os.access(CPUACCT, limits.os.W_OK):
        return
    v1, remove = limits.Limits._v1, limits.Limits._remove

    def _v1(self, name):
        v1(self, name)
        d = CPUACCT / name
        d.mkdir()
        self.dirs.append(d)

    def _remove(self):
        used = _usage(self.dirs)
        if used is not None:
            SANDBOX_CPU.append(used)
        remove(self)

    limits.Limits._v1, limits.Limits._remove = _v1, _remove


def _count_runner_cpu() -> None:
    """Each runner's CPU: its sandbox's cpuacct read at the fork and at the end (the runner and the sweep after)."""
    from course_utils.grading.sandbox import worker

    init, stop = worker.Worker.__init__, worker.Worker.stop

    def w_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._cpu0 = _usage(self.limits.dirs)

    def w_stop(self, *args, **kwargs):
        used = _usage(self.limits.dirs)
        if used is not None and getattr(self, "_cpu0", None) is not None:
            RUNNER_CPU[id(self)] = used - self._cpu0
            log(f"runner cpu {used - self._cpu0:.3f}")
        return stop(self, *args, **kwargs)

    worker.Worker.__init__, worker.Worker.stop = w_init, w_stop


def grade(folder: Path, jobs: int) -> tuple[float, float, float]:
    """(wall, judge CPU, children CPU) of one batch, events logged into EVENTS."""
    from course_utils.grading import cli

    EVENTS.clear()
    before, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    log("batch>")
    code = cli.main([str(folder), "--jobs", str(jobs)])
    log("batch<")
    wall = time.monotonic() - t0
    after, kids2 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    assert code == 0, code
    cpu = lambda a, b: (b.ru_utime + b.ru_stime) - (a.ru_utime + a.ru_stime)  # noqa: E731
    return wall, cpu(before, after), cpu(kids, kids2)


def spans(label: str) -> list[tuple[str, float, float, float]]:
    """(thread, start, end, thread CPU) of every call logged as ``label``."""
    open_: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    out = []
    for t, thread, what, cpu in EVENTS:
        if what.startswith(f"{label}>"):
            open_[(thread, label)].append((t, cpu))
        elif what == f"{label}<" and open_[(thread, label)]:
            t1, c1 = open_[(thread, label)].pop()
            out.append((thread, t1, t, cpu - c1))
    return out


def busy_profile(subs: list[tuple[str, float, float, float]], t0: float, t1: float) -> dict[int, float]:
    """Seconds of [t0, t1] during which exactly k submissions were being graded, for each k."""
    edges = sorted([(s, 1) for _, s, _, _ in subs] + [(e, -1) for _, _, e, _ in subs])
    out: dict[int, float] = defaultdict(float)
    k, last = 0, t0
    for t, d in edges:
        out[k] += t - last
        k, last = k + d, t
    out[k] += t1 - last
    return dict(out)


def report(jobs: int, wall: float, judge_cpu: float, kids_cpu: float, n: int) -> dict[str, float]:
    t0 = EVENTS[0][0]
    t1 = EVENTS[-1][0]
    subs = spans("submission")
    first = min(s for _, s, _, _ in subs)
    last = max(e for _, _, e, _ in subs)
    prof = busy_profile(subs, t0, t1)
    judged = spans("judge")
    starts = spans("start")
    stops = spans("stop")
    zyg = spans("zygote")
    readies = [t for t, _, what, _ in EVENTS if what == "runner:ready"]
    print(f"\n--jobs {jobs}: {n} submissions, wall {wall:.2f} s ({wall / n:.3f} s each); load {_load()}")
    print(f"  before the first submission starts: {first - t0:.2f} s (imports, options, store, queue's parse, "
          f"zygote starts); first runner ready at +{(min(readies) - t0) if readies else float('nan'):.2f} s")
    print(f"  after the last submission ends: {t1 - last:.2f} s (outputs)")
    print("  time with k submissions in flight: " + ", ".join(f"k={k}: {v:.2f} s" for k, v in sorted(prof.items())))
    sandboxes, runners = sum(SANDBOX_CPU), sum(RUNNER_CPU.values())
    print(f"  judge process CPU {judge_cpu:.2f} s ({judge_cpu / n:.3f}/sub); slot sandboxes (cpuacct) CPU "
          f"{sandboxes:.2f} s in {len(SANDBOX_CPU)} sandbox(es), of which fork-to-end of runners {runners:.2f} s "
          f"({runners / n:.3f}/sub), the rest start-up {sandboxes - runners:.2f} s")
    for name, sp in (("submission (grading thread)", subs), ("judge checks", judged), ("worker start", starts),
                     ("worker stop", stops), ("zygote Popen", zyg), ("queue (read+parse)", spans("queue")),
                     ("variants", spans("variants")), ("copies.flag", spans("copies"))):
        if sp:
            print(f"  {name:30s} calls {len(sp):3d}  wall {sum(e - s for _, s, e, _ in sp):7.2f} s  "
                  f"thread CPU {sum(c for *_, c in sp):6.2f} s")
    print("  per submission (in start order): start, slot, wall, runner CPU (fork to end), judge thread CPU, name")
    current: dict[str, dict] = {}
    for t, th, what, cpu in EVENTS:
        if what.startswith("submission> "):
            current[th] = {"t": t, "cpu": cpu, "name": what[12:], "runner": float("nan")}
        elif what.startswith("runner cpu ") and th in current:
            current[th]["runner"] = float(what.split()[-1])
        elif what == "submission<" and th in current:
            c = current.pop(th)
            print(f"    +{c['t'] - t0:6.2f} {th[-1]} {t - c['t']:6.2f} s  runner {c['runner']:6.3f}  judge "
                  f"{cpu - c['cpu']:6.3f}  {c['name']}")
    per_thread: dict[str, list] = defaultdict(list)
    for th, s, e, _ in subs:
        per_thread[th].append((s, e))
    for th, items in sorted(per_thread.items()):
        items.sort()
        gaps = sum(b[0] - a[1] for a, b in itertools.pairwise(items))
        print(f"  slot thread {th}: {len(items)} subs, busy {sum(e - s for s, e in items):.2f} s, "
              f"idle between {gaps:.2f} s, first at +{items[0][0] - t0:.2f}, last ends +{items[-1][1] - t0:.2f}")
    return {"wall": wall, "first": first - t0, "tail": t1 - last, "judge_cpu": judge_cpu, "kids_cpu": sandboxes,
            "runner_cpu": runners,
            **{f"k{k}": v for k, v in prof.items()}}


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it (the slots' sandboxes and runners included, seen from the host)."""
    found, todo = [pid], [pid]
    while todo:
        for children in _listdir(f"/proc/{todo.pop()}/task"):
            try:
                kids = [int(c) for c in Path(children).read_text().split()]
            except (OSError, ValueError):
                kids = []
            found += kids
            todo += kids
    return found


def _listdir(folder: str) -> list[str]:
    """Each thread's ``children`` file of a ``/proc/PID/task`` folder (none once the process is gone)."""
    try:
        return [f"{folder}/{name}/children" for name in os.listdir(folder)]
    except OSError:
        return []


def sample_runnable(cmd: list[str], every: float = 0.01) -> tuple[str, str]:
    """Run ``cmd`` (one batch) and count, every ``every`` s, its process tree's threads that want a CPU (state R).

    From this (parent) process, so the sampling costs the batch nothing. Fewer than two runnable threads means
    a core the batch leaves idle on a quiet 2-core machine, whatever the load of the shared machine while it
    ran (the load stretches each span, it does not make one). Returns (the command's stdout, a summary)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0, samples = time.monotonic(), []
    out: list[tuple[str, str]] = []
    reader = threading.Thread(target=lambda: out.append(proc.communicate()), daemon=True)
    reader.start()
    while proc.poll() is None:
        running = 0
        for pid in _tree(proc.pid):
            for task in _listdir(f"/proc/{pid}/task"):
                try:
                    running += Path(task[:-len("/children")] + "/stat").read_text().rsplit(")", 1)[1].split()[0] == "R"
                except (OSError, IndexError):
                    pass
        samples.append((time.monotonic() - t0, min(running, 2)))
        time.sleep(every)
    reader.join()
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd, *out[0])
    wall = time.monotonic() - t0
    dt = wall / max(len(samples), 1)
    bins: dict[int, list[int]] = defaultdict(list)
    for t, k in samples:
        bins[int(t / 0.5)].append(k)
    return out[0][0], (f"  runnable threads of the batch's processes, {len(samples)} samples: a core idle (fewer than 2) "
                    f"{sum(2 - k for _, k in samples) * dt:.2f} core-s of {2 * wall:.2f}; per 0.5 s, mean (at most 2): "
                    + " ".join(f"{sum(v) / len(v):.1f}" for _, v in sorted(bins.items())))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    p.add_argument("--copies", type=int, default=3)
    p.add_argument("--timeline", action="store_true", help="also print every event")
    p.add_argument("--folder", help=argparse.SUPPRESS)  # one --jobs value on a batch made by the caller
    args = p.parse_args(argv)
    if args.folder:  # one batch in this process: the judge starts cold, as a real `grade` does
        from course_utils.grading.sandbox.limits import one_torch_thread

        one_torch_thread()  # as the grader's command does before torch loads
        instrument()
        folder = Path(args.folder)
        n = len(list(folder.glob("*.ipynb")))
        wall, jc, kc = grade(folder, args.jobs[0])
        result = report(args.jobs[0], wall, jc, kc, n)
        if args.timeline:
            t0 = EVENTS[0][0]
            for t, th, what, cpu in EVENTS:
                print(f"    {t - t0:8.3f} {th:28s} {what:22s} cpu {cpu:7.3f}")
        print("RESULT " + json.dumps(result))
        from course_utils.grade import finish

        finish(0)  # ends as the grader's command does: no teardown in the parent's samples
    import benchmarks.grading as g

    g.COPIES = args.copies
    work = Path(tempfile.mkdtemp(prefix="grade-timeline-"))
    results = {}
    try:
        n = make_batch(work / "subs", ROOT / "solutions")
        for jobs in args.jobs:
            cmd = [sys.executable, "-m", "benchmarks.grading_timeline", "--jobs", str(jobs), "--folder",
                   str(work / "subs")] + (["--timeline"] if args.timeline else [])
            stdout, runnable = sample_runnable(cmd)
            lines = stdout.splitlines()
            print("\n".join(line for line in lines if not line.startswith("RESULT ")), flush=True)
            print(runnable, flush=True)
            results[jobs] = json.loads(next(line for line in lines if line.startswith("RESULT "))[7:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if 1 in results and 2 in results:
        one, two = results[1], results[2]
        s = one["wall"] / two["wall"]
        print(f"\nspeed-up {s:.2f}x; Amdahl serial fraction 2/S - 1 = {2 / s - 1:.2f}; CPU per submission "
              f"--jobs 1 {(one['judge_cpu'] + one['kids_cpu']) / n:.3f} s, "
              f"--jobs 2 {(two['judge_cpu'] + two['kids_cpu']) / n:.3f} s")
        cores = min(2, os.cpu_count() or 1)
        floor = (two["judge_cpu"] + two["kids_cpu"]) / cores  # every core busy from start to end, nothing idle
        print(f"bound: --jobs 2's CPU on {cores} cores, never idle, takes at least {floor:.2f} s: a speed-up of at most "
              f"{one['wall'] / floor:.2f}x with this work")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
