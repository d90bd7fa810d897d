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

__all__ = ["ANSWER_BANNER", "ANSWER_MARK", "RUNS", "SETUP_BANNER", "SETUP_MARK", "CellRun", "defined_names", "stale",
           "used_names", "watch_cells"]


def _latest(pred) -> CellRun | None:
    runs = [r for r in RUNS.values() if pred(r)]
    return max(runs, key=lambda r: r.count) if runs else None


def _cell_name(run: CellRun, owners: Mapping[str, str]) -> str:
    if run.setup:
        return "the shared set-up cell at the top"
    owner = run.exercise or next((owners[n] for n in sorted(run.names) if n in owners), None)
    return f"the answer cell for {owner}" if owner else "the cell that defines it"


def stale(grade_id: str, names: tuple[str, ...], namespace: Mapping[str, object],
          owners: Mapping[str, str]) -> str | None:
    """Why the code a check would grade is not what the student last wrote and ran, or None.

    ``names``: what the exercise's answer must define; ``owners``: name -> the exercise whose
    answer cell defines it. Only cells that ran in this kernel are known.
    """
    if notebook_shell() is None or not RUNS:
        return None
    # the last cell that ran this exercise's code: its answer cell, or an unmarked cell defining its names
    own = _latest(lambda r: r.exercise == grade_id or (r.exercise is None and bool(r.names & set(names))))
    if own is not None and own.error:
        origin = f"; {_origin(own.undefined, own, owners)}" if own.undefined else ""
        return (f"your answer cell for {grade_id} last raised {own.error}{origin}: fix it and run it, then this "
                "check (nothing was graded).")
    for name in names:  # an answer that builds on another exercise's answer cell (linear_module on LinearFunction)
        other = _latest(lambda r, name=name: name in r.names)
        if other is not None and other is not own and other.error:
            return (f"`{name}` comes from {_cell_name(other, owners)}, which last raised {other.error}: fix that "
                    "cell and run it, then this check (nothing was graded).")
    if own is None:
        if all(n in namespace for n in names):
            return None  # defined some other way (a cell without banner run before the hooks, exec): grade it
        return (f"the answer cell for {grade_id} has not run in this kernel yet: run the shared set-up cell at the "
                "top, then that answer cell, then this check.")
    edited = edited_since_run(own)
    if edited:
        return (f"your answer cell for {grade_id} was edited after it last ran ({edited}): run it, then this check "
                "(nothing was graded: the check would grade the version that ran).")
    missing = sorted(n for n in own.names | own.uses if n not in namespace)
    for name in missing:
        return (f"your answer cell for {grade_id} uses `{name}`, which is not defined in this kernel: "
                f"{_origin(name, own, owners)}; then run your answer cell and this check (nothing was graded).")
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
