"""The review page's HTML (``review`` serves it): the queue, and one row with its evidence and decision forms.

Everything a submission controls (its name, its answer cells, its hints, its flags) is hostile and
goes through ``html.escape``; the pages hold no script at all (the server's Content-Security-Policy
forbids one), only links and forms, so every action is reachable with Tab and Enter.
"""
from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

from ..attention import needs_decision, open_items
from ..results import SubmissionResult
from .gradebook import Decision, about

STYLE = """body{font-family:system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 1em 2em;color:#1f2328}
a{color:#0645ad}a:focus-visible,button:focus-visible,input:focus-visible,textarea:focus-visible{outline:3px solid #1a56db;
outline-offset:2px}.skip{position:absolute;left:-999px}.skip:focus{left:1em;top:.5em;background:#fff;padding:.3em}
table{border-collapse:collapse;margin:.5em 0;width:100%}th,td{border:1px solid #ccc;padding:.3em .5em;text-align:left;
vertical-align:top}th{background:#f3f4f6}pre{white-space:pre-wrap;margin:0;font-size:13px}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em}mark{background:#ffe08a;color:#1f2328}
.note{background:#e8f4ea;border:1px solid #2e7d32;padding:.5em}.error{background:#fdecea;border:1px solid #b3261e;
padding:.5em}form.decide{border:1px solid #ccc;padding:.5em;margin:.5em 0}label{display:block;margin:.3em 0 .1em}
textarea{width:100%;max-width:40em}button{font:inherit;padding:.3em .8em;margin-top:.4em}"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def page(title: str, body: str, nav: str = "") -> str:
    """A whole page: landmarks (a skip link, navigation, main), its title and the body."""
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><style>{STYLE}</style></head><body>"
            "<a class='skip' href='#main'>Skip to the content</a>"
            f"<header><nav aria-label='Review queue'>{nav}</nav></header>"
            f"<main id='main' tabindex='-1'>{body}</main></body></html>")


def row_link(row: SubmissionResult) -> str:
    return f"<a href='/row?s={quote(row.submission, safe='')}'>{esc(row.submission)}</a>"


def queue_page(queue: list[SubmissionResult], total: int, message: str = "") -> str:
    """The queue: every row waiting for a decision, what it waits for, a link to read it."""
    note = f"<p class='note' role='status'>{esc(message)}</p>" if message else ""
    if not queue:
        body = f"<h1>Review queue</h1>{note}<p>Nothing waits for a decision ({total} submission(s) in the book).</p>"
        return page("Review queue: empty", body)
    items = "".join(f"<tr><td>{row_link(r)}</td><td>{esc(r.status)}</td><td><ul>"
                    + "".join(f"<li>{esc(i)}</li>" for i in open_items(r)) + "</ul></td></tr>" for r in queue)
    body = (f"<h1>Review queue</h1>{note}<p>{len(queue)} of {total} submission(s) wait for a decision. Open one to "
            "read its answers, its verdicts and the evidence behind each flag, then accept it, override an exercise "
            "or dismiss a flag (each with a reason).</p><table><caption>Submissions waiting for a decision</caption>"
            "<thead><tr><th scope='col'>submission</th><th scope='col'>status</th><th scope='col'>waits for"
            f"</th></tr></thead><tbody>{items}</tbody></table>")
    return page(f"Review queue: {len(queue)} waiting", body)


@dataclass
class Evidence:
    """What the page can show beside a row: its answer cells as graded and the solutions' answers."""

    answers: Mapping[str, str] = field(default_factory=dict)  # answer cell id -> the student's source
    solutions: Mapping[str, str] = field(default_factory=dict)  # answer cell id -> the solution's source
    lessons: Mapping[str, str] = field(default_factory=dict)  # a lesson taught before the assignment -> its source
    problem: str = ""  # why the answers cannot be shown (the file is gone or changed)


def _marked(source: str, other: str) -> str:
    """``source`` escaped, each line that ``other`` also holds (indentation aside) marked."""
    theirs = {line.strip() for line in other.splitlines() if line.strip()}
    return "\n".join(f"<mark>{esc(line)}</mark>" if line.strip() in theirs else esc(line)
                     for line in source.splitlines())


def _stored_evidence(flag: str, row: SubmissionResult) -> str:
    """What the copy check matched when it raised ``flag`` (``copies.evidence``, stored with the row): the student's
    lines beside the solution's they match, and the answer's lines a lesson shows (never counted as copying)."""
    out = []
    for e in (e for e in row.evidence if e.get("flag") == flag):
        if not e.get("solution"):  # evidence from the submission alone (``owners``: the variant its outputs show)
            out.append(f"<figure><figcaption>What the submission's stored output shows ({esc(e.get('exercise', ''))})"
                       f"</figcaption><pre>{esc(chr(10).join(e.get('student', [])))}</pre></figure>")
            continue
        shown = "".join(f"<li><code>{esc(line)}</code></li>" for line in e.get("shown", []))
        out.append(f"<div class='pair'><figure><figcaption>What the check matched: the student's lines "
                   f"({esc(e.get('exercise', ''))})</figcaption><pre>{esc(chr(10).join(e.get('student', [])))}</pre>"
                   f"</figure><figure><figcaption>The solution's lines they match</figcaption>"
                   f"<pre>{esc(chr(10).join(e.get('solution', [])))}</pre></figure></div>"
                   + (f"<p>Lines of the answer a lesson shows (left out of the comparison):</p><ul class='lessons'>"
                      f"{shown}</ul>" if shown else ""))
    return "".join(out)


def _flag_evidence(flag: str, row: SubmissionResult, ev: Evidence) -> str:
    """Beside a copy flag: what the check matched (stored with the row), then the student's whole answer to the
    exercise it names beside the solution's, common lines marked."""
    gids = [g for g in ev.answers if about(flag, g.removesuffix("_answer"))] or \
        [g for g in ev.answers if g.removesuffix("_answer") in row.exercises and about(flag, g)]
    out = []
    for gid in gids[:1]:
        mine, theirs = ev.answers.get(gid, ""), ev.solutions.get(gid, "")
        out.append(f"<div class='pair'><figure><figcaption>The student's {esc(gid)} (lines also in the solution "
                   f"marked)</figcaption><pre>{_marked(mine, theirs)}</pre></figure><figure><figcaption>The solution's "
                   f"{esc(gid)}</figcaption><pre>{_marked(theirs, mine) if theirs else 'not loaded'}</pre></figure></div>"
                   + _in_lessons(mine, ev.lessons))
    return _stored_evidence(flag, row) + "".join(out)


def _in_lessons(answer: str, lessons: Mapping[str, str]) -> str:
    """The student's lines that a lesson taught before the assignment shows too, each with the lessons holding it."""
    taught = {name: {x.strip() for x in source.splitlines()} for name, source in lessons.items()}
    found = [(line, [n for n, lines in taught.items() if line.strip() in lines]) for line in answer.splitlines()
             if line.strip() and not line.strip().startswith("#")]
    shown = "".join(f"<li><code>{esc(line.strip())}</code>: {esc(', '.join(where))}</li>" for line, where in found if where)
    return (f"<p>{sum(1 for _, w in found if w)} of the answer's {len(found)} code lines are in the lessons taught "
            f"before it:</p><ul class='lessons'>{shown}</ul>" if lessons else "")


def _form(action: str, row: SubmissionResult, csrf: str, legend: str, fields: str, button: str, ident: str) -> str:
    """One decision form: POST, the CSRF token, the bytes it is about, a required reason."""
    return (f"<form class='decide' method='post' action='/decide'><fieldset><legend>{legend}</legend>"
            f"<input type='hidden' name='csrf' value='{esc(csrf)}'><input type='hidden' name='kind' value='{action}'>"
            f"<input type='hidden' name='submission' value='{esc(row.submission)}'>"
            f"<input type='hidden' name='sha256' value='{esc(row.sha256)}'>{fields}"
            f"<label for='reason-{ident}'>Reason (required; kept with the decision, shown in the feedback)</label>"
            f"<textarea id='reason-{ident}' name='reason' rows='2' required></textarea>"
            f"<button type='submit'>{button}</button></fieldset></form>")


def _exercises(row: SubmissionResult, ev: Evidence, csrf: str) -> str:
    out = ["<h2>Exercises</h2>"]
    for n, (gid, e) in enumerate(row.exercises.items()):
        stages = "".join(f"<tr><td>{esc(s.name)}</td><td>{s.points:g}/{s.max:g}</td><td>{esc(s.status)}</td>"
                         f"<td>{esc(s.diagnosis)}</td></tr>" for s in e.stages)
        answer = ev.answers.get(f"{gid}_answer")
        out.append(f"<section aria-labelledby='ex-{n}'><h3 id='ex-{n}'>{esc(gid)}: {e.points:g}/{e.max:g} "
                   f"({esc(e.label)})</h3>"
                   + (f"<p>{esc(e.problem)}</p>" if e.problem else "")
                   + (f"<table><caption>Stages of {esc(gid)}</caption><thead><tr><th scope='col'>stage</th>"
                      "<th scope='col'>points</th><th scope='col'>verdict</th><th scope='col'>diagnosis</th></tr>"
                      f"</thead><tbody>{stages}</tbody></table>" if stages else "")
                   + (f"<h4>Answer cell</h4><pre>{esc(answer)}</pre>" if answer is not None else "")
                   + _form("override", row, csrf, f"Override the points of {esc(gid)}",
                           f"<input type='hidden' name='exercise' value='{esc(gid)}'><label for='points-{n}'>Points "
                           f"(0 to {e.max:g})</label><input id='points-{n}' name='points' type='number' min='0' "
                           f"max='{e.max:g}' step='any' required value='{e.points:g}'>",
                           f"Override {esc(gid)}", f"ex{n}") + "</section>")
    return "".join(out)


def row_page(row: SubmissionResult, decisions: list[Decision], ev: Evidence, csrf: str, position: str,
             next_row: SubmissionResult | None, message: str = "", error: str = "") -> str:
    """One row: what it waits for, its flags with their evidence, its exercises, its history, the decisions."""
    items = open_items(row)
    nav = "<a href='/'>Queue</a>" + (f" · Next in the queue: {row_link(next_row)}" if next_row else "")
    flags = []
    for n, f in enumerate(row.flags):
        decide = _form("dismiss", row, csrf, "Dismiss this flag", f"<input type='hidden' name='flag' value='{esc(f)}'>",
                       "Dismiss the flag", f"flag{n}") if needs_decision(f) and f not in row.resolved else \
            "<p>Needs no decision" + (" (settled by a decision)." if f in row.resolved else ": a remark.") + "</p>"
        flags.append(f"<li><p>{esc(f)}</p>{_flag_evidence(f, row, ev)}{decide}</li>")
    history = "".join(f"<li>{esc(d.describe())}" + ("" if d.sha256 == row.sha256 else " (made on other bytes: not "
                                                     "applied)") + "</li>" for d in decisions)
    body = [f"<h1>{esc(row.submission)}</h1>",
            f"<p class='error' role='alert'>{esc(error)}</p>" if error else "",
            f"<p class='note' role='status'>{esc(message)}</p>" if message else "",
            f"<p>{esc(position)}. Assignment {esc(row.assignment or '-')}; status {esc(row.status)}; "
            f"{row.total:g}/{row.max:g} points (the checks gave {row.provisional:g}).</p>",
            "<h2>Waits for</h2>" + (("<ul>" + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>") if items
                                    else "<p>Nothing: decided.</p>"),
            _form("accept", row, csrf, "Accept the submission as it is (its points count; every flag is settled)", "",
                  "Accept", "accept") if items else "",
            "<h2>Flags and their evidence</h2>" + (f"<ul>{''.join(flags)}</ul>" if flags else "<p>None.</p>"),
            f"<p>{esc(ev.problem)}</p>" if ev.problem else "",
            _exercises(row, ev, csrf),
            "<h2>History</h2>" + (f"<ol>{history}</ol>" if history else "<p>No decision yet.</p>")]
    return page(f"Review: {row.submission}", "".join(body), nav)
