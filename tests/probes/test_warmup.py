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
threads = [t for t in threading.enumerate() if t.name == "course-warmup"]
for t in threads:
    t.join()
print(len(threads), "sympy" in sys.modules, "course_utils.checks" in sys.modules)
"""
DONE = """
from course_utils.probes import warmup
warmup.start()  # queues nothing more: every name was imported once
print(warmup._S.worker is None)
"""


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_outside_a_kernel_the_set_up_cell_starts_nothing():
    """The grader's sandbox runs the set-up cell as a script: no thread, no import beyond what it asked for."""
    assert _run("import sys" + REPORT) == ["0", "False", "False"]


LESSON = """
import types
import course_utils.probes.cells as cells
from course_utils.probes import lesson08, lesson08_op
lesson08.WARMUP, lesson08_op.WARMUP = ("json.tool",), ("csv", "no_such_module_here", "zipapp")  # cheap stand-ins
result = types.SimpleNamespace(info=types.SimpleNamespace(raw_cell=cells.ANSWER_BANNER.format(grade_id="func_softmax")
                                                          + "\\nx = 1\\n", cell_id=None), error_in_exec=None)
print(warmup.lesson_modules("row_norm_op"), file=sys.stderr)
cells.record(result)
warmup.wait()
print(all(m in sys.modules for m in ("json.tool", "csv", "zipapp")), warmup._S.worker is None)
"""


def test_in_a_kernel_the_set_up_cell_imports_what_a_first_check_needs():
    """The set-up cell imports what every first check needs. Lesson 08's first checks imported 3 to 8 s of modules
    more (opcheck's tests, AOTAutograd's passes, export): the first run of an answer cell imports every WARMUP
    of its lesson's probes (its own module's first; a name this torch lacks is skipped), and a check waits for it."""
    done = subprocess.run([sys.executable, "-c", FAKE_KERNEL + REPORT + DONE + LESSON], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "True", "True", "True", "True", "True"], done.stdout + done.stderr
    assert "['csv', 'no_such_module_here', 'zipapp', 'json.tool']" in done.stderr


def test_every_warm_up_module_exists_on_this_torch():
    """A renamed module would silently stop warming: each WARMUP name must be a module of the pinned torch (looked
    up as a file: importing them all takes seconds). Another torch may lack a few (torch 2.11 has no
    ``subclass_codegen``; the warm-up skips them), never the two that hold most of lesson 08's imports."""
    import importlib.util
    import re
    from pathlib import Path

    import torch

    from course_utils import probes

    names = [n.partition(":")[0] for m in probes.MODULES
             for n in getattr(importlib.import_module(f"course_utils.probes.{m}"), "WARMUP", ())]

    def found(name: str) -> bool:
        top, *rest = name.split(".")
        base = Path(importlib.util.find_spec(top).origin).parent.joinpath(*rest)
        return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()
    assert names
    pinned = re.search(r"^torch==(\S+)", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    if torch.__version__.split("+")[0] == pinned:
        assert [n for n in names if not found(n)] == []
    else:
        assert all(found(n) for n in ("torch.testing._internal.optests", "torch.export._trace"))


COUNTED = """
import importlib, sys, types
from course_utils.probes import lesson08, lesson08_op, warmup
imported, collected = [], []
warmup.importlib = types.SimpleNamespace(import_module=lambda n: (imported.append(n), importlib.import_module(n))[1])
warmup.gc = types.SimpleNamespace(collect=lambda: collected.append(1))
warmup.MODULES = ("json.tool",)
lesson08.WARMUP, lesson08_op.WARMUP = ("csv",), ("zipapp", "csv")
warmup.start()
warmup.prepare("func_softmax")  # its answer cell's first run, then the other exercise's, then both again
warmup.prepare("row_norm_op")
warmup.wait()
warmup.prepare("func_softmax")
warmup.prepare("row_norm_op")
warmup.start()
warmup.prepare("scalar_engine")  # another lesson's answer cell (Run All): nothing new to import, nothing to collect
warmup.wait()
print(imported, len(collected))
"""


def test_each_name_is_imported_once_and_collected_after_once():
    """Every answer cell of a lesson queues the same names: the warm-up imports each once, and runs one full
    collection after them, not one per answer cell (each held the CPU 0.2-0.3 s: in Run All every later check of a
    notebook waited for one)."""
    done = subprocess.run([sys.executable, "-c", COUNTED], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['json.tool', 'csv', 'zipapp'] 1", done.stdout


RUN_ALL = """
import sys, time
from pathlib import Path
folder = Path(sys.argv[1])
for name in ("cw_own", "cw_sibling"):  # stand-ins for lesson 08's imports, each taking a while
    (folder / f"{name}.py").write_text(
        f"import time, cw_log\\ncw_log.events.append(('{name}', time.monotonic()))\\ntime.sleep(0.8)\\n"
        f"cw_log.events.append(('{name} done', time.monotonic()))\\n")
(folder / "cw_log.py").write_text("events = []\\n")
sys.path.insert(0, str(folder))
import cw_log
import course_utils.probes as probes
from course_utils.checks import run_check
from course_utils.probes import lesson08, lesson08_op, warmup
warmup.MODULES = ()
lesson08.WARMUP, lesson08_op.WARMUP = ("cw_own",), ("cw_sibling",)
real_run = probes.run
def run(*args, **kwargs):
    cw_log.events.append(("check", time.monotonic()))
    try:
        return real_run(*args, **kwargs)
    finally:
        cw_log.events.append(("check done", time.monotonic()))
probes.run = run
warmup.prepare("func_softmax")  # Run All: the answer cell ran, its check comes at once
run_check("func_softmax", {})
warmup.wait()
print(" | ".join(e for e, _ in sorted(cw_log.events, key=lambda e: e[1])))
"""


def test_a_check_under_way_waits_only_for_its_own_imports_and_none_runs_beside_it(tmp_path):
    """Run All (issue 49): the first check comes while the warm-up is still importing. It waits for what its own
    probes import (a check importing beside the warm-up can deadlock on torch's circular modules, and they would
    share the CPU), not for what the lesson's next exercise needs: that is imported after the check."""
    done = subprocess.run([sys.executable, "-c", RUN_ALL, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "cw_own | cw_own done | check | check done | cw_sibling | cw_sibling done", done.stdout


def test_a_check_waits_only_for_what_its_own_probes_import():
    """Run All: lesson 01's first check came while the set-up cell's warm-up imported torch._dynamo (1 s of CPU it
    never uses) and waited for it; only lesson 08's probes, which run torch.func and opcheck, wait for it."""
    from course_utils.probes import warmup

    assert "torch._dynamo" not in warmup.needs("scalar_engine")
    assert {"torch.fx.experimental.symbolic_shapes", "@scalar_engine"} <= warmup.needs("scalar_engine")
    assert {"torch._dynamo", "torch._decomp.decompositions_for_jvp"} <= warmup.needs("func_softmax")
    assert "torch.testing._internal.optests" not in warmup.needs("func_softmax")  # its sibling's, after it
    assert {"torch._dynamo", "torch.testing._internal.optests"} <= warmup.needs("row_norm_op")


def test_only_a_front_end_a_person_uses_warms_up():
    """JupyterLab, Notebook, Colab and VS Code send each cell with stdin on; nbclient (nbval, nbgrader's autograde,
    ./course build) runs them back to back with stdin off, where no one reads and the warm-up cost each kernel 1.5 to
    1.9 CPU-s of imports its checks may never use. A shell without that request at hand warms up, as before."""
    from types import SimpleNamespace

    from course_utils.probes.cells import someone_reads

    def shell(parent):
        return SimpleNamespace(kernel=SimpleNamespace(get_parent=lambda channel=None: parent))

    assert someone_reads(shell({"content": {"code": "1", "allow_stdin": True}}))
    assert not someone_reads(shell({"content": {"code": "1", "allow_stdin": False}}))
    assert someone_reads(shell({})) and someone_reads(SimpleNamespace()) and someone_reads(None)


def test_a_kernel_run_by_nbclient_starts_no_warm_up():
    """The set-up cell and an answer cell sent with stdin off (how nbgrader's autograde and nbval run them) start no
    thread and import nothing beyond what they ask for."""
    headless = FAKE_KERNEL.replace("shell = ZMQInteractiveShell()", "shell = ZMQInteractiveShell()\nshell.kernel = "
                                   "types.SimpleNamespace(get_parent=lambda channel=None: {'content': {'allow_stdin': "
                                   "False}})")
    answer = LESSON.replace("from course_utils.probes import lesson08", "from course_utils.probes import warmup, lesson08")
    done = subprocess.run([sys.executable, "-c", headless + REPORT.replace(", warmup.start() is warmup.start()", "")
                           + answer], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", "False", "False", "False", "True"], done.stdout + done.stderr


READY = """
import sys, threading
from pathlib import Path
folder = Path(sys.argv[1])
(folder / "rd_log.py").write_text("threads = {}\\n")
for name in ("rd_first", "rd_machinery"):  # stand-ins: each says which thread imported it
    (folder / f"{name}.py").write_text(f"import threading, rd_log\\nrd_log.threads['{name}'] = "
                                       "threading.current_thread().name\\n")
sys.path.insert(0, str(folder))
import rd_log
from course_utils.probes import warmup
warmup.ready(("rd_machinery",))  # no warm-up at work (a script, nbclient): imported here, at once
print(rd_log.threads, warmup._S.worker is None)
del sys.modules["rd_machinery"]
warmup.MODULES = ("rd_first",)
warmup.start()  # a kernel's set-up cell: the warm-up is at work when the cell asks for the machinery
warmup.ready(("rd_machinery",))
print(rd_log.threads, warmup._S.worker is None)
"""


def test_ready_imports_before_returning_through_the_warm_up_if_one_runs(tmp_path):
    """Lesson 08's set-up cell (``probes.machinery``) needs torch._dynamo imported before it returns, whether a
    warm-up runs or not: with none it imports it itself; with one, the warm-up's thread imports it after what it has
    queued (two threads importing torch at once can deadlock) and the cell waits for all of it, so no import or
    collection is left running into the first check."""
    done = subprocess.run([sys.executable, "-c", READY, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["{'rd_machinery': 'MainThread'} True",
                                        "{'rd_machinery': 'course-warmup', 'rd_first': 'course-warmup'} True"], \
        done.stdout


def test_ready_hides_what_the_imports_warn_and_keeps_the_filters_they_add(tmp_path, monkeypatch):
    """On torch 2.15 lesson 08's set-up cell printed torch's own FutureWarning (torch._decomp calls the deprecated
    torch.jit.script while ready() imports it): not the student's output. A filter an import adds stays (SymPy's
    "once"), and a warning raised after ready() returns is shown as before."""
    import warnings

    from course_utils.probes import warmup

    (tmp_path / "noisy_torch_part.py").write_text(
        "import warnings\nwarnings.warn('`torch.jit.script` is deprecated.', FutureWarning)\n"
        "class Quiet(Warning):\n    pass\nwarnings.simplefilter('once', Quiet)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            warmup.ready(["noisy_torch_part"])
            quiet = sys.modules["noisy_torch_part"].Quiet
            assert warnings.filters[0] == ("once", None, quiet, None, 0)
            warnings.warn("the student's own", UserWarning, stacklevel=1)
        assert [str(w.message) for w in seen] == ["the student's own"]
    finally:
        sys.modules.pop("noisy_torch_part", None)


NOISY_WORKER = """
import sys, time, warnings
from pathlib import Path
folder = Path(sys.argv[1])
(folder / "nw_first.py").write_text(  # the worker is inside an import's own catch_warnings when ready() asks
    "import time, warnings\\nwith warnings.catch_warnings():\\n    warnings.simplefilter('ignore')\\n"
    "    time.sleep(0.5)\\n")
(folder / "nw_noisy.py").write_text("import warnings, threading\\n"
                                    "warnings.warn('`torch.jit.script` is deprecated.', FutureWarning)\\n"
                                    "WHO = threading.current_thread().name\\n")
sys.path.insert(0, str(folder))
from course_utils.probes import warmup
warmup.MODULES = ("nw_first",)
warmup.start()
time.sleep(0.1)
warmup.ready(("nw_noisy",))
print(sys.modules["nw_noisy"].WHO, flush=True)
warnings.warn("the student's own", UserWarning, stacklevel=1)
"""


def test_the_warm_ups_thread_hides_what_its_imports_warn_while_ready_waits(tmp_path):
    """With a warm-up at work, ready() waits while the worker imports: the worker hides torch's warnings on its own
    thread. A process-wide catch_warnings on the waiting thread interleaved with one inside the worker's import: it
    saved the import's "ignore" and restored it for good, hiding every later warning of the student's."""
    done = subprocess.run([sys.executable, "-c", NOISY_WORKER, str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["course-warmup"]
    assert "jit.script" not in done.stderr and "the student's own" in done.stderr, done.stderr
