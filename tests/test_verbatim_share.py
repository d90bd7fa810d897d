"""Exercises ask for transfer, not re-typing: few solution lines appear verbatim in the lessons.

A solution line is a non-empty, non-comment line inside a ``### BEGIN SOLUTION`` region (the
shipped broken code of a find-the-bug exercise excluded); it counts as copied when the same
stripped line is a code line of any lesson in ``notebooks/``. Limits (issue 20): at most 15%
over the transfer exercises, at most 30% over all exercises.
"""
from __future__ import annotations

import jupytext

from conftest import ROOT
from course_utils.markers import BEGIN, CHECK_CALL, END, SHIPPED

# exercises that mirror their lesson's worked example on purpose; every other one is transfer
MIRRORS: set[str] = set()
TRANSFER_LIMIT, OVERALL_LIMIT = 0.15, 0.30


def lesson_lines() -> set[str]:
    """Code lines of the lessons, and of the kernels lesson 10 prints from ``course_utils/kernels``."""
    lines = set()
    for py in [*(ROOT / "notebooks").glob("*.py"), *(ROOT / "course_utils" / "kernels").glob("*.py")]:
        lines |= {t for t in (ln.strip() for ln in py.read_text().splitlines()) if t and not t.startswith("#")}
    return lines


def solution_lines() -> dict[str, list[str]]:
    """grade_id -> the solution lines of its answer cell."""
    found: dict[str, list[str]] = {}
    for py in sorted((ROOT / "solutions").glob("*_exercises.py")):
        cells = jupytext.read(py).cells
        for i, cell in enumerate(cells):
            if cell.cell_type != "code" or BEGIN not in cell.source:
                continue
            gid = next(m.group(1) for c in cells[i + 1:] for m in [CHECK_CALL.search(c.source)] if m)
            inside = shipped = False
            for line in cell.source.splitlines():
                t = line.strip()
                if t in (BEGIN, END):
                    inside, shipped = t == BEGIN, False
                elif t == SHIPPED:
                    shipped = True
                elif inside and not shipped and t and not t.startswith("#"):
                    found.setdefault(gid, []).append(t)
    return found


def share(per_exercise: dict[str, list[str]], known: set[str]) -> tuple[int, int]:
    lines = [t for ts in per_exercise.values() for t in ts]
    return sum(t in known for t in lines), len(lines)


def test_solution_lines_copied_from_the_lessons_stay_under_the_limits():
    known, per = lesson_lines(), solution_lines()
    copied, total = share(per, known)
    t_copied, t_total = share({g: ts for g, ts in per.items() if g not in MIRRORS}, known)
    assert total > 200 and t_total > 150, "the solutions lost their answer regions?"
    assert t_copied / t_total <= TRANSFER_LIMIT, f"transfer exercises: {t_copied}/{t_total} lines are in the lessons"
    assert copied / total <= OVERALL_LIMIT, f"all exercises: {copied}/{total} lines are in the lessons"


def variant_solution_regions() -> dict[str, list[list[str]]]:
    """'grade_id/key' -> the solution regions (lines between the markers) of each variant's answer in
    solutions/variants/, in order: a Function's last region is its backward."""
    import importlib.util

    found: dict[str, list[list[str]]] = {}
    for path in sorted((ROOT / "solutions" / "variants").glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"variant_answers_{path.stem}", path)
        assert spec and spec.loader, path
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for key, source in module.ANSWERS.items():
            regions = found.setdefault(f"{path.stem}/{key}", [])
            inside = False
            for line in source.splitlines():
                t = line.strip()
                if t in (BEGIN, END):
                    inside = t == BEGIN
                    regions += [[]] if inside else []
                elif inside and t and not t.startswith("#"):
                    regions[-1].append(t)
    return found


def test_no_transfer_variants_answer_is_lesson_code():
    """Issue 51: every variant of a transfer exercise asks for a relative of the lesson's example, not the example.
    Saving and unpacking lines are the API every answer repeats; what a variant computes (its regions as a whole)
    and returns from backward (the gradients) must not be lesson code."""
    known = lesson_lines()
    transfer = {name: regions for name, regions in variant_solution_regions().items()
                if name.split("/")[0] not in MIRRORS and regions}
    assert transfer, "no transfer exercise has variants with marked solution regions: this test proves nothing"
    whole = [name for name, regions in transfer.items() if all(t in known for region in regions for t in region)]
    assert not whole, f"these variants' answers are lesson code line for line: {whole}"
    returned = {name: t for name, regions in transfer.items() for t in regions[-1]
                if t.startswith("return") and t in known}
    assert not returned, f"these variants' backward returns a lesson's line: {returned}"


def test_the_share_counts_a_copied_line():
    """The measure can fail: a solution made of lesson lines is counted as copied."""
    known = {"ctx.save_for_backward(x)", "return x"}
    assert share({"a": ["ctx.save_for_backward(x)", "return x", "y = x + 1"]}, known) == (2, 3)
