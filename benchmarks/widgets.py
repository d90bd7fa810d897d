"""How long one control change of each explorer takes, headless, before and after issue 14.

A scripted sequence of control changes (slider steps, dtype toggles, function choices) is
applied to each explorer while it is shown through IPython's real display machinery: the
time of one change runs from setting the control's value until the new figure (PNG and
text) has been formatted and published, which is what a notebook front end receives.

"Before" is the code of commit ``BASELINE_COMMIT`` (loaded from git and measured in the same
run); when git or that commit is unavailable the numbers recorded below are shown instead.
The browser section reads the latency the browser test measured (``artifacts/``).
"""
from __future__ import annotations

import importlib.util
import json
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


def time_changes(module, explorer: str, rounds: int = 2) -> list[float]:
    """Milliseconds per control change for one explorer class of ``module``."""
    recorder = _shell()
    tool = getattr(module, explorer)()
    tool.show()
    script = gradient_changes(tool) if explorer == "GradientExplorer" else step_size_changes(tool)
    times = []
    for _ in range(rounds):
        for control, value in script:
            before = recorder.published
            t0 = time.perf_counter()
            control.value = value
            flush = getattr(tool, "flush", None)
            if flush is not None:
                flush()
            times.append((time.perf_counter() - t0) * 1000)
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


def browser_section() -> list[str]:
    lines = ["### In a real browser (JupyterLab + headless Chromium, written by tests/test_browser.py)", ""]
    if not BROWSER_RESULTS.exists():
        return lines + ["Not measured yet: run `./course test` (or `pytest tests/test_browser.py`) first."]
    data = json.loads(BROWSER_RESULTS.read_text())
    lines += [f"Measured {data['when']}: time from the control's input event until the new figure is "
              "decoded in the page (kernel round trip, redraw, PNG transfer, rendering).", "",
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
            f"median ≤ {TARGET_MS:.0f} ms |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name in explorers:
        before = _stats(time_changes(old, name, rounds=1)) if old else RECORDED_BEFORE[name]
        after_times = time_changes(widgets, name)
        after = _stats(after_times)
        ok = "yes" if after[0] <= TARGET_MS else "**no**"
        rows.append(f"| {name} | {len(after_times)} | {before[0]:.0f} ms | {before[1]:.0f} ms | {after[0]:.0f} ms | "
                    f"{after[1]:.0f} ms | {max(after_times):.0f} ms | {ok} |")
    source = f"commit {BASELINE_COMMIT}, measured now" if old else "recorded (git history unavailable)"
    parts = ["## Widgets: time per control change", "",
             "Headless: from setting a control's value until the new figure (PNG + text) is formatted and "
             f"published through IPython's display machinery. Before = {source}.", "", *rows, "",
             *browser_section()]
    text = "\n".join(parts)
    print(text + "\n", flush=True)
    return text


if __name__ == "__main__":
    run()
