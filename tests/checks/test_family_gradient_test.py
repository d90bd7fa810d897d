"""gradient_test's hidden Functions carry no readable hint of which one is buggy (issue 29, item 4).

The red team's answer read each hidden Function's ``backward.__closure__`` for the bug markers and
tested nothing: 4/4. Here the same kind of answer (closures, globals, attributes, names, constants)
must earn 0, the request the runner sees must not name the kinds, and the code must differ per run.
"""
import torch

from check_helpers import ns_from
from course_utils import checks
from course_utils.checks import lesson06
from course_utils.checks.families import gradient_test
from course_utils.grading.grade_file import public
from course_utils.probes.autograd_function import materialize
from course_utils.probes.lesson06 import _function

INTROSPECTION = """
MARKERS = ("wrong", "contiguous", "inplace", "later", "slice", "broadcast", "one_input", "as_strided", "reshape",
           "mul_", "buggy", "bug")
def backward_is_correct(function_class, *inputs):
    b = function_class.backward
    seen = [repr(getattr(c, "cell_contents", None)) for c in (b.__closure__ or ())]
    seen += [repr(v) for k, v in b.__globals__.items() if not k.startswith("__")]
    seen += [repr(v) for v in vars(function_class).values()] + [function_class.__name__, function_class.__module__]
    seen += [repr(b.__code__.co_consts), repr(b.__code__.co_names), repr(b.__code__.co_varnames), b.__qualname__]
    text = " ".join(seen)
    return not any(m in text for m in MARKERS)
"""


def test_reading_closures_globals_attributes_and_names_earns_nothing():
    result = checks.run_check("gradient_test", ns_from(INTROSPECTION))
    assert result.points == 0, result.report()


def request(seed: int) -> dict:
    return checks.engine.make_request(checks.EXERCISES["gradient_test"], seed)


def test_the_runner_sees_no_kind_and_every_backward_has_the_same_vocabulary():
    req = request(3)
    sent = repr(public(req))
    names = [k for k in lesson06.CORRECT | lesson06.BUGGY if k not in ("mul", "exp", "matmul")]  # not torch's words
    assert "_kinds" not in sent and not [kind for kind in names if kind in sent]
    backwards = [_function(item["source"]).backward for item in req["hidden"]]
    assert len({frozenset(b.__code__.co_names) for b in backwards}) == 1
    assert len({frozenset(c for c in b.__code__.co_consts) for b in backwards}) == 1
    assert all(b.__closure__ is None and set(b.__globals__) - {"__builtins__"} == {"torch", "_n", "forward", "backward"}
               for b in backwards)


def test_the_code_is_written_afresh_for_every_run():
    one, two = request(3), request(4)
    by_kind = [dict(zip(r["_kinds"], (i["source"] for i in r["hidden"]))) for r in (one, two)]
    assert all(by_kind[0][k] != by_kind[1][k] for k in by_kind[0])
    assert [i["source"] for i in request(3)["hidden"]] == [i["source"] for i in one["hidden"]]  # per seed


def test_every_generated_function_behaves_as_its_kind():
    """Every correct kind passes gradcheck on its inputs, whichever spelling this run drew."""
    for seed in (1, 2):
        req = request(seed)
        for kind, item in zip(req["_kinds"], req["hidden"]):
            cls = _function(item["source"])
            if kind not in lesson06.CORRECT:
                continue
            args = [materialize(a) for a in item["args"]]
            assert torch.autograd.gradcheck(cls.apply, tuple(args)), kind
    gradient_test.source("exp", torch.Generator().manual_seed(0))  # importable alone
