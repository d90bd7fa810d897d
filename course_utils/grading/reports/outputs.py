"""Every output format of a grading run, behind one interface.

Each is a ``Writer`` (``results.Writer``): it reads a ``Batch`` (the results model and what
the run found beside it) and writes one target; none computes a total or a status of its
own. ``WRITERS`` names them by the command-line option that asks for them. The JSON lines
(``--json``) are printed per submission as it finishes, from ``SubmissionResult.to_json``;
Gradescope's results.json is written by ``gradescope.results`` from the same model.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..results import Batch, SubmissionResult, Writer
from . import dashboard, reports

WRITERS: dict[str, Writer] = {"out": reports.write_table, "feedback_dir": reports.write_feedback,
                              "report": dashboard.write}


def write_all(batch: Batch, targets: dict[str, str | None]) -> list[Path]:
    """Write every output asked for (option name -> target; None: not asked)."""
    unknown = set(targets) - set(WRITERS)
    if unknown:
        raise ValueError(f"no writer for {sorted(unknown)}; known: {sorted(WRITERS)}")
    return [WRITERS[name](batch, target) for name, target in targets.items() if target]


def json_line(row: SubmissionResult) -> str:
    """One submission as one line of JSON (``--json``)."""
    return json.dumps(row.to_json())
