"""A notebook file read strictly: its cells, bounded and type-checked, and what kind each cell is.

Every field used is type-checked and every text cleaned, so a malformed notebook becomes one clear
sentence (``NotebookError``), never a crash. Nothing in it is executed: this runs in the grader.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..paths import ASSIGNMENT_KEY
from .results import Status

MAX_NOTEBOOK_BYTES = 20 << 20


MAX_CELLS = 2000


MAX_SOURCE = 1 << 20


class NotebookError(ValueError):
    """A submission that cannot be graded; the message is the one sentence for the row."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Cell:
    cell_type: str
    source: str
    nbgrader: dict
    shown: str = ""  # the text its stored outputs show (bounded): read only as evidence (``owners.evidence``)


MAX_SHOWN = 4000  # characters of a cell's stored outputs kept


def shown_text(outputs: object) -> str:
    """The text a code cell's stored outputs show (streams, Markdown, plain text), cleaned and bounded; never run."""
    parts: list[str] = []
    for out in outputs if isinstance(outputs, list) else []:
        if not isinstance(out, dict):
            continue
        data = out["data"] if isinstance(out.get("data"), dict) else {}
        for value in (out.get("text"), data.get("text/markdown"), data.get("text/plain")):
            text = "".join(v for v in value if isinstance(v, str)) if isinstance(value, list) else value
            if isinstance(text, str):
                parts.append(text[:MAX_SHOWN])
        if sum(map(len, parts)) > MAX_SHOWN:
            break
    return clean("\n".join(parts))[:MAX_SHOWN]


def parse_notebook(data: bytes, suffix: str = ".ipynb") -> tuple[str | None, list[Cell]]:
    """(assignment name, cells) of a notebook file's bytes; NotebookError says what is wrong."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotebookError(Status.NOT_A_NOTEBOOK, "not a notebook: the file is not UTF-8 text") from None
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError, MemoryError) as exc:  # bad JSON, numbers of 4300+ digits, deep nesting
        kind = "truncated or invalid JSON" if suffix == ".ipynb" else "not JSON"
        why = "nested too deeply" if isinstance(exc, RecursionError) else clean(str(exc))[:80]
        raise NotebookError(Status.NOT_A_NOTEBOOK, f"not a notebook: {kind} ({why})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        raise NotebookError(Status.NOT_A_NOTEBOOK, "not a notebook: JSON but not a notebook (no list of 'cells')")
    if len(raw["cells"]) > MAX_CELLS:
        raise NotebookError(Status.NOT_A_NOTEBOOK, f"not a notebook: more than {MAX_CELLS} cells")
    meta = raw.get("metadata")
    course = meta.get(ASSIGNMENT_KEY) if isinstance(meta, dict) else None
    name = course.get("assignment") if isinstance(course, dict) else None
    cells = []
    for i, c in enumerate(raw["cells"]):
        if not isinstance(c, dict) or not isinstance(c.get("cell_type"), str):
            raise NotebookError(Status.NOT_A_NOTEBOOK, f"not a notebook: cell {i} is not a cell object")
        source = c.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str) or len(source) > MAX_SOURCE:
            raise NotebookError(Status.NOT_A_NOTEBOOK, f"not a notebook: cell {i} has a source that is not text "
                                f"(or longer than {MAX_SOURCE} characters)")
        source = clean(source, keep_lines=True)
        cell_meta = c.get("metadata", {})
        nbg = cell_meta.get("nbgrader", {}) if isinstance(cell_meta, dict) else {}
        nbg = nbg if isinstance(nbg, dict) else {}
        gid = nbg.get("grade_id")
        nbg = {"grade_id": clean(gid)[:200] if isinstance(gid, str) else None,
               **{k: nbg.get(k) is True for k in ("solution", "grade", "locked")}}
        cells.append(Cell(c["cell_type"], source, nbg, shown_text(c.get("outputs")) if c["cell_type"] == "code" else ""))
    return (clean(name)[:200] if isinstance(name, str) else None), cells


def clean(text: str, keep_lines: bool = False) -> str:
    """Text safe to write anywhere: lone surrogates replaced, control characters (ANSI escapes...) removed."""
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates become '?'
    if keep_lines:
        return text
    return "".join(ch for ch in text if ch in "\n\t" or (ch >= " " and not 0x7F <= ord(ch) < 0xA0))


def cell_kind(cell: Cell) -> str:
    """'answer' / 'check' / 'code' / 'text': what a cell of the course's exercise notebook is."""
    if cell.cell_type != "code":
        return "text"
    return "check" if cell.nbgrader.get("grade") else "answer" if cell.nbgrader.get("solution") else "code"

