"""Notebooks are code: every .ipynb is the executed image of its py:percent source."""
import json
import re
from pathlib import Path

import jupytext
import nbformat
import pytest

from conftest import ROOT
from course_utils import build, markers, release

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


def ships_broken_code(name: str) -> set[str]:
    """Exercises of solutions/``name`` whose answer cell ships (broken) code instead of a stub (``### SHIPPED``)."""
    found, shipped = set(), False
    for c in jupytext.read(ROOT / "solutions" / name).cells:
        if c.cell_type == "code" and markers.BEGIN in c.source:
            shipped = markers.SHIPPED in c.source
        elif c.cell_type == "code" and (m := markers.CHECK_CALL.search(c.source)):
            found |= {m.group(1)} if shipped else set()
            shipped = False
    return found


def test_a_fresh_exercise_notebook_shows_prompts_not_scores():
    """A student opening an exercise notebook sees "not attempted yet" under each check, no "0/N" and no ✗;
    only a find-the-bug exercise (its answer cell ships broken code) shows what that code gets wrong."""
    exercises = build.sources("exercises")
    assert exercises and any(ships_broken_code(py.name) for py in exercises)
    for py in exercises:
        broken = ships_broken_code(py.name)
        nb = json.loads(py.with_suffix(".ipynb").read_text())
        for c in nb["cells"]:
            gid = markers.CHECK_CALL.search("".join(c["source"])) if c["cell_type"] == "code" else None
            if not gid:
                continue
            shown = "".join("".join(o.get("data", {}).get("text/html", "")) for o in c["outputs"])
            status = re.search(r"data-status='([^']*)'", shown)
            assert status, f"{py.name}: the check of {gid.group(1)} shows no verdict: run ./course build"
            want = "failed" if gid.group(1) in broken else "not attempted"
            assert status.group(1) == want, f"{py.name}: {gid.group(1)} shows {status.group(1)!r}, not {want!r}"
            if want == "not attempted":
                assert "points</" not in shown and "✗" not in shown, shown  # no "0/N points", no cross


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
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


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_no_heading_hides_as_a_comment_in_a_code_cell(py: Path):
    """A heading written as `# ## Title` inside a code cell (a missing `# %% [markdown]` marker) renders as a comment
    and is missing from the lesson's outline (issue 49, item 8: lesson 08's `torch.func` on the new `Exp`)."""
    hidden = [line for c in jupytext.read(py).cells if c.cell_type == "code"
              for line in c.source.splitlines() if re.match(r"# #{1,4} \S", line)]
    assert not hidden, f"{py.name}: headings inside code cells (add a `# %% [markdown]` line above them): {hidden}"


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


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # \t, \b, \f, \r, \v... : "\text", "\frac" typed as escapes


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_twin_and_notebook_hold_the_same_cells_free_of_control_characters(py: Path):
    """Both files of a pair, cell by cell, and no markdown cell with a TAB or another control character:
    that is a LaTeX command (\\text, \\frac, \\beta) written through a string escape, broken in both files
    when the notebook was built from its twin (the pair test alone cannot see it)."""
    ipynb = py.with_suffix(".ipynb")
    twin, built = jupytext.read(py), nbformat.read(ipynb, as_version=4)
    assert cells(twin) == cells(built), f"{py.name} and {ipynb.name} differ: run ./course build"
    for name, nb in ((py.name, twin), (ipynb.name, built)):
        for i, c in enumerate(nb.cells):
            bad = CONTROL.search(c.source) or (re.search("\t", c.source) if c.cell_type == "markdown" else None)
            where = c.source[max(bad.start() - 20, 0):bad.start() + 10] if bad else ""
            assert bad is None, f"{name}, cell {i}: a control character near {where!r}"


def test_build_help_and_unknown_options_build_nothing(capsys, monkeypatch):
    """`./course build --help` printed nothing useful and rebuilt every notebook (minutes); now it explains."""
    monkeypatch.setattr(build, "build_one", lambda py: (_ for _ in ()).throw(AssertionError(f"built {py}")))
    assert build.main(["--help"]) == 0 and "usage: ./course build" in capsys.readouterr().out
    assert build.main(["--jobs", "2"]) == 2 and "takes notebook names" in capsys.readouterr().err


def test_every_exercise_notebook_header_says_how_to_get_the_fix():
    """`check(..., fix=True)` was documented only in its signature: every exercise notebook's header (generated
    by the build, in solutions/ and so in exercises/) now ends with how to get the fix without Jupyter's toggle,
    named with that notebook's first exercise."""
    assert build.sources("solutions") and build.sources("exercises")
    for py in build.sources("solutions") + build.sources("exercises"):
        nb = jupytext.read(py)
        first = next(m.group(1) for c in nb.cells if c.cell_type == "code" for m in [markers.CHECK_CALL.search(c.source)] if m)
        header = next(c for c in nb.cells if c.cell_type == "markdown")
        assert header.source.endswith(build.fix_note(first)), f"{py.relative_to(ROOT)}: run ./course build"
        assert header.source.count(build.FIX_MARK) == 1


def test_the_fix_call_the_header_documents_prints_the_fix():
    """What the header tells a student to type prints the level-2 fix as text; without fix=True it stays hidden."""
    from course_utils.checks import check

    call = re.search(r"`(print\(check\(.*?\)\))`", build.fix_note("exp")).group(1)
    source = (
        "import torch\nfrom torch.autograd import Function\n"
        "class Exp(Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        ctx.save_for_backward(x)\n"
        "        return (-x).exp()\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad_output):\n"
        "        (x,) = ctx.saved_tensors\n"
        "        return -grad_output * x\n"  # the input where the output belongs: a mistake with a fix
    )
    namespace: dict = {"__name__": "answer"}
    exec(compile(source, "answer", "exec"), namespace)
    namespace["check"] = check
    import contextlib
    import io

    for wanted, code in ((True, call), (False, call.replace(", fix=True", ""))):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(code, namespace)
        printed = out.getvalue()
        assert "the input x stands in the output's place" in printed, printed
        assert ("fix: save the output in forward" in printed) is wanted, printed


def test_the_fix_note_is_refreshed_not_repeated():
    nb = jupytext.read(ROOT / "solutions" / "03_exercises.py")
    once = build.with_fix_note(nb).cells[0].source
    assert build.with_fix_note(build.with_fix_note(nb)).cells[0].source == once


NOTEBOOKS = [py.with_suffix(".ipynb") for py in SOURCES]


@pytest.mark.parametrize("ipynb", NOTEBOOKS, ids=[str(p.relative_to(ROOT)) for p in NOTEBOOKS])
def test_every_nbval_marker_is_one_nbval_honours(ipynb: Path):
    """nbval compares a comment line as a whole: `# NBVAL_IGNORE_OUTPUT: why` is no marker, and the output it
    was meant to excuse was compared (lesson 03 failed on an AVX-512 CPU). Every line naming a marker, and
    every nbval tag, must be one nbval's own parser (the installed nbval) recognises."""
    from nbval.plugin import find_comment_markers, metadata_tags

    nb = nbformat.read(ipynb, as_version=4)
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        for line in cell.source.splitlines():
            if re.search(r"NBVAL_|PYTEST_VALIDATE_", line):
                assert list(find_comment_markers(line)), (
                    f"{ipynb.name}, code cell {i}: {line.strip()!r} is not a marker nbval honours: put the marker "
                    "alone on its line (`# NBVAL_IGNORE_OUTPUT`) and the reason on the next")
        tags = [t for t in cell.metadata.get("tags", []) if t.startswith("nbval")]
        assert all(t in metadata_tags for t in tags), f"{ipynb.name}, code cell {i}: unknown nbval tag in {tags}"
