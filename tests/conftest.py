"""Shared test set-up: the repository root on sys.path; the long poles first; an optional per-worker timeline."""
import json
import os
import resource
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# no student id, whatever this machine remembers (``course_utils.student``): nbval's kernels and every test see the
# default variants, as the committed notebooks store them; set before any kernel or subprocess starts
os.environ["AUTOGRAD_COURSE_NO_STUDENT"] = "1"

# lesson 10's Triton kernels run in Triton's interpreter where there is no GPU; the variable is read
# when triton is imported, so it is set here, before any test module can import it
if "TRITON_INTERPRET" not in os.environ:
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(autouse=True)
def _no_hint_gives_the_answer_away(request, monkeypatch):
    """In tests/checks, every verdict a test builds is read for give-aways (check_helpers.no_give_away)."""
    if "checks" not in Path(str(request.node.path)).relative_to(ROOT).parts[:2]:
        yield
        return
    from check_helpers import no_give_away

    with no_give_away(monkeypatch):
        yield


@pytest.fixture(scope="session")
def variant_runs(tmp_path_factory, worker_id):
    """Check runs of variant answers, each run once per session and shared by every worker (``variant_runs``)."""
    from variant_runs import VariantRuns

    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if worker_id != "master" else base) / "variant-runs"  # the workers' common folder
    folder.mkdir(exist_ok=True)
    return VariantRuns(folder)


def free_port() -> int:
    """A loopback TCP port nobody is listening on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pytest_addoption(parser):
    parser.addoption("--exercise", metavar="ID", help="of the files given, only what exercise ID needs "
                     "(./course test --exercise ID gives the files: course_utils/exercise_tests.py)")


def _only_the_exercise(config, items) -> None:
    """``--exercise ID``: keep the collected tests ``exercise_tests.keep`` chooses, by their parameters' values."""
    from course_utils import exercise_tests

    grade_id = config.getoption("exercise")
    try:
        lesson = exercise_tests.lesson_of(grade_id, ROOT)
    except exercise_tests.UnknownExercise as unknown:
        raise pytest.UsageError(str(unknown)) from None
    kept, dropped = [], []
    for item in items:
        path = Path(str(item.path)).resolve().relative_to(ROOT).as_posix()
        params = getattr(getattr(item, "callspec", None), "params", {})
        name = getattr(item, "originalname", item.name)
        (kept if exercise_tests.keep(grade_id, lesson, path, name, params) else dropped).append(item)
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept


# The files whose tests take longest all together (a fixture of minutes, a notebook with a long cell), longest
# first. ``./course test`` hands whole files to its two workers in the order of the collection
# (``--dist loadscope --no-loadscope-reorder``): these go first, so that none starts late while the other
# worker has nothing left to do; everything else keeps pytest's order. Measure with COURSE_TEST_TIMELINE.
LONG_POLES = (
    "tests/grading/test_nbgrader.py",
    "tests/grading/test_nbgrader_second_half.py",  # slow: CI starts it at once on the other worker; skipped here
    "tests/grading/test_cli.py",
    "notebooks/10_kernels_in_functions.ipynb",
    "tests/checks/test_variants.py",  # not test_hints beside it: it reads the same check runs (variant_runs), later
    "tests/test_colab.py",
    "tests/test_site.py",
    "tests/grading/test_batch.py",
    "tests/checks/test_lesson08.py",
    "tests/test_kernels.py",
    "notebooks/11_fused_loss_capstone.ipynb",
)


def long_poles_first(items: list) -> None:
    """Reorder ``items`` in place: the files of ``LONG_POLES`` first, in its order (a stable sort)."""
    rank = {name: i for i, name in enumerate(LONG_POLES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def _cpu_so_far() -> float:
    """User and system seconds of this process and of its children it has waited for."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timeline_line(report) -> None:
    """With COURSE_TEST_TIMELINE=FILE, each phase of each test is one JSON line: worker, test, phase, outcome, start,
    stop, and the worker's CPU seconds so far, its reaped children's included (``tests/timeline.py`` reads it: a file
    whose wall time far exceeds its CPU time is waiting)."""
    target = os.environ.get("COURSE_TEST_TIMELINE")
    if target and hasattr(report, "start") and not hasattr(report, "node"):  # a worker's report reaching xdist's
        # controller carries its node: the worker has written it
        line = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "master"), "test": report.nodeid, "when": report.when,
                "outcome": report.outcome, "start": round(report.start, 3), "stop": round(report.stop, 3),
                "cpu": round(_cpu_so_far(), 3)}
        if report.when == "setup" and report.nodeid in _CPU_AT_START:
            line["cpu0"] = _CPU_AT_START.pop(report.nodeid)
        with open(target, "a") as out:
            out.write(json.dumps(line) + "\n")


class _Timeline:
    """``timeline_line`` for every test, the notebooks' too (a conftest's own runtest hooks see only its folder)."""

    pytest_runtest_logreport = staticmethod(timeline_line)

    @staticmethod
    def pytest_runtest_logstart(nodeid, location) -> None:
        """The worker's CPU total as a test starts: a worker's first file counts from here (``cpu0``)."""
        _CPU_AT_START[nodeid] = round(_cpu_so_far(), 3)


_CPU_AT_START: dict[str, float] = {}


def pytest_configure(config):
    # a test's own pytest run (test_scaffold's) writes nothing: the run that started first owns the timeline
    owner = os.environ.setdefault("COURSE_TIMELINE_OWNER", str(os.getpid()))
    nested = owner != str(os.getpid()) and not hasattr(config, "workerinput")
    if os.environ.get("COURSE_TEST_TIMELINE") and not nested:
        config.pluginmanager.register(_Timeline(), "course-timeline")


def pytest_collection_modifyitems(config, items):
    """The long poles first; tests marked slow run in CI (CI is set) or with COURSE_SLOW=1, a developer's
    ./course test skips them."""
    if config.getoption("exercise", None):
        _only_the_exercise(config, items)
    long_poles_first(items)
    if os.environ.get("CI") or os.environ.get("COURSE_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow: CI runs it; COURSE_SLOW=1 ./course test runs it here")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _address_space_left_alone():
    """``grading.cli.main`` caps the judge's own address space (``cap_judge_memory``): a test calling it in-process
    must patch that out, or every later test on this worker inherits the cap (Chromium crashed with SIGTRAP and the
    768 GiB map of test_limits failed, tests far from the one that set it)."""
    before = resource.getrlimit(resource.RLIMIT_AS)
    yield
    after = resource.getrlimit(resource.RLIMIT_AS)
    if after != before:
        resource.setrlimit(resource.RLIMIT_AS, before)
        pytest.fail(f"this test capped the test process's address space ({after}, was {before}): patch "
                    "cli.cap_judge_memory when calling cli.main in-process")
