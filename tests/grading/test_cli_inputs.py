"""What the grader takes as a submission, and how it stops: platform records are never graded (issue 46, item 3),
a notebook of another assignment invents none (item 7), Ctrl-C stops a batch promptly (item 8). Run through the
documented command, on the layouts nbgrader and Gradescope really write."""
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT
from course_utils.grading.sandbox import sandbox

BOX = sandbox.detect()
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
UNSANDBOXED = () if BOX.mode != "none" else ("--no-sandbox",)  # grading unattempted notebooks: nothing runs long


def grade(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_utils.grade", *args, *UNSANDBOXED], check=False, capture_output=True,
                          text=True, env=ENV, timeout=600)


def export(book: Path, out: Path, fmt: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_utils.grade", "export", "--book", str(book), "--format", fmt,
                           "--out", str(out), *extra], check=False, capture_output=True, text=True, env=ENV, timeout=120)


def nbgrader_timestamp() -> str:
    """A timestamp.txt's text as nbgrader's exchange writes it (its own code and format)."""
    from nbgrader.exchange.default.exchange import Exchange

    exchange = Exchange()
    exchange.set_timestamp()
    return exchange.timestamp


def test_platform_time_records_are_read_for_times_never_graded(tmp_path):
    """nbgrader's submitted/STUDENT/ASSIGNMENT/timestamp.txt and Gradescope's STUDENT/submission_metadata.json
    beside STUDENT/submission/: no row, no feedback file, no "unreadable file" note; their times reach the export."""
    notebook = ROOT / "exercises" / "02_exercises.ipynb"
    for student in ("alice", "bob"):
        folder = tmp_path / "nbgrader" / "submitted" / student / "02_exercises"
        folder.mkdir(parents=True)
        shutil.copy(notebook, folder / "02_exercises.ipynb")
        (folder / "timestamp.txt").write_text(nbgrader_timestamp())
    for student in ("carol", "dan"):
        (tmp_path / "gradescope" / student / "submission").mkdir(parents=True)
        shutil.copy(notebook, tmp_path / "gradescope" / student / "submission" / "02_exercises.ipynb")
        (tmp_path / "gradescope" / student / "submission_metadata.json").write_text(json.dumps(
            {"id": 7, "created_at": "2026-03-01T10:00:00.000000-08:00", "assignment": {"title": "02"}}))
    out, feedback, book = tmp_path / "grades.csv", tmp_path / "feedback", tmp_path / "course.sqlite"
    proc = grade(str(tmp_path / "nbgrader" / "submitted"), str(tmp_path / "gradescope"), "--out", str(out),
                 "--feedback-dir", str(feedback), "--book", str(book), "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(Path(r["submission"]).name for r in rows) == ["02_exercises.ipynb"] * 4
    assert {r["status"] for r in rows} == {"graded"}
    assert len(list(feedback.rglob("*.*"))) == 4 and not [p for p in feedback.rglob("*")
                                                          if "timestamp" in p.name or "metadata" in p.name]
    assert "4 platform time record(s)" in proc.stderr
    done = export(book, tmp_path / "export.csv", "csv")
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "export.csv", newline="") as f:
        lines = list(csv.DictReader(f))
    assert len(lines) == 4 and not [x for x in lines if "unreadable" in x["notes"] or "not a notebook" in x["notes"]]
    assert sorted(x["time_source"] for x in lines) == ["Gradescope submission_metadata.json"] * 2 + [
        "nbgrader timestamp.txt"] * 2


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_notebook_of_another_assignment_is_held_under_the_batchs_and_invents_none(tmp_path):
    """Alice hands her 01 notebook into 02 (graded with --assignment 02_exercises): her row is filed under 02 and says,
    in one sentence, which assignment the file is; no export gets a 01 column or line, and she is not "missing"."""
    subs = tmp_path / "02"
    subs.mkdir()
    shutil.copy(ROOT / "exercises" / "01_exercises.ipynb", subs / "alice_02.ipynb")
    shutil.copy(ROOT / "exercises" / "02_exercises.ipynb", subs / "bob_02.ipynb")
    book = tmp_path / "course.sqlite"
    proc = grade(str(subs), "--assignment", "02_exercises", "--out", str(tmp_path / "g.csv"), "--book", str(book))
    assert proc.returncode == 0, proc.stderr
    rows = {Path(r["submission"]).name: r for r in read_csv(tmp_path / "g.csv")}
    alice = rows["alice_02.ipynb"]
    assert (alice["assignment"], alice["status"]) == ("02_exercises", "wrong assignment")
    assert ("this file is the notebook of 01_exercises, not of 02_exercises (the assignment graded here), so it was "
            "not graded") in alice["flags"]
    (tmp_path / "roster.csv").write_text("id,name,email,pattern\na1,Alice Ang,a@x.org,*alice*\nb2,Bob Bo,b@x.org,*bob*\n")
    out = {}
    for fmt in ("csv", "canvas", "moodle", "nbgrader"):
        done = export(book, tmp_path / f"{fmt}.csv", fmt, "--roster", str(tmp_path / "roster.csv"))
        assert done.returncode == 0, done.stderr
        out[fmt] = read_csv(tmp_path / f"{fmt}.csv")
        text = (tmp_path / f"{fmt}.csv").read_text()  # 01 only in the sentence that says what the file is
        assert "01_exercises" not in text.replace("notebook of 01_exercises", "").replace("--assignment 01_exercises", "")
    lines = {x["student_id"]: x for x in out["csv"]}
    assert len(out["csv"]) == 2 and lines["a1"]["assignment"] == "02_exercises"
    assert lines["a1"]["status"] == "wrong assignment" and lines["a1"]["score"] == ""
    assert "notebook of 01_exercises" in lines["a1"]["notes"] and "no submission" not in lines["a1"]["notes"]
    assert lines["a1"]["max"] == lines["b2"]["max"] != "0"
    canvas = {x["Student"]: x for x in out["canvas"]}
    assert list(out["canvas"][0])[5:] == ["02_exercises"] and canvas["Alice Ang"]["02_exercises"] == ""
    assert canvas["Points Possible"]["02_exercises"] == lines["b2"]["max"]
    assert list(out["moodle"][0])[3:] == ["02_exercises"]
    assert {x["Email address"]: x["02_exercises"] for x in out["moodle"]}["a@x.org"] == ""
    nbgrader = {x["student_id"]: x for x in out["nbgrader"]}
    assert {x["assignment"] for x in out["nbgrader"]} == {"02_exercises"} and len(out["nbgrader"]) == 2
    assert nbgrader["a1"]["max_score"] == nbgrader["b2"]["max_score"] and nbgrader["a1"]["score"] == "0"


def slow_notebook(seconds: float) -> str:
    """02's exercise notebook whose every answer cell first sleeps ``seconds``: a submission that takes a while."""
    raw = json.loads((ROOT / "exercises" / "02_exercises.ipynb").read_text())
    for cell in raw["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = [f"import time\ntime.sleep({seconds})\n", *cell["source"]]
    return json.dumps(raw)


def test_ctrl_c_stops_the_batch_promptly_and_keeps_what_finished(tmp_path):
    """SIGINT after the first result: nothing more is started, the running runners end, what finished is kept and
    written (run the command again to resume: test_cli's resume test), "interrupted" is said, the exit status is 130."""
    import signal
    import time

    subs = tmp_path / "subs"
    subs.mkdir()
    for i in range(8):  # about 3 s each (two answers): 12 s at --jobs 2 if nothing stopped it
        (subs / f"s{i:02}.ipynb").write_text(slow_notebook(1.5))
    out = tmp_path / "g.csv"
    cmd = [sys.executable, "-m", "course_utils.grade", str(subs), "--out", str(out), "--jobs", "2", *UNSANDBOXED]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("graded 1/8"):
            break
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    proc.wait(timeout=120)
    took = time.monotonic() - sent
    kept = len(list((tmp_path / "g.csv.results").glob("*.json")))
    assert proc.returncode == 130, rest
    assert f"interrupted: {kept} result(s) kept" in rest and 1 <= kept <= 3, rest
    assert took < 10, f"{took:.1f} s from SIGINT to exit"  # the rest would take 10 s on an idle machine
    with open(out, newline="") as f:
        assert len(list(csv.DictReader(f))) == kept


def test_a_copy_flag_reaches_the_row_with_its_evidence_through_the_judge(tmp_path):
    """Graded by the documented command: the row (JSON line and result store) holds the flag and its evidence."""
    from test_copies import disguised, solution_source, unmarked

    raw = json.loads((ROOT / "exercises" / "04_exercises.ipynb").read_text())
    copy = disguised(unmarked(solution_source("04_exercises", "linear_nd_answer")))
    for cell in raw["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "linear_nd_answer":
            cell["source"] = copy
    (tmp_path / "s.ipynb").write_text(json.dumps(raw))
    proc = grade(str(tmp_path / "s.ipynb"), "--json", "--out", str(tmp_path / "g.csv"))
    assert proc.returncode == 0, proc.stderr
    (row,) = [json.loads(line) for line in proc.stdout.splitlines()]
    (evidence,) = row["evidence"]
    assert evidence["flag"] in row["flags"] and evidence["exercise"] == "linear_nd"
    assert evidence["student"] and all(line in copy for line in evidence["student"])
    stored = json.loads(next((tmp_path / "g.csv.results").glob("*.json")).read_text())
    assert stored["evidence"] == row["evidence"]
