"""How a check cell shows its result to a student: a styled verdict in Jupyter, plain text elsewhere.

``check()`` returns a :class:`Verdict`, a float (the points: nbgrader reads the check cell's
value as its grade) whose notebook display is HTML: every part with its points, the failing
part's hint, the parts not reached yet; an exercise not attempted yet shows a prompt, no score.
Its text form is only the number, so a front end that shows HTML shows no stray ``1.0``; in a
terminal ``check()`` prints the plain verdict instead.

In a Jupyter kernel, :func:`watch_cells` remembers which cells failed (a SyntaxError in an
answer cell, say), so a check can say "the answer cell for mul did not run" instead of a
``NameError`` about a name that cell would have defined.
"""
from __future__ import annotations

import html
import re
from collections.abc import Sequence

from ..errors import notebook_shell
from .engine import Exercise, Result

COLOURS = {"passed": "#2e7d32", "failed": "#c62828", "not attempted": "#757575"}
ICONS = {"passed": "✓", "failed": "✗", "not attempted": "·"}
# name -> the error of the last cell that defines it, when that cell failed (None once it ran)
FAILED_DEFINITIONS: dict[str, str | None] = {}
DEFINES = re.compile(r"^(?:class|def)\s+(\w+)|^(\w+)\s*(?::[^=]*)?=(?!=)", re.M)


def _plural(points: float) -> str:
    return f"{points:g} point" + ("" if points == 1 else "s")


def verdict_html(ex: Exercise, result: Result) -> str:
    """Every part of ``ex`` with its points: passed, failed (with the hint) or not reached yet."""
    colour = COLOURS.get(result.status, COLOURS["failed"])
    head = (f"<b>{ICONS.get(result.status, '✗')} {html.escape(ex.grade_id)}</b>: "
            f"{result.points:g}/{result.max_points:g} points")
    if result.status == "not attempted":  # a prompt, not a score: what a fresh exercise notebook shows
        head = f"<b>{ICONS['not attempted']} {html.escape(ex.grade_id)}</b> ({_plural(ex.points)}): not attempted yet"
        body = (f"<div>{html.escape(result.feedback)} Write your answer in the cell above, run it, then run "
                "this check again.</div>")
    else:
        items, failing = [], result.status == "failed"
        # the engine's feedback is "<stage name>: <hint>"; a stage name may itself hold a colon
        failed_stage = next((st.name for st in ex.stages if failing and result.feedback.startswith(st.name + ": ")), "")
        reached_failure = False
        for stage in ex.stages:
            label = f"{html.escape(stage.name)} <span style='opacity:.7'>({_plural(stage.points)})</span>"
            if stage.name in result.passed_stages:
                items.append(f"<li>✓ {label}</li>")
            elif failing and not reached_failure and (stage.name == failed_stage or not failed_stage):
                reached_failure = True
                hint = result.feedback[len(failed_stage) + 2:] if failed_stage else result.feedback
                items.append(f"<li style='color:{COLOURS['failed']}'>✗ {label}: <span style='color:inherit'>"
                             f"{html.escape(hint)}</span></li>")
            else:
                items.append(f"<li style='opacity:.6'>· {label}: not checked yet</li>")
        if failing and not reached_failure:  # a failure before any part (a cell that did not run, time limit)
            items.insert(0, f"<li style='color:{COLOURS['failed']}'>✗ {html.escape(result.feedback)}</li>")
        body = f"<ul style='list-style:none;margin:.3em 0 0;padding-left:.8em'>{''.join(items)}</ul>"
    note = f"<div style='opacity:.7'>note: {html.escape(result.output_note)}</div>" if result.output_note else ""
    return (f"<div class='course-verdict' data-status='{html.escape(result.status)}' style='border-left:4px solid "
            f"{colour};padding:.3em .8em;margin:.2em 0;font-family:system-ui,sans-serif;line-height:1.5'>"
            f"<div>{head}</div>{body}{note}</div>")


class Verdict(float):
    """The points of one check (a float, for nbgrader and arithmetic) that Jupyter shows as the verdict."""

    result: Result
    exercise: Exercise

    def __new__(cls, exercise: Exercise, result: Result) -> Verdict:
        obj = super().__new__(cls, result.points)
        obj.result, obj.exercise = result, exercise
        return obj

    def __repr__(self) -> str:  # the text form nbgrader parses as the cell's score
        return float.__repr__(self)

    def __str__(self) -> str:
        return self.result.report()

    def _repr_html_(self) -> str:
        return verdict_html(self.exercise, self.result)


# --------------------------------------------------------------------------- cells that did not run
def _record(result: object) -> None:
    """IPython post_run_cell hook: remember which names the cell defines and whether it failed."""
    info = getattr(result, "info", None)
    source = getattr(info, "raw_cell", "") or ""
    error = getattr(result, "error_before_exec", None) or getattr(result, "error_in_exec", None)
    summary = None
    if error is not None:
        line = getattr(error, "lineno", None)
        summary = type(error).__name__ + (f" on line {line}" if isinstance(line, int) else "")
    for match in DEFINES.finditer(source):
        FAILED_DEFINITIONS[match.group(1) or match.group(2)] = summary


def watch_cells() -> None:
    """In a Jupyter kernel, start remembering failed cells (once per kernel; nothing elsewhere)."""
    shell = notebook_shell()
    if shell is None:
        return
    if not getattr(shell, "_course_watch_cells", False):
        shell.events.register("post_run_cell", _record)
        shell._course_watch_cells = True


def did_not_run(ex: Exercise, result: Result, owners: dict[str, str]) -> Result:
    """``result`` with a missing-name or NameError failure explained by the answer cell that failed.

    ``owners`` maps a name to the exercise whose answer cell defines it.
    """
    if result.status == "passed":
        return result
    names: Sequence[str] = ()
    if "missing_name" in result.mistakes:
        names = ex.names
    elif "raised" in result.mistakes:
        names = re.findall(r"NameError: name '(\w+)' is not defined", result.feedback)
    for name in names:
        error = FAILED_DEFINITIONS.get(name)
        if error:
            owner = owners.get(name, ex.grade_id)
            text = (f"the answer cell for {owner} did not run ({error}): fix the error shown there first, run "
                    "that cell, then this check.")
            return Result(result.grade_id, result.points, result.max_points, "failed", text, result.mistakes,
                          result.passed_stages, result.output_note, result.flags)
    return result
