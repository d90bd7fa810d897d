"""One runner start driven as the judge drives it (``Worker.wait``, a ``RunnerSession``), with no checks imported.

``test_cpu_limit`` runs it in this process (the machine's sandbox mode, and without one) and in a child for
the modes that need another user or namespace (``python runner_start.py MODE`` reads ``[[name, source, cpu],
...]`` on stdin and prints each start's outcome and mul's problem as JSON).
"""
from __future__ import annotations

import json
import sys

from course_utils.exercise_result import ExerciseResult
from course_utils.grading.options import Options
from course_utils.grading.sandbox import sandbox, worker, zygote
from course_utils.grading.sandbox.session import Outcome, RunnerSession

SPIN = ("while True:  # swallows the runner's alarms (SIGXCPU is no exception: Python's default action ends it)\n"
        "    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n")
FAKE = "import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)  # a CPU limit it never reached\n"


def start(box: sandbox.Sandbox, source: str, cpu: int) -> tuple[Outcome, RunnerSession]:
    """One runner start whose only cell is ``source`` (mul's answer) under a CPU limit of ``cpu`` seconds; the
    judge's clock (timeout 20: 60 s after ready) is far."""
    timeout = 20.0
    job = {"cells": [{"kind": "answer", "exercise": "mul", "source": source}], "grade": ["mul"], "skip_answers": [],
           "time_limit": timeout, "wall_limit": timeout * 2, "cpu_seconds": cpu, "requests": {"mul": {}},
           "probes": {"mul": []}}
    runs = RunnerSession({"mul": 1.0}, timeout, _no_result)
    runner = worker.Worker(job, Options(sandbox=box, timeout=timeout), 0)
    try:
        outcome = runner.wait(runs.start(runner.started), runs.on_message, runs.on_late)
    finally:
        zygote.close_all()
    runs.settle(outcome)
    return outcome, runs


def _no_result(message: dict) -> ExerciseResult:
    raise AssertionError(f"no result expected: {message}")


if __name__ == "__main__":
    mode = sys.argv[1]
    box = sandbox.detect(allow_uid=mode == "uid")
    if box.mode != mode:
        print(json.dumps({"skip": f"no {mode} sandbox here: {box.reason}"}))
        sys.exit(0)
    out = {}
    for name, source, cpu in json.loads(sys.stdin.read()):
        outcome, runs = start(box, source, cpu)
        out[name] = [str(outcome), runs.results["mul"].problem]
    print(json.dumps(out))
