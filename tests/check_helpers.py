"""Helpers the check tests share: run an answer like a student would, and assert a diagnosis."""
import ast
import re
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import jupytext

from conftest import ROOT
from course_utils import checks, markers
from course_utils.markers import BEGIN, END

PRELUDE = "import math, torch\nfrom torch import nn\nfrom torch.autograd import Function\n"


def ns_from(src: str) -> dict:
    ns: dict = {}
    exec(compile(PRELUDE + textwrap.dedent(src), "<student cell>", "exec"), ns)
    return ns


def solution_answer(number: str, cls: str) -> str:
    """The solution's answer cell that defines ``cls`` (solutions/NN_exercises.py): a test's one right base answer."""
    nb = jupytext.read(ROOT / "solutions" / f"{number}_exercises.py")
    found = [c.source for c in nb.cells if c.cell_type == "code" and re.search(rf"^class {cls}\b", c.source, re.M)]
    if len(found) != 1:
        raise LookupError(f"solutions/{number}_exercises.py has {len(found)} cells defining class {cls}, not one")
    return found[0]


def run_code_cells(nb) -> dict:
    """Execute a notebook's code cells, minus set-up and check cells, like a student would."""
    ns: dict = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and not markers.CHECK_CALL.search(cell.source) and "google.colab" not in cell.source:
            exec(compile(cell.source, "<cell>", "exec"), ns)
    return ns


def solution_namespace(number: str) -> dict:
    return run_code_cells(jupytext.read(ROOT / "solutions" / f"{number}_exercises.py"))


def _exercise_notebooks() -> dict[str, str]:
    """grade_id -> number of the solution notebook whose check cell names it."""
    found = {}
    for py in sorted((ROOT / "solutions").glob("*_exercises.py")):
        for gid in re.findall(r'^check\("(\w+)"', py.read_text(), re.M):
            found[gid] = py.name[:2]
    return found


EXERCISE_NOTEBOOK = _exercise_notebooks()



# --------------------------------------------------------------------------- hints never hold the solution
MIN_CHARS = 7  # shorter fragments ("a * b", "x.exp()") are names of the task, not its solution


def _squash(text: str) -> str:
    """Spaces removed, except one between two word characters ("return x" stays apart from "returns")."""
    return re.sub(r"\s*([^\w\s])\s*", r"\1", re.sub(r"\s+", " ", text)).strip()


def _solution_lines(nb, grade_id: str) -> list[str]:
    """The code lines between the solution markers of ``grade_id``'s answer cell (comments left out)."""
    lines: list[str] = []
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") != f"{grade_id}_answer":
            continue
        inside = False
        for line in cell.source.splitlines():
            if line.strip() in (BEGIN, END):
                inside = line.strip() == BEGIN
            elif inside and line.strip() and not line.strip().startswith("#"):
                lines.append(line.strip())
    return lines


@cache
def solution_fragments(grade_id: str) -> frozenset[str]:
    """The solution's code lines and expressions (spaces removed) that the task's own text does not show."""
    nb = jupytext.read(ROOT / "solutions" / f"{EXERCISE_NOTEBOOK[grade_id]}_exercises.py")
    task = "".join(_squash(c.source) for c in nb.cells if c.cell_type == "markdown")
    lines = _solution_lines(nb, grade_id)
    pieces = set(lines)
    for line in lines:
        try:
            tree = ast.parse(line.removeprefix("return ").removeprefix("if ").rstrip(":"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call, ast.Subscript)):
                pieces.add(ast.unparse(node))
    return frozenset(p for p in map(_squash, pieces) if len(p) >= MIN_CHARS and p not in task)


def gives_away(grade_id: str, hint: str) -> list[str]:
    """The solution fragments a hint contains: as written (spaces aside), or a formula of the solution (at least
    ``FORMULA`` nodes) with other names, another spelling of its calls (``x.expm1()``, ``torch.expm1(x)``) or
    ``dim=`` left out."""
    text = _squash(hint)
    raw = sorted(p for p in solution_fragments(grade_id) if p in text)
    return raw + sorted(canonical_solution(grade_id) & code_in(hint))


def repeats_fix(grade_id: str, hint: str, fix: str | None) -> list[str]:
    """The formulas of a mistake's fix (level 2) that its hint (level 1) already shows, the task's own aside."""
    if not fix:
        return []
    return sorted((code_in(fix, size=FIX_FORMULA, top=True) & code_in(hint, size=FIX_FORMULA)) - task_code(grade_id))


# --------------------------------------------------------------------------- formulas, whatever their names
MODULES = {"torch", "F", "math", "np", "special", "linalg", "functional", "nn"}
OPS = (ast.Call, ast.BinOp, ast.UnaryOp, ast.Compare)
NODES = (ast.Name, ast.Constant, ast.Call, ast.BinOp, ast.UnaryOp, ast.Compare, ast.keyword, ast.Attribute,
         ast.Subscript)
FORMULA = 8  # nodes: a formula of the solution, not a name (``sum(t * y, -1, keepdim=True)`` has 9, ``a / b / b`` 5)
FIX_FORMULA = 5  # nodes: a formula of the fix that the hint repeats (``1 / expm1(x)`` has 6)


def _is_module(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id in MODULES) or (
        isinstance(node, ast.Attribute) and node.attr in MODULES and _is_module(node.value))


def canon(node: ast.AST) -> str:
    """An expression with every variable named ``_``, ``torch.f(x)``, ``F.f(x)`` and ``x.f()`` all as ``f(_)``, and
    ``dim=`` as a positional argument: the same formula under any names and spelling."""
    if isinstance(node, ast.Name):
        return "_"
    if isinstance(node, ast.Constant):
        return repr(node.value)
    if isinstance(node, ast.Attribute):
        return node.attr if _is_module(node.value) else f"{canon(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        func, args = node.func, [canon(a) for a in node.args]
        if isinstance(func, ast.Attribute):
            name = func.attr
            if not _is_module(func.value):
                args.insert(0, canon(func.value))
        else:
            name = func.id if isinstance(func, ast.Name) else canon(func)
        args += [canon(k.value) for k in node.keywords if k.arg == "dim"]
        args += sorted(f"{k.arg}={canon(k.value)}" for k in node.keywords if k.arg != "dim")
        return f"{name}({','.join(args)})"
    if isinstance(node, ast.BinOp):
        return f"({canon(node.left)}{type(node.op).__name__}{canon(node.right)})"
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.operand, ast.Constant) and isinstance(node.op, ast.USub):
            return f"-{node.operand.value!r}"  # -1 is a number, not an operation
        return f"({type(node.op).__name__}{canon(node.operand)})"
    if isinstance(node, ast.Compare):
        return canon(node.left) + "".join(f"{type(o).__name__}{canon(c)}" for o, c in zip(node.ops, node.comparators))
    if isinstance(node, ast.Subscript):
        return f"{canon(node.value)}[{canon(node.slice)}]"
    if isinstance(node, (ast.Tuple, ast.List)):
        return "(" + ",".join(canon(e) for e in node.elts) + ")"
    return type(node).__name__


def _is_op(node: ast.AST) -> bool:
    return isinstance(node, OPS) and not (isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant))


def _derivative(node: ast.AST) -> bool:
    """Prose math, not code: d(a/b)/db."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "d" for n in ast.walk(node))


def _forms(tree: ast.AST, size: int, top: bool = False) -> set[str]:
    """The canonical form of every operation in ``tree`` (or only the outermost, ``top``) of at least two
    operations and ``size`` nodes: a formula, not a name."""
    nodes = [tree.body] if top and isinstance(tree, ast.Expression) else list(ast.walk(tree))
    return {canon(n) for n in nodes if _is_op(n) and sum(map(_is_op, ast.walk(n))) >= 2 and not _derivative(n)
            and sum(isinstance(m, NODES) for m in ast.walk(n)) >= size}


TOKEN = re.compile(r"[A-Za-z_][\w.]*|\d[\d.e]*|[()\[\]]|[-+*/@]")
WINDOW = 40  # tokens: the longest formula a hint could quote


@cache
def _pieces(text: str) -> tuple[ast.Expression, ...]:
    """The formulas quoted in ``text``, prose around them ignored: from each token, the longest stretch (within
    ``WINDOW`` tokens) that parses as a Python expression with an operation in it."""
    text = text.replace("`", " ")
    spans = [(m.start(), m.end(), m.group()) for m in TOKEN.finditer(text)]
    found = []
    for i, (start, _, first) in enumerate(spans):
        if not (first[0].isalnum() or first[0] in "_(-") or (first == "(" and start and text[start - 1].isalnum()):
            continue  # "(" right after a name opens its arguments: the call starts at the name (d(a/b)/db is prose)
        for j in range(min(len(spans), i + WINDOW) - 1, i, -1):
            piece = text[start:spans[j][1]]
            if piece.count("(") != piece.count(")") or not any(c in piece for c in "()*/+-@["):
                continue
            try:
                found.append(ast.parse(piece.strip(), mode="eval"))
            except (SyntaxError, ValueError):
                continue
            break
    return tuple(found)


@cache
def code_in(text: str, size: int = FORMULA, top: bool = False) -> frozenset[str]:
    """The canonical forms of the formulas quoted in ``text`` (``_forms``)."""
    return frozenset().union(*(_forms(tree, size, top) for tree in _pieces(text)))


@cache
def task_code(grade_id: str) -> frozenset[str]:
    """Every formula the task's own text shows, however small: its markdown and its variants' task texts (the task
    cell under the markdown shows the student's variant, issue 51)."""
    from course_utils.checks.registry import family

    nb = jupytext.read(ROOT / "solutions" / f"{EXERCISE_NOTEBOOK[grade_id]}_exercises.py")
    texts = [c.source for c in nb.cells if c.cell_type == "markdown"] + [v.task for v in family(grade_id)]
    return frozenset().union(*(code_in(text, size=1) for text in texts))


@cache
def canonical_solution(grade_id: str) -> frozenset[str]:
    """The canonical forms of the solution's formulas that the task's own text does not show."""
    nb = jupytext.read(ROOT / "solutions" / f"{EXERCISE_NOTEBOOK[grade_id]}_exercises.py")
    forms: set[str] = set()
    for line in _solution_lines(nb, grade_id):
        try:
            tree = ast.parse(line.removeprefix("return ").removeprefix("if ").rstrip(":"))
        except SyntaxError:
            continue
        forms |= _forms(tree, FORMULA)
    return frozenset(forms - task_code(grade_id))


def assert_diagnosed(code: str, grade_id: str, source: str, phrases: list[str], variant: str | None = None):
    """The answer `source` fails `grade_id` (its ``variant``, the default if None) with exactly mistake `code`, and
    the hint says each phrase.

    A phrase may sit in the hint (level 1) or in its fix (level 2, shown on request): both are checked together;
    the fix never shows in the plain verdict.
    """
    result = checks.run_check(grade_id, ns_from(source), variant=variant)
    report = result.report(fix=True)
    assert result.mistakes == [code], report
    assert result.status == "failed" and result.points < result.max
    assert grade_id in report and len(report) < 1200 and "Traceback" not in report
    assert not result.fix or result.fix not in result.report(), "the fix shows only on request"
    leaked = leaks(result)
    assert not leaked, f"{code}: the level-1 hint of {grade_id} holds the solution's {leaked} (move it to fix=...)"
    for phrase in phrases:
        assert phrase in report, f"{phrase!r} not in:\n{report}"
    return result


# a LinearFunction that only forwards: linear_module answers that are graded on their module alone start with it
FORWARD_ONLY_LINEAR = """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        return input.mm(weight.t())
    @staticmethod
    def backward(ctx, g):
        return None, None, None
"""


# --------------------------------------------------------------------------- every verdict a test builds, read
def leaks(result) -> list[str]:
    """What the level-1 text of a check's ``result`` (its diagnosis, and the remarks the verdict shows as notes)
    gives away: the solution's code or formulas (names and spellings aside), or the expressions of its own fix
    (level 2, shown only on request)."""
    if result.grade_id not in EXERCISE_NOTEBOOK:
        return []
    failing = result.failing
    found = [p for text in result.flags for p in gives_away(result.grade_id, text)]
    if result.diagnosis:
        found += gives_away(result.grade_id, result.diagnosis)
        found += repeats_fix(result.grade_id, result.diagnosis, failing.fix if failing else None)
    return found


@contextmanager
def no_give_away(monkeypatch) -> Iterator[list[str]]:
    """While active, every result the check engine assesses is read by ``leaks``; fails at the end if one leaked.

    The BUGS tables reach one hint per mistake code, but hints are built at run time (a wrong tangent, a value at
    the worst point, a crash's message) and differ per answer: so every answer any check test holds is read.
    """
    from course_utils.checks import engine

    assess, seen = engine._assess, []

    def assessed(ex, request, facts):
        result = assess(ex, request, facts)
        found = leaks(result)
        if found:
            seen.append(f"{result.grade_id} ({', '.join(result.mistakes)}): {result.diagnosis!r} gives away {found}")
        return result

    monkeypatch.setattr(engine, "_assess", assessed)
    yield seen
    assert not seen, "level-1 hints that give the answer away (move it to fix=...):\n" + "\n".join(seen)
