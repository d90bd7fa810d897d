"""A real browser: JupyterLab on loopback, lesson 03 run in headless Chromium, controls moved.

Asserts that each explorer's figure changes after each control change and that no cell shows
an error; saves a screenshot to artifacts/. Runs on a copy of the notebook so JupyterLab's
autosave cannot touch the committed one.

It also measures, in the page, the time from a control's input event (key press, click,
selection) until the new figure is decoded, and writes the samples to
artifacts/widget_latency.json for ``./course bench`` to report. Times are recorded, never
asserted.
"""
import datetime
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import nbformat
import pytest

from conftest import ROOT, free_port

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
LESSON = "03_exp_save_the_output.ipynb"



@pytest.fixture
def lab(tmp_path):
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing at /usr/bin/chromium: ./course test should have installed it.")
        pytest.skip("needs Chromium at /usr/bin/chromium (apt-get install chromium)")
    work = tmp_path / "course"
    work.mkdir()
    nb = nbformat.read(ROOT / "notebooks" / LESSON, as_version=4)
    for cell in nb.cells:  # start from a clean notebook so every prompt and output is from this run
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("jupytext", None)  # no paired .py in the scratch folder
    nbformat.write(nb, work / LESSON)
    port, token = free_port(), "browser-test"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    with open(tmp_path / "lab.log", "w") as log:  # the server keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
             "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
            break
        except OSError:
            assert proc.poll() is None, (tmp_path / "lab.log").read_text()
            assert time.time() < deadline, "JupyterLab did not start"
            time.sleep(1)
    yield base, token
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


# In the page: the figure of the k-th explorer (the image in the cell with its controls), and
# a probe that resolves with the milliseconds from the next input event to a new, decoded figure.
PROBE = """
window.figureOf = (k) => {
  const cells = [...document.querySelectorAll('.jp-CodeCell')].filter(c => c.querySelector('.widget-dropdown'));
  return cells[k] ? cells[k].querySelector('.jp-OutputArea-output img') : null;
};
window.armFigureProbe = (k) => {
  const old = window.figureOf(k) ? window.figureOf(k).src : null;
  const events = ['keydown', 'pointerdown', 'change', 'input'];
  let t0 = null;
  const mark = () => { if (t0 === null) t0 = performance.now(); };
  events.forEach(e => document.addEventListener(e, mark, {capture: true}));
  window.figureProbe = new Promise(resolve => {
    const finish = value => {
      observer.disconnect(); events.forEach(e => document.removeEventListener(e, mark, {capture: true})); resolve(value); };
    const check = async () => {
      const img = window.figureOf(k);
      if (t0 === null || !img || img.src === old) return;
      observer.disconnect();
      try { await img.decode(); } catch (err) {}
      finish(performance.now() - t0);
    };
    const observer = new MutationObserver(check);
    observer.observe(document.querySelector('.jp-Notebook'), {subtree: true, childList: true, attributes: true,
                                                           attributeFilter: ['src']});
    setTimeout(() => finish(null), 60000);
  });
};
"""


def timed_change(page, explorer: int, action) -> float:
    """Milliseconds from the input event of ``action()`` to the explorer's new figure; fails if none came."""
    page.evaluate("k => window.armFigureProbe(k)", explorer)
    action()
    ms = page.evaluate("() => window.figureProbe")
    assert ms is not None, f"explorer {explorer}'s figure did not change within 60 s after moving a control"
    return ms


def measure_latency(page) -> dict[str, list[float]]:
    """Move every kind of control of both explorers; return the latencies per explorer."""
    page.evaluate(PROBE)
    gradient, sweep = page.locator(".jp-CodeCell", has=page.locator(".widget-dropdown")).all()[:2]
    samples = {"GradientExplorer": [], "StepSizeExplorer": []}
    record = samples["GradientExplorer"].append
    record(timed_change(page, 0, lambda: gradient.locator(".widget-dropdown select").select_option(label="tanh")))
    for dtype in ("float32", "float64"):
        record(timed_change(page, 0, lambda dtype=dtype: gradient.locator(".widget-toggle-button", has_text=dtype).click()))
    h_handle = gradient.locator(".widget-slider").nth(1).locator(".noUi-handle").first
    h_handle.focus()
    for key in ["ArrowLeft"] * 4 + ["ArrowRight"] * 4:  # FD step h: 1e-3 down to 1e-7 and back
        record(timed_change(page, 0, lambda key=key: h_handle.press(key)))
    record = samples["StepSizeExplorer"].append
    x0_handle = sweep.locator(".widget-slider .noUi-handle").first
    x0_handle.focus()
    for key in ["ArrowRight"] * 4 + ["ArrowLeft"] * 4:  # x0: 1.0 up to 2.0 and back, step 0.25
        record(timed_change(page, 1, lambda key=key: x0_handle.press(key)))
    record(timed_change(page, 1, lambda: sweep.locator(".widget-dropdown select").select_option(label="tanh")))
    return samples


def plot_images(page) -> list[str]:
    return page.eval_on_selector_all(".jp-OutputArea-output img", "els => els.map(e => e.src)")


def wait_until(predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def test_lesson_runs_in_jupyterlab_and_the_widget_redraws(lab):
    from playwright.sync_api import sync_playwright

    base, token = lab
    shots = ROOT / "artifacts"
    shots.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(f"{base}/lab/tree/{LESSON}?token={token}", timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
            def prompts():
                return page.eval_on_selector_all(
                    ".jp-CodeCell .jp-InputPrompt", "els => els.map(e => e.textContent.trim())")

            def all_ran():
                shown = prompts()
                return shown and all(p not in ("[*]:", "[ ]:", "") for p in shown)

            # run every cell through JupyterLab's own command, once the kernel session is ready
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                                   " && window.jupyterapp.shell.currentWidget.sessionContext", timeout=120_000)
            page.evaluate("""async () => {
                const panel = window.jupyterapp.shell.currentWidget;
                await panel.sessionContext.ready;
                await panel.context.ready;
                await window.jupyterapp.commands.execute('notebook:run-all-cells');
            }""")
            try:
                wait_until(all_ran, 240, "every cell to finish")
            except AssertionError:
                page.screenshot(path=str(shots / "browser_lesson03_failed.png"))
                raise AssertionError(f"cells did not all run; prompts: {prompts()}") from None
            page.wait_for_selector(".widget-dropdown select", timeout=60_000)
            samples = measure_latency(page)
            shots.joinpath("widget_latency.json").write_text(json.dumps({
                "when": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                "samples": samples}, indent=1))
            before = plot_images(page)
            assert len(before) >= 2, "the two widget figures should be shown"

            dropdown = page.locator(".widget-dropdown select").first
            dropdown.select_option(label="tanh with a bug in backward")
            after = wait_until(lambda: (imgs := plot_images(page)) != before and imgs, 60, "the plot to change")
            assert after[0] != before[0], "the gradient plot did not change after moving the control"
            assert page.locator(".jp-OutputArea-output", has_text="tanh with a bug in backward").count() >= 1

            page.locator(".widget-toggle-button", has_text="float32").first.click()
            wait_until(lambda: plot_images(page)[0] != after[0], 60, "the plot to change with dtype")

            errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            assert errors.count() == 0, errors.first.inner_text()
            assert "Traceback" not in page.locator(".jp-Notebook").inner_text()
            page.locator(".widget-dropdown").first.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / "browser_lesson03.png"))
        finally:
            browser.close()
