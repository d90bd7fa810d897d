"""How long one control change of each explorer takes, headless, before and after issue 14.

A scripted sequence of control changes (slider steps, dtype toggles, function choices) is
applied to each explorer while it is shown through IPython's real display machinery: the
time of one change runs from setting the control's value until the new figure (PNG and
text) has been formatted and published, which is what a notebook front end receives.

"Before" is the code of commit ``BASELINE_COMMIT`` (loaded from git and measured in the same
run); when git or that commit is unavailable the numbers recorded below are shown instead.
Wall-clock times depend on what else the machine runs, so the process CPU time per change
and the load average are reported too.

The browser section runs tests/test_browser.py (JupyterLab + headless Chromium), which
writes the time from a control's input event to the new figure in the page to
``artifacts/widget_latency.json``; without Chromium the last measurement is shown.
"""
from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BASELINE_COMMIT = "2a1af78"  # widgets.py before issue 14
TARGET_MS = 100.0
# Measured on the CI machine (2 cores) with BASELINE_COMMIT, used when git cannot provide it.
RECORDED_BEFORE = {"GradientExplorer": (282.0, 486.0), "StepSizeExplorer": (245.0, 266.0)}
BROWSER_RESULTS = ROOT / "artifacts" / "widget_latency.json"


class _Recorder:
    """Stands in for the kernel's display publisher: counts what would be sent."""

    def __init__(self) -> None:
        self.published = 0

    def publish(self, data, metadata=None, *args, **kwargs) -> None:
        if "image/png" in data:  # a figure, not the controls
            assert data["image/png"] and data["text/plain"]
            self.published += 1

    def clear_output(self, wait: bool = False) -> None:
        pass


def _shell() -> _Recorder:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    recorder = _Recorder()
    shell.display_pub = recorder
    return recorder


def gradient_changes(tool) -> list[tuple[object, object]]:
    """(control, new value) pairs a student might produce in a minute of exploring."""
    steps = [(tool.x_range, (-3.0 + 0.5 * i, 3.0)) for i in range(1, 9)]
    steps += [(tool.h, 10.0 ** -e) for e in range(2, 11)]
    steps += [(tool.dtype, "float32"), (tool.dtype, "float64")] * 2
    steps += [(tool.function, name) for name in ("tanh", "abs (kink at 0)", "tanh with a bug in backward",
                                                 "naive softplus", "exp")]
    steps += [(tool.x_range, (-3.0, 3.0 - 0.5 * i)) for i in range(1, 9)]
    return steps


def step_size_changes(tool) -> list[tuple[object, object]]:
    steps = [(tool.x0, float(v)) for v in np.arange(-3.0, 3.01, 0.25) if v != tool.x0.value]
    steps += [(tool.function, name) for name in ("tanh", "abs (kink at 0)", "naive softplus", "exp")]
    return steps


def time_changes(module, explorer: str, rounds: int = 2, cpu: list[float] | None = None) -> list[float]:
    """Wall milliseconds per control change for one explorer class of ``module`` (CPU ms into ``cpu``)."""
    recorder = _shell()
    tool = getattr(module, explorer)()
    tool.show()
    script = gradient_changes(tool) if explorer == "GradientExplorer" else step_size_changes(tool)
    times = []
    for _ in range(rounds):
        for control, value in script:
            before = recorder.published
            t0, c0 = time.perf_counter(), time.process_time()
            control.value = value
            flush = getattr(tool, "flush", None)
            if flush is not None:
                flush()
            times.append((time.perf_counter() - t0) * 1000)
            if cpu is not None:
                cpu.append((time.process_time() - c0) * 1000)
            assert recorder.published > before, f"{explorer}: setting {control.description} drew nothing"
    return times


def baseline_module() -> types.ModuleType | None:
    """course_utils.widgets as it was at BASELINE_COMMIT, or None without git history."""
    try:
        source = subprocess.run(["git", "show", f"{BASELINE_COMMIT}:course_utils/widgets.py"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    spec = importlib.util.spec_from_loader("course_utils._widgets_baseline", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "course_utils"
    sys.modules[spec.name] = module
    exec(compile(source, f"{BASELINE_COMMIT}:course_utils/widgets.py", "exec"), module.__dict__)
    return module


def _stats(times: list[float]) -> tuple[float, float]:
    return statistics.median(times), float(np.percentile(times, 90))


def measure_in_browser() -> str:
    """Run the browser test, which writes BROWSER_RESULTS; returns a note when it could not run."""
    if not Path("/usr/bin/chromium").exists():
        return "Chromium is missing, so this is the last measurement the browser test wrote."
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_browser.py"],
                          cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, PYTHONHASHSEED="0"))
    if done.returncode:
        return f"The browser test failed this time (last lines: {done.stdout.strip().splitlines()[-1:]}); older numbers."
    return ""


def browser_section() -> list[str]:
    lines = ["### In a real browser (JupyterLab + headless Chromium, tests/test_browser.py)", ""]
    note = measure_in_browser()
    if not BROWSER_RESULTS.exists():
        return lines + [note or "No measurement was written."]
    data = json.loads(BROWSER_RESULTS.read_text())
    lines += [f"Measured {data['when']}: time from the control's input event until the new figure is "
              "decoded in the page (kernel round trip, redraw, PNG transfer, rendering). "
              "Each explorer: its dropdown, its slider moved key by key, and (gradients) the dtype buttons. "
              + note, "",
              "| control | changes | median | p90 | max |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, samples in data["samples"].items():
        med, p90 = _stats(samples)
        lines.append(f"| {name} | {len(samples)} | {med:.0f} ms | {p90:.0f} ms | {max(samples):.0f} ms |")
    return lines


def run() -> str:
    """Measure both explorers before and after; return a Markdown report."""
    from course_utils import widgets

    explorers = ("GradientExplorer", "StepSizeExplorer")
    old = baseline_module()
    rows = ["| explorer | changes | before: median | before: p90 | after: median | after: p90 | after: max | "
            f"CPU median before → after | median ≤ {TARGET_MS:.0f} ms |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name in explorers:
        cpu_before: list[float] = []
        before = _stats(time_changes(old, name, rounds=1, cpu=cpu_before)) if old else RECORDED_BEFORE[name]
        cpu_after: list[float] = []
        after_times = time_changes(widgets, name, cpu=cpu_after)
        after = _stats(after_times)
        ok = "yes" if after[0] <= TARGET_MS else "**no**"
        cpu = (f"{statistics.median(cpu_before):.0f} → " if cpu_before else "") + f"{statistics.median(cpu_after):.0f} ms"
        rows.append(f"| {name} | {len(after_times)} | {before[0]:.0f} ms | {before[1]:.0f} ms | {after[0]:.0f} ms | "
                    f"{after[1]:.0f} ms | {max(after_times):.0f} ms | {cpu} | {ok} |")
    source = f"commit {BASELINE_COMMIT}, measured now" if old else "recorded (git history unavailable)"
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    parts = ["## Widgets: time per control change", "",
             "Headless: from setting a control's value until the new figure (PNG + text) is formatted and "
             f"published through IPython's display machinery. Before = {source}. Load average during the run: "
             f"{load} on {os.cpu_count()} cores (wall times grow with it; CPU times much less).", "", *rows, "",
             *browser_section()]
    text = "\n".join(parts)
    print(text + "\n", flush=True)
    return text


if __name__ == "__main__":
    run()
