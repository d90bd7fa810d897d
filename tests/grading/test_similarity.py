"""The similarity report (copydetect) on a planted copy, an honest pair and untouched stubs.

Five students hand in ``04_exercises``, all other answers left as the stub: ``original``
writes LinearFunction; ``copier`` copies it, renames every variable, reorders the methods
and adds comments; ``honest`` writes an independent correct answer; ``idle1`` and ``idle2``
hand in the stub. Only the copy may be flagged, and grades stay as they are.
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap

import nbformat
import pytest

from conftest import ROOT
from grading_corpus import unattempted

HEAD = """import math

import torch
from torch import nn
from torch.autograd import Function


class LinearFunction(Function):  # linear_function's default variant: the weight stored (in, out)
"""
ORIGINAL = HEAD + """    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight)
        if bias is not None:
            output = output + bias
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight.t())
        if ctx.needs_input_grad[1]:
            grad_weight = input.t().mm(grad_output)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias
"""
COPY = HEAD + """    @staticmethod
    def backward(ctx, g):
        # gradients of the three inputs
        x, w, b = ctx.saved_tensors
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = g.mm(w.t())   # dL/dx
        if ctx.needs_input_grad[1]:
            gw = x.t().mm(g)
        if b is not None and ctx.needs_input_grad[2]:
            gb = g.sum(0)
        return gx, gw, gb

    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        result = input.mm(weight)
        if bias is not None:
            result = result + bias
        return result
"""
HONEST = HEAD + """    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight)
        ctx.has_bias = bias is not None
        y = torch.matmul(input, weight)
        return y if bias is None else y + bias.unsqueeze(0)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        grads = [None, None, None]
        if needs[0]:
            grads[0] = torch.matmul(grad_output, weight.transpose(0, 1))
        if needs[1]:
            grads[1] = torch.matmul(input.transpose(0, 1), grad_output)
        if ctx.has_bias and needs[2]:
            grads[2] = grad_output.sum(dim=0)
        return tuple(grads)
"""
STUDENTS = {"original": ORIGINAL, "copier": COPY, "honest": HONEST, "idle1": None, "idle2": None}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    base = tmp_path_factory.mktemp("similarity")
    for name, source in STUDENTS.items():
        nb = unattempted("04")
        for cell in nb.cells:
            if source and cell.metadata.get("nbgrader", {}).get("grade_id") == "linear_function_answer":
                cell.source = textwrap.dedent(source)
        (base / "subs" / name).mkdir(parents=True)
        nbformat.write(nb, base / "subs" / name / "04_exercises.ipynb")
    proc = subprocess.run([sys.executable, "-m", "course_utils.grade", str(base / "subs"), "--out",
                           str(base / "grades.csv"), "--similarity", str(base / "report.html"), "--jobs", "2"],
                          check=False, capture_output=True, text=True, cwd=base, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(base / "report.csv") as f:
        pairs = list(csv.DictReader(f))
    with open(base / "grades.csv") as f:
        grades = {r["submission"].split(os.sep)[-2]: r for r in csv.DictReader(f)}
    return (base / "report.html").read_text(), pairs, grades, proc.stderr


def who(row: dict) -> set[str]:
    return {row["submission_a"].split(os.sep)[-2], row["submission_b"].split(os.sep)[-2]}


def test_the_planted_copy_is_flagged_and_nothing_else(report):
    _, pairs, _, stderr = report
    flagged = [who(p) for p in pairs if p["flagged"] == "yes"]
    assert flagged == [{"original", "copier"}], pairs
    assert "1 pair(s) of answers flagged" in stderr
    copy = next(p for p in pairs if who(p) == {"original", "copier"})
    assert float(copy["similarity"]) >= 0.75 and copy["exercise"] == "linear_function"


def test_the_honest_pair_is_not_flagged(report):
    _, pairs, _, _ = report
    honest = [float(p["similarity"]) for p in pairs if "honest" in who(p)]
    assert all(s < 0.5 for s in honest), honest


def test_untouched_stubs_are_not_compared(report):
    _, pairs, _, _ = report
    assert not [p for p in pairs if who(p) & {"idle1", "idle2"}], pairs
    assert [float(p["similarity"]) for p in pairs] == sorted((float(p["similarity"]) for p in pairs), reverse=True)


def test_html_shows_both_answers_side_by_side_with_the_matches_marked(report):
    html, _, _, _ = report
    assert html.count("<h2") == 1 and "linear_function" in html
    left, right = html.split("<td><pre>")[1:3]
    assert "<mark>" in left and "<mark>" in right
    assert "gx = g.mm(w.t())" in right.replace("<mark>", "").replace("</mark>", "") or \
        "gx = g.mm(w.t())" in left.replace("<mark>", "").replace("</mark>", "")


def test_grades_are_unchanged_by_the_flag(report):
    _, _, grades, _ = report
    assert grades["copier"]["total"] == grades["original"]["total"] == grades["honest"]["total"]
    assert float(grades["original"]["linear_function"]) == 4


def test_the_html_report_shows_the_most_similar_pairs_and_points_to_the_csv_for_more():
    import numpy as np

    from course_utils.grading.reports import similarity

    none = np.zeros((2, 0), dtype=int)
    pairs = [similarity.Pair("04_exercises", "mul", similarity.Answer(f"s{i}", "<b>x</b> = 1"),
                             similarity.Answer("t", "y = 2"), 0.9, (0.9, 0.9), (none, none))
             for i in range(similarity.SHOWN + 5)]
    page = similarity.html_report(pairs, 0.6)
    assert page.count("<h2") == similarity.SHOWN and "the other 5 are in the CSV" in page
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page  # student code is escaped


def test_no_csv_cell_of_the_similarity_report_starts_a_formula():
    """Student and file names such as '=HYPERLINK(...)' or '@cmd' stay text in a spreadsheet."""
    from course_utils.grading.reports.similarity import Answer, Pair, csv_report

    pair = Pair("02_exercises", "mul", Answer("=HYPERLINK(\"x\")/a.ipynb", "a"), Answer("@cmd|x.ipynb", "b"), 0.9,
                (0.9, 0.8), ((), ()))
    rows = list(csv.reader(csv_report([pair], 0.6).splitlines()))
    cells = [c for row in rows[1:] for c in row]
    assert "'=HYPERLINK(\"x\")/a.ipynb" in cells and "'@cmd|x.ipynb" in cells
    assert not [c for c in cells if c[:1] in "=+-@\t\r"]


def test_the_highlight_ends_where_the_shared_code_ends_not_one_character_later():
    """copydetect mapped a slice's end through the whitespace or comment after it (off by one or more)."""
    from course_utils.grading.reports import similarity

    body = ("def f(x, w):\n    y = x.mm(w.t())  # forward\n    gx = g.mm(w)\n\n    gw = g.t().mm(x)\n"
            "    total = gx.sum() + gw.sum() * 2\n    return gx, gw, 'total'\n")
    a, b = body + "    # done\nprint(1)\n", "import math\n\n" + body + "z = 3\n"
    fa, fb = similarity._fingerprint(a, set()), similarity._fingerprint(b, set())
    _, shares, slices = similarity._compare(fa, fb, a, b)
    assert min(shares) > 0.5
    for source, (starts, ends) in zip((a, b), slices):
        marked = [source[s:e] for s, e in zip(starts, ends)]
        assert marked and all(m.endswith("'total'") and m.startswith("def f") for m in marked), marked


def test_a_short_standard_answer_is_never_flagged_and_shipped_code_does_not_count():
    from course_utils.grading.reports import similarity

    forward = ("        a, b = ctx.saved_tensors\n        grad_a = grad_output * b\n        grad_b = grad_output * a\n"
               "        return grad_a, grad_b\n")
    one = similarity.Answer("one.ipynb", forward + "        # mine\n")
    two = similarity.Answer("two.ipynb", forward)
    (pair,) = similarity.compare({("02", "mul"): [one, two]}, {})
    assert pair.similarity >= 0.6 and pair.overlap < similarity.MIN_SPAN and not pair.flagged(0.6)
    shipped = "class Mul(Function):\n    @staticmethod\n    def backward(ctx, grad_output):\n" + forward
    assert similarity.compare({("02", "mul"): [one, two]}, {}, {"02": shipped}) == []
