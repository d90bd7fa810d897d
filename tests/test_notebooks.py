"""Notebooks are code: every .ipynb is the executed image of its py:percent source."""
import json
from pathlib import Path

import jupytext
import nbformat
import pytest

from conftest import ROOT
from course_utils import build, release

SOURCES = [py for folder in build.FOLDERS for py in build.sources(folder)]
IDS = [str(p.relative_to(ROOT)) for p in SOURCES]


def cells(nb):
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def test_there_are_lessons():
    names = [p.name for p in build.sources("notebooks")]
    assert names[0] == "00_start_here.py" and len(names) >= 3


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_pair_in_sync(py: Path):
    ipynb = py.with_suffix(".ipynb")
    assert ipynb.exists(), f"{ipynb.name} is missing: run ./course build"
    assert cells(jupytext.read(py)) == cells(nbformat.read(ipynb, as_version=4)), (
        f"{py.name} and {ipynb.name} differ: run ./course build"
    )


EXECUTED = [p for p in SOURCES if p.parent.name not in build.SHIPPED_CLEAN]
CLEAN = [p for p in SOURCES if p.parent.name in build.SHIPPED_CLEAN]


def test_exercise_notebooks_are_shipped_clean():
    """A student opening a fresh exercise notebook sees no verdict (no "0/N") before writing anything."""
    assert CLEAN, "no exercise notebooks found"
    for py in CLEAN:
        nb = json.loads(py.with_suffix(".ipynb").read_text())
        dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
                 and (c["outputs"] or c["execution_count"] is not None)]
        assert not dirty, f"{py.with_suffix('.ipynb').name}: cells {dirty} carry outputs: run ./course build"


@pytest.mark.parametrize("py", EXECUTED, ids=[str(p.relative_to(ROOT)) for p in EXECUTED])
def test_every_code_cell_was_executed_without_unexpected_errors(py: Path):
    nb = json.loads(py.with_suffix(".ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    counts = [c["execution_count"] for c in code]
    assert None not in counts, "a cell was never executed: run ./course build"
    assert counts == list(range(1, len(counts) + 1)), "cells were not run top to bottom in one kernel"
    for c in code:
        errors = [o for o in c["outputs"] if o["output_type"] == "error"]
        assert not errors or "raises-exception" in c["metadata"].get("tags", []), errors


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_first_code_cell_is_the_setup_cell(py: Path):
    first = next(c for c in jupytext.read(py).cells if c.cell_type == "code")
    assert first.source == build.setup_cell_source()


def test_setup_cell_installs_from_the_one_repository_url():
    url = build.repo_url()
    assert url.startswith("https://github.com/")
    assert f"git+{url}" in build.setup_cell_source()
    assert "google.colab" in build.setup_cell_source()


def test_readme_and_start_page_list_every_lesson():
    assert (ROOT / "README.md").read_text() == build.expected_readme(), "README lesson list stale: ./course build"
    assert build.START_PAGE.read_text() == build.expected_start_page(), "start page stale: ./course build"
    readme = (ROOT / "README.md").read_text()
    for py in build.sources("notebooks")[1:]:
        assert build.colab_url(f"notebooks/{py.stem}.ipynb") in readme


def test_exercises_are_generated_from_solutions():
    for py in release.solution_sources():
        target = ROOT / "exercises" / py.name
        assert target.exists() and target.read_text() == release.released_text(py), (
            f"exercises/{py.name} is not what the generator produces: run ./course build"
        )
    assert {p.name for p in build.sources("exercises")} == {p.name for p in release.solution_sources()}


def test_start_page_lesson_list_stays_inside_its_markdown_cell():
    first = jupytext.read(build.START_PAGE).cells[0]
    assert first.cell_type == "markdown"
    assert build.LIST_BEGIN in first.source and build.LIST_END in first.source
    assert "| 01 |" in first.source


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_cell_ids_are_the_builders_so_a_rebuild_changes_only_what_changed(py: Path):
    nb = nbformat.read(py.with_suffix(".ipynb"), as_version=4)
    expected = [build.cell_id(py.name, i, c.source) for i, c in enumerate(nb.cells)]
    assert [c.id for c in nb.cells] == expected, f"{py.with_suffix('.ipynb').name}: run ./course build"
