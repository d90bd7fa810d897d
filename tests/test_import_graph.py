"""The import graph of course_utils is a tree (no cycles), counting imports inside functions too.

Imports under ``if TYPE_CHECKING:`` count too: they never run, but a reader follows them, and a
type-only circle is a circle in the design. An edge goes from a module to every course_utils module it imports
(``from . import x`` names the
submodule ``x`` when there is one, else the package). A package's ``__init__`` may import its
submodules; a submodule importing its own package (or anything that imports back) is a cycle.
"""
from __future__ import annotations

import ast

from conftest import ROOT

PACKAGE = ROOT / "course_utils"


def module_name(path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def known_modules() -> dict[str, object]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(path, known) -> set[str]:
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in known:
                    found.add(target)
                elif base in known:
                    found.add(base)
    return found - {me}


def graph() -> dict[str, set[str]]:
    known = known_modules()
    return {name: imports(path, known) for name, path in known.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_finder_sees_a_cycle_through_a_lazy_import():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_course_utils_imports_form_no_cycle():
    edges = graph()
    assert "course_utils.checks.registry" in edges["course_utils.checks"]
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_a_type_only_import_is_an_edge(tmp_path, monkeypatch):
    """``if TYPE_CHECKING: from .b import X`` ties a to b: a circle through it is a circle (it was not counted)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import X\n")
    known = {"pkg.a": package / "a.py", "pkg.b": package / "b.py"}
    monkeypatch.setitem(globals(), "ROOT", tmp_path)  # module names are read relative to ROOT
    assert imports(package / "a.py", known) == {"pkg.b"}


def test_outputs_grade_book_and_options_import_neither_torch_nor_the_checks():
    """What the results model carries is all the outputs read: writing a report or exporting a book needs no torch."""
    import subprocess
    import sys

    light = ["results", "reports.outputs", "reports.reports", "reports.dashboard", "book.lms", "book.gradebook",
             "book.book_cli", "store", "options"]
    code = ("import sys\n" + "".join(f"import course_utils.grading.{m}\n" for m in light)
            + "import course_utils.exercise_result, course_utils.status\n"
            + "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('course_utils.checks')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def imported_names(path) -> list[tuple[str, str]]:
    """(module as written, name) for every ``from X import name`` in ``path``, counting imports inside functions."""
    return [(node.module or "", alias.name) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) for alias in node.names]


def test_usage_error_is_imported_from_its_home():
    """``UsageError`` lives in ``grading.errors``; ``collect`` re-exported it and 7 modules imported it from there."""
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    wrong = sorted(f"{path.relative_to(ROOT)}: from {module}" for path in files
                   for module, name in imported_names(path) if name == "UsageError" and not module.endswith("errors"))
    assert wrong == []


def test_the_grader_never_imports_the_edition_builder():
    """The solution markers, task calls and the repository rewrite are facts both read (``markers``): the grader
    imported ``release`` (the student-edition builder) for them."""
    edges = graph()
    assert "course_utils.markers" in edges["course_utils.release"]
    assert sorted(m for m, deps in edges.items() if m.startswith("course_utils.grading")
                  and "course_utils.release" in deps) == []


GRADING_FLOORS = {  # grading/__init__ and CONTRIBUTING: a module imports only its own floor or lower ones
    "sandbox": 0,
    **dict.fromkeys(["errors", "results", "collect", "names", "notebook", "assignment", "checksums", "version",
                     "submission", "policy", "attention", "store", "options"], 1),
    "reports": 2,
    "book": 3,
    **dict.fromkeys(["cli", "batch", "grade_file", "owners", "gradescope", "gradescope_archive"], 4),
}


def floor(module: str) -> int | None:
    """The floor of a grader module (``course_utils.grading.book.late`` -> 3), None outside the grader."""
    parts = module.split(".")
    return GRADING_FLOORS.get(parts[2]) if len(parts) > 2 and parts[:2] == ["course_utils", "grading"] else None


def test_the_grader_s_floors_hold():
    """sandbox/ < the core's data < reports/ < book/ < the pipeline: no module imports a higher floor."""
    edges = graph()
    grader = [m for m in edges if m.startswith("course_utils.grading.")]
    assert sorted(m for m in grader if floor(m) is None) == []  # every module has its floor
    upward = sorted(f"{m} -> {d}" for m in grader for d in edges[m]
                    if floor(d) is not None and floor(d) > floor(m))  # type: ignore[operator]
    assert upward == []
