"""An exercise asks only for what was shown before it: every API its reference answer uses is in an earlier text.

The course is read in one order: lesson 00, lesson 01, exercises 01, lesson 02, exercises 02, ... (``course()``,
built from the file names: the one place that order lives). For each exercise, the reference answer (the code
between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` in ``solutions/NN_exercises.py``) is parsed, and every
API it uses must appear in a text the student has seen by then: a lesson up to NN (code or markdown), the
released exercise notebooks before it, and the exercise's own text and stub. "Uses" are

* attribute accesses and method calls on a value: ``.mT``, ``.amax``, ``.new_zeros`` (written ``.name``);
* functions of a module, by their full name: ``torch.linalg.vector_norm``, ``torch.randn_like``;
* keyword arguments: ``retain_graph=``, ``keepdim=``, and with the method they go to where the method alone
  does not say it (``clamp(max=)``: ``clamp(min=0)`` is ReLU, ``max=`` an upper bound).

A tensor method and the torch function of the same name are one API (``x.exp()`` is ``torch.exp(x)``), and
an attribute the answer itself assigns (``ctx.has_bias = ...``) is its own name, not an API.

Techniques that no parser sees (a stable softmax, a safe denominator, Newton's iteration) are listed in
``TECHNIQUES`` with the text that must show them before their exercise.
"""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field

import jupytext
import pytest
import torch

from conftest import ROOT
from course_utils import build, markers

# Where a gap is known and owned by someone else's open change, the uses it still lacks (the lead empties an
# entry when that change is merged; an entry that is no longer a gap fails, so this list never goes stale).
KNOWN_GAPS: dict[str, set[str]] = {}

# name -> (exercise, a regex that the code of a lesson before it must match, what it teaches)
TECHNIQUES: dict[str, tuple[str, str, str]] = {
    "stable softmax": ("func_softmax", r"\.amax\(.*keepdim=True\)", "subtract the row maximum before exp"),
    "safe denominator": ("row_norm_op", r"torch\.where\(\w+ == 0, torch\.ones_like",
                         "replace a zero denominator so that 0/safe gives gradient 0"),
    "Newton's iteration": ("lambert_w", r"Newton's method", "iterate w <- w - F(w) / F'(w) to a root"),
    "softmax's VJP": ("func_softmax", r"torch\.diag\(\w+\) - torch\.outer\(",
                      "derive softmax's Jacobian diag(y) - y y^T and its O(n) vector form (issue 51)"),
}

MODULES = {"torch": "torch", "math": "math", "np": "numpy", "numpy": "numpy", "F": "torch.nn.functional",
           "tl": "triton.language", "triton": "triton"}
# what Python itself teaches (str.format, list.append, dict.items, math.tanh...): not a course's API
PYTHON_MODULES = ("math.",)
PYTHON = {f".{name}" for t in (str, list, dict, tuple, set, int, float, bytes) for name in dir(t)
          if not name.startswith("_") and not hasattr(torch.Tensor, name)}  # tensor.sort, .add, .split are the course's
PYTHON_KEYWORDS = {"end=", "sep=", "file=", "key=", "reverse=", "strict=", "encoding="}


@dataclass
class Station:
    """One step of the course: a lesson, or one exercise (its text, stub and check) of an exercise notebook."""

    name: str
    shown: set[str] = field(default_factory=set)  # what its text shows
    code: str = ""  # all of its text, for TECHNIQUES
    answer: set[str] = field(default_factory=set)  # what its reference answer uses (an exercise only)
    grade_id: str = ""


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in MODULES:
        return ".".join([MODULES[node.id], *reversed(parts)])
    return None


def _callee(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else "?"


def uses_in_code(source: str) -> set[str]:
    """The APIs a piece of Python uses; an unparsable piece (a fragment in markdown) is read by pattern."""
    source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return _uses_by_pattern(source)
    found: set[str] = set()
    inner = set()  # Attribute nodes inside a module's dotted name (torch.linalg in torch.linalg.norm)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            name = _dotted(node)
            if name is not None:
                found.add(name)
                value = node.value
                while isinstance(value, ast.Attribute):
                    inner.add(id(value))
                    value = value.value
            else:
                found.add(f".{node.attr}")
        elif isinstance(node, ast.Call):
            found |= {_keyword(_callee(node.func), k.arg) for k in node.keywords if k.arg}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {f"{node.module}.{a.name}" for a in node.names}
    stored = {f".{n.attr}" for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
    return found - stored


QUALIFIED = {"clamp", "clamp_", "clip"}  # methods whose keywords mean something of their own


def _keyword(callee: str, keyword: str) -> str:
    return f"{callee}({keyword}=)" if callee in QUALIFIED else f"{keyword}="


def _uses_by_pattern(text: str) -> set[str]:
    found = {f".{m}" for m in re.findall(r"(?<![\w.])\w*\.([A-Za-z_]\w*)", text)}
    found |= set(re.findall(r"\b(?:torch|math|numpy)(?:\.\w+)+", text))
    found |= {_keyword(f, k) for f, args in re.findall(r"(\w+)\(([^()]*)", text) for k in re.findall(r"(\w+)=", args)}
    return found


MD_CODE = re.compile(r"```(?:python)?\n(.*?)```|`([^`\n]+)`", re.S)


def uses_in_cell(cell) -> set[str]:
    if cell.cell_type == "code":
        return uses_in_code(cell.source)
    return set().union(*(uses_in_code(a or b) for a, b in MD_CODE.findall(cell.source)))


def _split_exercises(cells) -> list[tuple[str, list]]:
    """(grade_id, its cells) for each check cell of an exercise notebook, in order (the text before a check
    belongs to it; what follows the last check belongs to no exercise)."""
    groups, current = [], []
    for cell in cells:
        current.append(cell)
        match = markers.CHECK_CALL.search(cell.source) if cell.cell_type == "code" else None
        if match:
            groups.append((match.group(1), current))
            current = []
    return groups


@functools.cache
def course() -> list[Station]:
    """Every station in reading order: lesson NN, then each exercise of exercises/NN (the one order). Read once per
    worker, on first use: not at collection, where every worker would read every notebook."""
    stations = []
    for lesson in build.sources("notebooks"):
        nb = jupytext.read(lesson)
        stations.append(Station(f"lesson {lesson.name[:2]}", set().union(*map(uses_in_cell, nb.cells)),
                                "\n".join(c.source for c in nb.cells)))
        solution = ROOT / "solutions" / f"{lesson.name[:2]}_exercises.py"
        if not solution.exists():
            continue
        released = _split_exercises(jupytext.read(ROOT / "exercises" / solution.name).cells)
        answers = _split_exercises(jupytext.read(solution).cells)
        assert [g for g, _ in released] == [g for g, _ in answers], f"exercises/{solution.name}: run ./course build"
        for (gid, shown_cells), (_, answer_cells) in zip(released, answers):
            answer = set().union(*(uses_in_code(c.source) for c in answer_cells
                                   if c.cell_type == "code" and markers.BEGIN in c.source))
            stations.append(Station(f"exercise {gid} (exercises {lesson.name[:2]})",
                                    set().union(*map(uses_in_cell, shown_cells)),
                                    "\n".join(c.source for c in shown_cells), answer, gid))
    return stations


def gaps(stations: list[Station]) -> dict[str, dict[str, str]]:
    """exercise -> {use its answer makes before any text shows it: where it is first shown ('' if nowhere)}."""
    first: dict[str, str] = {}
    for s in stations:
        for use in s.shown:
            for alias in _aliases(use):
                first.setdefault(alias, s.name)
    found: dict[str, dict[str, str]] = {}
    seen: set[str] = set()
    for s in stations:
        seen |= s.shown
        missing = {u for u in s.answer - PYTHON - PYTHON_KEYWORDS
                   if not u.startswith(PYTHON_MODULES) and not any(a in seen for a in _aliases(u))}
        if missing:
            found[s.grade_id] = {use: first.get(use, "") for use in sorted(missing)}
    return found


def _aliases(use: str) -> set[str]:
    """A use and its other spelling: ``.exp`` and ``torch.exp``."""
    if use.startswith("torch.") and use.count(".") == 1:
        return {use, use[5:]}
    if use.startswith("."):
        return {use, f"torch{use}"}
    return {use}


def describe(found: dict[str, dict[str, str]]) -> str:
    return "; ".join(f"{gid} uses " + ", ".join(f"`{u}` ({w or 'shown nowhere'})" for u, w in uses.items())
                     for gid, uses in found.items())


def test_the_course_order_holds_every_exercise_of_every_notebook():
    from course_utils.checks.registry import EXERCISES

    assert sorted(s.grade_id for s in course() if s.grade_id) == sorted(EXERCISES)
    assert all(s.answer for s in course() if s.grade_id), "an exercise without a reference answer"


def test_every_api_a_reference_answer_uses_is_shown_before_its_exercise():
    found = gaps(course())
    unexpected = {gid: {u: w for u, w in uses.items() if u not in KNOWN_GAPS.get(gid, set())}
                  for gid, uses in found.items()}
    unexpected = {gid: uses for gid, uses in unexpected.items() if uses}
    assert not unexpected, ("asked before taught: " + describe(unexpected) + ". Show each in the lesson before "
                            "its exercise, or write the reference answer with what was shown.")
    stale = {gid: sorted(uses - set(found.get(gid, {}))) for gid, uses in KNOWN_GAPS.items()}
    stale = {gid: uses for gid, uses in stale.items() if uses}
    assert not stale, f"KNOWN_GAPS lists what is now taught in time, remove it: {stale}"


def variant_answer(grade_id: str, key: str) -> str:
    """The right answer to one variant (``solutions/variants/<grade_id>.py``, ``ANSWERS[key]``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"variant_answers_{grade_id}", ROOT / "solutions" / "variants" /
                                                  f"{grade_id}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ANSWERS[key]


def variant_course(grade_id: str, key: str) -> list[Station]:
    """The course as a student of variant ``key`` reads it: the exercise shows that variant's task text, and its
    answer is that variant's answer."""
    from course_utils.checks.registry import variant

    task = variant(grade_id, key).task
    shown = set().union(*(uses_in_code(a or b) for a, b in MD_CODE.findall(task)))
    return [Station(s.name, s.shown | shown, s.code + "\n" + task, uses_in_code(variant_answer(grade_id, key)), grade_id)
            if s.grade_id == grade_id else s for s in course()]


def _variants() -> list[tuple[str, str]]:
    from course_utils.checks.registry import FAMILIES

    return [(gid, v.key) for gid, family in sorted(FAMILIES.items()) for v in family]


@pytest.mark.parametrize("grade_id, key", _variants())
def test_every_api_a_variants_answer_uses_is_shown_before_it(grade_id: str, key: str):
    """Issue 51: every variant, not only the default, asks only for what was shown (its own task text included)."""
    found = gaps(variant_course(grade_id, key)).get(grade_id, {})
    assert not found, f"asked before taught: {describe({f'{grade_id} ({key})': found})}"


def test_the_variant_audit_reads_the_variants_task_and_answer():
    """The audit can fail: an answer using `.amax` before any text shows it is found, unless its task shows it."""
    gid, key = _variants()[0]
    stations = variant_course(gid, key)
    own = next(s for s in stations if s.grade_id == gid)
    own.answer = own.answer | {".some_api_no_lesson_shows"}
    assert ".some_api_no_lesson_shows" in gaps(stations)[gid]


@pytest.mark.parametrize("name", TECHNIQUES)
def test_every_technique_is_taught_in_a_lesson_before_its_exercise(name: str):
    grade_id, pattern, what = TECHNIQUES[name]
    before = []
    for s in course():
        if s.grade_id == grade_id:
            break
        if s.name.startswith("lesson"):
            before.append(s)
    else:
        pytest.fail(f"TECHNIQUES names {grade_id!r}, which is no exercise of the course")
    assert any(re.search(pattern, s.code) for s in before), (
        f"{grade_id} needs '{what}' ({name}), which no lesson before it shows")


# --------------------------------------------------------------------------- every variant (issue 51)
def variant_answers(grade_id: str) -> dict[str, str]:
    """``solutions/variants/<grade_id>.py``'s ANSWERS: variant key -> a right answer cell for that variant."""
    import importlib.util

    path = ROOT / "solutions" / "variants" / f"{grade_id}.py"
    spec = importlib.util.spec_from_file_location(f"variant_answers_{grade_id}", path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ANSWERS


def variant_gaps(stations: list[Station], families: dict[str, list[tuple[str, str, str]]]) -> dict[str, dict[str, str]]:
    """'grade_id/key' -> {use a variant's answer makes before any text shows it: where it is first shown}. A
    variant's student has seen what the exercise's own station shows plus their variant's task text.
    ``families``: grade id -> [(key, task text, answer source)]."""
    first: dict[str, str] = {}
    for s in stations:
        for use in s.shown:
            for alias in _aliases(use):
                first.setdefault(alias, s.name)
    found: dict[str, dict[str, str]] = {}
    seen: set[str] = set()
    for s in stations:
        seen |= s.shown
        for key, text, answer in families.get(s.grade_id, []):
            told = seen | set().union(*(uses_in_code(a or b) for a, b in MD_CODE.findall(text)))
            missing = {u for u in uses_in_code(answer) - PYTHON - PYTHON_KEYWORDS
                       if not u.startswith(PYTHON_MODULES) and not any(a in told for a in _aliases(u))}
            if missing:
                found[f"{s.grade_id}/{key}"] = {use: first.get(use, "") for use in sorted(missing)}
    return found


def test_every_api_a_variants_answer_uses_is_shown_before_its_exercise_or_in_its_task():
    from course_utils.checks import registry

    families = {gid: [(v.key, v.task, variant_answers(gid)[v.key]) for v in registry.family(gid)]
                for gid in registry.FAMILIES}
    assert families, "no exercise has variants: this test would prove nothing"
    found = variant_gaps(course(), families)
    assert not found, ("asked before taught: " + describe(found) + ". Show each in a lesson before the exercise or "
                       "in the variant's task text, or write the variant's answer with what was shown.")


def test_the_variant_audit_finds_an_api_only_a_variants_answer_uses():
    """The audit can fail: a variant whose answer uses `.tanh` passes only when its task text shows it."""
    lesson = Station("lesson 03", {".exp"}, "", set())
    exercise = Station("exercise s", set(), "", {".exp"}, "s")
    answer = "y = torch.tanh(x)"
    assert variant_gaps([lesson, exercise], {"s": [("tanh", "returns tanh x", answer)]}) == {
        "s/tanh": {"torch.tanh": ""}}
    assert variant_gaps([lesson, exercise], {"s": [("tanh", "returns `torch.tanh(x)`", answer)]}) == {}


def test_the_audit_finds_an_api_used_before_it_is_shown():
    """The audit can fail: `.mT` first shown in lesson 09 but used in an exercise of lesson 04 is found."""
    early = Station("lesson 04", {".mm"}, "", set())
    exercise = Station("exercise x", set(), "", {".mm", ".mT", "torch.linalg.vector_norm", "clamp(max=)"}, "x")
    later = Station("lesson 09", {".mT", "clamp(max=)"}, "", set())
    assert gaps([early, exercise, later]) == {"x": {".mT": "lesson 09", "clamp(max=)": "lesson 09",
                                                    "torch.linalg.vector_norm": ""}}
    assert uses_in_code("y = torch.linalg.vector_norm(x, dim=-1).clamp(max=1) + x.mT.sum()") >= {
        "torch.linalg.vector_norm", "dim=", ".clamp", "clamp(max=)", ".mT", ".sum"}
    assert "torch.linalg" not in uses_in_code("torch.linalg.vector_norm(x)")
    assert uses_in_cell(jupytext.reads("# %% [markdown]\n# use `x.amax(-1, keepdim=True)` and `.rsqrt()`\n",
                                       fmt="py:percent").cells[0]) >= {".amax", "keepdim=", ".rsqrt"}


# --------------------------------------------------------------------------- issue 51: every variant, not only the default
@functools.cache
def variant_stations() -> dict[tuple[str, str], Station]:
    """(grade id, variant key, a station for that variant's answer): what the course has shown by its exercise, plus
    the variant's own task text; the answer is ``solutions/variants/<grade_id>.py``'s for that key."""
    import importlib.util

    from course_utils.checks import registry

    found = {}
    seen: set[str] = set()
    for s in course():
        seen |= s.shown
        if s.grade_id not in registry.FAMILIES:
            continue
        path = ROOT / "solutions" / "variants" / f"{s.grade_id}.py"
        spec = importlib.util.spec_from_file_location(f"taught_{s.grade_id}", path)
        assert spec and spec.loader, f"{path}: every varied exercise has answers for its variants"
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for variant in registry.family(s.grade_id):
            task = set().union(*(uses_in_code(a or b) for a, b in MD_CODE.findall(variant.task)))
            found[s.grade_id, variant.key] = Station(f"{s.name}, variant {variant.key}", seen | task, "",
                                                     uses_in_code(module.ANSWERS[variant.key]), s.grade_id)
    return found


def test_every_variant_has_its_station():
    """The stations below are every variant of every family, none missing (they are parametrised by the families)."""
    assert sorted(variant_stations()) == sorted(_variants())


@pytest.mark.parametrize("grade_id, key", _variants(), ids=[f"{g}-{k}" for g, k in _variants()])
def test_every_api_a_variants_answer_uses_is_shown_before_its_exercise(grade_id: str, key: str):
    """Issue 51: a variant asks for no API the default's students were shown and its students were not."""
    station = variant_stations()[grade_id, key]
    found = gaps([station])
    missing = {u: w for u, w in found.get(grade_id, {}).items() if u not in KNOWN_GAPS.get(grade_id, set())}
    assert not missing, (f"asked before taught: variant {key!r} of {grade_id} uses " + ", ".join(f"`{u}`" for u in missing)
                         + "; show it in a lesson before the exercise or in the variant's task, or answer with what "
                         "was shown.")


def test_the_variant_audit_sees_each_variants_own_answer():
    """The audit can fail: an answer that uses an API no text shows is found, and the variant's task counts as shown."""
    station = Station("x", {".abs"}, "", uses_in_code("y = torch.special.erf(x).abs()"), "x")
    assert gaps([station]) == {"x": {"torch.special.erf": ""}}
    shown = set().union(*(uses_in_code(a or b) for a, b in MD_CODE.findall("the values of `torch.special.erf(x)`")))
    assert gaps([Station("x", {".abs"} | shown, "", station.answer, "x")]) == {}
