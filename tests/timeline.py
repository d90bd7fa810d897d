"""Read a COURSE_TEST_TIMELINE file: per worker, each test file's span and busy seconds, and each worker's idle end.

    COURSE_TEST_TIMELINE=/tmp/timeline.jsonl ./course test
    .venv/bin/python tests/timeline.py /tmp/timeline.jsonl
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def spans(lines: list[dict]) -> dict[str, list[tuple[str, float, float, float]]]:
    """Per worker, in order: (file, first start, last stop, seconds inside its tests), times from the run's start."""
    t0 = min(line["start"] for line in lines)
    out: dict[str, list[list]] = {}
    for line in sorted(lines, key=lambda x: x["start"]):
        runs = out.setdefault(line["worker"], [])
        name = line["test"].split("::")[0]
        if not runs or runs[-1][0] != name:
            runs.append([name, line["start"] - t0, line["stop"] - t0, 0.0])
        runs[-1][2] = max(runs[-1][2], line["stop"] - t0)
        runs[-1][3] += line["stop"] - line["start"]
    return {w: [(n, round(a, 1), round(b, 1), round(s, 1)) for n, a, b, s in runs] for w, runs in sorted(out.items())}


def cpu_per_file(lines: list[dict]) -> dict[str, float]:
    """CPU seconds each file cost its worker (lines that carry the worker's running CPU total): the total at the
    file's last line less the total at the line before its first, so a file's fixtures and reaped children count."""
    out: dict[str, float] = {}
    per_worker: dict[str, list[dict]] = {}
    for line in sorted((x for x in lines if "cpu" in x), key=lambda x: x["stop"]):
        per_worker.setdefault(line["worker"], []).append(line)
    for worker_lines in per_worker.values():
        before = worker_lines[0].get("cpu0", worker_lines[0]["cpu"])  # the total as the worker's first test began
        for line in worker_lines:
            name = line["test"].split("::")[0]
            out[name] = out.get(name, 0.0) + line["cpu"] - before
            before = line["cpu"]
    return {name: round(cpu, 1) for name, cpu in out.items()}


def report(lines: list[dict], top: int = 12) -> str:
    """Each worker's end and its longest files; the gap between the first and the last worker to finish is idle."""
    per = spans(lines)
    cpu = cpu_per_file(lines)
    ends = {w: runs[-1][2] for w, runs in per.items()}
    text = [f"run: {max(ends.values()):.0f} s; idle at the end: {max(ends.values()) - min(ends.values()):.0f} s"]
    failed = sorted({line["test"] for line in lines if line.get("outcome") == "failed"})
    text += [f"FAILED {name}" for name in failed]
    for worker, runs in per.items():
        text.append(f"{worker}: ends at {ends[worker]:.0f} s, {len(runs)} files; longest:")
        text += [f"  {s:7.1f} s busy, {a:6.0f}-{b:.0f} s  {n}" + (f"  ({cpu[n]:.1f} s CPU)" if n in cpu else "")
                 for n, a, b, s in sorted(runs, key=lambda r: -r[3])[:top]]
    return "\n".join(text)


def waiting(lines: list[dict], top: int = 15) -> str:
    """The files whose busy seconds exceed their CPU seconds the most: where the workers wait, not compute."""
    cpu = cpu_per_file(lines)
    rows = [(busy - cpu[n], busy, n) for runs in spans(lines).values() for n, _, _, busy in runs if n in cpu]
    return "\n".join(["waiting (busy less CPU), most first:"] +
                     [f"  {w:6.1f} s of {busy:6.1f} s  {n}" for w, busy, n in sorted(rows, reverse=True)[:top]])


if __name__ == "__main__":
    print(waiting([json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line.strip()]))
    print(report([json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line.strip()]))
