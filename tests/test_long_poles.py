"""tests/conftest.py hands the longest test files to ``./course test``'s workers first (issue 52, item 4)."""
import json
from types import SimpleNamespace

from conftest import LONG_POLES, ROOT, long_poles_first, pytest_runtest_logreport


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
        pytest_runtest_logreport(SimpleNamespace(nodeid="tests/test_a.py::t", when=when, start=start, stop=start + 0.5))
    pytest_runtest_logreport(SimpleNamespace(nodeid="collecting", when="collect"))  # a collect report: no times
    assert [json.loads(line) for line in timeline.read_text().splitlines()] == [
        {"worker": "gw1", "test": "tests/test_a.py::t", "when": when, "start": start, "stop": start + 0.5}
        for when, start in (("setup", 10.0), ("call", 12.5), ("teardown", 13.0))]
    monkeypatch.delenv("COURSE_TEST_TIMELINE")
    pytest_runtest_logreport(SimpleNamespace(nodeid="tests/test_a.py::u", when="call", start=1.0, stop=2.0))
    assert len(timeline.read_text().splitlines()) == 3  # off unless asked for
