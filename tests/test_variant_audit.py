"""The audit over every exercise and variant (issue 51): no answer is handed over.

For every exercise and every variant's right answer (the solution notebook's answer cell for the default,
``solutions/variants/<grade_id>.py`` ``ANSWERS`` for each key):

* its backward's statements (the body of every ``backward``, up to names and spacing, as
  ``grading.normalise`` reads code) do not all appear, in order, in one code cell of a lesson (``notebooks/*.py``);
* no expression its backward returns or assigns appears as code in a task text of its own exercise (the
  solution notebook's Markdown for it and every variant's task);
* none of its classes is a lesson's class (every statement of the class, normalised, is in one class a lesson
  defines, in order: a lesson may add lines of its own).

Every offender is listed in one message. ``HANDED_OVER`` is the list of exercises known to offend before the
families of issue 51 land (the six answers printed in lessons); the test fails while an exercise outside it
offends, and also when one inside it no longer does, so the list can only shrink: the lead empties it at merge.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import textwrap
from functools import cache

import jupytext
import pytest

from conftest import ROOT
from course_utils.checks import registry
from course_utils.grading.reports.normalise import imported_names, statements

# exercises whose answer a lesson prints today (issue 51, item 1, as this audit reads it): the families make them
# transfer exercises
# (scalar_engine, 68% of its lines in lesson 01, is not the lesson's class; every family is transfer now)
HANDED_OVER: frozenset[str] = frozenset()
HEADING = re.compile(r"^## Exercise `(\w+)`", re.M)
CODE = re.compile(r"```(?:python)?\n(.*?)```|`([^`\n]+)`", re.S)
BACKWARDS = ("backward", "_backward")
CLASS_STATEMENTS = 3  # a class of fewer statements is too small to be anyone's code in particular
TOKENS = 5  # an expression shorter than this (``_ * _``) is any product: it says nothing about a backward


def notebook_cells(path) -> list:
    return jupytext.read(path).cells


@cache
def lessons() -> dict[str, list[str]]:
    """Lesson notebook -> the source of each of its code cells."""
    return {p.name: [c.source for c in notebook_cells(p) if c.cell_type == "code"]
            for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))}


@cache
def known() -> frozenset[str]:
    """The names the course's imports bind (torch, F, math...): kept as written, like the copy check does."""
    return imported_names([s for cells in lessons().values() for s in cells])


def keys(source: str) -> list[str]:
    return [s.key for s in statements(source, known())]


@cache
def solutions() -> tuple[dict[str, str], dict[str, str]]:
    """(grade id -> the default's answer cell, grade id -> the Markdown of its part of the solution notebook)."""
    answers: dict[str, str] = {}
    texts: dict[str, str] = {}
    for path in sorted((ROOT / "solutions").glob("[0-9][0-9]_exercises.py")):
        current = None
        for cell in notebook_cells(path):
            if cell.cell_type == "markdown":
                found = HEADING.search(cell.source)
                current = found.group(1) if found else current
                if current:
                    texts[current] = texts.get(current, "") + "\n" + cell.source
            gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                answers[gid.removesuffix("_answer")] = cell.source
    return answers, texts


def variant_answers(grade_id: str) -> dict[str, str]:
    """Variant key -> its right answer: ``solutions/variants/<grade_id>.py``, else the solution's for the default."""
    path = ROOT / "solutions" / "variants" / f"{grade_id}.py"
    if path.exists():
        spec = importlib.util.spec_from_file_location(f"variant_answers_{grade_id}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return dict(module.ANSWERS)
    return {registry.family(grade_id)[0].key: solutions()[0].get(grade_id, "")}


def backward_bodies(source: str) -> list[str]:
    """The source of the body of every ``backward`` the answer defines (dedented, docstrings kept out by normalise)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines()
    return [textwrap.dedent("\n".join(lines[f.body[0].lineno - 1:f.body[-1].end_lineno]))
            for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name in BACKWARDS]


def expressions(body: str) -> list[str]:
    """The normalised expressions a backward body returns or assigns (each at least ``TOKENS`` tokens)."""
    out = []
    for node in ast.walk(ast.parse(body)):
        value = node.value if isinstance(node, (ast.Return, ast.Assign, ast.AugAssign)) else None
        if value is not None:
            parts = value.elts if isinstance(value, ast.Tuple) else [value]
            out += [k for p in parts for k in keys(ast.unparse(p)) if len(k.split()) >= TOKENS]
    return out


def classes(source: str) -> list[tuple[str, tuple[str, ...]]]:
    """(name, normalised statements) of every class a piece of code defines."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [(c.name, tuple(keys(ast.get_source_segment(source, c) or ""))) for c in tree.body if isinstance(c, ast.ClassDef)]


def contains(seq: list[str] | tuple[str, ...], part: list[str] | tuple[str, ...]) -> bool:
    """Whether every statement of ``part`` is in ``seq``, in order (a lesson may interleave its own lines)."""
    rest = iter(seq)
    return bool(part) and all(any(k == s for s in rest) for k in part)


def task_code(grade_id: str) -> set[str]:
    """The normalised code of every task text of an exercise: its Markdown in the solutions and every variant's task."""
    texts = [solutions()[1].get(grade_id, "")] + [v.task for v in registry.family(grade_id)]
    found: set[str] = set()
    for text in texts:
        for block, span in CODE.findall(text):
            found.update(keys(block or span))
    return found


@cache
def lesson_code(lesson_cells: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[dict, list]:
    """(lesson -> each code cell's statements, every lesson class's statements), normalised once."""
    return ({name: [keys(c) for c in cells] for name, cells in lesson_cells},
            [c for _, cells in lesson_cells for cell in cells for _, c in classes(cell)])


def offences(grade_id: str, key: str, answer: str) -> list[str]:
    """Why this variant's answer is handed over (empty when it is not)."""
    out = []
    lesson_keys, lesson_classes = lesson_code(tuple((n, tuple(c)) for n, c in lessons().items()))
    for body in backward_bodies(answer):
        mine = keys(body)
        shown = [name for name, cells in lesson_keys.items() if any(contains(c, mine) for c in cells)]
        if shown:
            out.append(f"its backward's statements are in {', '.join(shown)}")
        told = [e for e in expressions(body) if e in task_code(grade_id)]
        if told:
            out.append(f"its task text shows the backward's expression {told[0]!r}")
    out += [f"class {name} is a lesson's class" for name, body in classes(answer)
            if len(body) >= CLASS_STATEMENTS and any(contains(c, body) for c in lesson_classes)]
    return out


def audit() -> dict[str, list[str]]:
    """Grade id -> every offence of every variant of it ("<key>: why")."""
    found: dict[str, list[str]] = {}
    for gid in registry.EXERCISES:
        for key, answer in variant_answers(gid).items():
            for why in offences(gid, key, answer):
                found.setdefault(gid, []).append(f"{key}: {why}")
    return found


def test_no_answer_is_handed_over_by_a_lesson_or_its_task():
    found = audit()
    new = {g: w for g, w in found.items() if g not in HANDED_OVER}
    fixed = sorted(HANDED_OVER - set(found))
    message = "; ".join(f"{g} ({', '.join(w)})" for g, w in sorted(new.items()))
    assert not new, f"{len(new)} exercise(s) hand their answer over: {message}"
    assert not fixed, f"no longer handed over, so remove them from HANDED_OVER: {', '.join(fixed)}"


def test_the_audit_reads_every_exercises_answer():
    answers = solutions()[0]
    assert set(answers) == set(registry.EXERCISES), set(registry.EXERCISES) ^ set(answers)
    assert len([g for g in registry.EXERCISES if backward_bodies(answers[g])]) >= 20  # most have a backward


LEAK_ANSWER = """
class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3 * x.pow(2)
"""


def test_a_leaked_backward_is_caught_in_a_lesson_and_in_a_task_text(monkeypatch):
    """The audit can fail: the same backward with other names in a lesson, and its expression in the task."""
    assert offences("mul", "plain", LEAK_ANSWER) == []
    lesson = LEAK_ANSWER.replace("grad_output", "g").replace("x", "inp").replace("Cube", "Lesson")
    monkeypatch.setitem(lessons(), "99_leak.py", [lesson])
    found = offences("mul", "plain", LEAK_ANSWER)
    assert "its backward's statements are in 99_leak.py" in found
    assert "class Cube is a lesson's class" in found
    monkeypatch.setitem(lessons(), "99_leak.py", [])
    text = solutions()[1]
    monkeypatch.setitem(text, "mul", text.get("mul", "") + "\nBackward returns `g * 3 * y.pow(2)`.")
    assert any("task text shows the backward's expression" in w for w in offences("mul", "plain", LEAK_ANSWER))


@pytest.mark.parametrize("answer", ["", "class Broken(:\n    pass"])
def test_an_answer_that_does_not_parse_is_no_offence(answer):
    assert offences("mul", "plain", answer) == []
