"""The runner session's trust rules on lists of messages, with no process (issue 42, item 1).

Each test feeds a ``RunnerSession`` the messages a runner (honest, or one whose answer code forges
frames) would send, then ends the start with an ``Outcome`` as ``Worker.wait`` would, and reads what
counts. The verdicts are stand-ins: a facts message's ``facts`` is the score it asks for.
"""
import pytest

from course_utils import checks
from course_utils.grading.sandbox.session import (
    BACKSTOP,
    CONFIRM_GRACE,
    NOT_STARTED,
    REASONS,
    RUNNER_WALL,
    STARTUP,
    Deadline,
    Outcome,
    RunnerSession,
)

POINTS = {"a": 2.0, "b": 3.0, "c": 1.0}
TIMEOUT = 10.0
STEP = BACKSTOP * TIMEOUT  # the judge's clock per exercise: a backstop after the runner's own limits


def verdict(message: dict) -> checks.Result:
    gid, points = message["exercise"], float(message["facts"])
    return checks.Result(gid, points, POINTS[gid], "passed" if points == POINTS[gid] else "failed")


def facts(gid: str, points: float, notes: tuple[str, ...] = ()) -> dict:
    return {"kind": "facts", "exercise": gid, "facts": points, "cell_errors": list(notes), "printed": 0,
            "fake_output": False}


def begin(gid: str) -> dict:
    return {"kind": "begin", "exercise": gid}


READY, DONE = {"kind": "ready"}, {"kind": "done"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(messages: list, outcome: Outcome = Outcome.DONE, session: RunnerSession | None = None,
        clock: Clock | None = None) -> RunnerSession:
    """One runner start of ``session`` (a fresh one by default) that sent ``messages`` and ended with ``outcome``."""
    session = session or RunnerSession(dict(POINTS), TIMEOUT, verdict, clock or Clock())
    session.start(session.clock())
    for message in messages:
        session.on_message(message)
    session.settle(outcome)
    return session


def honest(*scores: tuple[str, float]) -> list:
    out: list = [READY]
    for gid, points in scores:
        out += [begin(gid), facts(gid, points)]
    return out + [DONE]


def test_an_honest_runner_confirms_each_result_by_moving_on():
    s = run(honest(("a", 2), ("b", 1), ("c", 1)))
    assert s.finished and {g: r.points for g, r in s.results.items()} == {"a": 2, "b": 1, "c": 1}
    assert not s.flags() and not s.broken and not s.review()


@pytest.mark.parametrize("forged", [
    "not a dict", {"kind": 3}, {"kind": "points", "exercise": "a"}, begin("zz"), facts("zz", 1),
    {"kind": "facts", "exercise": "a", "facts": 2, "cell_errors": [], "printed": "0", "fake_output": False},
    {"kind": "facts", "exercise": "a", "facts": 2, "cell_errors": [1], "printed": 0, "fake_output": False},
    {"kind": "audit", "exercise": None, "reason": "x"},
])
def test_a_forged_message_is_counted_and_changes_nothing(forged):
    s = run([READY, begin("a"), forged, facts("a", 1), begin("b"), forged, facts("b", 3), DONE])
    assert s.counts.forged == 2 and s.results["a"].points == 1 and s.results["b"].points == 3
    assert s.flags() == ["2 message(s) on the grader's channel were not valid and were ignored"]


def test_a_result_followed_by_the_end_of_the_process_never_counts():
    """Answer code writes a full-score frame, then os._exit: the result was never followed by the runner."""
    s = run([READY, begin("a"), facts("a", 2)], Outcome.DIED)
    assert s.results["a"].points == 0 and s.results["a"].problem == f"Your code {REASONS[Outcome.DIED]}."
    assert s.counts.unconfirmed == 1 and "a" in s.broken and not s.finished
    assert s.flags() == ["1 result message(s) were followed by the end of the process, not by the grader's next "
                         "step (forged, then exit?): not counted"]
    assert s.todo() == ["b", "c"]


def test_a_result_is_confirmed_by_the_next_begin_or_by_done():
    s = RunnerSession(dict(POINTS), TIMEOUT, verdict, Clock())
    s.start(s.clock())
    for message in (READY, begin("a"), facts("a", 2)):
        s.on_message(message)
    assert s.pending is not None and not s.results
    s.on_message(begin("b"))
    assert s.pending is None and s.results["a"].points == 2
    s.on_message(facts("b", 3))
    s.on_message(DONE)
    assert s.results["b"].points == 3


def test_a_begin_for_the_same_exercise_does_not_confirm_its_result():
    s = run([READY, begin("a"), facts("a", 2), begin("a")], Outcome.DIED)
    assert s.results["a"].points == 0 and s.counts.unconfirmed == 1


def test_two_results_before_moving_on_keep_the_lower():
    s = run([READY, begin("a"), facts("a", 2), facts("a", 1), facts("a", 2), begin("b"), facts("b", 3), DONE],
            Outcome.DONE)
    assert s.results["a"].points == 1 and s.counts.duplicate == 2
    assert "2 extra result message(s) for one exercise (forged?); the lowest score was kept" in s.flags()


def test_a_result_for_another_exercise_while_one_is_pending_is_ignored():
    s = run([READY, begin("a"), facts("a", 1), facts("b", 3), begin("b"), facts("b", 0), DONE])
    assert s.results["a"].points == 1 and s.results["b"].points == 0 and s.counts.duplicate == 1


def test_a_second_confirmed_result_for_an_exercise_keeps_the_lower():
    lower = run([READY, begin("a"), facts("a", 2), begin("b"), facts("a", 1), DONE])
    assert lower.results["a"].points == 1 and lower.counts.duplicate == 1
    higher = run([READY, begin("a"), facts("a", 1), begin("b"), facts("a", 2), DONE])
    assert higher.results["a"].points == 1 and higher.counts.duplicate == 1


def test_the_notes_of_the_confirmed_result_are_kept():
    s = run([READY, begin("a"), facts("a", 2, ("cell 3 raised",)), DONE])
    assert s.notes == {"a": ["cell 3 raised"]}


def test_deadlines_ready_lowers_hard_and_a_late_second_ready_moves_nothing():
    clock = Clock()
    s = RunnerSession(dict(POINTS), TIMEOUT, verdict, clock)
    deadline = s.start(clock.now)
    assert deadline == Deadline(1000 + STARTUP + 3 * STEP, 1000 + STARTUP + 3 * STEP)
    clock.now = 1002.0
    s.on_message(READY)
    assert deadline == Deadline(1002 + 3 * STEP, 1002 + STEP) and deadline.due() == 1002 + STEP
    clock.now = 1008.0
    s.on_message(READY)  # written by answer code to buy time: ignored
    assert deadline == Deadline(1002 + 3 * STEP, 1002 + STEP)


def test_a_result_grants_the_grace_once_per_exercise_and_confirming_it_the_next_step():
    clock = Clock()
    s = RunnerSession(dict(POINTS), TIMEOUT, verdict, clock)
    deadline = s.start(clock.now)
    s.on_message(READY)
    hard = deadline.hard
    s.on_message(begin("a"))
    clock.now = hard - 1  # a late result, on a loaded machine: time to confirm it
    s.on_message(facts("a", 2))
    assert deadline == Deadline(hard - 1 + CONFIRM_GRACE, hard - 1 + CONFIRM_GRACE)
    clock.now = hard + 1
    s.on_message(begin("b"))
    assert s.results["a"].points == 2 and deadline.step == hard + 1 + STEP and deadline.due() == hard - 1 + 5
    s.on_message(facts("a", 2))  # another result for a: pending again, but no second grace
    assert deadline.hard == hard - 1 + CONFIRM_GRACE


def test_the_judges_clock_is_a_backstop_after_both_of_the_runners_own_limits():
    """Issue 48, item 5: the runner stops a looping exercise itself (CPU time ``--timeout``, clock ``RUNNER_WALL``
    times it) before the judge's step, so load never decides which limit fires and what the answer scores."""
    clock = Clock()
    s = RunnerSession(dict(POINTS), TIMEOUT, verdict, clock)
    deadline = s.start(clock.now)
    s.on_message(READY)
    assert deadline.step - clock.now == STEP > RUNNER_WALL * TIMEOUT > TIMEOUT
    assert STEP - RUNNER_WALL * TIMEOUT >= TIMEOUT  # a whole --timeout between the runner's clock and the judge's


def test_a_begin_for_a_confirmed_exercise_does_not_move_the_blame():
    s = run([READY, begin("a"), facts("a", 2), begin("b"), begin("a")], Outcome.TIMEOUT)
    assert s.results["a"].points == 2 and s.results["b"].points == 0 and s.results["b"].mistakes == ["timeout"]


def test_a_runner_broken_after_a_confirmed_result_skips_that_cell_next_time():
    s = run([READY, begin("a"), facts("a", 2), DONE], Outcome.DIED)
    assert s.results["a"].points == 2 and s.broken == {"a"} and s.todo() == ["b", "c"]  # no one blamed yet
    s = run([READY, begin("a"), facts("a", 2), begin("b"), begin("a")], Outcome.DIED)
    assert s.broken == {"b"} and s.results["b"].points == 0  # current stays b: a's begin was ignored
    s = RunnerSession(dict(POINTS), TIMEOUT, verdict, Clock())
    s.results["a"] = verdict(facts("a", 2))
    s = run([READY, {"kind": "audit", "exercise": "a", "reason": "opened a socket"}], Outcome.DIED, s)
    assert s.results["b"].points == 0  # nothing begun: the first without a result is blamed
    assert s.review() == ["answer code of a opened a socket (seen at run time)"]


def test_a_runner_that_never_got_ready_says_so():
    s = run([], Outcome.DIED)
    assert s.results["a"].problem == f"Your code {NOT_STARTED}." and s.results["a"].mistakes == ["raised"]
    s = run([], Outcome.TIMEOUT)
    assert s.results["a"].problem == f"Your code {REASONS[Outcome.TIMEOUT]}."


@pytest.mark.parametrize("outcome", [Outcome.GARBLED, Outcome.UNREADABLE])
def test_a_broken_channel_counts_as_forged(outcome):
    s = run([READY, begin("b")], outcome)
    assert s.counts.forged == 1 and s.results["b"].problem == f"Your code {REASONS[outcome]}." and "b" in s.broken


def test_a_finished_session_ignores_how_the_runner_ended():
    s = run(honest(("a", 2), ("b", 3), ("c", 1)), Outcome.GARBLED)
    assert s.counts.forged == 0 and s.finished


def test_the_review_lists_at_most_five_audit_events_then_a_count():
    audits = [{"kind": "audit", "exercise": "", "reason": f"did thing {i}"} for i in range(7)]
    s = run([READY, *audits, *honest(("a", 2), ("b", 3), ("c", 1))[1:]])
    assert s.review()[0] == "answer code of the notebook did thing 0 (seen at run time)"
    assert len(s.review()) == 6 and s.review()[-1] == "and 2 more seen at run time"
