"""The GPU test path's set-up: the repository root on sys.path, Triton compiled (never interpreted).

Runs where only torch, triton, numpy and pytest are installed (see pytest.ini). In the main
suite these modules are collected too and every test is skipped at once without CUDA.
"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

CUDA = torch.cuda.is_available()
if CUDA and "triton" not in sys.modules:
    os.environ.pop("TRITON_INTERPRET", None)  # these tests are about the compiled kernels
