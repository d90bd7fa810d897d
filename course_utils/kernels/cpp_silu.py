"""A fused SiLU forward and backward in C++, built with ``load_inline`` and registered as ``course_cpp::silu``.

The C++ defines two operators with ``TORCH_LIBRARY`` and their CPU kernels with
``TORCH_LIBRARY_IMPL``; Python adds what the compiler and autograd need: a fake (shape-only)
implementation of each, and ``register_autograd`` so that ``course_cpp::silu`` saves only
``x`` and calls ``course_cpp::silu_backward`` in backward. ``load()`` builds once per machine
(the build directory is cached; about half a minute the first time) and registers once per process.
"""
from __future__ import annotations

import shutil
import subprocess
import sys

import torch

NAME = "course_silu"
SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cmath>

// y = x * sigmoid(x), one pass over memory
torch::Tensor silu_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_floating_point(), "course_cpp::silu needs a floating-point tensor");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "silu_forward", [&] {
    const scalar_t* in = xc.data_ptr<scalar_t>();
    scalar_t* out = y.data_ptr<scalar_t>();
    at::parallel_for(0, xc.numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        out[i] = in[i] / (scalar_t(1) + std::exp(-in[i]));
      }
    });
  });
  return y;
}

// grad_x = grad_y * s * (1 + x * (1 - s)), s = sigmoid(x) recomputed from the saved x
torch::Tensor silu_backward(const torch::Tensor& grad_y, const torch::Tensor& x) {
  TORCH_CHECK(grad_y.sizes() == x.sizes(), "course_cpp::silu_backward: grad_y and x differ in shape");
  auto xc = x.contiguous();
  auto gc = grad_y.contiguous();  // a grad_output may be an expanded view
  auto grad_x = torch::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "silu_backward", [&] {
    const scalar_t* in = xc.data_ptr<scalar_t>();
    const scalar_t* g = gc.data_ptr<scalar_t>();
    scalar_t* out = grad_x.data_ptr<scalar_t>();
    at::parallel_for(0, xc.numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        scalar_t s = scalar_t(1) / (scalar_t(1) + std::exp(-in[i]));
        out[i] = g[i] * s * (scalar_t(1) + in[i] * (scalar_t(1) - s));
      }
    });
  });
  return grad_x;
}

TORCH_LIBRARY(course_cpp, m) {
  m.def("silu(Tensor x) -> Tensor");
  m.def("silu_backward(Tensor grad_y, Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(course_cpp, CPU, m) {
  m.impl("silu", &silu_forward);
  m.impl("silu_backward", &silu_backward);
}
"""

_loaded = False


def _fake_silu(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _fake_silu_backward(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _setup_context(ctx, inputs: tuple, output: torch.Tensor) -> None:
    ctx.save_for_backward(inputs[0])


def _backward(ctx, grad_y: torch.Tensor) -> torch.Tensor:
    (x,) = ctx.saved_tensors
    return torch.ops.course_cpp.silu_backward(grad_y, x)


def load(verbose: bool = False) -> object:
    """Build (or reuse) the extension and register it; returns ``torch.ops.course_cpp.silu``."""
    global _loaded
    if not _loaded:
        if shutil.which("ninja") is None and "google.colab" in sys.modules:  # Colab has g++ but may lack ninja
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "ninja"], check=True)
        missing = [tool for tool in ("g++", "ninja") if shutil.which(tool) is None]
        if missing:
            raise RuntimeError(f"building the C++ extension needs {' and '.join(missing)}: run ./course lab "
                               "(it installs them) or install them with your system's package manager.")
        from torch.utils.cpp_extension import load_inline

        load_inline(NAME, cpp_sources=[SOURCE], is_python_module=False, verbose=verbose)
        torch.library.register_fake("course_cpp::silu")(_fake_silu)
        torch.library.register_fake("course_cpp::silu_backward")(_fake_silu_backward)
        torch.library.register_autograd("course_cpp::silu", _backward, setup_context=_setup_context)
        _loaded = True
    return torch.ops.course_cpp.silu
