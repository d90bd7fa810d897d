"""probes/warmup.py: the shared set-up cell imports, in a Jupyter kernel, what a first check would import on the
spot (issue 49, item 7: the first check of every notebook took 2-5 s, of which SymPy's import 1-2 s); outside a
kernel (the grader's sandbox, a script) nothing starts."""
import subprocess
import sys

from conftest import ROOT

FAKE_KERNEL = """
import sys, types
class ZMQInteractiveShell:  # what probes.cells looks for: a Jupyter kernel's shell
    class events:
        @staticmethod
        def register(event, fn):
            pass

    def set_custom_exc(self, exceptions, handler):
        pass
shell = ZMQInteractiveShell()
sys.modules["IPython"] = types.SimpleNamespace(get_ipython=lambda: shell)
"""
REPORT = """
import threading
import course_utils.probes.cells
from course_utils.probes import warmup
threads = [t for t in threading.enumerate() if t.name == "course-warmup"]
for t in threads:
    t.join()
print(len(threads), "sympy" in sys.modules, "course_utils.checks" in sys.modules, warmup.start() is warmup.start())
"""


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_in_a_kernel_the_set_up_cell_imports_what_a_first_check_needs():
    assert _run(FAKE_KERNEL + REPORT) == ["1", "True", "True", "True"]


def test_outside_a_kernel_the_set_up_cell_starts_nothing():
    """The grader's sandbox runs the set-up cell as a script: no thread, no import beyond what it asked for."""
    assert _run("import sys" + REPORT.replace("from course_utils.probes import warmup", "warmup = None")
                .replace(", warmup.start() is warmup.start()", "")) == ["0", "False", "False"]
