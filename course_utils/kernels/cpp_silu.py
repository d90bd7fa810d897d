"""A fused SiLU forward and backward in C++, built with ``load_inline`` and registered as ``course_cpp::silu``.

The C++ defines the operators with ``TORCH_LIBRARY``, their CPU kernels with
``TORCH_LIBRARY_IMPL``, and their autograd (a ``torch::autograd::Function`` registered for the
``Autograd`` key: ``course_cpp::silu`` saves only ``x`` and calls ``course_cpp::silu_backward``
in backward, with no Python per call); Python adds what the compiler needs: a fake
(shape-only) implementation of each. The kernels run over a
``TensorIterator`` with ``cpu_kernel_vec``, as ATen's own elementwise kernels do: any input layout
(a transposed ``x``, the expanded gradient of a sum) without a copy, ``at::vec::Vectorized`` math
(16 floats per AVX-512 instruction, 8 with AVX2; ``exp`` from SLEEF) and the work split across
threads; ``course_cpp::silu_scalar`` is the one-element-at-a-time loop, kept for comparison
(lesson 10, ``benchmarks/kernels.py``).
``load()`` builds once per torch installation (the build directory is cached; about a minute the first
time) and registers once per process.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import subprocess
import sys
from collections.abc import Iterator

import torch

NAME = "course_silu_autograd"
SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/native/TensorIterator.h>
#include <ATen/native/cpu/Loops.h>
#include <cmath>

using at::vec::Vectorized;

// The scalar loop: one exp and one division per element, one element per instruction.
torch::Tensor silu_scalar(const torch::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
              "course_cpp::silu_scalar needs a float32 or float64 tensor");
  auto xc = x.contiguous();
  auto y = torch::empty(xc.sizes(), xc.options());
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "silu_scalar", [&] {
    const scalar_t* in = xc.data_ptr<scalar_t>();
    scalar_t* out = y.data_ptr<scalar_t>();
    at::parallel_for(0, xc.numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        out[i] = in[i] / (scalar_t(1) + std::exp(-in[i]));
      }
    });
  });
  return y;
}

// y = x * sigmoid(x). A TensorIterator walks x in any layout (strided, expanded) and writes a
// contiguous y; cpu_kernel_vec calls the Vectorized lambda on Vectorized<scalar_t>::size() elements
// at a time (16 floats with AVX-512), the scalar one on the tail, and splits the work across threads.
torch::Tensor silu_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
              "course_cpp::silu needs a float32 or float64 tensor");
  auto y = torch::empty(x.sizes(), x.options());
  auto iter = at::TensorIteratorConfig().add_output(y).add_const_input(x).build();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "silu_forward", [&] {
    using Vec = Vectorized<scalar_t>;
    at::native::cpu_kernel_vec(iter,
        [](scalar_t v) -> scalar_t { return v / (scalar_t(1) + std::exp(-v)); },
        [](Vec v) -> Vec { return v / (Vec(scalar_t(1)) + v.neg().exp()); });
  });
  return y;
}

// grad_x = grad_y * s * (1 + x * (1 - s)), s = sigmoid(x) recomputed from the saved x. grad_y is
// often expanded (the gradient of a sum): the iterator reads it with stride 0, nothing is copied.
torch::Tensor silu_backward(const torch::Tensor& grad_y, const torch::Tensor& x) {
  TORCH_CHECK(grad_y.sizes() == x.sizes(), "course_cpp::silu_backward: grad_y and x differ in shape");
  auto g = grad_y.scalar_type() == x.scalar_type() ? grad_y : grad_y.to(x.scalar_type());
  auto grad_x = torch::empty(x.sizes(), x.options());
  auto iter = at::TensorIteratorConfig().add_output(grad_x).add_const_input(g).add_const_input(x).build();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "silu_backward", [&] {
    using Vec = Vectorized<scalar_t>;
    at::native::cpu_kernel_vec(iter,
        [](scalar_t dy, scalar_t v) -> scalar_t {
          scalar_t s = scalar_t(1) / (scalar_t(1) + std::exp(-v));
          return dy * s * (scalar_t(1) + v * (scalar_t(1) - s));
        },
        [](Vec dy, Vec v) -> Vec {
          const Vec one(scalar_t(1));
          Vec s = one / (one + v.neg().exp());
          return dy * s * (one + v * (one - s));
        });
  });
  return grad_x;
}

// Autograd, in C++ as well: a Python formula (torch.library.register_autograd) costs tens of
// microseconds per call, as much as the whole kernel on a small tensor. Forward saves only x and
// calls the operator again below the autograd key; backward calls course_cpp::silu_backward.
// Both go through the dispatcher, so the compiler's fake tensors reach the fake implementations.
class SiluFunction : public torch::autograd::Function<SiluFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    ctx->save_for_backward({x});
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("course_cpp::silu", "")
                         .typed<torch::Tensor(const torch::Tensor&)>();
    return op.call(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("course_cpp::silu_backward", "")
                         .typed<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>();
    return {op.call(grad_outputs[0], ctx->get_saved_variables()[0])};
  }
};

torch::Tensor silu_autograd(const torch::Tensor& x) { return SiluFunction::apply(x); }

TORCH_LIBRARY(course_cpp, m) {
  m.def("silu(Tensor x) -> Tensor");
  m.def("silu_backward(Tensor grad_y, Tensor x) -> Tensor");
  m.def("silu_scalar(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(course_cpp, CPU, m) {
  m.impl("silu", &silu_forward);
  m.impl("silu_backward", &silu_backward);
  m.impl("silu_scalar", &silu_scalar);
}

TORCH_LIBRARY_IMPL(course_cpp, Autograd, m) {
  m.impl("silu", &silu_autograd);
}
"""

_loaded = False


def _new(x: torch.Tensor) -> torch.Tensor:
    """What the C++ returns: a contiguous tensor of x's shape (``empty_like`` would keep a view's strides)."""
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _fake_silu(x: torch.Tensor) -> torch.Tensor:
    return _new(x)


def _fake_silu_backward(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return _new(x)


def capability() -> str:
    """The widest vector instructions both this CPU and torch's build use: "AVX512", "AVX2" or "DEFAULT"."""
    found = torch.backends.cpu.get_cpu_capability()
    return found if found in ("AVX2", "AVX512") else "DEFAULT"


def compile_flags() -> list[str]:
    """Optimise, and let ``Vectorized`` use the CPU's vector registers as ATen does (16 floats with AVX-512,
    8 with AVX2); elsewhere (e.g. ARM) ``Vectorized`` is a plain loop over a small array."""
    flags = {"AVX512": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma"],
             "AVX2": ["-mavx2", "-mfma"]}.get(capability())
    if flags is None:
        return ["-O3"]
    return ["-O3", *flags, f"-DCPU_CAPABILITY_{capability()}", f"-DCPU_CAPABILITY={capability()}"]


def build_name() -> str:
    """The extension's name, which names its build directory: one per vector width and per torch installation.

    The build file records torch's include and library paths, so two virtual environments sharing one build
    directory (a second checkout, ``./course test --torch``) made ninja rebuild it (half a minute to a minute)
    every time the other one had loaded it; each installation now keeps its own build.
    """
    installation = hashlib.sha1(f"{torch.__version__} {torch.__file__}".encode()).hexdigest()[:8]
    return f"{NAME}_{capability().lower()}_{installation}"


class _NoCudaHomeWarning(logging.Filter):
    """Drops cpp_extension's "No CUDA runtime is found, using CUDA_HOME=..." (a CUDA wheel on a machine without a
    GPU says it on import): this extension is C++ for the CPU only, so CUDA_HOME plays no part in it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "No CUDA runtime is found" not in record.getMessage()


@contextlib.contextmanager
def _without_cuda_home_warning() -> Iterator[None]:
    logger, dropped = logging.getLogger("torch.utils.cpp_extension"), _NoCudaHomeWarning()
    logger.addFilter(dropped)
    try:
        yield
    finally:
        logger.removeFilter(dropped)


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
        with _without_cuda_home_warning():
            from torch.utils.cpp_extension import load_inline

        flags = compile_flags()
        load_inline(build_name(), cpp_sources=[SOURCE], extra_cflags=flags,
                    is_python_module=False, verbose=verbose)
        torch.library.register_fake("course_cpp::silu")(_fake_silu)
        torch.library.register_fake("course_cpp::silu_backward")(_fake_silu_backward)
        torch.library.register_fake("course_cpp::silu_scalar")(_fake_silu)
        _loaded = True
    return torch.ops.course_cpp.silu
