"""Run every class and function a package defines, and every reference its checks hold, through every check.

Run as a script with the student edition's ``course_utils`` first on the path (``tests/test_edition.py``):
``python edition_scan.py [GRADE_ID,...]`` prints one JSON line: how many candidates were tried and every
(exercise, candidate, points) that earned full marks. Each candidate is handed in three ways:

* as itself, under every name the exercise asks for (a reference Function renamed and pasted);
* a function as the forward of a Function whose backward asks autograd for the function's gradient (the
  laziest paste: the backward left to autograd), which may pass only with the checks' flag for it;
* a class that is not a Function, as the base of one (its own ``forward``/``backward`` as staticmethods).

What a candidate is: every class and function defined in a module of the package (private ones too), the
``reference`` and ``also_correct`` of every ``FunctionSpec`` the checks hold, and every module-level callable
of the checks whose name says it is a reference.
"""
from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import sys
import warnings
from collections.abc import Callable

warnings.filterwarnings("ignore")
os.environ.setdefault("MPLBACKEND", "Agg")

import torch  # noqa: E402

import course_utils  # noqa: E402
from course_utils import wire  # noqa: E402
from course_utils.checks import EXERCISES, engine  # noqa: E402
from course_utils.checks.autograd_function import FunctionSpec  # noqa: E402

SKIP_MODULES = ("course_utils.__main__",)
TRACE = bool(os.environ.get("EDITION_SCAN_TRACE"))


def _modules() -> list:
    found = []
    for info in pkgutil.walk_packages(course_utils.__path__, "course_utils."):
        if info.name in SKIP_MODULES:
            continue
        try:
            found.append(importlib.import_module(info.name))
        except Exception:  # a module the edition cannot import (a lesson's tool it lacks): nothing to hand in
            continue
    return found


def candidates() -> dict[str, object]:
    """name -> every class and function the package defines, and the checks' references."""
    found: dict[str, object] = {}
    for module in _modules():
        for name, obj in list(vars(module).items()):
            where = f"{module.__name__}.{name}"
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and getattr(obj, "__module__", "") == module.__name__:
                found[where] = obj
            elif isinstance(obj, FunctionSpec):
                found[f"{where}.reference"] = obj.reference
                for k, other in enumerate(obj.also_correct):
                    found[f"{where}.also_correct[{k}]"] = other
            elif callable(obj) and "reference" in name.lower() and not inspect.ismodule(obj):
                found[where] = obj
    return found


def autograd_backward(fn: Callable) -> type:
    """A Function whose forward is ``fn`` and whose backward asks autograd for ``fn``'s gradient."""

    class Pasted(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            ctx.args = args
            return fn(*args)

        @staticmethod
        def backward(ctx, *grads):
            with torch.enable_grad():
                args = [a.detach().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                        for a in ctx.args]
                out = fn(*args)
                tensors = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
                got = iter(torch.autograd.grad(out, tensors, grads[0], allow_unused=True))
            return tuple(next(got) if isinstance(a, torch.Tensor) and a.requires_grad else None for a in args)

    return Pasted


def as_function(cls: type) -> type | None:
    """A class with forward and backward that is no Function, made into one (its methods as staticmethods)."""
    fwd, bwd = getattr(cls, "forward", None), getattr(cls, "backward", None)
    if not (callable(fwd) and callable(bwd)) or issubclass(cls, torch.autograd.Function):
        return None
    return type(cls.__name__, (torch.autograd.Function,), {"forward": staticmethod(fwd), "backward": staticmethod(bwd)})


def hand_ins(obj: object) -> list[tuple[str, object]]:
    ways: list[tuple[str, object]] = [("as itself", obj)]
    if inspect.isclass(obj):
        made = as_function(obj)
        if made is not None:
            ways.append(("as a Function", made))
    elif callable(obj):
        ways.append(("forward, backward by autograd", autograd_backward(obj)))
    return ways


def _try(ex, request: dict, answer: object) -> tuple[float, float, bool] | None:
    """(points, max, flagged) of one hand-in, or None when the check itself could not run it."""
    namespace = dict.fromkeys(ex.names, answer)
    try:
        facts = engine.probe(ex, namespace, wire.loads(wire.dumps(request)), time_limit=5.0)
        result = engine.assess(ex, wire.loads(wire.dumps(request)), wire.loads(wire.dumps(facts)))
    except Exception:
        return None
    return result.points, result.max, bool(result.flags)


def _run_from(ex, request: dict, tries: list, start: int, out: int) -> None:
    """In a child process: every hand-in from ``start`` on, each announced before and reported after it runs."""
    with os.fdopen(out, "w", buffering=1) as pipe:
        for k in range(start, len(tries)):
            pipe.write(f"start {k}\n")
            pipe.write(f"done {k} {json.dumps(_try(ex, request, tries[k][2]))}\n")
    os._exit(0)


def scan(gid: str, found: dict[str, object]) -> tuple[list[dict], list[str]]:
    """(hand-ins earning full marks, hand-ins that crashed the process) for one exercise.

    Each hand-in runs in a forked child: a raw kernel launcher handed tensors of another shape can corrupt
    memory (Triton's interpreter) and kill the process; that hand-in is recorded as crashed (no marks, as in
    the grader, where a crashed runner scores nothing) and the scan goes on with the next.
    """
    ex = EXERCISES[gid]
    request = engine.make_request(ex, 0)
    tries = [(where, how, answer) for where, obj in found.items() for how, answer in hand_ins(obj)]
    full, crashed, start = [], [], 0
    while start < len(tries):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            _run_from(ex, request, tries, start, write)
        os.close(write)
        current = start
        with os.fdopen(read) as pipe:
            for line in pipe:
                word, k, *rest = line.split(" ", 2)
                current = int(k)
                if word == "done":
                    got = json.loads(rest[0])
                    if got and got[0] >= got[1] > 0:
                        where, how, _ = tries[current]
                        full.append({"exercise": gid, "candidate": where, "how": how,
                                     "points": f"{got[0]:g}/{got[1]:g}", "flagged": got[2]})
                    current += 1
                elif TRACE:
                    print(gid, *tries[current][:2], file=sys.stderr, flush=True)
        _, status = os.waitpid(pid, 0)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and current >= len(tries):
            break
        crashed.append(f"{gid} <- {tries[current][0]} ({tries[current][1]})")
        start = current + 1
    return full, crashed


def main(wanted: list[str]) -> dict:
    found = candidates()
    full, crashed = [], []
    for gid in wanted:
        got, died = scan(gid, found)
        full += got
        crashed += died
    return {"candidates": sorted(found), "tried": len(wanted), "full_marks": full, "crashed": crashed}


if __name__ == "__main__":
    ids = sys.argv[1].split(",") if len(sys.argv) > 1 and sys.argv[1] else list(EXERCISES)
    print(json.dumps(main(ids)))
