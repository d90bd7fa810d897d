"""``./course grade review --book BOOK``: the review page, served on 127.0.0.1 only (Starlette + uvicorn).

It walks the review queue (``attention``): for each row its answer cells, each exercise's stages
and verdicts, every flag with the evidence the page can show (for a copy flag, the student's answer
beside the solution's, common lines marked), its history, and forms to accept it, override one
exercise or dismiss a flag, each with a required reason. A decision goes through the same
transaction as the command line's (``book_outputs.decide``: refused when the row was graded again
since the page showed it), then every output the book remembers is rewritten from it.

It writes decisions, so, as Jupyter does: it listens on 127.0.0.1 only; a per-run token (in the
address it prints) is traded for an HttpOnly, SameSite=Strict cookie; a request with another Host
is refused (DNS rebinding); state changes only by POST, each carrying the run's CSRF token and
refused when the browser says it is cross-site (``Origin``, ``Sec-Fetch-Site``); every page is
sent with a Content-Security-Policy that allows no script, no frame and no other origin.
"""
from __future__ import annotations

import secrets
import socket
import sys
import webbrowser
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ...paths import ROOT
from .. import attention
from ..assignment import load_assignments
from ..errors import UsageError
from ..notebook import NotebookError
from ..results import SubmissionResult
from ..submission import read
from . import book_outputs, review_page
from .gradebook import GradeBook

# same-origin referrers: with no-referrer, Chromium sends "Origin: null" on our own forms
HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
           "frame-ancestors 'none'; base-uri 'none'", "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "same-origin", "Cache-Control": "no-store", "X-Frame-Options": "DENY"}
KINDS = ("accept", "override", "dismiss")


@dataclass
class Run:
    """One run of the page: its book, its secrets, where it listens, what it last said."""

    book: str
    port: int
    token: str = ""
    csrf: str = ""
    message: str = ""  # what the last decision did, shown once on the next page
    refused: str = ""  # why the last decision was refused, shown once on the row's page
    assignments: dict | None = None

    def __post_init__(self) -> None:
        self.token = self.token or secrets.token_urlsafe(32)
        self.csrf = self.csrf or secrets.token_urlsafe(32)

    @property
    def cookie(self) -> str:
        return f"course_review_{self.port}"

    def hosts(self) -> set[str]:
        return {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=HEADERS)


def _refuse(status: int, why: str) -> HTMLResponse:
    return _html(review_page.page("Refused", f"<h1>Refused</h1><p>{review_page.esc(why)}</p>"), status)


def _guard(run: Run, request: Request) -> Response | None:
    """None when the request may proceed; otherwise the refusal (wrong host, no token, cross-site POST)."""
    if request.headers.get("host", "") not in run.hosts():
        return _refuse(403, "This page answers only at 127.0.0.1 (or localhost) on its own port.")
    given = request.query_params.get("token", "")
    if given and secrets.compare_digest(given, run.token):  # the printed address: trade the token for a cookie
        rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
        back = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), status_code=303, headers=HEADERS)
        back.set_cookie(run.cookie, run.token, httponly=True, samesite="strict", path="/")
        return back
    if not secrets.compare_digest(request.cookies.get(run.cookie, ""), run.token):
        return _refuse(403, "Open the address `./course grade review` printed (it carries this run's token).")
    if request.method == "POST":
        origin, site = request.headers.get("origin"), request.headers.get("sec-fetch-site")
        if origin is not None and origin.removeprefix("http://") not in run.hosts():
            return _refuse(403, "Refused a request from another site.")
        if site is not None and site not in ("same-origin", "none"):
            return _refuse(403, "Refused a request from another site.")
    return None


def _rows(gb: GradeBook) -> tuple[list[SubmissionResult], list[SubmissionResult]]:
    """(every row with its decisions applied, the queue)."""
    rows = gb.final_rows()
    return rows, attention.queue(rows)


def _evidence(run: Run, row: SubmissionResult) -> review_page.Evidence:
    """The row's answer cells as graded (only from the very bytes graded) and the solutions' answers."""
    if run.assignments is None:
        try:
            run.assignments = load_assignments(ROOT, solutions=True)
        except UsageError:
            run.assignments = {}
    course = run.assignments.get(row.assignment)
    solutions = {c.nbgrader["grade_id"]: c.source for c in (course.solution or ()) if c.nbgrader.get("solution")} \
        if course is not None else {}
    try:
        parsed = read(Path(row.submission), run.assignments)
    except (NotebookError, OSError, ValueError, RecursionError, MemoryError) as exc:  # the page says why
        why = (f"The answer cells cannot be shown: {row.submission} cannot be read here ({type(exc).__name__}); run "
               "the page from the folder you graded from.")
        return review_page.Evidence({}, solutions, problem=why)
    if parsed.sha256 != row.sha256:
        return review_page.Evidence({}, solutions, problem="The answer cells are not shown: the file changed since it "
                                                           "was graded (regrade it to decide on what it holds now).")
    return review_page.Evidence(dict(parsed.answers), solutions, lessons=_lessons(row.assignment))


def _lessons(assignment: str) -> dict[str, str]:
    """The lessons taught up to ``assignment`` (``04_exercises``: lessons 01 to 04), by file name."""
    number = assignment[:2]
    if not number.isdigit():
        return {}
    return {p.name: p.read_text(encoding="utf-8") for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
            if "01" <= p.name[:2] <= number}


def _queue(run: Run, request: Request) -> Response:
    with GradeBook(run.book) as gb:
        rows, queue = _rows(gb)
    message, run.message = run.message, ""
    return _html(review_page.queue_page(queue, len(rows), message))


def _row(run: Run, request: Request) -> Response:
    name = request.query_params.get("s", "")
    with GradeBook(run.book) as gb:
        rows, queue = _rows(gb)
        row = next((r for r in rows if r.submission == name), None)
        if row is None:
            return _refuse(404, f"No submission {name!r} in the book.")
        decisions = gb.decisions(row.submission)
    others = [r for r in queue if r.submission != row.submission]
    at = next((i for i, r in enumerate(queue) if r.submission == row.submission), None)
    later = queue[at + 1:] if at is not None else others
    position = f"{at + 1} of {len(queue)} in the queue" if at is not None else \
        f"not in the queue ({len(queue)} waiting)"
    message, run.message = run.message, ""
    refused, run.refused = run.refused, ""
    following = (later or others)[:1]
    return _html(review_page.row_page(row, decisions, _evidence(run, row), run.csrf, position,
                                      following[0] if following else None, message, refused))


def _where(submission: str) -> str:
    return f"/row?s={quote(submission, safe='')}"


async def _decide(run: Run, request: Request) -> Response:
    form = await request.form()
    field = {k: str(form.get(k, "")) for k in ("csrf", "kind", "submission", "sha256", "reason", "exercise",
                                               "points", "flag")}
    if not secrets.compare_digest(field["csrf"], run.csrf):
        return _refuse(403, "Refused: the form is not this run's (reload the page).")
    if field["kind"] not in KINDS:
        return _refuse(400, f"No decision {field['kind']!r}.")
    with GradeBook(run.book) as gb:
        stored = gb.result(field["submission"])
        if stored is None:
            return _refuse(404, f"No submission {field['submission']!r} in the book.")
        try:
            if stored.sha256 != field["sha256"]:
                raise UsageError("the submission was graded again since this page showed it; nothing was written: "
                                 "read it again and decide on what it holds now.")
            points = float(field["points"]) if field["kind"] == "override" else None
            d, written = book_outputs.decide(gb, stored, field["kind"], field["reason"], field["exercise"], points,
                                             who=None, flag=field["flag"])
        except (UsageError, ValueError) as exc:  # said on the row's page (kept here, never in a link)
            run.refused = str(exc)
            return RedirectResponse(_where(stored.submission), status_code=303, headers=HEADERS)
        _, queue = _rows(gb)
    run.message = (f"{stored.submission}: {d.describe()}. " + (f"Rewritten from the book: {', '.join(written)}."
                                                               if written else "No output remembers this submission."))
    after = [r for r in queue if r.submission > stored.submission] or queue
    return RedirectResponse(_where(after[0].submission) if after else "/", status_code=303, headers=HEADERS)


def make_app(run: Run) -> Starlette:
    """The page's routes, each behind ``_guard``."""
    def guarded(handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            refused = _guard(run, request)
            if refused is not None:
                return refused
            result = handler(run, request)
            return await result if hasattr(result, "__await__") else result
        return endpoint

    return Starlette(routes=[Route("/", guarded(_queue), methods=["GET"]), Route("/row", guarded(_row), methods=["GET"]),
                             Route("/decide", guarded(_decide), methods=["POST"])])


def listen(port: int = 0) -> socket.socket:
    """A socket on 127.0.0.1 only (``port`` 0: a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def main(book: str, port: int = 0, browser: bool = True) -> int:
    """Serve the page until Ctrl-C; print its address (with the token) first."""
    import uvicorn

    with GradeBook(book):
        pass  # a book that cannot be read fails now, in one sentence
    try:
        sock = listen(port)
    except OSError as exc:
        raise UsageError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror}): give another --port.") from None
    run = Run(book, sock.getsockname()[1])
    url = f"http://127.0.0.1:{run.port}/?token={run.token}"
    print(f"review page of {book}: {url}\n(only this machine can reach it; Ctrl-C stops it)", file=sys.stderr, flush=True)
    if browser:
        webbrowser.open(url)
    server = uvicorn.Server(uvicorn.Config(make_app(run), log_level="warning"))
    server.run(sockets=[sock])
    return 0
