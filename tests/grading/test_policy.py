"""The judge's reading of answer cells: names resolved, reaching for the grader held for review.

Every solution answer must pass untouched (no false holds); each way of reaching the
grader found so far must be held, however it is spelled.
"""
import json

import pytest

from conftest import ROOT
from course_utils.grading.policy import learning_flags, review_reasons


def _answers(folder: str) -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / folder).glob("*_exercises.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            meta = cell["metadata"].get("nbgrader", {})
            if meta.get("solution"):
                found.append((f"{path.name}:{meta['grade_id']}", "".join(cell["source"])))
    return found


@pytest.mark.parametrize("where, source", _answers("solutions") + _answers("exercises"))
def test_solutions_and_stubs_are_never_held(where, source):
    assert review_reasons(source) == [], where
    assert learning_flags(source) == [], where


HELD = {
    "import sys\nsys.modules['course_utils'] = None": "sys",
    "import sys as s\nf = s._getframe(1)": "imports `sys`",
    "import inspect\nf = inspect.currentframe().f_back": "f_back",
    "import gc\n[o for o in gc.get_objects()]": "imports `gc`",
    "from gc import get_objects as walk\nwalk()": "imports `gc`",
    "import builtins\nbuiltins.print = None": "builtins",
    "import ctypes": "ctypes",
    "from course_utils.checks import engine": "course's own package",
    "import course_utils.grading.sandbox.runner as r": "course's own package",
    "import torch\ntorch.allclose = lambda *a, **k: True": "torch.allclose",
    "import torch.nn.functional as F\nF.linear = None": "torch.nn.functional.linear",
    "from torch import autograd as A\nA.gradcheck = lambda *a, **k: True": "torch.autograd.gradcheck",
    "import torch\nsetattr(torch, 'equal', None)": "torch.equal",
    "import torch\nf = getattr(torch, 'al' + 'lclose')": "computed attribute name",
    "import torch\nlib = torch.library.Library('aten', 'IMPL')": "torch.library.Library",
    "from torch.library import Library as L\nL('aten', 'IMPL')": "torch.library.Library",
    "from torch.overrides import TorchFunctionMode\nclass M(TorchFunctionMode): pass": "TorchFunctionMode",
    "class T:\n    def __torch_function__(self, *a): return True": "__torch_function__",
    "x = ().__class__.__base__.__subclasses__()": "__subclasses__",
    "f = (lambda: 0).__globals__": "__globals__",
    "eval('1 + 1')": "eval",
    "exec('x = 1')": "exec",
    "m = __import__('o' + 's')": "__import__",
    "import importlib\nimportlib.import_module('os')": "importlib",
    "print(open('/proc/self/environ').read())": "open",
    "import torch._C": "torch._C",
    "import torch._functorch": "private",
}


@pytest.mark.parametrize("source, phrase", HELD.items())
def test_reaching_for_the_grader_is_held(source, phrase):
    reasons = review_reasons(source)
    assert reasons and any(phrase in r for r in reasons), reasons


NOT_HELD = [
    "import math, torch\nfrom torch import nn\nclass L(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.weight = nn.Parameter(torch.empty(3))\n    def forward(self, input):\n        return input * 2\n",
    "def f(open, eval):\n    return open + eval\n",  # parameters named like builtins
    "import numpy as np\nfrom functools import reduce\nx = getattr(np, 'float64')\n",
    "class Scalar:\n    def __radd__(self, other):\n        return self\n    __rmul__ = __radd__\n",
    "import torch\nx = torch.zeros(3)\nx.data = torch.ones(3)\n",  # an attribute of an object, not of a module
    # torch read inside the index of what is written (vocab_chunked_ce's zloss answer): nothing of torch is written
    "import torch\nx, k = torch.zeros(3), torch.ones(3) > 0\nx[torch.where(k, 1, 0)] -= 0.5\n"
    "x[torch.where(k, 1, 0)] = torch.nn.functional.relu(x)\ndel x[torch.arange(1)]\n",
]


@pytest.mark.parametrize("source", NOT_HELD)
def test_ordinary_code_is_not_held(source):
    assert review_reasons(source) == []


@pytest.mark.parametrize("spelling", [
    "torch.autograd.grad(y, (a2, b2), g)",
    "G(y, (a2, b2), g)",
    "AG.grad(y, (a2, b2), g)",
    "grad_fn(y, (a2, b2), g)",
    "torch.func.vjp(lambda a: a, a2)[1](g)",
])
def test_autograd_in_backward_is_found_however_it_is_spelled(spelling):
    source = ("import torch\nfrom torch.autograd import Function, grad as G\nimport torch.autograd as AG\n"
              "grad_fn = torch.autograd.grad\n"
              "class Mul(Function):\n    @staticmethod\n    def backward(ctx, g):\n        a2, b2 = ctx.saved_tensors\n"
              "        y = a2 * b2\n        return " + spelling + "\n")
    flags = learning_flags(source)
    assert flags and "Mul.backward calls autograd itself" in flags[0], flags


ROUNDS = 10  # per thread: the old code failed in every run of this test at 10


class _Cycle:
    """Garbage whose collection runs Python code: in the middle of ``ast.parse`` that switches threads."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        sum(range(50))


def test_reading_answers_from_many_threads_at_once_gives_the_single_thread_reading():
    """Issue 38, item 5: at --jobs 2 a correct answer got 'SystemError: AST constructor recursion depth mismatch'
    (CPython gh-106905, ast.parse from several threads), 0 points, 1 run in 4."""
    import gc
    import sys
    import threading

    source = ("import torch\nclass Mul(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, g):\n"
              "        return " + "(" * 30 + "g" + " * 2)" * 30 + "\n") * 10
    expected = (learning_flags(source), review_reasons(source))
    got, errors = [], []

    def read() -> None:
        try:
            for _ in range(ROUNDS):
                junk = [_Cycle() for _ in range(20)]
                del junk
                got.append((learning_flags(source), review_reasons(source)))
        except Exception as exc:  # any failure is the finding
            errors.append(f"{type(exc).__name__}: {exc}")

    interval, threshold = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can: the race shows in every run
    gc.set_threshold(50)
    try:
        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*threshold)
    assert not errors, errors[:3]
    assert got == [expected] * 8 * ROUNDS


def test_the_judge_parses_python_only_through_the_serialised_parse():
    """What runs in the judge's threads (grading, checks) calls ast.parse in one place: ``policy.parse``."""
    calls = [f"{p.relative_to(ROOT)}" for folder in ("course_utils/grading", "course_utils/checks")
             for p in sorted((ROOT / folder).rglob("*.py")) if "ast.parse(" in p.read_text()]
    assert calls == ["course_utils/grading/policy.py"], calls
