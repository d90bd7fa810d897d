"""One parse per submission (issue 42): the judge, the similarity report and the copy check read the same answers.

Before, each of the three read and parsed the file itself, each with its own rule for which
cells are answers: the judge graded the first cell carrying an answer's id, the similarity
report compared it, but the copy check read every cell with nbgrader's solution flag, so a
second copy of an answer cell, or a cell with an id the course does not have, could be
flagged "copied from the solutions" while the graded answer was the student's own.
The batch runs in this process with no runner (``_run_all`` does nothing): what is read, parsed
and stored is the point here, not the points.
"""
from __future__ import annotations

import builtins
import json
import os
import sys

import nbformat
import pytest

from conftest import ROOT
from course_utils.grading import assignment, notebook, submission
from course_utils.grading.reports import copies, similarity
from course_utils.grading.results import SubmissionResult
from grading_corpus import answer, unattempted

OWN_MUL = ("class Mul(Function):\n    @staticmethod\n    def forward(ctx, a, b):\n        ctx.save_for_backward(a, b)\n"
           "        return torch.mul(a, b)\n\n    @staticmethod\n    def backward(ctx, g):\n"
           "        a, b = ctx.saved_tensors\n        return torch.mul(g, b), torch.mul(g, a)\n")


def with_cells(tmp_path, name: str, *extra: tuple[str, dict]) -> os.PathLike:
    """02_exercises as shipped, its ``mul_answer`` cell holding OWN_MUL, then ``extra`` (source, nbgrader) cells
    right after it (a copy of the answer cell keeps its metadata)."""
    nb = unattempted("02")
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "mul_answer")
    nb.cells[at].source = OWN_MUL
    for k, (source, meta) in enumerate(extra, 1):
        nb.cells.insert(at + k, nbformat.v4.new_code_cell(source, metadata={"nbgrader": meta}))
    nbformat.write(nb, tmp_path / name)
    return tmp_path / name


def read_by_all_three(path) -> dict[str, object]:
    """What each consumer takes as the answer to ``mul``, and the copy check's flags."""
    assignments = assignment.load_assignments(ROOT, solutions=True)
    sub = submission.read(path, assignments)
    row = SubmissionResult(str(path))
    planned = submission.plan(row, sub, assignments)
    mul = next(c["source"] for c in planned if c["kind"] == "answer" and c["exercise"] == "mul")
    (compared,) = similarity.answers([sub], assignments)[("02_exercises", "mul")]
    return {"judge": mul, "similarity": compared.source, "copies": copies.flags(sub, assignments), "row": row}


@pytest.mark.parametrize("meta", [{"solution": True, "grade_id": "mul_answer"},  # a copy of the answer cell
                                  {"solution": True, "grade_id": "scratch"}])  # an id the course does not have
def test_the_three_read_the_same_answer_cells(tmp_path, meta):
    """The solution pasted into a cell that is not graded is no answer for any of the three (the old copy check
    flagged it); pasted into the graded cell it is, for all three."""
    solution = answer("02", "mul_answer")
    seen = read_by_all_three(with_cells(tmp_path, "a.ipynb", (solution, meta)))
    assert seen["judge"] == seen["similarity"] == OWN_MUL and seen["copies"] == []
    assert seen["row"].flags[0] == ("answer cell mul_answer appears 2 times: the first was graded, the others ignored"
                                    if meta["grade_id"] == "mul_answer" else
                                    "1 cell(s) added by the student were ignored (only answer cells are graded)")

    swapped = with_cells(tmp_path, "b.ipynb", (OWN_MUL, meta))
    nb = nbformat.read(swapped, as_version=4)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "mul_answer").source = solution
    nbformat.write(nb, swapped)
    seen = read_by_all_three(swapped)
    assert seen["judge"] == seen["similarity"] == solution
    assert seen["copies"] == ["copied from the solutions: the answer to mul still holds the solution marker "
                              "'### BEGIN SOLUTION'"]


def test_a_submission_read_as_before_keeps_its_flags(tmp_path):
    """No copy, no foreign cell: the plan's flags are the ones it always gave (nothing new is said)."""
    seen = read_by_all_three(with_cells(tmp_path, "plain.ipynb"))
    assert seen["judge"] == OWN_MUL and seen["copies"] == []
    assert not [f for f in seen["row"].flags if "appears" in f or "added by the student" in f]


@pytest.mark.parametrize("data, words", [(b"\xff\xfe", "not UTF-8"), (b'{"cells": ', "truncated or invalid JSON"),
                                         (b"[1, 2]", "no list of 'cells'")])
def test_a_broken_file_is_one_sentence(tmp_path, data, words):
    (tmp_path / "x.ipynb").write_bytes(data)
    with pytest.raises(notebook.NotebookError, match=words) as err:
        submission.read(tmp_path / "x.ipynb", assignment.load_assignments(ROOT))
    assert "\n" not in str(err.value)


# --------------------------------------------------------------------------- the command line, in this process
@pytest.fixture
def grade(monkeypatch, tmp_path):
    """``./course grade ARGS --no-sandbox`` in this process, with no runner started (nothing is run, nothing is
    judged: the rows carry their flags, their exercises are not graded)."""
    from course_utils.grading import cli, grade_file
    from course_utils.grading.sandbox import zygote

    monkeypatch.setattr(zygote, "warm_up", lambda *args, **kwargs: None)
    monkeypatch.setattr(cli, "cap_judge_memory", lambda extra: None)  # never cap the test process
    monkeypatch.setattr(grade_file, "_run_all", lambda row, cells, options, slot: None)
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> int:
        return cli.main([*args, "--no-sandbox"] if "--merge" not in args else list(args))
    return run


@pytest.mark.parametrize("store", [True, False])
def test_each_submission_is_read_and_parsed_once(grade, tmp_path, monkeypatch, store):
    """The one parse is the judge's; similarity and the copy check read it. With a result store the file is opened
    twice: once to hash it (the store's key, before deciding whether to grade it) and once to read it; without
    one, once."""
    subs = tmp_path / "subs"
    subs.mkdir()
    idle = unattempted("02")
    idle.metadata["kernelspec"] = {"name": "python3", "display_name": "mine"}  # not the course's own bytes
    nbformat.write(idle, subs / "idle.ipynb")
    with_cells(subs, "own.ipynb")
    with_cells(subs, "twin.ipynb", ("# my notes", {}))  # the same answer, other bytes
    files = {str(p): p.read_bytes() for p in subs.iterdir()}
    opened: list[str] = []
    parsed: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def counting_open(file, *args, **kwargs):
        if str(file) in files:
            opened.append(str(file))
        return real_open(file, *args, **kwargs)

    def counting_os_open(file, *args, **kwargs):
        if str(file) in files:
            opened.append(str(file))
        return real_os_open(file, *args, **kwargs)

    real_parse = notebook.parse_notebook

    def counting_parse(data, *args, **kwargs):
        parsed.extend(p for p, b in files.items() if b == data)
        return real_parse(data, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(os, "open", counting_os_open)
    for name, module in list(sys.modules.items()):  # wherever a grading module holds the parser under its own name
        if name.startswith("course_utils.grading") and getattr(module, "parse_notebook", None) is real_parse:
            monkeypatch.setattr(module, "parse_notebook", counting_parse)
    assert grade(str(subs), *(["--out", "grades.csv"] if store else []), "--similarity", "similar", "--jobs", "2") == 0
    assert sorted(parsed) == sorted(files), "each submission is parsed once"
    assert sorted(opened) == sorted((2 if store else 1) * list(files)), "opened to hash it (a store's key), read once"
    assert "own.ipynb" in (tmp_path / "similar.csv").read_text()  # the report read the one parse


def test_copies_flags_are_stored_with_the_result_in_one_write_and_survive_merge(grade, tmp_path, monkeypatch, capsys):
    """A shard interrupted after grading (its outputs never written) still has each row's copies flags in its
    results, and --merge shows them in every output: the table, the feedback, JSON and the dashboard."""
    from course_utils.grading import cli, store

    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "copied.ipynb").write_bytes((ROOT / "solutions" / "02_exercises.ipynb").read_bytes())
    with_cells(subs, "own.ipynb")
    saved: list[str] = []
    real_save, real_batch = store.Store.save, cli.grade_batch

    def counting_save(self, row):
        saved.append(os.path.basename(row.submission))
        return real_save(self, row)

    def interrupted(*args, **kwargs):
        real_batch(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(store.Store, "save", counting_save)
    monkeypatch.setattr(cli, "grade_batch", interrupted)
    assert grade(str(subs), "--results", "shard-1") == 130
    assert sorted(saved) == ["copied.ipynb", "own.ipynb"], "one write per result"
    stored = {os.path.basename(r.submission): r for r in store.merge([tmp_path / "shard-1"])}
    flag = "copied from the solutions: the answer to mul still holds the solution marker '### BEGIN SOLUTION'"
    assert flag in stored["copied.ipynb"].flags and not [f for f in stored["own.ipynb"].flags if "copied" in f]

    monkeypatch.setattr(cli, "grade_batch", real_batch)
    assert grade(str(subs), "--results", "shard-1", "--out", "one-run.csv") == 0  # resumed: nothing graded again
    assert sorted(saved) == ["copied.ipynb", "own.ipynb"]
    capsys.readouterr()
    assert grade("--merge", "shard-1", "--out", "grades.csv", "--feedback-dir", "feedback", "--report", "dash.html",
                 "--json") == 0
    table = (tmp_path / "grades.csv").read_text()
    assert flag in table and table == (tmp_path / "one-run.csv").read_text()
    (feedback,) = [p for p in (tmp_path / "feedback").rglob("*") if p.is_file() and "copied" in p.name]
    assert flag in feedback.read_text()
    assert "copied from the solutions" in (tmp_path / "dash.html").read_text()
    lines = {os.path.basename(r["submission"]): r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert flag in lines["copied.ipynb"]["flags"]


def test_a_file_replaced_after_the_store_hashed_it_is_stored_as_the_bytes_graded(grade, tmp_path, monkeypatch,
                                                                                  capsys):
    """The store's lookup hashes the file before the judge reads it; a file replaced in between is graded as the
    bytes read, stored under their digest (not the looked-up one) and flagged, never silently."""
    import hashlib

    from course_utils.grading import cli

    subs = tmp_path / "subs"
    subs.mkdir()
    own = with_cells(subs, "own.ipynb")
    looked_up = hashlib.sha256(own.read_bytes()).hexdigest()
    real_digest = cli.file_digest

    def digest_then_replace(path):
        digest = real_digest(path)
        with_cells(subs, "own.ipynb", ("# written after the store hashed the file", {}))
        return digest

    monkeypatch.setattr(cli, "file_digest", digest_then_replace)
    assert grade(str(subs), "--out", "grades.csv", "--json") == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    graded = hashlib.sha256(own.read_bytes()).hexdigest()
    assert graded != looked_up and row["sha256"] == graded
    assert any("the file changed after the result store looked it up" in f for f in row["flags"]), row["flags"]
