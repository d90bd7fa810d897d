"""Small helpers for lesson 08: short error messages, and the graphs ``torch.compile`` builds.

``error_summary(fn)`` runs ``fn()`` and returns ``"TypeName: first line(s) of the message"``
(or ``"no error"``), so a notebook can show PyTorch's real message without a long,
machine-specific traceback.

``GraphRecorder`` is a ``torch.compile`` backend that runs like ``"aot_eager"`` (no code
generation) and keeps the three graphs it sees: the one Dynamo captured (``"dynamo"``),
and the forward and backward graphs AOTAutograd derived from it (``"forward"``,
``"backward"``). ``recorder.ops(name)`` lists the operators of one graph in order.
"""
from __future__ import annotations

from collections.abc import Callable

from .errors import CourseError

GRAPH_NAMES = ("dynamo", "forward", "backward")


def error_summary(fn: Callable[[], object], lines: int = 1) -> str:
    """Call ``fn()``; return ``'ErrorType: message'`` cut to its first ``lines`` non-empty lines."""
    if not callable(fn):
        raise CourseError(f"error_summary needs something to call, e.g. lambda: f(x); got {type(fn).__name__}.")
    try:
        fn()
    except Exception as err:  # the point is to show whichever error PyTorch raises
        text = [ln.rstrip() for ln in str(err).splitlines() if ln.strip()]
        message = "\n".join(text[:lines]).replace(" (scroll up for stack trace)", "")
        return f"{type(err).__name__}: {message}"
    return "no error"


def op_name(node) -> str:
    """Readable name of one FX node's operator: 'aten.addmm', 'course.numpy_polyval', 'linear', 'pow'."""
    target = node.target
    if node.op == "call_method":
        return str(target)
    name = str(target) if hasattr(target, "_schema") else getattr(target, "__name__", str(target))
    return name.removesuffix(".default")


class GraphRecorder:
    """A ``torch.compile`` backend that records the graphs and runs them eagerly (like "aot_eager")."""

    def __init__(self) -> None:
        self.graphs: dict = {}

    def __call__(self, gm, example_inputs):
        from functorch.compile import make_boxed_func
        from torch._dynamo.backends.common import aot_autograd

        self.graphs["dynamo"] = gm

        def keep(name):
            def compiler(graph, _inputs):
                self.graphs[name] = graph
                return make_boxed_func(graph.forward)
            return compiler

        return aot_autograd(fw_compiler=keep("forward"), bw_compiler=keep("backward"))(gm, example_inputs)

    def ops(self, name: str) -> list[str]:
        """Operators called by one recorded graph, in order."""
        if name not in GRAPH_NAMES:
            raise CourseError(f"unknown graph {name!r}: choose one of {', '.join(GRAPH_NAMES)}.")
        if name not in self.graphs:
            raise CourseError(f"no {name} graph recorded yet: call the compiled function first"
                              + (" and then .backward()" if name == "backward" else "") + ".")
        nodes = self.graphs[name].graph.nodes
        return [op_name(n) for n in nodes if n.op in ("call_function", "call_method")]
