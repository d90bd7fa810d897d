"""What the judge reads in an answer cell before trusting anything its runner reports.

The judge parses every answer cell itself (never runs it). Names are resolved through
imports, ``from`` imports, aliases and plain assignments (``G = torch.autograd.grad``),
so a rule holds on what the code refers to, not on how it is spelled. Two outputs:

* ``review_reasons``: code that reaches for the grader instead of the exercise (the
  course's own package, ``sys``, frames, ``gc`` walks, ``builtins``, ``ctypes``, dynamic
  code, dangerous dunders, overriding torch functions or the modules the probe uses).
  Such a submission is still graded, but its status is **held for review**, with these
  reasons, in every output: an instructor decides, never silent full marks.
* ``learning_flags``: legal but not what the exercise teaches (a Function's backward
  that asks autograd for the answer).
"""
from __future__ import annotations

import ast
import threading
from collections.abc import Iterator

ALLOWED_IMPORTS = {  # top-level modules an answer may import without review
    "torch", "math", "cmath", "numpy", "scipy", "functools", "itertools", "operator", "typing", "collections",
    "dataclasses", "numbers", "abc", "enum", "copy", "random", "statistics", "fractions", "decimal", "warnings",
    "contextlib", "time", "triton", "__future__",
}
PRIVATE_TORCH_OK = {"torch._dynamo", "torch._inductor", "torch._library"}  # public-in-practice, used by lessons 08/10
HELD_MODULE_PREFIXES = ("torch.overrides", "torch.utils._python_dispatch", "torch._C", "torch.library.Library",
                        "torch.library.impl", "torch.library.fallthrough_kernel", "torch.utils._pytree")
DYNAMIC = {"__import__": "imports by name at run time", "exec": "runs code from a string",
           "eval": "evaluates code from a string", "compile": "compiles code from a string",
           "globals": "reads the namespace dictionary", "locals": "reads the namespace dictionary",
           "vars": "reads an object's namespace dictionary", "breakpoint": "opens a debugger",
           "open": "opens files"}
DUNDERS = {"__globals__", "__code__", "__closure__", "__builtins__", "__dict__", "__subclasses__", "__bases__",
           "__base__", "__mro__", "__getattribute__", "__setattr__", "__delattr__", "__import__", "__loader__",
           "__spec__", "__self__", "__func__", "__defaults__", "__kwdefaults__", "__wrapped__", "__reduce__",
           "__reduce_ex__", "__set_name__", "__init_subclass__", "__class_getitem__", "__torch_function__",
           "__torch_dispatch__"}
FRAME_ATTRS = {"f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next",
               "gi_frame", "gi_code", "cr_frame", "ag_frame", "co_code", "co_consts"}
OVERRIDE_METHODS = {"__torch_function__", "__torch_dispatch__"}
AUTOGRAD_NAMES = ("torch.autograd.grad", "torch.autograd.backward", "torch.autograd.functional", "torch.func",
                  "torch.autograd.forward_ad", "functorch", "torch.Tensor.backward", "torch.vmap")
MAX_REASONS = 5


_PARSING = threading.Lock()  # one ast.parse at a time in this process (see ``parse``)


def parse(source: str) -> ast.Module | None:
    """The tree of ``source``, or None if it is not Python; one thread at a time.

    ``ast.parse`` keeps its recursion count in the ast module's shared state, and on CPython
    releases without the fix of gh-106905 (3.11.7 among them) two threads that convert trees at once (a garbage
    collection in between runs Python code, and so switches threads) make it raise
    ``SystemError: AST constructor recursion depth mismatch``: a correct answer got 0 points
    at ``--jobs 2``. Serialised, a grade never depends on thread timing.
    """
    try:
        with _PARSING:
            return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


class Names:
    """Local name -> dotted name it stands for (imports, aliases, simple assignments), flow-insensitive."""

    def __init__(self, tree: ast.AST) -> None:
        self.alias: dict[str, str] = {}
        pending: list[tuple[str, ast.AST]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.alias[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.alias.setdefault(top, top)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.alias[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        pending.append((t.id, node.value))
        for _ in range(3):  # aliases of aliases
            for name, value in pending:
                resolved = self.resolve(value)
                if resolved and name not in self.alias and "." in resolved:
                    self.alias[name] = resolved

    def resolve(self, node: ast.AST) -> str:
        """'torch.autograd.grad' for ``G`` after ``from torch.autograd import grad as G``; '' if unknown."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            parts.append(node.args[1].value)
            node = node.args[0]
            inner = self.resolve(node)
            return ".".join([inner, *reversed(parts)]) if inner else ""
        if not isinstance(node, ast.Name):
            return ""
        base = self.alias.get(node.id, node.id)
        return ".".join([base, *reversed(parts)])


def _imports(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                yield "." * node.level + (node.module or "")
            else:
                yield from (f"{node.module}.{a.name}" for a in node.names)


def _import_reason(name: str) -> str | None:
    top = name.split(".")[0]
    if name.startswith(".") or top not in ALLOWED_IMPORTS:
        what = "the course's own package" if top == "course_utils" else f"`{name.split('.')[0] or name}`"
        return f"imports {what}"
    if any(name == p or name.startswith(p + ".") for p in HELD_MODULE_PREFIXES):
        return f"imports `{name}` (overrides torch functions or operators)"
    private = next((p for p in name.split(".")[1:] if p.startswith("_")), None)
    if private and not any(name == p or name.startswith(p + ".") for p in PRIVATE_TORCH_OK):
        return f"imports the private `{name}`"
    return None


def review_reasons(source: str) -> list[str]:
    """Why an answer cell must be looked at by a person before its points count; [] when it need not."""
    tree = parse(source)
    if tree is None:
        return []  # it cannot run either; the runner reports the syntax error
    names = Names(tree)
    bound = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)} | \
        {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | \
        {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    found = [reason for reason in map(_import_reason, _imports(tree)) if reason]
    for node in ast.walk(tree):
        found += _node_reasons(node, names, bound)
        found += _assignment_reasons(node, names)
    for node in ast.walk(tree):
        found += _module_use_reasons(node, names)
    reasons = list(dict.fromkeys(found))  # first occurrence order, each reason once
    return reasons[:MAX_REASONS] + ([f"and {len(reasons) - MAX_REASONS} more"] if len(reasons) > MAX_REASONS else [])


def _node_reasons(node: ast.AST, names: Names, bound: set[str]) -> list[str]:
    """What one node does that a person must look at: dynamic calls, internals, torch overrides."""
    if isinstance(node, ast.Name) and node.id in DYNAMIC and node.id not in bound and node.id not in names.alias:
        return [f"calls `{node.id}` ({DYNAMIC[node.id]})"]
    if isinstance(node, ast.Name) and node.id in ("__builtins__", "__loader__", "__spec__"):
        return [f"uses `{node.id}`"]
    if isinstance(node, ast.Attribute):
        if node.attr in DUNDERS:
            return [f"reads the attribute `{node.attr}` (reaches into objects' internals)"]
        if node.attr in FRAME_ATTRS:
            return [f"reads the frame/code attribute `{node.attr}`"]
        return []
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) >= 2:
        return _attribute_call_reasons(node, node.func.id, names)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in OVERRIDE_METHODS:
        return [f"defines `{node.name}` (intercepts torch functions)"]
    if isinstance(node, ast.ClassDef):
        return [f"subclasses `{full}` (intercepts torch functions)" for full in map(names.resolve, node.bases)
                if full.endswith(("TorchFunctionMode", "TorchDispatchMode"))]
    return []


def _attribute_call_reasons(node: ast.Call, func: str, names: Names) -> list[str]:
    """``getattr``/``setattr``/``delattr``/``hasattr`` with a computed name, an internal one, or on torch."""
    attr = node.args[1]
    if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
        return [f"calls `{func}` with a computed attribute name"]
    if attr.value in DUNDERS or attr.value in FRAME_ATTRS:
        return [f"reads the attribute `{attr.value}` through {func}"]
    owner = names.resolve(node.args[0])
    if func in ("setattr", "delattr") and owner.split(".")[0] in ALLOWED_IMPORTS and owner in names.alias.values():
        return [f"changes `{owner}.{attr.value}` (redefines what the checks use)"]
    return []


def _assignment_reasons(node: ast.AST, names: Names) -> list[str]:
    """An assignment or deletion that rewrites an attribute of torch, sys, os, builtins or gc."""
    if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        return []
    targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
    reasons = []
    for leaf in (leaf for t in targets for leaf in ast.walk(t)):  # the names written, not those read in an index
        if isinstance(leaf, (ast.Attribute, ast.Subscript)) and isinstance(leaf.ctx, (ast.Store, ast.Del)):
            owner = names.resolve(leaf.value)
            if owner and owner.split(".")[0] in ALLOWED_IMPORTS | {"sys", "os", "builtins", "gc"} \
                    and _is_module_path(owner, names):
                reasons.append(f"assigns to `{owner}.{getattr(leaf, 'attr', '[...]')}` (redefines what the checks use)")
    return reasons


def _module_use_reasons(node: ast.AST, names: Names) -> list[str]:
    """Reads of interpreter internals (sys, gc, inspect, ...) and uses of torch.library's overrides."""
    if not isinstance(node, (ast.Name, ast.Attribute)):
        return []
    full = names.resolve(node)
    reasons = []
    if full.split(".")[0] in ("sys", "gc", "inspect", "ctypes", "builtins", "importlib") and "." in full and \
            isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Store):
        reasons.append(f"uses `{'.'.join(full.split('.')[:2])}`")
    if full.startswith(("torch.library.Library", "torch.library.impl", "torch.library.fallthrough_kernel")):
        reasons.append(f"uses `{full}` (replaces the implementation of existing operators)")
    return reasons


def _is_module_path(dotted: str, names: Names) -> bool:
    """``torch``, ``torch.autograd``, ``F`` (torch.nn.functional): a module, not an object the student made."""
    top = dotted.split(".")[0]
    imported = set(names.alias.values()) | set(names.alias)
    return top in imported or dotted in imported


def learning_flags(source: str) -> list[str]:
    """Legal but not learning: a Function's backward that asks autograd for the answer (names resolved)."""
    tree = parse(source)
    if tree is None:
        return []
    names = Names(tree)
    notes = []
    for cls in ast.walk(tree):
        if not (isinstance(cls, ast.ClassDef) and any(names.resolve(b).endswith("Function") for b in cls.bases)):
            continue
        for fn in cls.body:
            if not (isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name in ("backward", "jvp", "vjp")):
                continue
            used = set()
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward":
                    used.add(names.resolve(node.func) or ".backward")
                elif isinstance(node, (ast.Name, ast.Attribute)):
                    full = names.resolve(node)
                    if any(full == a or full.startswith(a + ".") for a in AUTOGRAD_NAMES):
                        used.add(full)
            used = {u for u in used if not any(v.startswith(u + ".") for v in used)}  # the longest names only
            if used:
                notes.append(f"{cls.name}.{fn.name} calls autograd itself ({', '.join(sorted(used))[:120]}) instead "
                             "of computing the gradient by hand")
    return notes
