"""Drive the explorers in a real Jupyter kernel, with control changes sent as comm messages.

This is what a browser does when a student drags a slider: one ``comm_msg`` ("update") per
new value. Here a burst of them is sent without waiting, faster than any figure can be
drawn, and the ``update_display_data`` messages the kernel sends back are counted.
Used by tests/test_widgets.py (ipywidgets 8) and tests/test_colab.py (ipywidgets 7).
"""
from __future__ import annotations

import json
import queue
import time

CREATE = """
import json, ipywidgets
from course_utils import widgets
tool = widgets.StepSizeExplorer()
tool.show()
figure, lines = id(tool.view.figure), [id(line) for line in tool.view.lines.values()]
print(json.dumps({"model": tool.x0.model_id, "ipywidgets": ipywidgets.__version__}))
"""
REPORT = """
print(json.dumps({"requests": tool.throttle.requests, "runs": tool.throttle.runs, "x0": tool.x0.value,
                  "same_artists": figure == id(tool.view.figure)
                                  and lines == [id(line) for line in tool.view.lines.values()]}))
"""


def run(kc, code: str, timeout: float = 180) -> tuple[str, list[dict]]:
    """Execute ``code``; return its stdout and every IOPub message it caused. Raises on an error."""
    msg_id = kc.execute(code)
    out, messages = [], []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind == "error":
            raise AssertionError("\n".join(content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(out), messages


def send_values(kc, model_id: str, values: list) -> None:
    """Send one widget 'update' per value, as a browser does while a slider moves."""
    for value in values:
        data = {"method": "update", "state": {"value": value}, "buffer_paths": []}
        kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": model_id, "data": data}))


def wait_for_figure(kc, text: str, timeout: float = 120) -> list[str]:
    """Texts of all figure updates until one contains ``text``."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if msg["msg_type"] == "update_display_data" and "image/png" in msg["content"]["data"]:
            seen.append(msg["content"]["data"]["text/plain"])
            if text in seen[-1]:
                return seen
    raise AssertionError(f"no figure showing {text!r} arrived; the figures shown were: {seen}")


def slider_burst(kc, changes: int = 40) -> dict:
    """Create a StepSizeExplorer, send ``changes`` slider values at once, report what was drawn."""
    created = json.loads(run(kc, CREATE)[0])
    values = [-3.0 + 0.25 * (i % 24) for i in range(changes - 1)] + [3.0]  # 3.0 only at the end
    send_values(kc, created["model"], values)
    texts = wait_for_figure(kc, "at x = 3:")
    report = json.loads(run(kc, REPORT)[0])
    return dict(created, **report, figures=texts, changes=changes)
