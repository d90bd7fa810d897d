"""CONTRIBUTING's map of the grader and its walk from a file to a row name only what exists.

The walk ("From a submission file to its grade-book row") names modules, functions and methods in
backticks; every one must be found in the source (a renamed function breaks this test, not the reader).
The map (the folder table) and ``grading/__init__``'s docstring must each name every module of
``course_utils/grading/``, in the folder where it lives.
"""
from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "course_utils"
GRADING = PACKAGE / "grading"
TEXT = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")


def section(text: str, title: str) -> str:
    """The body of the section whose heading is ``title`` (up to the next heading of any level)."""
    m = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    assert m, f"CONTRIBUTING.md has no section {title!r}"
    return m.group(1)


def modules() -> dict[str, Path]:
    """Every module of the grader by its path inside ``grading/`` without ``.py`` (``sandbox/worker``)."""
    return {p.relative_to(GRADING).with_suffix("").as_posix(): p for p in GRADING.rglob("*.py")
            if p.name != "__init__.py"}


@cache
def defined(path: Path) -> frozenset[str]:
    """Names a module defines or imports at any depth, and ``Class.method`` for its classes' methods."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names |= {f"{node.name}.{n.name}" for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return frozenset(names)


def module_file(dotted: str) -> Path | None:
    """The file of a module named as the walk names it: ``collect``, ``book/gradebook``, ``checks.engine``."""
    rel = dotted.replace(".", "/")
    for base in (GRADING, PACKAGE):
        for candidate in (base / f"{rel}.py", base / rel / "__init__.py"):
            if candidate.exists():
                return candidate
    leaf = [p for name, p in modules().items() if name.rsplit("/", 1)[-1] == rel]
    return leaf[0] if len(leaf) == 1 else None


def resolve(token: str, here: list[Path]) -> bool:
    """Whether a backticked ``token`` of a walk step names something real (``here``: the step's files)."""
    if token.endswith(("/", ".py")):
        return any((base / token).exists() for base in (GRADING, PACKAGE, ROOT))
    parts = token.split(".")
    for cut in range(len(parts), 0, -1):  # the longest prefix that is a module, the rest defined in it
        path = module_file(".".join(parts[:cut]))
        if path is not None:
            rest = ".".join(parts[cut:])
            return not rest or rest in defined(path)
    return any(token in defined(p) for p in here)


def problems(walk: str) -> list[str]:
    """What a walk names that does not exist, step by step."""
    found = []
    for step in re.split(r"^\d+\. ", walk, flags=re.M)[1:]:
        tokens = [t for t in re.findall(r"`([^`\s]+)`", step) if not t.startswith("-")]
        here = [p for t in tokens if t.endswith(".py") for p in [GRADING / t.removeprefix("grading/"), PACKAGE / t]
                if p.exists()]
        here += [p for t in tokens if "." in t and not t.endswith(".py")
                 for p in [module_file(t.split(".")[0])] if p is not None]  # ``collect.collect``: collect's names too
        assert here, f"a step names no module file: {step[:80]!r}"
        found += [f"{t!r} in step {step[:40]!r}" for t in tokens if not resolve(t, here)]
    return found


def test_every_name_in_the_walk_from_a_file_to_a_row_exists():
    walk = section(TEXT, "From a submission file to its grade-book row")
    assert len(re.findall(r"^\d+\. ", walk, re.M)) >= 8  # the walk is there, step by step
    assert problems(walk) == []


def test_a_renamed_function_is_caught():
    assert problems("1. `grading/grade_file.py` `grade_submission`: then `submission.read`.\n") == []
    found = problems("1. `grading/grade_file.py` `grade_one`: then `submission.parse` and `grading/nowhere.py`.\n")
    assert [p.split(" in step")[0] for p in found] == ["'grade_one'", "'submission.parse'", "'grading/nowhere.py'"]


def test_the_map_in_contributing_names_every_module_in_its_folder():
    table = section(TEXT, "The grader: three folders and a thin core")
    listed = {}
    for folder, names in re.findall(r"^\| `grading/([a-z]*)/?` [^|]*\|[^|]*\| (.*) \|$", table, re.M):
        for name in re.findall(r"`(\w+)`", names):
            listed[f"{folder}/{name}" if folder else name] = True
    assert sorted(listed) == sorted(modules())


def test_the_package_docstring_names_every_module():
    import course_utils.grading as grading

    doc = grading.__doc__ or ""
    assert sorted(m for m in modules() if f"``{m.rsplit('/', 1)[-1]}``" not in doc) == []
    for folder in ("sandbox", "reports", "book"):  # each module under the heading of its folder
        part = doc.split(f"\n``{folder}/``:", 1)[1].split("\n\n", 1)[0]
        assert sorted(m for m in modules() if m.startswith(f"{folder}/")
                      and f"``{m.split('/')[1]}``" not in part) == []
