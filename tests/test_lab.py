"""The README lab command brings up JupyterLab serving the course (on loopback)."""
import json
import os
import signal
import subprocess
import time
import urllib.request

from conftest import ROOT, free_port



def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.read().decode()


def test_course_lab_serves_the_course(tmp_path):
    port, token = free_port(), "course-test-token"
    log = open(tmp_path / "lab.log", "w")
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
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
        status, listing = get(f"http://127.0.0.1:{port}/api/contents/notebooks?token={token}")
        names = {item["name"] for item in json.loads(listing)["content"]}
        assert "00_start_here.ipynb" in names
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
