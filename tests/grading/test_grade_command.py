"""``python -m course_utils.grade`` ends without the interpreter's teardown, after everything a normal exit does.

Tearing down torch and the checks cost every grading command about half a CPU-second after its last output
(issue 48 P3: serial time at any ``--jobs``); ``grade.finish`` skips it, but must still wait for the other
threads, run the ``atexit`` handlers and flush what was printed, or a row or the sandboxes' clean-up is lost.
"""
import os
import subprocess
import sys

from conftest import ROOT

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
