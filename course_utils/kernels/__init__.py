"""Kernels behind autograd Functions (lesson 10 and ``benchmarks/kernels.py``).

``triton_swiglu`` and ``triton_rmsnorm`` hold Triton kernels and the Functions around them;
``cpp_silu`` builds a C++ extension with ``torch.utils.cpp_extension.load_inline``. Triton
is imported only by those modules: without a GPU, set ``TRITON_INTERPRET=1`` before the
first ``import triton`` (``interpreting()`` says which mode this process is in).
"""
from __future__ import annotations

import os
import sys


def interpreting() -> bool:
    """Whether Triton kernels in this process run in Triton's interpreter (on CPU tensors)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def require_triton_mode() -> None:
    """Refuse, in one sentence, to launch kernels that can neither compile nor be interpreted here."""
    import torch

    if not torch.cuda.is_available() and not interpreting():
        raise RuntimeError("Triton needs a GPU, or TRITON_INTERPRET=1 set before the first `import triton`: "
                           "restart the kernel and run the lesson's first cells in order.")
    if "triton" not in sys.modules:
        import triton  # noqa: F401  (imported here so the check above ran first)
