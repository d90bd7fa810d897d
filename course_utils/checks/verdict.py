"""How a check cell shows its result to a student: a styled verdict in Jupyter, plain text elsewhere.

``check()`` returns a :class:`Verdict`, a float (the points: nbgrader reads the check cell's
value as its grade) whose notebook display is HTML: every part with its points, the failing
part's hint, the parts not reached yet; an exercise not attempted yet shows a prompt, no score.
Its text form is only the number, so a front end that shows HTML shows no stray ``1.0``; in a
terminal ``check()`` prints the plain verdict instead.

The failing part shows its diagnosis (level 1); its fix, where the check has one, sits behind a
"Show the fix" toggle that stays closed until the student opens it (level 2).
"""
from __future__ import annotations

import html
import re

from ..status import CheckStatus
from ..variant_text import verdict_line
from .engine import Exercise, Result

CODE_SPAN = re.compile(r"`([^`<>]+)`")

COLOURS: dict[str, str] = {CheckStatus.PASSED: "#2e7d32", CheckStatus.FAILED: "#c62828", CheckStatus.NOT_ATTEMPTED: "#757575"}
# secondary text of a failed part and of the parts not reached: JupyterLab's secondary colour, which follows its
# theme and keeps a 4.5:1 contrast; elsewhere a grey of 7:1 on white (opacity faded the failed part's red, and the
# parts after it, below 4.5:1: axe-core's serious color-contrast violation). Text of the page's own colour keeps
# opacity .7, which stays above 4.5:1; the variant line holds `code`, whose theme colour opacity would fade: it is
# secondary text too.
SECONDARY = "color:var(--jp-content-font-color2,#595959)"
ICONS: dict[str, str] = {CheckStatus.PASSED: "✓", CheckStatus.FAILED: "✗", CheckStatus.NOT_ATTEMPTED: "·"}


def _plural(points: float) -> str:
    return f"{points:g} point" + ("" if points == 1 else "s")


def _fix_toggle(fix: str | None) -> str:
    """Level 2 of help: the fix behind a toggle that stays closed until the student opens it."""
    if not fix:
        return ""
    return (f"<details class='course-fix' style='margin:.2em 0 0 1.2em;color:#37474f'><summary style='cursor:pointer'>"
            f"Show the fix</summary><div>{html.escape(fix)}</div></details>")


def _text(text: str, grade_id: str = "") -> str:
    """A message as HTML: escaped, `code` spans as <code>, without a leading "<grade_id>: " the heading already says."""
    if grade_id and text.startswith(f"{grade_id}: "):
        text = text[len(grade_id) + 2:]
    return CODE_SPAN.sub(r"<code>\1</code>", html.escape(text))


def verdict_html(ex: Exercise, result: Result, footer: str = "", student: str | None = None) -> str:
    """Every part of ``ex`` with its points: passed, failed (with the hint) or not reached yet.

    A varied exercise's verdict names the variant it assessed, and for which student (``variant_text``).
    """
    colour = COLOURS.get(result.status, COLOURS[CheckStatus.FAILED])
    head = (f"<b>{ICONS.get(result.status, '✗')} {html.escape(ex.grade_id)}</b>: "
            f"{result.points:g}/{result.max:g} points")
    if result.status == CheckStatus.NOT_ATTEMPTED:  # a prompt, not a score: what a fresh exercise notebook shows
        head = f"<b>{ICONS[CheckStatus.NOT_ATTEMPTED]} {html.escape(ex.grade_id)}</b> ({_plural(ex.points)}): not attempted yet"
        body = (f"<div>{_text(result.diagnosis, ex.grade_id)} Write your answer in the cell above, run it, then run "
                "this check again.</div>")
    else:
        items = []
        outcomes = {o.name: o for o in result.stages}
        for stage in ex.stages:
            faded = "opacity:.7" if outcomes.get(stage.name) and outcomes[stage.name].status == CheckStatus.PASSED else SECONDARY
            label = f"{html.escape(stage.name)} <span style='{faded}'>({_plural(stage.points)})</span>"
            o = outcomes.get(stage.name)
            if o is not None and o.status == CheckStatus.PASSED:
                items.append(f"<li>✓ {label}</li>")
            elif o is not None and o.status in (CheckStatus.FAILED, CheckStatus.NOT_ATTEMPTED):
                items.append(f"<li style='color:{COLOURS[CheckStatus.FAILED]}'>✗ {label}: <span style='color:inherit'>"
                             f"{_text(o.diagnosis, ex.grade_id)}</span>{_fix_toggle(o.fix)}</li>")
            else:
                items.append(f"<li style='{SECONDARY}'>· {label}: not checked yet</li>")
        if result.problem:  # a failure before any part (a cell that did not run, time limit)
            items.insert(0, f"<li style='color:{COLOURS[CheckStatus.FAILED]}'>✗ {_text(result.problem, ex.grade_id)}</li>")
        body = f"<ul style='list-style:none;margin:.3em 0 0;padding-left:.8em'>{''.join(items)}</ul>"
    note = f"<div class='course-variant' style='{SECONDARY}'>{_text(verdict_line(result.variant, student))}</div>" \
        if result.variant else ""
    note += f"<div style='opacity:.7'>note: {_text(result.output_note)}</div>" if result.output_note else ""
    # remarks an assess function made for the instructor (backward calls autograd itself, ...): the student sees them too,
    # unless the failing part already says it (a backward that runs autograd, failed for exactly that)
    failing = result.failing
    said = failing.code if failing is not None else ""
    flags = [f for f in result.flags if not (said == "autograd_in_backward" and "calls autograd itself" in f)]
    note += "".join(f"<div style='opacity:.7'>note: {_text(flag, ex.grade_id)}</div>" for flag in flags)
    note += f"<div class='course-footer' style='opacity:.7'>{_text(footer)}.</div>" if footer else ""
    return (f"<div class='course-verdict' data-status='{html.escape(result.status)}' style='border-left:4px solid "
            f"{colour};padding:.3em .8em;margin:.2em 0;font-family:system-ui,sans-serif;line-height:1.5'>"
            f"<div>{head}</div>{body}{note}</div>")


class Verdict(float):
    """The points of one check (a float, for nbgrader and arithmetic) that Jupyter shows as the verdict."""

    result: Result
    exercise: Exercise
    show_fix: bool
    footer: str  # which code was graded (``cells.provenance``): shown to the student, never part of the result
    student: str | None  # whose variant was assessed (the notebook's student id), shown beside the variant

    def __new__(cls, exercise: Exercise, result: Result, show_fix: bool = False, footer: str = "",
                student: str | None = None) -> Verdict:
        obj = super().__new__(cls, result.points)
        obj.result, obj.exercise, obj.show_fix, obj.footer, obj.student = result, exercise, show_fix, footer, student
        return obj

    def __repr__(self) -> str:  # the text form nbgrader parses as the cell's score
        return float.__repr__(self)

    def __str__(self) -> str:
        return self.result.report(fix=self.show_fix, student=self.student) + (f"\n  {self.footer}." if self.footer else "")

    def _repr_html_(self) -> str:
        return verdict_html(self.exercise, self.result, self.footer, self.student)
