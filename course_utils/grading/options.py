"""How a batch is graded (``Options``) and the judge's memory budget: settings, no torch.

The command line, Gradescope's ``run`` and ``batch`` build and pass these before anything
imports torch or the checks (``judge`` does, when a file is graded), so they need no lazy import.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .sandbox import sandbox

JUDGE_MEMORY = 3 << 30  # the judge's own growth allowed beyond its size at start, plus JOB_MEMORY per job
JOB_MEMORY = 1 << 30


@dataclass
class Options:
    timeout: float = 60.0  # seconds per exercise (--timeout)
    memory: int = 4 << 30  # bytes per runner, all its processes (--memory)
    sandbox: sandbox.Sandbox = sandbox.Sandbox("none", "not detected")  # noqa: RUF009 - frozen: one shared default is safe
    slots: int = 1  # submissions graded at once, each in its own runner slot (--jobs)
    assignment: str | None = None  # the assignment every notebook of the batch must be (--assignment)
    # each file's roster id (display name -> id) with --roster, else None: whose variants a file is judged against
    owners: dict[str, str] | None = None
    feedback_fix: bool = False  # feedback shows each failing part's fix too (level 2 of help; --feedback-fix)
    stop: threading.Event = field(default_factory=threading.Event)  # set: grade nothing more, end the runners (Ctrl-C)


class Stoppable:
    """A runner's deadline that is due at once when the batch is stopped (``Options.stop``): ``Worker.wait``
    then ends the runner as at a time limit, so Ctrl-C never waits for a submission's checks to finish."""

    def __init__(self, deadline, stop: threading.Event) -> None:
        self.deadline, self.stop = deadline, stop

    def due(self) -> float:
        return float("-inf") if self.stop.is_set() else self.deadline.due()
