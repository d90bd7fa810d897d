"""The README lab command brings up JupyterLab serving the course (on loopback): on the start page,
without the news prompt, with a file browser that shows a student the lessons and the exercises."""
import json
import os
import signal
import subprocess
import time
import urllib.request

from conftest import ROOT, free_port


def test_lab_config_culls_idle_kernels_without_a_tab():
    """Every notebook opened keeps a kernel (hundreds of MiB each) unless idle ones are culled."""
    from traitlets.config import Config

    c = Config()
    exec(compile((ROOT / "lab" / "jupyter_lab_config.py").read_text(), "jupyter_lab_config.py", "exec"),
         {"get_config": lambda: c, "__file__": str(ROOT / "lab" / "jupyter_lab_config.py")})
    kernels = c.MappingKernelManager
    assert 0 < kernels.cull_idle_timeout <= 3600 and 0 < kernels.cull_interval <= kernels.cull_idle_timeout
    assert kernels.cull_connected is False and kernels.cull_busy is False  # an open tab or a running cell stays


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.read().decode()


def test_course_lab_serves_the_course(tmp_path):
    port, token = free_port(), "course-test-token"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    with open(tmp_path / "lab.log", "w") as log:  # the server keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [str(ROOT / "course"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
             f"--IdentityProvider.token={token}"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )
    try:
        deadline = time.time() + 120
        while True:
            try:
                status, page = get(f"http://127.0.0.1:{port}/lab?token={token}")
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "lab.log").read_text()
                assert time.time() < deadline, "JupyterLab did not come up in 120 s"
                time.sleep(1)
        assert status == 200 and "JupyterLab" in page
        log_text = (tmp_path / "lab.log").read_text()
        assert f"127.0.0.1:{port}/lab/tree/notebooks/00_start_here.ipynb?token=" in log_text, log_text[-2000:]
        status, _ = get(f"http://127.0.0.1:{port}/lab/tree/notebooks/00_start_here.ipynb?token={token}")
        assert status == 200

        def listing(folder: str) -> set[str]:
            return {item["name"] for item in json.loads(get(f"http://127.0.0.1:{port}/api/contents/{folder}"
                                                            f"?token={token}")[1])["content"]}

        top, lessons, exercises = listing(""), listing("notebooks"), listing("exercises")
        assert {"notebooks", "exercises", "README.md"} <= top
        assert not top & {"solutions", "course_utils", "course_utils.egg-info", "tests", "benchmarks", "lab"}, top
        assert "00_start_here.ipynb" in lessons and "01_exercises.ipynb" in exercises
        assert not [n for n in lessons | exercises if not n.endswith(".ipynb")], "the .py twins are shown"
        news = json.loads(get(f"http://127.0.0.1:{port}/lab/api/settings/@jupyterlab/apputils-extension:notification"
                              f"?token={token}")[1])
        defaults = {k: v.get("default") for k, v in news["schema"]["properties"].items()}  # overrides.json's
        assert news["settings"].get("fetchNews", defaults["fetchNews"]) == "false", defaults
        assert news["settings"].get("checkForUpdates", defaults["checkForUpdates"]) is False
        assert not (ROOT / ".jupyter").exists(), "the project's settings must not be written as the user's"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
