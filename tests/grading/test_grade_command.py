"""``python -m course_utils.grade`` ends without the interpreter's teardown, after everything a normal exit does.

Tearing down torch and the checks cost every grading command about half a CPU-second after its last output
(issue 48 P3: serial time at any ``--jobs``); ``grade.finish`` skips it, but must still wait for the other
threads, run the ``atexit`` handlers and flush what was printed, or a row or the sandboxes' clean-up is lost.
"""
import json
import os
import subprocess
import sys

import nbformat
import pytest

from conftest import ROOT
from grading_corpus import JUDGE_THREADS_SITE, submission

SCRIPT = """
import atexit, sys, threading, time
from course_utils.grade import finish

class Teardown:
    def __del__(self):  # runs only when the interpreter clears its modules at exit
        sys.stdout.write("teardown\\n")
        sys.stdout.flush()

keep = Teardown()
atexit.register(lambda: sys.stdout.write("atexit\\n"))

def late():
    time.sleep(0.3)
    sys.stdout.write("thread\\n")

threading.Thread(target=late).start()
sys.stdout.write("row\\n")  # block-buffered (a pipe, PYTHONUNBUFFERED unset): only a flush writes it
{end}
"""


def _run(end: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | {"PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", SCRIPT.format(end=end)], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def test_finish_keeps_what_a_normal_exit_does_and_skips_the_teardown():
    normal = _run("sys.exit(3)")
    assert normal.returncode == 3 and normal.stdout.split() == ["row", "thread", "atexit", "teardown"], normal
    fast = _run("finish(3)")
    assert fast.returncode == 3, fast.stderr
    assert fast.stdout.split() == ["row", "thread", "atexit"], fast.stdout  # no teardown, nothing else lost


def test_finish_reports_a_failed_flush_as_python_does():
    """stdout closed by its reader: status 120, as Python's own exit gives, never a silent 0."""
    done = _run("import os\nos.close(1)\nfinish(0)")
    assert done.returncode == 120, (done.returncode, done.stderr)



@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one CPU: torch's pool has one thread anyway")
def test_the_judge_computes_on_one_torch_thread_as_its_runners_do(tmp_path):
    """Issue 48 P3: a second torch thread in the judge spun between its checks, CPU the runners lacked at --jobs 2."""
    site, subs, out = tmp_path / "site", tmp_path / "subs", tmp_path / "threads"
    site.mkdir()
    subs.mkdir()
    (site / "sitecustomize.py").write_text(JUDGE_THREADS_SITE)  # imported by the judge (and by it again after a root re-exec)
    nbformat.write(submission("02"), subs / "ada.ipynb")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env |= {"PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "JUDGE_THREADS_OUT": str(out)}
    done = subprocess.run([sys.executable, "-m", "course_utils.grade", str(subs), "--json"], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[0])["total"] > 0, done.stdout  # the checks ran: torch was used
    assert out.read_text() == "1"
