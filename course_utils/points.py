"""An exercise's points as a notebook states them, derived from its check's stages (their one home).

A notebook says what an exercise is worth twice: its heading (``## Exercise `mul` (2 points)``) and its check
cell's nbgrader ``points``. Both are copies of ``checks.EXERCISES[grade_id].points`` (the sum of the stages'
points): the build writes the heading's with ``with_points`` and the metadata with ``release.tag_cells``, and
``disagreements`` lists every place a notebook says otherwise (a hand edit, a stale build), which the tests assert
is none.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

import nbformat

from .errors import CourseError

HEADING = re.compile(r"^(?P<head>#+ Exercise `(?P<gid>\w+)`)(?P<said> \((?P<points>\d+(?:\.\d+)?) points?\))?", re.M)


def awards() -> dict[str, float]:
    """Grade id -> what its check can award, from the stages (``checks.EXERCISES``)."""
    from .checks import EXERCISES

    return {gid: ex.points for gid, ex in EXERCISES.items()}


def said(points: float) -> str:
    """How a heading states an exercise's points: ``(2 points)``, ``(1 point)``, ``(1.5 points)``."""
    return f"({points:g} point{'' if points == 1 else 's'})"


def with_points(nb: nbformat.NotebookNode, worth: Mapping[str, float], where: str) -> nbformat.NotebookNode:
    """Write each exercise heading's points from ``worth``, adding them where a heading has none (in place)."""
    def write(match: re.Match) -> str:
        gid = match["gid"]
        if gid not in worth:
            raise CourseError(f"{where}: the heading of exercise `{gid}` names no known exercise; "
                              f"use a grade id of checks.EXERCISES.")
        return f"{match['head']} {said(worth[gid])}"

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = HEADING.sub(write, cell.source)
    return nb


def disagreements(nb: nbformat.NotebookNode, worth: Mapping[str, float], where: str) -> list[str]:
    """Every heading and nbgrader ``points`` of ``nb`` that is not what the stages award, one sentence each."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for match in HEADING.finditer(cell.source):
                gid, points = match["gid"], match["points"]
                if gid not in worth:
                    found.append(f"{where} cell {index}: the heading names `{gid}`, which is no exercise.")
                elif points is None or float(points) != worth[gid]:
                    stated = (match["said"] or "no points").strip()
                    found.append(f"{where} cell {index}: the heading of `{gid}` says {stated}, its stages award "
                                 f"{said(worth[gid])}.")
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade"):
            gid = meta.get("grade_id", "")
            if gid not in worth:
                found.append(f"{where} cell {index}: nbgrader grade_id `{gid}` is no exercise.")
            elif meta.get("points") != worth[gid]:
                found.append(f"{where} cell {index}: nbgrader points of `{gid}` are {meta.get('points')}, "
                             f"its stages award {worth[gid]:g}.")
    return found
