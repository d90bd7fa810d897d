"""Shards on separate machines (issue 39): each shard graded by its own process in its own clone of the repository,
with its own copy of the submissions, merged on a third; the merged book, decisions included, equals one run's.

Also keeps the recipes of README's "Large courses: shards" (.github/workflows/grade-shards.yml, k8s/) consistent
with the grader: every shard index of 1..N is graded, with the options the grader knows, and the merge reads
every shard's folder.
"""
import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from course_utils.grading.cli import build_parser
from course_utils.grading.sandbox import sandbox

BOX = sandbox.detect()
SANDBOX = [] if BOX.usable else ["--no-sandbox"]


def clone(where: Path) -> Path:
    """A machine: a fresh clone of this repository's commit, with its own copy of the submissions."""
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(where)], check=True, timeout=300)
    subs = where / "submissions"
    subs.mkdir()
    shutil.copy(ROOT / "solutions" / "02_exercises.ipynb", subs / "alice_02_exercises.ipynb")
    shutil.copy(ROOT / "exercises" / "02_exercises.ipynb", subs / "bob_02_exercises.ipynb")
    shutil.copy(ROOT / "solutions" / "02_exercises.ipynb", subs / "carol_02_exercises.ipynb")
    (subs / "dave_02_exercises.ipynb").write_text('{"cells": [')  # truncated: ungradable until accepted
    return where


def grade(machine: Path, *args: str) -> subprocess.CompletedProcess:
    """``./course grade ARGS`` on that machine: its own process, its own course_utils (not this checkout's)."""
    env = dict(os.environ, PYTHONPATH=str(machine), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "course_utils.grade", *args], cwd=machine, env=env,
                          capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


DECISIONS = [("override", "bob_02_exercises.ipynb", "mul", "1", "--reason", "started it: partial credit"),
             ("accept", "dave_02_exercises.ipynb", "--reason", "the file was cut by the upload; counted as is")]


def decide_and_export(machine: Path, book: str) -> list[dict]:
    for command, *args in DECISIONS:
        grade(machine, command, "--book", book, *args, "--who", "prof")
    grade(machine, "export", "--book", book, "--format", "csv", "--out", "export.csv")
    with open(machine / "export.csv", newline="") as f:
        return list(csv.DictReader(f))


def without_times(rows: list[dict]) -> list[dict]:
    """The export's rows, the clock time of each decision masked (the two runs decide seconds apart)."""
    import re

    return [{k: re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d)?\S*", "TIME", v or "") for k, v in r.items()} for r in rows]


@pytest.mark.slow
def test_shards_in_separate_clones_merge_to_one_run_decisions_included(tmp_path):
    common = ("--timeout", "60", *SANDBOX)
    one = clone(tmp_path / "one-machine")
    grade(one, "submissions/", "--out", "grades.csv", "--book", "book.sqlite", *common)
    expected = decide_and_export(one, "book.sqlite")

    desk = clone(tmp_path / "instructor")  # the merge runs where the book lives: no submissions needed there
    shutil.rmtree(desk / "submissions")
    for k in (1, 2):
        machine = clone(tmp_path / f"machine-{k}")
        grade(machine, "submissions/", "--shard", f"{k}/2", "--results", f"shard-{k}", *common)
        shutil.copytree(machine / f"shard-{k}", desk / f"shard-{k}")
    assert sorted(len(list((desk / f"shard-{k}").glob("*.json"))) for k in (1, 2)) == [2, 2]
    grade(desk, "--merge", "shard-1", "shard-2", "--out", "grades.csv", "--book", "book.sqlite")
    merged = decide_and_export(desk, "book.sqlite")
    assert len(merged) == 4 and without_times(merged) == without_times(expected)
    scores = {r["submission"].split("/")[-1]: r for r in merged}
    assert "mul set to 1 by prof" in scores["bob_02_exercises.ipynb"]["notes"]
    assert "accepted by prof" in scores["dave_02_exercises.ipynb"]["notes"]
    assert scores["alice_02_exercises.ipynb"]["score"] == scores["carol_02_exercises.ipynb"]["score"] != ""

    # a second merge (a shard rerun, say) keeps every decision, as a second run does on one machine
    grade(desk, "--merge", "shard-1", "shard-2", "--out", "grades.csv", "--book", "book.sqlite")
    grade(one, "submissions/", "--out", "grades.csv", "--book", "book.sqlite", *common)
    tables = []
    for machine in (desk, one):
        with open(machine / "grades.csv", newline="") as f:
            tables.append(list(csv.DictReader(f)))
    assert without_times(tables[0]) == without_times(tables[1])
    # the copy-of-the-solutions flags are stored with each shard's results, so the merge has them too
    assert sum("copied from the solutions" in r["flags"] for r in tables[0]) == 2
    grade(desk, "export", "--book", "book.sqlite", "--format", "csv", "--out", "again.csv")
    with open(desk / "again.csv", newline="") as f:
        assert without_times(list(csv.DictReader(f))) == without_times(merged)


# ---- the recipes in the repository -----------------------------------------------------------------

def grader_args(command: str) -> list[str]:
    """The arguments after ``./course grade`` in a shell command line (continuations joined, quotes dropped)."""
    import shlex

    line = command.replace("\\\n", " ")
    words = shlex.split(line[line.index("./course grade") + len("./course grade"):].splitlines()[0])
    return words


def test_the_actions_workflow_grades_every_shard_and_merges_them_all():
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "grade-shards.yml").read_text())
    jobs = flow["jobs"]
    assert jobs["grade"]["needs"] == "plan" and jobs["merge"]["needs"] == "grade"
    assert jobs["grade"]["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.plan.outputs.shards) }}"
    plan = jobs["plan"]["steps"][0]["run"]
    code = plan.split('python3 -c "', 1)[1].split('")"', 1)[0]
    listed = subprocess.run([sys.executable, "-c", code], env={"N": "3"}, capture_output=True, text=True,
                            check=True).stdout
    assert listed.strip() == "[1, 2, 3]"
    step = next(s for s in jobs["grade"]["steps"] if "./course grade" in s.get("run", ""))
    line = step["run"].replace("${{ matrix.shard }}", "2").replace("${{ inputs.shards }}", "3")
    optional = '${ASSIGNMENT:+--assignment "$ASSIGNMENT"}'  # bash: the option only when the input is given
    assert optional in line
    for expanded, assignment in (("", None), ("--assignment 04_exercises", "04_exercises")):
        options = build_parser().parse_args(grader_args(line.replace(optional, expanded)))
        assert options.shard == "2/3" and options.results == "results/shard-2" and options.jobs == 2
        assert options.submissions == ["submissions/"] and options.assignment == assignment
    upload = next(s for s in jobs["grade"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == "results/shard-${{ matrix.shard }}"
    merge = next(s for s in jobs["merge"]["steps"] if "./course grade" in s.get("run", ""))
    download = next(s for s in jobs["merge"]["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    assert download["with"] == {"pattern": "shard-*", "path": "results"}  # one folder per artifact: results/shard-K
    assert build_parser().parse_args(grader_args(merge["run"])).merge == ["results/shard-*"]


def test_the_kubernetes_indexed_job_grades_every_shard_and_the_merge_reads_them_all():
    job = yaml.safe_load((ROOT / "k8s" / "grade-shards.yaml").read_text())
    spec = job["spec"]
    container = spec["template"]["spec"]["containers"][0]
    shards = int(next(e["value"] for e in container["env"] if e["name"] == "SHARDS"))
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == shards
    script = container["args"][0]
    for index in range(shards):
        k = index + 1
        line = (script.replace('"$K/$SHARDS"', f"{k}/{shards}").replace('"/grading/results/shard-$K"',
                                                                           f"/grading/results/shard-{k}"))
        options = build_parser().parse_args(grader_args(line))
        assert options.shard == f"{k}/{shards}" and options.results == f"/grading/results/shard-{k}"
        assert options.uid_sandbox and not options.no_sandbox
    merge = yaml.safe_load((ROOT / "k8s" / "merge-shards.yaml").read_text())
    line = merge["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert build_parser().parse_args(grader_args(line)).merge == ["/grading/results/shard-*"]
