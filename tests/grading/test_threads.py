"""The judge's entry points from 8 threads at once give the single-thread verdicts, every time.

Grading runs submissions in threads (``--jobs``). A check that seeds or reads the
process-wide RNG (or any other global setting) gives grades that depend on timing:
this once failed a correct ``linear_module`` 312 times out of 400 with two threads.
Facts are collected once per exercise (probe beside the solution, in this thread);
the checks' ``assess`` and ``request`` then run concurrently, as in the judge.
"""
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from check_helpers import EXERCISE_NOTEBOOK, solution_namespace
from course_utils import checks, wire

SEEDS = (3, 11)
THREADS = 8
ROUNDS = 6


def _skewed(obj: object) -> object:
    """The same facts with every floating tensor off by 3%: a wrong answer, as the judge sees it."""
    if isinstance(obj, torch.Tensor):
        return obj * 1.03 if obj.is_floating_point() else obj
    if isinstance(obj, list):
        return [_skewed(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _skewed(v) for k, v in obj.items()}
    return obj


def _verdict(result: checks.Result) -> tuple:
    return result.points, result.status, result.summary, tuple(result.mistakes), tuple(result.flags)


@pytest.fixture(scope="module")
def cases():
    namespaces = {n: solution_namespace(n) for n in sorted(set(EXERCISE_NOTEBOOK.values()))}
    found = []
    for gid, ex in checks.EXERCISES.items():
        for seed in SEEDS:
            request = ex.request(seed)
            facts = wire.loads(wire.dumps(checks.probe(ex, namespaces[EXERCISE_NOTEBOOK[gid]],
                                                       wire.loads(wire.dumps(request)))))
            for kind, f in (("correct", facts), ("wrong", _skewed(facts))):
                found.append((gid, seed, kind, request, f))
    return found


def test_judging_in_threads_matches_judging_alone(cases):
    alone = [_verdict(checks.assess(checks.EXERCISES[g], req, f)) for g, _, _, req, f in cases]
    assert any(v[1] == "passed" for v in alone) and any(v[1] == "failed" for v in alone)
    for (gid, seed, kind, _, _), v in zip(cases, alone):
        if kind == "correct":
            assert v[1] == "passed", (gid, seed, v)
    work = [(i, c) for i, c in enumerate(cases)] * ROUNDS
    with ThreadPoolExecutor(THREADS) as pool:
        got = list(pool.map(lambda item: (item[0], _verdict(checks.assess(checks.EXERCISES[item[1][0]], item[1][3],
                                                                               item[1][4]))), work))
    wrong = [(cases[i][:3], v, alone[i]) for i, v in got if v != alone[i]]
    assert not wrong, f"{len(wrong)} of {len(got)} verdicts changed in threads, e.g. {wrong[0]}"


def test_requests_in_threads_match_requests_alone():
    """The inputs the judge picks from a seed are the same whatever else runs meanwhile."""
    jobs = [(gid, seed) for gid in checks.EXERCISES for seed in SEEDS]
    alone = {job: wire.dumps(checks.EXERCISES[job[0]].request(job[1])) for job in jobs}
    with ThreadPoolExecutor(THREADS) as pool:
        got = list(pool.map(lambda job: (job, wire.dumps(checks.EXERCISES[job[0]].request(job[1]))), jobs * 4))
    assert all(alone[job] == data for job, data in got)


def test_the_global_rng_is_never_touched_by_judging(cases):
    torch.manual_seed(1234)
    state = torch.random.get_rng_state()
    for gid, _, _, req, facts in cases:
        checks.assess(checks.EXERCISES[gid], req, facts)
        checks.EXERCISES[gid].request(5)
    assert torch.equal(torch.random.get_rng_state(), state)
