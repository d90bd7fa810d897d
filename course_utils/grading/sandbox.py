"""The runner's sandbox: bubblewrap with its own namespaces, a read-only minimum of files,
an unprivileged identity, no capabilities and a seccomp filter.

Two ways in, one result (student code never has root or capabilities):

* grader run by a normal user: bubblewrap makes a user namespace (uid 65534 inside,
  the instructor's uid outside), drops every capability and forbids nested user namespaces.
* grader run as root: a user namespace made by root maps the sandbox to *host* root, and
  host root may write ``/proc/sys`` even without capabilities. So bubblewrap runs privileged
  to build the namespaces and mounts, and the runner's first act, before any student code,
  is to drop to an unprivileged host uid of its own (one per worker slot), clear every
  capability set and the bounding set, and verify it (``runner.drop_privileges``).

Either way: new pid, net, ipc, uts and cgroup namespaces, its own ``/proc``, no network,
an empty environment plus what the runner needs, ``python -I``, and only these paths:
the system's ``/usr`` (libraries), the Python installation, the runner's own files of
``course_utils`` (``RUNNER_FILES`` and the probes, read-only: no check code), a
size-limited private ``/scratch`` and ``/tmp``. Never ``solutions/``, homes,
the batch folder or the results folder.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..paths import PACKAGE as COURSE_UTILS  # the package the runner imports (parts bound read-only)
from . import seccomp

COURSE_MOUNT = "/course"  # where course_utils appears inside the sandbox
SCRATCH = "/scratch"
SANDBOX_UID = 65534  # inside the user namespace (normal-user mode)
ROOT_MODE_FIRST_UID = 61000  # host uids used in root mode: one per worker slot, never a real account
# all of the course the sandbox holds: the runner, its framing and the probes; never checks/ (references,
# expected values, judging), never solutions/, release or grading's other modules
RUNNER_FILES = ("__init__.py", "wire.py", "grading/__init__.py", "grading/runner.py", "grading/protocol.py")
RUNNER_DIRS = ("probes",)
PASS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")  # some CPUs need these for numpy to work at all
BOOT = (f"import sys; sys.path.insert(0, {COURSE_MOUNT!r}); "
        "from course_utils.grading.runner import main; main(UID)")


def boot(uid: int | None) -> str:
    """The runner's start-up code; ``uid``: the unprivileged user it becomes (root mode), else None."""
    return BOOT.replace("UID", "None" if uid is None else str(int(uid)))


@dataclass(frozen=True)
class Sandbox:
    mode: str  # "root" | "user" | "none"
    reason: str = ""  # why there is no sandbox, for the warning


def runner_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": SCRATCH, "TMPDIR": "/tmp", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg",
           # the runner's uid has no passwd entry: getpass.getuser() (torch computes cache paths with it on
           # some releases, e.g. 2.11 on first use of torch.compile's config) reads these instead
           "USER": "student", "LOGNAME": "student",
           # no GPU reaches the sandbox: Triton kernels (lesson 10) run in Triton's interpreter
           "TRITON_INTERPRET": "1"}
    env.update({k: os.environ[k] for k in PASS_ENV if k in os.environ})
    env.update(extra or {})
    return env


def _python_paths() -> list[str]:
    """Folders the interpreter and its packages live in (the venv and its base installation)."""
    paths = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    paths.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    return sorted(p for p in paths if p not in ("/", "/usr") and os.path.isdir(p))


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[:i + 1]) for i in range(len(parts))]


def bwrap_command(mode: str, course_utils: Path, scratch_bytes: int, seccomp_fd: int | None,
                  uid: int | None = None) -> list[str]:
    """The bubblewrap command line that starts the runner (without the limits wrapper).

    ``uid``: in root mode, the host uid the runner drops to (one per worker slot).
    """
    cmd = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
           "--die-with-parent", "--new-session", "--clearenv"]
    if mode == "user":
        cmd += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL",
                "--disable-userns"]
    for key, value in runner_env().items():
        cmd += ["--setenv", key, value]
    cmd += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            cmd += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            cmd += ["--ro-bind", top, top]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        if os.path.exists(etc):
            cmd += ["--ro-bind", etc, etc]
    # private /tmp and /scratch first: the course or its Python may live under /tmp, and a later
    # tmpfs would hide what was bound there
    cmd += ["--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", str(scratch_bytes), "--tmpfs", SCRATCH,
            "--perms", "1777", "--size", str(scratch_bytes), "--tmpfs", "/tmp"]
    made: set[str] = {"/usr", "/etc", "/tmp", SCRATCH}
    binds = [(p, p) for p in _python_paths()]
    mount = f"{COURSE_MOUNT}/course_utils"
    binds += [(str(course_utils / name), f"{mount}/{name}") for name in RUNNER_FILES + RUNNER_DIRS]
    for _, dest in binds:
        for parent in _ancestors(dest):
            if parent not in made and not os.path.islink(parent):
                made.add(parent)
                cmd += ["--perms", "0755", "--dir", parent]
    for src, dest in binds:
        cmd += ["--ro-bind", src, dest]
    cmd += ["--chdir", SCRATCH]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    return cmd + ["--", sys.executable, "-I", "-B", "-c", boot(uid)]


def plain_command() -> list[str]:
    """Without bubblewrap: still isolated mode Python, still an empty environment (see ``runner_env``)."""
    return [sys.executable, "-I", "-c", boot(None).replace(COURSE_MOUNT, str(COURSE_UTILS.parent))]


@cache
def detect() -> Sandbox:
    """Which sandbox this machine can give (tried for real once per process)."""
    if not shutil.which("bwrap"):
        return Sandbox("none", "bubblewrap (bwrap) was not found")
    mode = "root" if os.geteuid() == 0 else "user"
    probe = bwrap_command(mode, COURSE_UTILS, 1 << 20, None)
    probe = probe[:probe.index("--") + 1] + [sys.executable, "-I", "-c", "import os; print(os.getuid())"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Sandbox("none", f"bubblewrap could not start ({type(exc).__name__})")
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[-1][:160]
        return Sandbox("none", f"bubblewrap is installed but cannot create a sandbox here ({first})")
    return Sandbox(mode)


def seccomp_pipe() -> int | None:
    """A readable fd holding the compiled filter (bubblewrap reads it once), or None."""
    program = seccomp.filter_for()
    if program is None:
        return None
    read, write = os.pipe()
    os.write(write, program)  # a few hundred bytes: fits in the pipe buffer
    os.close(write)
    return read
