"""Which cells ran in this Jupyter kernel, and how: the facts that keep a check from grading stale code.

This half runs beside the student's code and decides nothing (``checks.cells`` does); it lives
among the probes because the shared set-up cell of every exercise notebook imports it first
(``import course_utils.probes.cells``), before any answer cell runs, and that cell also runs in
the grader's sandbox, which holds no checks (there, outside a kernel, it records nothing).

IPython's ``post_run_cell`` hook records, for every cell that runs, its id (when the front end
sends one), a hash of its source, when it ran, the names it defines at top level and whether it
raised (which error, on which line). An answer cell carries a banner line naming its exercise
(``ANSWER_BANNER``, written by ``build``); a cell without one is matched to an exercise by the
names it defines.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import re
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

ANSWER_BANNER = "# ✎ Your answer for `{grade_id}`: edit this cell, run it, then run the check below it."
ANSWER_MARK = re.compile(r"^# ✎ Your answer for `(\w+)`", re.M)
SETUP_BANNER = "# 🔒 Shared set-up (locked): imports every exercise below uses. Run it first."
SETUP_MARK = "# 🔒 Shared set-up"
DEFINES = re.compile(r"^(?:class|def)\s+(\w+)|^(\w+)\s*(?::[^=]*)?=(?!=)", re.M)


@dataclass
class CellRun:
    """The last run of one cell: what it defines, and the error it raised (None when it ran)."""

    exercise: str | None  # from the answer banner
    setup: bool
    names: frozenset[str]
    uses: frozenset[str]  # global names it reads (answer cells only)
    digest: str
    count: int  # order of the runs (this kernel's own counter)
    error: str | None  # "SyntaxError on line 3: invalid syntax"
    undefined: str | None = None  # the name of a NameError it raised
    cell_id: str | None = None  # the front end's id of the cell (JupyterLab sends it)
    at: float = 0.0  # when it ran (time.time())
    number: int | None = None  # its execution count, the N of In[N] the student sees


RUNS: dict[str, CellRun] = {}  # cell key (id, or the exercise of its banner, or its source hash) -> last run
_COUNTER = [0]


def defined_names(source: str) -> frozenset[str]:
    """Names a cell binds at top level (classes, functions, assignments, imports); a regex when it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return frozenset(m.group(1) or m.group(2) for m in DEFINES.finditer(source))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return frozenset(found)


def used_names(source: str) -> frozenset[str]:
    """Global names a cell reads anywhere (a superset is fine: only names nowhere defined are reported)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return frozenset()
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound |= {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
    bound |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
              for a in n.names}
    loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return frozenset(loads - bound - set(dir(builtins)))


def describe(error: BaseException) -> str:
    """'SyntaxError on line 3: invalid syntax': the error, the line of the cell, its first message line."""
    line = getattr(error, "lineno", None) if isinstance(error, SyntaxError) else None
    if line is None:
        cell_frames = [f for f in traceback.extract_tb(error.__traceback__)
                       if "ipykernel_" in f.filename or f.filename.startswith("<ipython-input")]
        line = cell_frames[0].lineno if cell_frames else None
    first = (str(getattr(error, "msg", "") or error).strip().splitlines() or [""])[0][:160]
    return type(error).__name__ + (f" on line {line}" if isinstance(line, int) else "") + (f": {first}" if first else "")


def _key(source: str, cell_id: str | None) -> str:
    mark = ANSWER_MARK.search(source)
    return cell_id or (f"answer:{mark.group(1)}" if mark else "") or hashlib.sha1(source.encode()).hexdigest()


def record(result: object) -> None:
    """IPython post_run_cell hook: remember the cell's last run."""
    info = getattr(result, "info", None)
    source = getattr(info, "raw_cell", "") or ""
    error = getattr(result, "error_before_exec", None) or getattr(result, "error_in_exec", None)
    mark = ANSWER_MARK.search(source)
    if mark and someone_reads(notebook_shell()):
        from . import warmup

        warmup.prepare(mark.group(1))  # what this lesson's first checks import, while the student works (issue 49)
    _COUNTER[0] += 1
    RUNS[_key(source, getattr(info, "cell_id", None))] = CellRun(
        mark.group(1) if mark else None, source.lstrip().startswith(SETUP_MARK), defined_names(source),
        used_names(source) if mark else frozenset(), hashlib.sha1(source.encode()).hexdigest()[:12], _COUNTER[0],
        describe(error) if isinstance(error, BaseException) else None,
        getattr(error, "name", None) if isinstance(error, NameError) else None, getattr(info, "cell_id", None),
        time.time(), getattr(result, "execution_count", None))


def notebook_shell() -> Any:
    """The IPython shell of a Jupyter kernel, else None (never imports IPython; ``errors`` is not in the sandbox)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and any(c.__name__ == "ZMQInteractiveShell" for c in type(shell).__mro__):
        return shell
    return None


def someone_reads(shell: Any) -> bool:
    """Whether the cell running now came from a front end a person uses (JupyterLab, Notebook, Colab, VS Code: they
    answer ``input()``), not from one that runs every cell back to back with stdin off (nbclient: nbval, nbgrader's
    autograde, ``./course build``). There no one reads between cells, and the warm-up only imports beside them what
    the checks may never use (1.5 to 1.9 of a kernel's 2.4 to 4.3 CPU-s on lesson 03's notebooks). Unknown: True."""
    get_parent = getattr(getattr(shell, "kernel", None), "get_parent", None)
    if get_parent is None:
        return True
    try:
        content = (get_parent("shell") or {}).get("content") or {}
    except Exception:  # a kernel whose request is not at hand: warm up, as before
        return True
    return bool(content.get("allow_stdin", True))


def watch_cells() -> None:
    """In a Jupyter kernel, start recording cell runs (once per kernel; nothing elsewhere)."""
    shell = notebook_shell()
    if shell is None:
        return
    if not getattr(shell, "_course_watch_cells", False):
        shell.events.register("post_run_cell", record)
        shell._course_watch_cells = True
        if not someone_reads(shell):
            return
        from . import warmup

        warmup.start()  # the first check's imports, while the student reads (issue 49)


watch_cells()  # importing this module is what the shared set-up cell does for it
