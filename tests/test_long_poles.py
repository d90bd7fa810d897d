"""tests/conftest.py hands the longest test files to ``./course test``'s workers first (issue 52, item 4)."""
import json
from types import SimpleNamespace

from conftest import LONG_POLES, ROOT, long_poles_first, timeline_line


def test_every_long_pole_is_a_file_of_the_suite():
    """A long pole renamed or moved would silently start last again."""
    assert len(set(LONG_POLES)) == len(LONG_POLES)
    missing = [name for name in LONG_POLES if not (ROOT / name).is_file()]
    assert not missing, f"tests/conftest.py LONG_POLES names files that do not exist: {missing}"


def test_long_poles_come_first_in_their_order_and_the_rest_keeps_its_order():
    ids = ["tests/test_a.py::t1", f"{LONG_POLES[2]}::Cell 0", "tests/test_a.py::t2", f"{LONG_POLES[0]}::x",
           "tests/test_b.py::t", f"{LONG_POLES[2]}::Cell 1", f"{LONG_POLES[0]}::y"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    long_poles_first(items)
    assert [i.nodeid for i in items] == [f"{LONG_POLES[0]}::x", f"{LONG_POLES[0]}::y", f"{LONG_POLES[2]}::Cell 0",
                                         f"{LONG_POLES[2]}::Cell 1", "tests/test_a.py::t1", "tests/test_a.py::t2",
                                         "tests/test_b.py::t"]


def test_the_timeline_records_each_phase_with_its_worker(tmp_path, monkeypatch):
    timeline = tmp_path / "timeline.jsonl"
    monkeypatch.setenv("COURSE_TEST_TIMELINE", str(timeline))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    for when, start in (("setup", 10.0), ("call", 12.5), ("teardown", 13.0)):
        timeline_line(SimpleNamespace(nodeid="tests/test_a.py::t", when=when, outcome="passed", start=start,
                                                 stop=start + 0.5))
    timeline_line(SimpleNamespace(nodeid="collecting", when="collect"))  # a collect report: no times
    written = [json.loads(line) for line in timeline.read_text().splitlines()]
    cpu = [line.pop("cpu") for line in written]
    assert written == [
        {"worker": "gw1", "test": "tests/test_a.py::t", "when": when, "outcome": "passed", "start": start,
         "stop": start + 0.5}
        for when, start in (("setup", 10.0), ("call", 12.5), ("teardown", 13.0))]
    assert 0 < cpu[0] <= cpu[1] <= cpu[2]  # the worker's running CPU total
    monkeypatch.delenv("COURSE_TEST_TIMELINE")
    timeline_line(SimpleNamespace(nodeid="tests/test_a.py::u", when="call", outcome="passed", start=1.0,
                                             stop=2.0))
    assert len(timeline.read_text().splitlines()) == 3  # off unless asked for


def test_the_timeline_report_shows_each_workers_files_and_the_idle_end():
    from timeline import report, spans

    def line(worker, test, start, stop, outcome="passed"):
        return {"worker": worker, "test": test, "when": "call", "outcome": outcome, "start": start, "stop": stop}

    lines = [line("gw0", "a.py::x", 100, 150), line("gw1", "b.ipynb::Cell 0", 100, 110),
             line("gw1", "b.ipynb::Cell 1", 110, 130, "failed"), line("gw0", "c.py::y", 150, 160),
             line("gw1", "a.py::z", 131, 132)]
    assert spans(lines) == {"gw0": [("a.py", 0, 50, 50), ("c.py", 50, 60, 10)],
                            "gw1": [("b.ipynb", 0, 30, 30), ("a.py", 31, 32, 1)]}
    text = report(lines)
    assert text.startswith("run: 60 s; idle at the end: 28 s\nFAILED b.ipynb::Cell 1\ngw0: ends at 60 s, 2 files")


def test_the_cpu_per_file_is_the_difference_of_the_workers_running_total():
    from timeline import cpu_per_file, waiting

    def line(worker, test, stop, cpu):
        return {"worker": worker, "test": test, "when": "call", "outcome": "passed", "start": stop - 1, "stop": stop,
                "cpu": cpu}

    lines = [dict(line("gw0", "a.py::x", 10, 5.0), cpu0=1.0), line("gw0", "a.py::y", 30, 7.0),
             line("gw0", "b.py::z", 40, 16.0), line("gw1", "c.py::w", 10, 3.0), line("gw1", "c.py::v", 50, 4.5)]
    assert cpu_per_file(lines) == {"a.py": 6.0, "b.py": 9.0, "c.py": 1.5}  # a.py from its start (cpu0)
    assert waiting(lines).splitlines()[1].endswith("c.py")  # 2 s busy, 1.5 s of CPU: the only file that waits
