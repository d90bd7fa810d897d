"""Finding submissions, reading them strictly, and building what the runner executes.

Only the students' answer cells are taken from a submission; every other cell comes from
the course's own copy in ``exercises/``. Changes to locked cells become flags
(nbgrader-style checksums). Symbolic links inside a batch folder are never followed, files
are opened without following links, and every field used is type-checked, so a malformed
notebook becomes a row with one clear sentence, never a crash.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from ..errors import CourseError
from ..markers import REPOSITORY, retarget
from ..paths import ASSIGNMENT_KEY, repo_url
from ..variant_settings import settings_agree
from .errors import UsageError
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


@dataclass(frozen=True)
class Assignment:
    name: str
    path: Path
    cells: tuple[Cell, ...]
    solution: tuple[Cell, ...] | None = None  # its notebook's cells in solutions/ (() if none); None: not loaded
    lessons: tuple[str, ...] = ()  # the code cells of every lesson (notebooks/), loaded with the solutions

    def exercises(self) -> list[str]:
        return [c.nbgrader["grade_id"] for c in self.cells if c.cell_type == "code" and c.nbgrader.get("grade")]

    def stubs(self) -> dict[str, str]:
        """Answer cell id -> its source as shipped: the code cells with nbgrader's solution flag, no check's."""
        return {c.nbgrader["grade_id"]: c.source for c in self.cells if cell_kind(c) == "answer"}

    def answers_in(self, cells: list[Cell]) -> dict[str, str]:
        """The one rule for which of a submission's cells are its answers (the judge, similarity and copies read it).

        For each of this assignment's answer cells, in the course's order: the first of the
        submission's cells carrying its grade_id and nbgrader's solution flag, whatever its type
        (a cell turned into Markdown is still graded as code). A second copy of one is not an answer;
        an answer cell missing from the submission has no entry.
        """
        found: dict[str, str] = {}
        for c in cells:
            gid = c.nbgrader["grade_id"]
            if c.nbgrader["solution"] and gid:
                found.setdefault(gid, c.source)
        return {gid: found[gid] for gid in self.stubs() if gid in found}


def checksum(source: str) -> str:
    """nbgrader-style cell checksum: of the source with trailing whitespace normalised."""
    text = "\n".join(line.rstrip() for line in source.strip().splitlines())
    return hashlib.sha256(text.encode()).hexdigest()


GITHUB_PATH = re.compile(r"/github/([\w.-]+)/([\w.-]+)")  # a repository in a Colab link (colab.../github/O/N/blob)


def untouched(theirs: str, course: str) -> bool:
    """Whether a submission's copy of a locked cell is one of the forms the course itself gives it.

    The course's own copy, or that copy as ``release --repository URL`` writes it for any repository
    the instructor may have named (``markers.retarget``, the one rewrite release applies to every
    file: the set-up cell's install line, links): derived from the course's cell, so a set-up cell
    that changes stays recognised. Any other change is not.
    """
    if checksum(theirs) == checksum(course):
        return True
    try:
        ours = repo_url().rstrip("/")
    except (OSError, KeyError, ValueError):  # no pyproject.toml (an old Gradescope archive): only the exact copy
        return False
    if ours not in course and ours.removeprefix("https://github.com/") not in course:
        return False
    # every repository the cell may now name: as a URL, or as the owner/name path of a Colab link
    named = [m.group(0) for m in REPOSITORY.finditer(theirs)] + [
        f"https://github.com/{owner}/{name}" for owner, name in GITHUB_PATH.findall(theirs)]
    candidates = dict.fromkeys(x for url in named for x in (url, url.rstrip(".")) if REPOSITORY.fullmatch(x))
    return any(checksum(retarget(course, ours, url)) == checksum(theirs) for url in list(candidates)[:16])


# --------------------------------------------------------------------------- reading notebooks
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


INVISIBLE = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")  # control, format (bidi, zero-width), unassigned...


def display_name(path: Path | str) -> str:
    """A file's path as text, whatever bytes its name has; two different paths never read the same.

    Invalid UTF-8 shows as ``\\xNN``, control and invisible characters (DEL, bidi overrides,
    zero-width and no-break spaces...) as ``\\xNN`` below 0x80, else ``\\uNNNN`` (combining marks too in a name that
    is not NFC),
    and a backslash as two, so ``alice\\x7f.ipynb`` (with a DEL) is never shown as ``alice.ipynb``
    next to Alice's file, nor as a file whose name really is ``alice\\x7f.ipynb``: a name is one row,
    one feedback file, one grade.
    """
    text = os.fsencode(path).decode("utf-8", "surrogateescape")
    marks = unicodedata.normalize("NFC", text) != text  # é as e + U+0301: shown so, never like the NFC é
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch == "\\":
            out.append("\\\\")
        elif (unicodedata.category(ch) in INVISIBLE or (marks and unicodedata.combining(ch))
              or (ch.isspace() and ch != " ")):  # a no-break or other odd space reads as a plain one
            # \xNN only below 0x80: from 0x80 up it is how a byte that is not UTF-8 is shown (U+00A0 is \u00a0)
            out.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


def load_assignments(course: Path, solutions: bool = False) -> dict[str, Assignment]:
    """Every exercise notebook of the course by assignment name; ``solutions``: with its solution's cells too.

    Only the instructors' grading run asks for the solutions (to flag copies of them: ``copies``);
    elsewhere (Gradescope) no copy check runs.
    """
    solved = _solutions(course) if solutions else None
    lessons = lesson_code(course) if solutions else ()
    found = {}
    for path in sorted((course / "exercises").glob("*.ipynb")):
        name, cells = parse_notebook(path.read_bytes())
        if name:
            found[name] = Assignment(name, path, tuple(cells), None if solved is None else solved.get(name, ()),
                                     lessons)
    if not found:
        raise UsageError(f"no exercise notebooks with assignment metadata in {course / 'exercises'}; "
                         "run ./course build first.")
    try:  # the grader judges the variants the notebooks handed out: refused when they were built under another setting
        settings_agree(course / "exercises")
    except CourseError as exc:
        raise UsageError(str(exc)) from None
    return found


def lesson_code(course: Path) -> tuple[str, ...]:
    """The code cells of every lesson notebook (``notebooks/``): what a student may type from the lessons, which the
    copy check never counts as copied (a notebook that does not read is left out)."""
    code: list[str] = []
    for path in sorted((course / "notebooks").glob("*.ipynb")):
        try:
            code += [c.source for c in parse_notebook(path.read_bytes())[1] if c.cell_type == "code"]
        except (NotebookError, OSError):
            continue
    return tuple(code)


def _solutions(course: Path) -> dict[str, tuple[Cell, ...]]:
    """Assignment name -> the cells of its notebook in ``solutions/`` (a notebook that does not read is left out)."""
    found: dict[str, tuple[Cell, ...]] = {}
    for path in sorted((course / "solutions").glob("*.ipynb")):
        try:
            name, cells = parse_notebook(path.read_bytes())
        except (NotebookError, OSError):
            continue
        if name:
            found[name] = tuple(cells)
    return found


def course_version(assignments: dict[str, Assignment], course_utils: Path) -> str:
    """What a stored result depends on: the exercise notebooks and their solutions and the lessons' code (the
    copies flags rest on them; read from the course whether loaded or not), all of course_utils' code and the torch
    version.

    An upgrade of the grader, of a check, of a solution or of torch makes every stored result stale.
    """
    from importlib import metadata

    h = hashlib.sha256()
    for a in assignments.values():
        h.update(a.path.read_bytes())
    for folder in sorted({a.path.parent.parent / "solutions" for a in assignments.values()}):
        for path in sorted(folder.glob("*.ipynb")):  # the copies flags stored with a result rest on them
            h.update(path.read_bytes())
    for course in sorted({a.path.parent.parent for a in assignments.values()}):
        for code in lesson_code(course):  # and on the lessons' code (not their outputs)
            h.update(code.encode() + b"\0")
    for path in sorted(course_utils.rglob("*.py")):
        h.update(str(path.relative_to(course_utils)).encode() + b"\0" + path.read_bytes())
    try:
        h.update(metadata.version("torch").encode())
    except metadata.PackageNotFoundError:
        h.update(b"no torch")
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------- collecting files
def collect(paths: list[str]) -> list[tuple[Path, str | None]]:
    """(file, reason it is skipped or None) for every file under the given paths; links not followed."""
    found: dict[Path, str | None] = {}
    for p in paths:
        path = Path(p)
        try:
            path.stat()
        except PermissionError:
            raise UsageError(f"{p} cannot be read by this user: grade as a user who can read it.") from None
        except OSError:
            pass
        if path.is_dir():
            for folder, dirs, files in os.walk(path, followlinks=False):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if name.startswith("."):
                        continue
                    f = Path(folder) / name
                    found[f] = "a symbolic link (links are not followed)" if f.is_symlink() else None
                for d in dirs:
                    if (Path(folder) / d).is_symlink():
                        found[Path(folder) / d] = "a symbolic link to a folder (links are not followed)"
        elif path.is_file():
            found[path] = None
        else:
            raise UsageError(f"{p} does not exist: pass notebooks or folders of notebooks.")
    return sorted(found.items())


def read_submission(path: Path) -> bytes:
    """The file's bytes, refusing links (O_NOFOLLOW), non-regular files and oversize files."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotebookError(Status.SKIPPED, "skipped: not a regular file")
        if info.st_size > MAX_NOTEBOOK_BYTES:
            raise NotebookError(Status.NOT_A_NOTEBOOK, f"not a notebook: larger than {MAX_NOTEBOOK_BYTES >> 20} MiB")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(MAX_NOTEBOOK_BYTES + 1)
    finally:
        os.close(fd)


def cell_kind(cell: Cell) -> str:
    """'answer' / 'check' / 'code' / 'text': what a cell of the course's exercise notebook is."""
    if cell.cell_type != "code":
        return "text"
    return "check" if cell.nbgrader.get("grade") else "answer" if cell.nbgrader.get("solution") else "code"
