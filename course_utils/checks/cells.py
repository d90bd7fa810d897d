"""What a check concludes from the cells that ran in this Jupyter kernel, so it never grades stale code.

The facts (every cell's last run) are recorded by ``probes.cells``; this module decides.

Before a check grades, :func:`stale` asks: did the answer cell of this exercise (and of every
name it must define) last run successfully, and is it still what ran? If not, the check says
which cell, what it raised and where, and grades nothing. An edit that is not re-run stays in
the browser; the kernel sees it only once JupyterLab has saved the notebook (autosave), by
comparing the saved cell with the source that ran (``edited_since_run``).

Outside a kernel (a terminal, the grader's runner) nothing is recorded and nothing changes.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping

from ..errors import notebook_shell
from ..probes.cells import (
    ANSWER_BANNER,
    ANSWER_MARK,
    RUNS,
    SETUP_BANNER,
    SETUP_MARK,
    CellRun,
    defined_names,
    used_names,
    watch_cells,
)

__all__ = ["ANSWER_BANNER", "ANSWER_MARK", "RUNS", "SETUP_BANNER", "SETUP_MARK", "CellRun", "defined_names",
           "provenance", "stale",
           "used_names", "watch_cells"]


def _latest(pred) -> CellRun | None:
    runs = [r for r in RUNS.values() if pred(r)]
    return max(runs, key=lambda r: r.count) if runs else None


def _at(run: CellRun) -> str:
    return f" (In[{run.number}])" if run.number else ""


def _cell_name(run: CellRun, owners: Mapping[str, str]) -> str:
    if run.setup:
        return "the shared set-up cell at the top"
    if run.exercise:
        return f"the answer cell for {run.exercise}"
    return "another cell" + _at(run)  # a scratch cell: not the answer cell, whatever it defines


def _yours(run: CellRun, grade_id: str) -> str:
    """The cell that ran this exercise's code: its answer cell (marked or, in a notebook without banners, not)."""
    return f"your answer cell for {grade_id}"


def stale(grade_id: str, names: tuple[str, ...], namespace: Mapping[str, object],
          owners: Mapping[str, str]) -> str | None:
    """Why the code a check would grade is not what the student last wrote and ran, or None.

    ``names``: what the exercise's answer must define; ``owners``: name -> the exercise whose
    answer cell defines it. Only cells that ran in this kernel are known.
    """
    if notebook_shell() is None:
        return None
    not_run = (f"the answer cell for {grade_id} has not run in this kernel yet: run the shared set-up cell at the "
               "top, then that answer cell, then this check.")
    if not RUNS:  # only this check cell is running: nothing ran before it (or ran before the hooks)
        return None if all(n in namespace for n in names) else not_run
    own = _own(grade_id, names, owners)
    edited = edited_since_run(own) if own is not None else None
    if own is not None and edited:  # an edit since the last run wins over what that run raised
        raised = f"; that run raised {own.error}" if own.error else ""
        return (f"{_yours(own, grade_id)} was edited after it last ran ({edited}{raised}): run it, then this check "
                "(nothing was graded: the check would grade the version that ran).")
    if own is not None and own.error:
        if own.undefined:
            where = _latest(lambda r: own.undefined in r.names and r is not own)
            if where is not None and not where.error and where.count > own.count:  # cells run out of order
                return (f"{_yours(own, grade_id)} last raised {own.error} because it ran before "
                        f"{_cell_name(where, owners)}{'' if where.exercise is None and not where.setup else _at(where)}"
                        f", which defines `{own.undefined}`: nothing to fix, run your answer cell again, then this "
                        "check (nothing was graded).")
        origin = f"; {_origin(own.undefined, own, owners)}" if own.undefined else ""
        return (f"{_yours(own, grade_id)} last raised {own.error}{origin}: fix it and run it, then this "
                "check (nothing was graded).")
    for name in names:  # an answer that builds on another exercise's answer cell (linear_module on LinearFunction)
        other = _latest(lambda r, name=name: name in r.names)
        if other is not None and other is not own and other.error:
            return (f"`{name}` comes from {_cell_name(other, owners)}, which last raised {other.error}: fix that "
                    "cell and run it, then this check (nothing was graded).")
    if own is None:
        if all(n in namespace for n in names):
            return None  # defined some other way (a cell without banner run before the hooks, exec): grade it
        return not_run
    missing = sorted(n for n in own.names | own.uses if n not in namespace)
    for name in missing:
        return (f"{_yours(own, grade_id)} uses `{name}`, which is not defined in this kernel: "
                f"{_origin(name, own, owners)}; then run your answer cell and this check (nothing was graded).")
    return None


def _own(grade_id: str, names: tuple[str, ...], owners: Mapping[str, str]) -> CellRun | None:
    """The last cell that ran this exercise's code: its answer cell, or a cell without banner defining its own names.

    A name another exercise owns (``LinearFunction`` for linear_module) does not make a cell this exercise's.
    """
    mine = {n for n in names if owners.get(n, grade_id) == grade_id}
    return _latest(lambda r: r.exercise == grade_id or (r.exercise is None and not r.setup and bool(r.names & mine)))


def provenance(grade_id: str, names: tuple[str, ...], owners: Mapping[str, str], passed: bool = False) -> str:
    """What a graded verdict says about the code it graded, in a Jupyter kernel ("" elsewhere).

    A name last defined by a cell other than the answer cell is named (it was graded, not the answer
    cell). Under Jupyter Server, a verdict short of full marks (``passed`` False) on a run the saved
    notebook does not yet hold says which run it graded and to save, as an edit made since is seen
    only once saved; a pass, or a run the notebook was saved after (the check sees edits then), gets
    no such note: said on every verdict, it would be noise students learn to skip.
    """
    if notebook_shell() is None or not RUNS:
        return ""
    notes = []
    answer = _latest(lambda r: r.exercise == grade_id)
    for name in names:
        if owners.get(name, grade_id) != grade_id:
            continue
        last = _latest(lambda r, name=name: name in r.names)
        # only where the answer cell carries its banner (a notebook without banners has no other answer cell)
        if answer is not None and last is not None and last.count > answer.count and not last.setup \
                and last.exercise is None:
            notes.append(f"`{name}` was last defined by another cell{_at(last)}, not your answer cell: that is "
                         "what was graded")
    own = _own(grade_id, names, owners)
    if not notes and not passed and own is not None and own.number and \
            os.environ.get("JPY_SESSION_NAME", "").endswith(".ipynb"):
        saved = _saved_at()
        if saved is None or saved <= own.at:
            notes.append(f"graded the version that ran at In[{own.number}]; save the notebook (Ctrl+S) so the "
                         "check can tell when you edit it without running it")
    return "; ".join(notes)


def _saved_at() -> float | None:
    try:
        return os.path.getmtime(os.environ.get("JPY_SESSION_NAME", ""))
    except OSError:
        return None


def edited_since_run(run: CellRun) -> str | None:
    """How we know a cell changed since it ran, or None: the notebook saved after that run holds another source.

    JupyterLab keeps edits in the browser until it saves (autosave: every two minutes), and
    Jupyter Server tells the kernel its notebook's path (``JPY_SESSION_NAME``); anything else
    (no path, no cell id, no save since the run, an unreadable file) means "not known".
    """
    path = os.environ.get("JPY_SESSION_NAME", "")
    if not run.cell_id or not path.endswith(".ipynb"):
        return None
    try:
        saved = os.path.getmtime(path)
        if saved <= run.at:
            return None
        with open(path, encoding="utf-8") as f:
            cells = json.load(f).get("cells", [])
        cell = next((c for c in cells if isinstance(c, dict) and c.get("id") == run.cell_id), None)
        if cell is None:
            return None
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
    except (OSError, ValueError, AttributeError):
        return None
    if hashlib.sha1(source.encode()).hexdigest()[:12] == run.digest:
        return None
    return f"the notebook saved at {time.strftime('%H:%M:%S', time.localtime(saved))} holds another version"


def _origin(name: str, own: CellRun, owners: Mapping[str, str]) -> str:
    """Which cell a name comes from, as far as this kernel knows: the cross-cell part of a NameError."""
    where = _latest(lambda r: name in r.names and r is not own)
    if where is None:
        return (f"no cell that ran in this kernel defines `{name}` (a typo? or an import of the shared set-up cell "
                "at the top, not run yet?)")
    if where.error:
        return f"`{name}` comes from {_cell_name(where, owners)}, which last raised {where.error}"
    return f"`{name}` comes from {_cell_name(where, owners)}"
