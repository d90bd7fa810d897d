"""The runner's own rlimits (runner.set_limits): what they leave a hostile answer, tried in a child process."""
from __future__ import annotations

import subprocess
import sys
import textwrap

TIMERS = textwrap.dedent("""
    import ctypes, ctypes.util, sys
    from course_utils.grading.sandbox.runner import set_limits
    set_limits(0, 60, None)
    librt = ctypes.CDLL(ctypes.util.find_library("rt") or ctypes.util.find_library("c"), use_errno=True)
    made = 0
    for _ in range(5000):
        timer = ctypes.c_void_p()
        if librt.timer_create(1, None, ctypes.byref(timer)) != 0:  # CLOCK_MONOTONIC, SIGALRM on expiry
            break
        made += 1
    print(made)
""")


def test_posix_timers_are_bounded() -> None:
    """Each POSIX timer is kernel memory that no --memory counts: 96,365 of them held 36 MiB before the limit."""
    out = subprocess.run([sys.executable, "-c", TIMERS], capture_output=True, text=True, timeout=60, check=True)
    assert 0 < int(out.stdout) <= 1024, out.stdout
