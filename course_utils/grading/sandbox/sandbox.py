"""The runner's sandbox: bubblewrap with its own namespaces, a read-only minimum of files,
an unprivileged identity, no capabilities and a seccomp filter.

Two ways in, one result (student code never has root or capabilities):

* grader run by a normal user: bubblewrap makes a user namespace (uid 65534 inside,
  the instructor's uid outside), drops every capability and forbids nested user namespaces.
* grader run as root: a user namespace made by root maps the sandbox to *host* root, and
  host root may write ``/proc/sys`` even without capabilities. So bubblewrap runs privileged
  to build the namespaces and mounts, and the runner's first act, before any student code,
  is to drop to an unprivileged host uid of its own (one per sandbox, leased), clear every
  capability set and the bounding set, and verify it (``runner.drop_privileges``).

Either way: new pid, net, ipc, uts and cgroup namespaces, its own ``/proc``, no network,
an empty environment plus what the runner needs, ``python -I``, and only these paths:
the system's ``/usr`` (libraries), the Python installation, the runner's own files of
``course_utils`` (``RUNNER_FILES`` and the probes, read-only: no check code), a
size-limited private ``/scratch``, ``/tmp`` and ``/dev/shm`` (``WRITABLE``: the only writable
folders; ``/``, ``/course`` and ``/dev`` are remounted read-only). Never ``solutions/``, homes,
the batch folder or the results folder. Root mode's uid is leased (``uids.Lease``): no two live
runners of the machine share one.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ...paths import PACKAGE as COURSE_UTILS  # the package the runner imports (parts bound read-only)
from . import seccomp
from .sweep import WRITABLE  # a runner's only writable folders (each its own tmpfs); the rest is read-only

COURSE_MOUNT = "/course"  # where course_utils appears inside the sandbox
SCRATCH = "/scratch"
SANDBOX_UID = 65534  # inside the user namespace (normal-user mode)
ROOT_MODE_FIRST_UID = 61000  # host uids used in root mode: one per zygote (uids.Lease), never a real account
UID_MODE_FIRST_UID = 62000  # uid mode: one per runner (uids.Lease: no two live runners of the machine share one)
# all of the course the sandbox holds: the runner, its framing, the probes, and student.py (the shared set-up cell
# says which student id it sees: nothing there assesses); never checks/ (references, expected values, assessing), never
# solutions/, release or grading's other modules
RUNNER_FILES = ("__init__.py", "wire.py", "student.py", "grading/__init__.py", "grading/sandbox/__init__.py",
                "grading/sandbox/runner.py",
                "grading/sandbox/protocol.py", "grading/sandbox/audit.py", "grading/sandbox/sweep.py")
RUNNER_DIRS = ("probes",)
PASS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")  # some CPUs need these for numpy to work at all
def boot(uid: int | None, seccomp_file: str | None = None, entry: str = "main") -> str:
    """The runner's start-up code; ``uid``: the unprivileged user it becomes (root and uid modes), else None.

    ``seccomp_file``: the filter the runner loads itself, after dropping privileges (uid mode: no bubblewrap).
    ``entry``: ``main`` (one runner) or ``serve`` (the zygote, which forks the runners).
    """
    args = "None" if uid is None else str(int(uid))
    if seccomp_file is not None:
        args = f"seccomp_file={seccomp_file!r}, uid={args}"
    return (f"import sys; sys.path.insert(0, {COURSE_MOUNT!r}); "
            f"from course_utils.grading.sandbox.runner import {entry}; {entry}({args})")


@dataclass(frozen=True)
class Sandbox:
    mode: str  # "root" | "user" (bubblewrap) | "uid" (root without namespaces) | "none"
    reason: str = ""  # why there is no sandbox, and how to get one
    explicit: bool = False  # "none" because the instructor asked (--no-sandbox): only then may points be given

    @property
    def usable(self) -> bool:
        """Whether student code may be graded this way: sandboxed, or unsandboxed on explicit request."""
        return self.mode != "none" or self.explicit


NO_SANDBOX = Sandbox("none", "--no-sandbox was given", explicit=True)

FIXES = (  # (what bubblewrap's error says, what to do), first match wins
    ("No such file", "the Python installation or the course is under a path bubblewrap cannot bind "
     "(a symbolic link in the .venv path?): recreate .venv at a real path with ./course setup"),
    ("Can't find source path", "the Python installation or the course is under a path bubblewrap cannot bind "
     "(a symbolic link in the .venv path?): recreate .venv at a real path with ./course setup"),
    ("namespace", "this machine or container does not allow the namespaces bubblewrap needs: allow "
     "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or "
     "kernel.apparmor_restrict_unprivileged_userns=0), or run the grader as root outside a container"),
    ("uid map", "this machine or container does not allow user namespaces: allow them "
     "(sysctl kernel.unprivileged_userns_clone=1), or run the grader as root outside a container"),
    ("Operation not permitted", "this container forbids what bubblewrap needs (mount, namespaces): grade "
     "outside it, or give the container those rights (Docker: --security-opt seccomp=unconfined "
     "--cap-add SYS_ADMIN)"),
)


def fix_for(message: str) -> str:
    """What to do about bubblewrap's error ``message`` (one clause)."""
    for needle, fix in FIXES:
        if needle.lower() in message.lower():
            return fix
    return "run `bwrap --ro-bind / / true` to see why bubblewrap fails here, and fix that"


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
                  uid: int | None = None, zygote: bool = False) -> list[str]:
    """The bubblewrap command line that starts the runner (without the limits wrapper).

    ``uid``: in root mode, the host uid the runner drops to (leased by the slot's sandbox: ``uids.Lease``).
    ``zygote``: start ``runner.serve`` (one import, a forked runner per job) instead of one runner.
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
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    for folder in WRITABLE:  # the only writable places: size-limited, swept between runners (sweep.py)
        cmd += ["--perms", "1777", "--size", str(scratch_bytes), "--tmpfs", folder]
    made: set[str] = {"/usr", "/etc", "/dev", *WRITABLE}
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
    # everything else read-only: in user mode bubblewrap builds /, /course and /dev owned by the sandbox's
    # uid, and a file a runner left there (/course is sys.path[0]) would run in the next runner of the slot
    cmd += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", SCRATCH]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    return cmd + ["--", sys.executable, "-I", "-B", "-c", boot(uid, entry="serve" if zygote else "main")]


def plain_command() -> list[str]:
    """Without bubblewrap: still isolated mode Python, still an empty environment (see ``runner_env``)."""
    return [sys.executable, "-I", "-c", boot(None).replace(COURSE_MOUNT, str(COURSE_UTILS.parent))]


@cache
def detect(allow_uid: bool = False) -> Sandbox:
    """Which sandbox this machine can give (tried for real once per process).

    ``allow_uid``: as root, where bubblewrap cannot start, fall back to the uid sandbox (``uid_command``).
    """
    box = _bubblewrap()
    if box.mode == "none" and allow_uid and os.geteuid() == 0 and seccomp.filter_for() is not None:
        unreadable = uid_cannot_read()
        if unreadable:  # fail closed: a runner that cannot import what it needs would cost honest points
            return Sandbox("none", f"{box.reason.split(';')[0]}; the uid sandbox cannot be used either: its uid "
                           f"cannot read {unreadable}: make the Python installation readable by every user "
                           "(chmod -R o+rX on it and its parent folders), or install Python outside a private "
                           "folder such as /root")
        return Sandbox("uid", box.reason.split(";")[0] + "; student code runs as a separate uid without namespaces")
    return box


READABLE_PROBE = r"""
import json, os, sys
tops = [p for p in sys.path if os.path.isabs(p) and os.path.exists(p)]  # as root: what the runner will search
uid = int(sys.argv[1])
os.setgroups([])
os.setresgid(uid, uid, uid)
os.setresuid(uid, uid, uid)
bad = []
for top in tops:
    if not os.access(top, os.R_OK | os.X_OK):
        bad.append(top)
        continue
    for root, dirs, files in os.walk(top, onerror=lambda e: bad.append(e.filename)):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        bad += [os.path.join(root, f) for f in files if not os.access(os.path.join(root, f), os.R_OK)]
        if bad:
            break
    if bad:
        break
print(json.dumps(bad[:1]))
"""


def uid_cannot_read() -> str:
    """The first file or folder of the runner's import path that its uid cannot read ('' if none).

    In uid mode the runner starts as root and then becomes its uid: every module it imports
    later (torch's, SymPy's ``colorsys``...) must be readable by that uid, as must the copy of
    its own files. Python under ``/root`` (mode 0700) would let the runner start and then fail
    an honest answer's import.
    """
    from .uids import Lease

    lease = Lease(UID_MODE_FIRST_UID)
    base, _home = uid_dir(lease.uid)
    try:
        code = f"import sys; sys.path.insert(0, {os.path.join(base, 'course')!r}); " + READABLE_PROBE
        done = subprocess.run([sys.executable, "-I", "-B", "-c", code, str(lease.uid)], capture_output=True,
                              text=True, timeout=120, check=False, cwd="/", env=runner_env())
        found = json.loads(done.stdout) if done.returncode == 0 else [f"(the check failed: {done.stderr[-160:]})"]
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        found = [f"(the check failed: {type(exc).__name__})"]
    finally:
        shutil.rmtree(base, ignore_errors=True)
        lease.release()
    return str(found[0]) if found else ""


def _bubblewrap() -> Sandbox:
    if not shutil.which("bwrap"):
        return Sandbox("none", "bubblewrap (bwrap) was not found on PATH: install it "
                       "(Debian/Ubuntu: apt-get install bubblewrap)")
    mode = "root" if os.geteuid() == 0 else "user"
    probe = bwrap_command(mode, COURSE_UTILS, 1 << 20, None)
    probe = probe[:probe.index("--") + 1] + [sys.executable, "-I", "-c", "import os; print(os.getuid())"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Sandbox("none", f"bubblewrap could not start ({type(exc).__name__}): "
                       "run `bwrap --ro-bind / / true` to see why")
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[-1][:160]
        return Sandbox("none", f"bubblewrap is installed but cannot create a sandbox here ({first}); "
                       + fix_for(first))
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


# --------------------------------------------------------------------------- uid mode (root, no namespaces)
def uid_dir(uid: int) -> tuple[str, str]:
    """(folder to remove afterwards, private home) for a uid-mode runner.

    The folder is root's: the runner's files of ``course_utils`` (read-only copies: never the
    checks) and the seccomp filter; only ``home`` (mode 0700) belongs to ``uid``.
    """
    base = tempfile.mkdtemp(prefix="grade-uid-")
    os.chmod(base, 0o755)
    target = os.path.join(base, "course", "course_utils")
    for name in RUNNER_FILES:
        os.makedirs(os.path.dirname(os.path.join(target, name)), mode=0o755, exist_ok=True)
        shutil.copyfile(COURSE_UTILS / name, os.path.join(target, name))
    for name in RUNNER_DIRS:
        shutil.copytree(COURSE_UTILS / name, os.path.join(target, name), ignore=shutil.ignore_patterns("__pycache__"))
    program = seccomp.filter_for()
    assert program is not None  # detect() offers uid mode only where there is a filter
    with open(os.path.join(base, "filter.bpf"), "wb") as f:
        f.write(program)
    for folder, _dirs, files in os.walk(base):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    home = os.path.join(base, "home")
    os.mkdir(home, 0o700)
    os.chown(home, uid, uid)
    return base, home


def uid_command(base: str, uid: int) -> list[str]:
    """Start the runner as root; its first act is to become ``uid`` and load the filter (``runner.main``)."""
    code = boot(uid, os.path.join(base, "filter.bpf")).replace(COURSE_MOUNT, os.path.join(base, "course"))
    return [sys.executable, "-I", "-B", "-c", code]
