"""The grader on a corpus of honest, mistaken, broken and hostile submissions (see grading_corpus).

One batch runs the documented command (``--jobs 2``, the sandbox as the machine allows,
as whatever user runs the tests: root in CI). The assertions are about outcomes: no
unearned points, nothing that is not the student's own in any report, no file outside
the sandbox changed, every submission a row, honest neighbours keep full marks, nothing
left running.
"""
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from course_utils.grading.sandbox import sandbox
from grading_corpus import HTML_NAME, MARKER, SECRET, write_corpus

BOX = sandbox.detect()
SANDBOXED = BOX.mode != "none"
TIMEOUT = "10"
needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox here: {BOX.reason}")


def test_ci_has_the_sandbox():
    """In CI the set-up installs bubblewrap: a sandbox that silently went missing must fail, not skip."""
    if os.environ.get("CI") and shutil.which("bwrap"):
        assert SANDBOXED, f"bubblewrap is installed but the grader cannot sandbox: {BOX.reason}"


def run_grader(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_utils.grade", *args], check=False, capture_output=True, text=True,
                          cwd=cwd, env=env or dict(os.environ, PYTHONPATH=str(ROOT)), timeout=1500)


def tree_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p).encode() + p.read_bytes())
    return h.hexdigest()


def leftovers() -> list[str]:
    """Processes the hostile answer started to outlive the grader (other tests may be grading meanwhile)."""
    found = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                cmd = Path(f"/proc/{p}/cmdline").read_bytes()
            except OSError:
                continue
            if MARKER.encode() in cmd:
                found.append(f"{p}: {cmd[:80]!r}")
    return found


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    base = tmp_path_factory.mktemp("grading")
    home = base / "home"
    home.mkdir()
    (home / "secret.txt").write_text(SECRET)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    abstract = socket.socket(socket.AF_UNIX)
    abstract_name = f"course-grader-test-{os.getpid()}-{base.name}"  # two suites on one machine do not collide
    abstract.bind(b"\0" + abstract_name.encode())
    abstract.listen()
    victim = base / "grades.csv"
    victim.write_text("the instructor's previous table\n")
    subs = base / "subs"
    ctx = {"VICTIM": str(victim), "PORT": listener.getsockname()[1], "ABSTRACT": abstract_name,
           "SOLUTIONS": str(ROOT / "solutions" / "02_exercises.py"), "BATCH": str(subs),
           "HOME_FILE": str(home / "secret.txt"), "SECRET": SECRET, "MARKER": MARKER,
           "USR_TARGET": f"/usr/course-grader-test-{os.getpid()}-{base.name}"}
    expect = write_corpus(subs, ctx, SANDBOXED)
    before = {"subs": tree_digest(subs), "course": tree_digest(ROOT / "course_utils"), "victim": victim.read_bytes()}
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(home), INSTRUCTOR_TOKEN=SECRET)
    proc = run_grader(str(subs), "--out", str(base / "out" / "grades.csv"), "--feedback-dir", str(base / "fb"),
                      "--json", "--jobs", "2", "--timeout", TIMEOUT, "--memory", "2",
                      "--report", str(base / "out" / "report.html"), "--similarity", str(base / "out" / "similar"),
                      cwd=base, env=env)
    listener.close()
    abstract.close()
    rows = {}
    for line in proc.stdout.splitlines():
        row = json.loads(line)
        rows[str(Path(row["submission"]).relative_to(subs))] = row
    return {"base": base, "subs": subs, "proc": proc, "rows": rows, "expect": expect, "before": before,
            "usr_target": ctx["USR_TARGET"],
            "victim": victim, "leftovers": leftovers()}


def test_batch_exits_zero_and_every_submission_gets_a_row(batch):
    assert batch["proc"].returncode == 0, batch["proc"].stderr[-3000:]
    assert set(batch["rows"]) == set(batch["expect"])
    table = (batch["base"] / "out" / "grades.csv").read_text().splitlines()
    assert len(table) == 1 + len(batch["expect"])


CASES = ["correct.ipynb", "swapped.ipynb", "unattempted.ipynb", "tampered_check.ipynb", "fake_output.ipynb",
         "infinite_loop.ipynb", "catch_all_loop.ipynb", "memory_hog.ipynb", "kernel_killer.ipynb",
         "sys_exit.ipynb", "os_exit.ipynb", "huge_output.ipynb", "escape.ipynb", "forge_points.ipynb",
         "torch_overrides.ipynb", "keepalive.ipynb", "flood.ipynb", "fill_scratch.ipynb", "shadow_worker.ipynb",
         "memory_children.ipynb", "busy.ipynb", "autograd_backward.ipynb", "alias_autograd.ipynb", "ansi.ipynb",
         "overlap.ipynb", "reference_hunt.ipynb", "=HYPERLINK(1).ipynb", "@sum.ipynb", "a/b.ipynb", "a__b.ipynb", "notes.txt",
         "truncated.ipynb", HTML_NAME, "unknown_assignment.ipynb", "no_answers.ipynb", "source_not_text.ipynb",
         "list_grade_id.ipynb", "link_to_solution.ipynb", "linked_folder"]


@pytest.mark.parametrize("name", CASES)
def test_each_submission_gets_expected_points_and_flags(batch, name):
    if name not in batch["expect"]:
        pytest.skip("not run without a sandbox: it would attack this machine")
    row, want = batch["rows"][name], batch["expect"][name]
    if "points" in want:
        assert row["status"] == ("held for review" if want.get("held") else "graded"), row
        assert (want.get("held") or "") in " | ".join(row["review"]) and bool(row["review"]) == bool(want.get("held")), row
        # exercises the case does not name keep the solution's full marks (the unattempted notebook's zero)
        others = 0 if name == "unattempted.ipynb" else None
        got = {g: e["points"] for g, e in row["exercises"].items()}
        expected = {g: want["points"].get(g, e["max"] if others is None else others) for g, e in row["exercises"].items()}
        assert set(want["points"]) <= set(got) and got == expected, row
        assert row["total"] == sum(expected.values())
    else:
        assert row["status"] == want["status"] and row["total"] == 0, row
    flags = " | ".join(row["flags"])
    for phrase in want["flags"]:
        assert phrase in flags, f"{phrase!r} not in {flags!r}"
    assert ("without sandbox" in flags) == (not SANDBOXED and "points" in want)


def test_points_never_exceed_the_course_maximum(batch):
    from course_utils.checks import EXERCISES

    for row in batch["rows"].values():
        for gid, e in row["exercises"].items():
            assert 0 <= e["points"] <= EXERCISES[gid].points == e["max"], (row["submission"], gid, e)


@needs_sandbox
def test_escape_attempts_all_fail(batch):
    feedback = batch["rows"]["escape.ipynb"]["exercises"]["mul"]["feedback"]
    report = re.search(r"REPORT ran=(\d+) ok=(\S+)", feedback)
    assert report, feedback
    assert report.group(1) == "19" and report.group(2) == "none", feedback


@needs_sandbox
def test_no_check_code_reference_or_solution_is_in_the_sandbox(batch):
    """Only the runner, its framing, wire and the probes are there: nothing to compute answers with or to plant."""
    feedback = batch["rows"]["reference_hunt.ipynb"]["exercises"]["mul"]["feedback"]
    report = re.search(r"REPORT found=(\S+) listing=(\S+)", feedback)
    assert report, feedback
    assert report.group(1) == "none", feedback
    # student.py: the set-up cell names the id
    assert report.group(2) == "__init__.py+grading+probes+student.py+wire.py", feedback


@needs_sandbox
def test_no_file_outside_the_sandbox_changed(batch):
    assert tree_digest(batch["subs"]) == batch["before"]["subs"], "a submission was changed"
    assert batch["victim"].read_bytes() == batch["before"]["victim"], "the instructor's file was changed"
    assert tree_digest(ROOT / "course_utils") == batch["before"]["course"], "the course's code was changed"
    assert not Path(batch["usr_target"]).exists(), "a file was written into /usr"


def test_nothing_is_left_running(batch):
    assert batch["leftovers"] == []


def test_reports_hold_nothing_that_is_not_the_students_own(batch):
    texts = [(batch["base"] / "out" / "grades.csv").read_text(), batch["proc"].stdout,
             (batch["base"] / "out" / "report.html").read_text()]
    texts += [p.read_text() for p in (batch["base"] / "fb").iterdir()]
    solution_line = "ctx.save_for_backward(a, b)"  # in solutions/02, absent from every answer but the students'
    for text in texts:
        assert SECRET not in text
        assert "instructor's previous table" not in text
    if SANDBOXED:
        assert all(solution_line not in t for t in texts[2:])  # the dashboard and the feedback


def test_forged_and_hostile_channels_are_reported(batch):
    rows = batch["rows"]
    assert "not valid" in " ".join(rows["forge_points.ipynb"]["flags"])
    keepalive = rows["keepalive.ipynb"]["exercises"]["mul"]["feedback"]
    assert "time limit" in keepalive or "sent more data" in keepalive, keepalive
    assert "sent more data" in rows["flood.ipynb"]["exercises"]["mul"]["feedback"]
    if SANDBOXED:  # busy.ipynb is not run without a sandbox; whichever clock stops it first (the judge's
        # deadline, or the runner's own alarm on a loaded machine), the student reads that it did not finish
        busy = rows["busy.ipynb"]["exercises"]["mul"]
        assert busy["points"] == 0 and ("time limit" in busy["feedback"] or "did not finish" in busy["feedback"]), busy


@needs_sandbox
def test_memory_is_capped_for_all_processes_together(batch):
    """Four children of 700 MiB each under --memory 2: three together would already pass the cap."""
    mul = batch["rows"]["memory_children.ipynb"]["exercises"]["mul"]["feedback"]
    report = re.search(r"children_ok=(\d)", mul)
    assert (report and int(report.group(1)) <= 2) or "memory" in mul, mul


@needs_sandbox
def test_a_restarted_runner_is_the_real_one(batch):
    """Files planted in the scratch folder (a fake runner, sitecustomize) are not what starts next."""
    feedback = batch["rows"]["shadow_worker.ipynb"]["exercises"]["linear_module"]["feedback"]
    assert "not defined" in feedback and "time limit" not in feedback, feedback


def test_failures_are_explained(batch):
    rows = batch["rows"]
    fb = {n: rows[n]["exercises"]["linear_module"]["feedback"] for n in (
        "infinite_loop.ipynb", "catch_all_loop.ipynb", "memory_hog.ipynb", "kernel_killer.ipynb",
        "sys_exit.ipynb", "os_exit.ipynb")}
    assert all("did not finish" in fb[n] or "time limit" in fb[n] for n in ("infinite_loop.ipynb",
                                                                         "catch_all_loop.ipynb")), fb
    assert "stopped" in fb["catch_all_loop.ipynb"], fb  # it swallowed the runner's alarm: the judge's backstop ended it
    assert "memory" in fb["memory_hog.ipynb"].lower()
    assert "die" in fb["kernel_killer.ipynb"]
    assert "sys.exit" in fb["sys_exit.ipynb"] and "os._exit" in fb["os_exit.ipynb"]


def test_no_control_sequences_reach_any_report(batch):
    """ANSI escapes printed or raised by an answer never reach the CSV, the JSON, the dashboard or the feedback."""
    texts = [(batch["base"] / "out" / "grades.csv").read_text(), batch["proc"].stdout,
             (batch["base"] / "out" / "report.html").read_text()]
    texts += [p.read_text() for p in (batch["base"] / "fb").iterdir()]
    assert all("\x1b" not in t and "\x07" not in t for t in texts)
    assert "bold" in batch["rows"]["ansi.ipynb"]["exercises"]["mul"]["feedback"]


def test_no_csv_cell_starts_a_formula(batch):
    import csv

    with open(batch["base"] / "out" / "grades.csv", newline="") as f:
        cells = [c for row in csv.reader(f) for c in row]
    assert any("HYPERLINK" in c for c in cells) and any("@sum" in c for c in cells)
    assert not [c for c in cells if c.lstrip(" ")[:1] in ("=", "+", "-", "@", "\t", "\r")]


def test_judge_refuses_overlapping_tensor_ranges(batch):
    """A frame whose 2000 tensors all point at one 1 MiB range would decode to 2 GiB: refused unread."""
    row = batch["rows"]["overlap.ipynb"]
    assert row["exercises"]["mul"]["points"] == 0 and "not valid" in " ".join(row["flags"])


def test_json_rows_have_the_contract_fields(batch):
    row = batch["rows"]["swapped.ipynb"]
    assert {"submission", "assignment", "total", "max", "exercises", "flags"} <= set(row)
    assert row["assignment"] == "02_exercises" and row["max"] == sum(e["max"] for e in row["exercises"].values())
    mul = row["exercises"]["mul"]
    assert {"points", "max", "feedback"} <= set(mul) and mul["max"] == 2
    assert "swapped" in mul["feedback"] and "input 0 (`a`)" in mul["feedback"]


def test_feedback_files_are_unique_and_readable(batch):
    names = sorted(p.name for p in (batch["base"] / "fb").iterdir())
    assert len(names) == len(set(names)) == len(batch["expect"])
    b = [n for n in names if n.startswith("a__b--")]
    assert len(b) == 2, names  # a/b.ipynb and a__b.ipynb do not overwrite each other
    texts = {(batch["base"] / "fb" / n).read_text() for n in b}
    assert any("2/2 points" in t for t in texts) and any("1/2 points" in t for t in texts)


def test_feedback_names_are_stable():
    from course_utils.grading.reports.reports import feedback_name

    assert feedback_name("/x/a/b.ipynb", "/x") == feedback_name("/x/a/b.ipynb", "/x")
    assert feedback_name("/x/a/b.ipynb", "/x") != feedback_name("/x/a__b.ipynb", "/x")


def test_resume_skips_finished_submissions(batch, tmp_path):
    """The batch was the first run: a rerun with its result store (copied) and the same options grades nothing
    again (stored results untouched, the table the same, --json still a line for each submission); a damaged
    result is graded again, not a crash."""
    shutil.copytree(batch["base"] / "out" / "grades.csv.results", tmp_path / "g.csv.results")
    shutil.copy(batch["base"] / "out" / "grades.csv", tmp_path / "g.csv")
    results = sorted((tmp_path / "g.csv.results").glob("*.json"))
    assert len(results) == len(batch["expect"]) - 2  # the two symbolic links are skipped, not stored
    stamps = [p.stat().st_mtime_ns for p in results]
    table = (tmp_path / "g.csv").read_text()
    again = [str(batch["subs"]), "--out", str(tmp_path / "g.csv"), "--timeout", TIMEOUT, "--memory", "2"]
    second = run_grader(*again, "--json")
    assert second.returncode == 0, second.stderr
    assert f"{len(batch['expect'])} submission(s) already graded, 0 to go" in second.stderr
    assert len(second.stdout.splitlines()) == len(batch["expect"])  # --json still reports every submission
    assert [p.stat().st_mtime_ns for p in results] == stamps
    assert (tmp_path / "g.csv").read_text() == table
    damaged = next(p for p in results if p.name.endswith("_notes.txt.json"))  # graded again without a runner
    damaged.write_text('{"submission": 5}')
    third = run_grader(*again)
    assert third.returncode == 0 and "1 to go" in third.stderr, third.stderr
    assert json.loads(damaged.read_text())["submission"] == str(batch["subs"] / "notes.txt")


def test_shards_merge_to_the_full_table(batch, tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("correct.ipynb", "unattempted.ipynb", "notes.txt", "truncated.ipynb"):
        shutil.copy(batch["subs"] / name, subs / name)
    for k in (1, 2):
        proc = run_grader(str(subs), "--shard", f"{k}/2", "--results", str(tmp_path / f"shard{k}"),
                          "--timeout", TIMEOUT)
        assert proc.returncode == 0, proc.stderr
    assert [len(list((tmp_path / f"shard{k}").glob("*.json"))) for k in (1, 2)] == [2, 2]
    merged = run_grader("--merge", str(tmp_path / "shard1"), str(tmp_path / "shard2"), "--out",
                        str(tmp_path / "merged.csv"))
    assert merged.returncode == 0, merged.stderr
    rows = (tmp_path / "merged.csv").read_text().splitlines()
    correct = next(r.split(",") for r in rows if "correct.ipynb" in r)
    assert len(rows) == 5 and correct[3] == correct[7] != "0"  # total == provisional (after days late, penalty, score)


@pytest.mark.parametrize("args, words", [
    (["/no/such/folder"], "does not exist"),
    ([], "no submissions given"),
    (["--shard", "3/2", "."], "--shard must look like K/N"),
    (["--jobs", "0", "."], "--jobs must be at least 1"),
    (["--memory", "0", "."], "--memory is in GiB"),
    (["--merge", "/no/such/results"], "is not a results folder"),
])
def test_usage_errors_exit_2_with_one_sentence(args, words, tmp_path):
    proc = run_grader(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert words in proc.stderr and "Traceback" not in proc.stderr


def test_as_a_normal_user_where_the_machine_allows(tmp_path):
    """The same grader run by an unprivileged user: bubblewrap's user-namespace mode."""
    if os.geteuid() != 0:
        pytest.skip("already a normal user: the batch above covered it")
    probe = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                            "from course_utils.grading.sandbox import sandbox; print(sandbox.detect().mode)"],
                           check=False, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd="/")
    if probe.stdout.strip() != "user":
        pytest.skip("a normal user cannot run the sandbox on this machine (its Python lives in root's home): "
                    + (probe.stdout + probe.stderr).strip()[-160:])
    import tempfile

    import nbformat

    from grading_corpus import SWAPPED_MUL, submission

    tmp_path = Path(tempfile.mkdtemp(prefix="grade-as-user-"))  # pytest's own folders are root-only
    os.chmod(tmp_path, 0o777)
    subs = tmp_path / "subs"
    subs.mkdir(mode=0o755)
    nbformat.write(submission("02", {"mul_answer": SWAPPED_MUL}), subs / "s.ipynb")
    proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m",
                           "course_utils.grade", str(subs), "--json", "--timeout", TIMEOUT], check=False, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path)), timeout=600)
    shutil.rmtree(tmp_path, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    assert row["exercises"]["mul"]["points"] == 1
    assert "without sandbox" not in " ".join(row["flags"]), row["flags"]


def test_dashboard_in_chromium(batch):
    """The --report page opens from a file, offline: plots there, numbers as in the CSV, names shown as text."""
    import csv
    import statistics

    if not os.path.exists("/usr/bin/chromium"):
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing at /usr/bin/chromium: ./course test should have installed it.")
        pytest.skip("needs Chromium at /usr/bin/chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    out = batch["base"] / "out"
    with open(out / "grades.csv", newline="") as f:
        table = list(csv.DictReader(f))
    graded = [r for r in table if r["status"] == "graded"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        outside, dialogs = [], []
        page.on("request", lambda r: not r.url.startswith("file://") and outside.append(r.url))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto((out / "report.html").as_uri())
        page.wait_for_load_state("load")
        sections = page.locator("section.assignment")
        assert sections.count() == len({r["assignment"] for r in graded}) > 0
        for i in range(sections.count()):
            section = sections.nth(i)
            name = section.get_attribute("data-assignment")
            rows = [r for r in graded if r["assignment"] == name]
            box = section.locator("figure svg").first.bounding_box()
            assert box and box["width"] > 100 and box["height"] > 50, f"{name}: no histogram drawn"
            for tr in section.locator("table.stats tr[data-exercise]").all():
                gid = tr.get_attribute("data-exercise")
                scores = [float(r[gid]) for r in rows if r[gid] != ""]
                cells = [c.strip() for c in tr.locator("td").all_inner_texts()]
                expected = [gid, None, str(len(scores)), f"{statistics.fmean(scores):.2f}",
                            f"{statistics.median(scores):g}"]
                assert [c for c, e in zip(cells, expected) if e is not None] == [e for e in expected if e], (gid, cells)
                top = float(cells[1])
                assert [int(c) for c in cells[5:8]] == [sum(s >= top for s in scores),
                                                        sum(0 < s < top for s in scores), sum(s <= 0 for s in scores)]
        attention = page.locator("#attention").inner_text()
        assert HTML_NAME in attention and page.locator("#attention img").count() == 0
        for r in table:
            if r["status"] not in ("graded",):
                assert os.path.basename(r["submission"]) in attention, r["submission"]
        pairs = [[c.strip() for c in tr.locator("td").all_inner_texts()]
                 for tr in page.locator("#similarity table.pairs tr").all()[1:]]
        assert pairs, "the corpus has copies of one solution: some pair must be flagged"
        assert len({frozenset(p[1:3]) for p in pairs}) == len(pairs), "a pair is listed twice"
        shares = [int(p[0].rstrip("%")) for p in pairs]
        assert shares == sorted(shares, reverse=True)
        href = page.locator("#similarity table.pairs a").first.get_attribute("href")
        page.goto((out / href.split("#")[0]).as_uri() + "#" + href.split("#")[1])
        assert page.locator(f"#{href.split('#')[1]}").count() == 1, href
        browser.close()
    assert not outside and not dialogs, (outside, dialogs)


def test_two_files_whose_names_differ_by_a_control_character_stay_two_rows(tmp_path):
    """Issue 38, item 6: ``alice<DEL>.ipynb`` next to ``alice.ipynb``: two rows, two names, two feedback files."""
    import csv

    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "alice.ipynb").write_text('{"cells": ')  # rows without running anything: both are not notebooks
    (subs / os.fsdecode(b"alice\x7f.ipynb")).write_text("[1, 2]")
    proc = run_grader(str(subs), "--out", str(tmp_path / "grades.csv"), "--feedback-dir", str(tmp_path / "fb"))
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "grades.csv", newline="") as f:
        names = [os.path.basename(r["submission"]) for r in csv.DictReader(f)]
    assert sorted(names) == ["alice.ipynb", "alice\\x7f.ipynb"]
    texts = [p.read_text() for p in (tmp_path / "fb").iterdir()]
    assert len(texts) == 2 and sum("truncated or invalid JSON" in t for t in texts) == 1


@pytest.mark.parametrize("store", [False, True])
def test_only_files_named_like_notebooks_warm_a_slot(tmp_path, monkeypatch, store):
    """A zygote imports torch (about 1.5 CPU-s): a folder of notes, or a resume whose only file to grade again is a
    text file, starts none; one notebook among notes at --jobs 2 starts one slot, not two."""
    from course_utils.grading import batch, cli
    from course_utils.grading.sandbox import zygote

    warmed = []
    monkeypatch.setattr(cli, "cap_judge_memory", lambda extra: None)  # never cap the test process (conftest checks)
    monkeypatch.setattr(zygote, "warm_up", lambda mode, memory, count, slots: warmed.append(count))
    monkeypatch.setattr(cli, "grade_batch", lambda todo, assignments, options, *a, **k: batch.warm_slots(
        options, batch.notebooks_by_name(path for path, _ in todo)))  # the batch's own warm-up, nothing graded

    (tmp_path / "notes.txt").write_text("my notes")
    (tmp_path / "README.md").write_text("# read me")
    out = ["--out", str(tmp_path / "grades.csv")] if store else []
    assert cli.main([str(tmp_path), "--jobs", "2", "--no-sandbox", *out]) == 0
    assert warmed == []
    shutil.copy(ROOT / "solutions" / "02_exercises.ipynb", tmp_path / "a.ipynb")
    assert cli.main([str(tmp_path), "--jobs", "2", "--no-sandbox", *out]) == 0
    assert warmed == ([1] if store else [1, 1])  # without a store the command line warms first (the batch's
    # own call then finds that slot started)


@pytest.mark.parametrize("store", [False, True])
def test_without_a_result_store_the_slots_start_before_the_course_is_read(tmp_path, monkeypatch, capsys, store):
    """No result store can leave a listed file ungraded, so the command line starts the slots' zygotes before it
    reads the course (their import of torch overlaps it: issue 48 P3); with a store, a resume may have nothing to
    grade, so they start only in the batch, once there is work. A usage error after an early start ends them."""
    from course_utils.grading import cli
    from course_utils.grading.sandbox import zygote

    calls = []
    monkeypatch.setattr(cli, "cap_judge_memory", lambda extra: None)  # never cap the test process (conftest checks)
    monkeypatch.setattr(zygote, "warm_up", lambda mode, memory, count, slots: calls.append(("warm", count, slots)))
    monkeypatch.setattr(zygote, "close_all", lambda: calls.append("close"))
    read = cli.load_assignments
    monkeypatch.setattr(cli, "load_assignments", lambda *a, **k: (calls.append("read"), read(*a, **k))[1])
    monkeypatch.setattr(cli, "grade_batch", lambda todo, *a, **k: calls.append(("batch", len(todo))))
    for name in ("a", "b", "c"):
        shutil.copy(ROOT / "solutions" / "02_exercises.ipynb", tmp_path / f"{name}.ipynb")
    out = ["--out", str(tmp_path / "grades.csv")] if store else []
    assert cli.main([str(tmp_path), "--jobs", "2", "--no-sandbox", *out]) == 0
    assert calls == (["read", ("batch", 3)] if store else [("warm", 2, 2), "read", ("batch", 3)])
    calls.clear()
    assert cli.main([str(tmp_path), "--jobs", "2", "--no-sandbox", "--assignment", "nope", *out]) == 2
    assert calls == (["read", "close"] if store else [("warm", 2, 2), "read", "close"])
