"""The review queue ("Needs your attention"): exactly what still needs an instructor's decision.

A row is in the queue while it has an open item: a hold or a status that keeps its points from
counting (until ``accept``), or a flag that is an accusation or an integrity concern (until
``accept``, an ``override`` of the exercise it names, or ``dismiss``). A decided row leaves the
queue; its decisions stay in its history (``SubmissionResult.decisions``). Remarks that need no
decision (the batch ran without the sandbox, a deleted answer cell graded as not attempted,
printed output discarded) are listed with the row, never queued. A flag this module does not know
is queued: an unknown remark is never dismissed silently.
"""
from __future__ import annotations

from ..status import SubmissionStatus
from .results import SubmissionResult

DISMISSED = "flag dismissed"  # how a dismissal opens in a row's history (``gradebook.Decision.describe``)

# flags that are facts about how a row was graded, not questions for the instructor (by their opening words)
REMARKS = ("graded WITHOUT the sandbox", "skipped: ")
REMARK_PARTS = ("is missing from the submission (graded as not attempted)", "characters (discarded)",
                "the first was graded, the others ignored")


def needs_decision(flag: str) -> bool:
    """Whether ``flag`` asks the instructor to decide (see the module's rule)."""
    return not (flag.startswith(REMARKS) or any(part in flag for part in REMARK_PARTS))


def open_items(row: SubmissionResult) -> list[str]:
    """What in ``row`` (decisions applied: ``gradebook.final``) still waits for a decision; [] when nothing does."""
    items = []
    if row.status == SubmissionStatus.HELD:
        items.append("held for review: " + ("; ".join(row.review) or "see its flags"))
    elif not row.graded:
        items.append(f"{row.status}: its points do not count until accepted")
    return items + [f for f in row.flags if needs_decision(f) and f not in row.resolved]


def queue(rows: list[SubmissionResult]) -> list[SubmissionResult]:
    """The rows with an open item, the ones whose points do not count first, then by name."""
    return sorted((r for r in rows if open_items(r)), key=lambda r: (r.graded, str(r.status), r.submission))
