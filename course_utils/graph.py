"""Draw autograd's backward graph with torchviz, deterministically.

torchviz names every node by ``id()`` of a Python object, i.e. a memory address, so its
DOT source changes from run to run. We rename nodes in order of first appearance, which
makes the same computation give byte-identical DOT (and SVG) in any process, so notebook
outputs can be compared by nbval. Custom ``autograd.Function`` nodes get their own colour
and a ``(custom Function)`` line. Without Graphviz's ``dot`` the same call shows a text
tree of the same graph plus a one-line install hint.
"""
from __future__ import annotations

import html
import re
import shutil
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from .errors import CourseError, type_name

with warnings.catch_warnings():  # torchviz 0.0.3 imports distutils, deprecated since 3.10
    warnings.simplefilter("ignore", DeprecationWarning)
    import torchviz

CUSTOM_FILL = "#ffd166"
CUSTOM_BORDER = "#b5179e"
INSTALL_HINT = (
    "Graphviz's `dot` was not found, so this is the text view; for pictures install Graphviz "
    "(Debian/Ubuntu: apt-get install graphviz, macOS: brew install graphviz, conda: conda install graphviz)."
)



def dot_available() -> bool:
    """True when Graphviz's ``dot`` program can be found on PATH."""
    return shutil.which("dot") is not None


def is_custom(fn: object) -> bool:
    """True for the graph node of a user-written ``torch.autograd.Function``."""
    return isinstance(fn, torch.autograd.function.BackwardCFunction)


def _outputs(var: object, caller: str) -> tuple[torch.Tensor, ...]:
    """Validate what the user passed and return it as a tuple of tensors with a graph."""
    items = var if isinstance(var, (tuple, list)) else (var,)
    if len(items) == 0:
        raise CourseError(f"{caller}() got an empty {type_name(var)}: pass at least one output tensor.")
    for t in items:
        if not isinstance(t, torch.Tensor):
            raise CourseError(
                f"{caller}() expects a tensor (or a tuple of tensors) computed from inputs with "
                f"requires_grad=True, but got a {type_name(t)}."
            )
        if t.grad_fn is None:
            if t.requires_grad:
                raise CourseError(
                    f"{caller}() got a leaf tensor of shape {tuple(t.shape)}: it was created, not computed, "
                    "so it has no backward graph; draw a result computed from it, such as (x * 2).sum()."
                )
            raise CourseError(
                f"{caller}() got a tensor with no grad_fn: nothing it came from requires grad, so autograd "
                "recorded no graph; create the inputs with requires_grad=True (and not under torch.no_grad())."
            )
    return tuple(items)


def _custom_names(outputs: tuple[torch.Tensor, ...]) -> set[str]:
    """Class names of the custom Function nodes reachable from ``outputs``."""
    names: set[str] = set()
    for fn in _walk(outputs):
        if is_custom(fn):
            names.add(type(fn).__name__)
    return names


def _walk(outputs: tuple[torch.Tensor, ...]) -> list[object]:
    """Every graph node reachable from ``outputs``, depth first, each once."""
    order: list[object] = []
    seen: set[int] = set()
    stack = [t.grad_fn for t in reversed(outputs)]
    keep = []  # keep Python wrappers alive so id() stays unique during the walk
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        keep.append(fn)
        order.append(fn)
        stack.extend(u for u, _ in reversed(getattr(fn, "next_functions", ())))
    return order


_LINE = re.compile(r"^\t(\d+)(?: -> (\d+))?")


def _rename_nodes(body: list[str]) -> list[str]:
    """Replace address-based node names by n0, n1, ... in order of first appearance."""
    names: dict[str, str] = {}

    def name(token: str) -> str:
        return names.setdefault(token, f"n{len(names)}")

    out = []
    for line in body:
        m = _LINE.match(line)
        if not m:
            out.append(line)
            continue
        head = "\t" + name(m.group(1)) + (f" -> {name(m.group(2))}" if m.group(2) else "")
        out.append(head + line[m.end():])
    return out


def _mark_custom(body: list[str], custom: set[str]) -> list[str]:
    """Give nodes of custom Functions their own colour and a '(custom Function)' line."""
    if not custom:
        return body
    pattern = re.compile(r'^(\tn\d+) \[label="?(' + "|".join(map(re.escape, sorted(custom))) + r')"?\]$')
    out = []
    for line in body:
        m = pattern.match(line.rstrip("\n"))
        if m:
            line = (
                f'{m.group(1)} [label="{m.group(2)}\\n(custom Function)" fillcolor="{CUSTOM_FILL}" '
                f'color="{CUSTOM_BORDER}" penwidth=2]\n'
            )
        out.append(line)
    return out


def _drop_custom_saved(body: list[str]) -> list[str]:
    """Remove torchviz's always-on saved-tensor nodes of custom Functions (show_saved=False)."""
    out = []
    for line in body:
        if "[dir=none]" in line:
            continue
        if "fillcolor=orange" in line:
            continue
        out.append(line)
    return out


def backward_graph(
    var: object,
    params: Mapping[str, torch.Tensor] | None = None,
    show_saved: bool = False,
    caller: str = "backward_graph",
) -> torchviz.dot.Digraph:
    """The backward graph of ``var`` as a graphviz ``Digraph`` with deterministic node names.

    ``params`` names leaf tensors (``{"a": a}``); ``show_saved`` adds what each node saved
    for backward (orange boxes).
    """
    outputs = _outputs(var, caller)
    params = _check_params(params, caller)
    target = outputs if len(outputs) > 1 else outputs[0]
    try:
        dot = torchviz.make_dot(target, params=dict(params), show_attrs=show_saved, show_saved=show_saved)
    except RuntimeError as exc:
        if "freed" in str(exc) or "second time" in str(exc):
            raise CourseError(
                "The graph's saved tensors were already freed by .backward(): draw the graph before calling "
                "backward(), or call backward(retain_graph=True)."
            ) from None
        raise
    body = _rename_nodes(dot.body)
    if not show_saved:
        body = _drop_custom_saved(body)
    dot.body = _mark_custom(body, _custom_names(outputs))
    return dot


def _check_params(params: object, caller: str) -> Mapping[str, torch.Tensor]:
    if params is None:
        return {}
    if not isinstance(params, Mapping) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in params.items()
    ):
        raise CourseError(f"{caller}() expects params as a dict of name -> tensor, e.g. {{'a': a, 'b': b}}.")
    return params


def _shape(t: torch.Tensor) -> str:
    return "scalar" if t.dim() == 0 else str(tuple(t.shape))


def _saved(fn: object) -> list[str]:
    """'name shape' for each tensor a node saved for backward."""
    items: list[str] = []
    if is_custom(fn):
        try:
            tensors = fn.saved_tensors  # type: ignore[attr-defined]
        except RuntimeError:
            return ["<freed by backward>"]
        return [f"saved[{i}] {_shape(t)}" for i, t in enumerate(tensors)]
    for attr in sorted(a for a in dir(fn) if a.startswith("_saved_")):
        try:
            val = getattr(fn, attr)
        except RuntimeError:
            return ["<freed by backward>"]
        if isinstance(val, torch.Tensor):
            items.append(f"{attr[len('_saved_'):]} {_shape(val)}")
    return items


def graph_text(
    var: object,
    params: Mapping[str, torch.Tensor] | None = None,
    show_saved: bool = False,
) -> str:
    """A text tree of the backward graph: one node per line, outputs at the top, leaves at the bottom.

    A node reached a second time is printed as ``(shared, see above)``.
    """
    outputs = _outputs(var, "graph_text")
    names = {id(t): k for k, t in _check_params(params, "graph_text").items()}
    lines: list[str] = []
    seen: set[int] = set()
    keep: list[object] = []

    def label(fn: object) -> str:
        text = type(fn).__name__
        if is_custom(fn):
            text += "  [custom Function]"
        if hasattr(fn, "variable"):
            leaf = fn.variable
            text += f" -> leaf {names.get(id(leaf), '')} {_shape(leaf)}".replace("  ", " ")
        if show_saved:
            saved = _saved(fn)
            if saved:
                text += "  saved: " + ", ".join(saved)
        return text

    def visit(fn: object, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        if id(fn) in seen:
            lines.append(prefix + branch + type(fn).__name__ + "  (shared, see above)")
            return
        seen.add(id(fn))
        keep.append(fn)
        lines.append(prefix + branch + label(fn))
        children = [u for u, _ in getattr(fn, "next_functions", ()) if u is not None]
        child_prefix = prefix + ("" if top else ("   " if last else "│  "))
        for i, child in enumerate(children):
            visit(child, child_prefix, i == len(children) - 1, False)

    for i, t in enumerate(outputs):
        lines.append(f"output {i if len(outputs) > 1 else ''} {_shape(t)}".replace("  ", " "))
        visit(t.grad_fn, "  ", True, True)
    return "\n".join(lines)


@dataclass(frozen=True)
class GraphView:
    """A drawn graph: SVG in notebooks when ``dot`` exists, the text tree otherwise."""

    text: str
    dot_source: str
    title: str = ""

    def svg(self) -> str | None:
        if not dot_available():
            return None
        import graphviz

        return graphviz.Source(self.dot_source).pipe(format="svg").decode()

    def _repr_svg_(self) -> str | None:
        return self.svg()

    def __repr__(self) -> str:
        head = f"{self.title}\n" if self.title else ""
        hint = "" if dot_available() else "\n" + INSTALL_HINT
        return head + self.text + hint

    def _repr_pretty_(self, p, cycle) -> None:  # IPython's text/plain
        p.text(repr(self))


@dataclass(frozen=True)
class SideBySide:
    """Two graphs next to each other with titles (e.g. native ``a * b`` vs a custom ``Mul``)."""

    left: GraphView
    right: GraphView

    def _repr_html_(self) -> str:
        if not dot_available():
            return None  # type: ignore[return-value]
        cells = "".join(
            f'<td style="vertical-align:top;text-align:center;padding:0 1.5em">'
            f"<b>{html.escape(g.title)}</b><br>{g.svg()}</td>"
            for g in (self.left, self.right)
        )
        return f"<table><tr>{cells}</tr></table>"

    def __repr__(self) -> str:
        blocks = []
        for g in (self.left, self.right):
            blocks.append(f"== {g.title} ==\n{g.text}" if g.title else g.text)
        hint = "" if dot_available() else "\n" + INSTALL_HINT
        return "\n\n".join(blocks) + hint

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))


def draw(
    var: object,
    params: Mapping[str, torch.Tensor] | None = None,
    show_saved: bool = False,
    title: str = "",
) -> GraphView:
    """Draw the backward graph of ``var`` (a tensor or tuple of tensors) for display in a notebook.

    Custom Function nodes are yellow with a purple border; leaves you named in ``params``
    are labelled; ``show_saved=True`` also shows what each node saved for backward.
    """
    dot = backward_graph(var, params, show_saved, caller="draw")
    return GraphView(text=graph_text(var, params, show_saved), dot_source=dot.source, title=title)


def compare(
    left: object,
    right: object,
    titles: tuple[str, str] = ("native", "custom"),
    params: Mapping[str, torch.Tensor] | None = None,
    show_saved: bool = False,
) -> SideBySide:
    """Two backward graphs side by side, e.g. ``compare(a * b, Mul.apply(a, b))``."""
    if not (isinstance(titles, tuple) and len(titles) == 2 and all(isinstance(t, str) for t in titles)):
        raise CourseError("compare() expects titles as a pair of strings, e.g. ('native', 'custom').")
    return SideBySide(
        draw(left, params, show_saved, titles[0]),
        draw(right, params, show_saved, titles[1]),
    )
