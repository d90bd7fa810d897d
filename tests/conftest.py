"""Shared test set-up: the repository root on sys.path."""
import os
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# lesson 10's Triton kernels run in Triton's interpreter where there is no GPU; the variable is read
# when triton is imported, so it is set here, before any test module can import it
if "TRITON_INTERPRET" not in os.environ:
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture
def root() -> Path:
    return ROOT


def free_port() -> int:
    """A loopback TCP port nobody is listening on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# modules of minutes each (nbgrader and grader batches): handed to the workers first, so the many short
# tests fill in around them instead of one worker finishing a long module alone at the end
LONG_MODULES = ("test_grading_jobs.py", "test_nbgrader.py", "test_nbgrader_second_half.py", "test_grade.py",
                "test_site.py", "test_grading_batch.py", "10_kernels_in_functions.ipynb", "04_linear.ipynb")


def _long_first(item) -> int:
    name = item.path.name
    return LONG_MODULES.index(name) if name in LONG_MODULES else len(LONG_MODULES)


def pytest_collection_modifyitems(config, items):
    """Long modules first (same order on every worker); tests marked slow run in CI (CI is set) or with
    COURSE_SLOW=1, a developer's ./course test skips them."""
    items.sort(key=_long_first)  # stable: within a module and among the rest, collection order stays
    if os.environ.get("CI") or os.environ.get("COURSE_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow: CI runs it; COURSE_SLOW=1 ./course test runs it here")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
