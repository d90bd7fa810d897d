"""How a ``torch.library.triton_op`` body launches a Triton kernel on the installed torch (lesson 10, section 4).

``torch.library.wrap_triton(kernel)`` makes a launch visible to ``torch.compile``. Under Triton's interpreter
(``TRITON_INTERPRET=1``, no GPU) ``@triton.jit`` gives an ``InterpretedFunction``, which has nothing a tracer
can read, and releases differ in what ``wrap_triton`` does with it: torch 2.11 refuses it (``RuntimeError``),
2.13 and later hand it back as it is. Nothing here tests a version number: ``launcher`` asks the installed
torch, and where it refuses an interpreted kernel, launches the kernel itself, as the later releases do.
"""
from __future__ import annotations

from typing import Any

from . import interpreting


def wrap_triton_gives(kernel: Any) -> str:
    """What the installed torch's ``wrap_triton`` does with ``kernel``, in words (lesson 10 prints it)."""
    from torch.library import wrap_triton

    try:
        wrapped = wrap_triton(kernel)
    except RuntimeError:
        return "refuses it"
    return "returns it unwrapped" if wrapped is kernel else f"wraps it in a {type(wrapped).__name__}"


def launcher(kernel: Any) -> Any:
    """``kernel`` as a ``triton_op`` body launches it: ``wrap_triton(kernel)`` wherever the installed torch
    takes it; the kernel itself where that torch refuses a kernel run by Triton's interpreter (eagerly the
    same launch; a compiler tracing the body meets the interpreter either way). Any other refusal is raised."""
    from torch.library import wrap_triton

    try:
        return wrap_triton(kernel)
    except RuntimeError:
        if interpreting() and type(kernel).__name__ == "InterpretedFunction":
            return kernel
        raise
