"""A real browser: JupyterLab on loopback, lesson 03 run in headless Chromium, a control moved.

Asserts that the gradient plot changes and that no cell shows an error; saves a screenshot
to artifacts/. Runs on a copy of the notebook so JupyterLab's autosave cannot touch the
committed one.
"""
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
    log = open(tmp_path / "lab.log", "w")
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
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
