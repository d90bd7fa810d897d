"""Between two runners of one zygote: end every leftover process, put the writable folders back.

The zygote (``runner.serve``) records its sandbox's writable folders before the first runner
(``snapshot``): they are empty but for the mount points bubblewrap made there when the course
or its Python lives under ``/tmp``. After each runner ``sweep`` kills every process but the
sandbox's init and the zygote, refuses a sandbox with System V IPC objects left, and makes the
folders match the snapshot again: everything new is removed (symlinks are removed, never
followed; locked folders are opened first), and a recorded entry that was changed, removed or
replaced makes the sandbox "not clean", so the judge never reuses it. Runs inside the sandbox.
"""
from __future__ import annotations

import ctypes
import os
import platform
import resource
import shutil
import signal
import stat
import time

WRITABLE = ("/tmp", "/scratch", "/dev/shm")  # a runner's only writable folders (bubblewrap modes): all else is read-only

Snapshot = dict[str, tuple[int, int, int, int]]  # path -> (mode, uid, size, mtime) of a file; size 0 for a folder


FROZEN = ("/", "/dev")  # read-only mounts (bubblewrap modes): a runner cannot change them, and the zygote checks it


IOPRIO_GET = {"x86_64": 252, "aarch64": 31}  # ioprio_get's syscall number (no wrapper in Python)


def own_state() -> tuple:
    """This process's limits and scheduling: what every runner the zygote forks inherits.

    In user mode a runner has its zygote's uid, and ``prlimit``, ``setpriority``,
    ``sched_setscheduler`` and ``ioprio_set`` on a process of one's own uid need no ptrace:
    a runner could lower the zygote's address-space limit (the next honest answer then fails
    to allocate) or its priority. The sandbox is clean only while this is unchanged.
    """
    limits = tuple(resource.getrlimit(getattr(resource, name)) for name in sorted(dir(resource))
                   if name.startswith("RLIMIT_"))
    ioprio = -1
    number = IOPRIO_GET.get(platform.machine())
    if number is not None:
        ioprio = ctypes.CDLL(None, use_errno=True).syscall(number, 1, 0)  # IOPRIO_WHO_PROCESS, this process
    return (limits, os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0),
            os.sched_getparam(0).sched_priority, ioprio)


def _fingerprint(st: os.stat_result) -> tuple[int, int, int, int]:
    if stat.S_ISDIR(st.st_mode):
        return (st.st_mode, st.st_uid, 0, 0)  # a folder's size and mtime follow its entries, checked one by one
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return (st.st_mode, st.st_uid, st.st_rdev, 0)  # a device's times move with its use
    return (st.st_mode, st.st_uid, st.st_size, st.st_mtime_ns)


def snapshot(folders: tuple[str, ...] = WRITABLE) -> Snapshot:
    """Every path in ``folders`` now, not descending into other mounts (bubblewrap's bind mounts)."""
    found: Snapshot = {}
    for folder in folders:
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            continue
        found[folder] = _fingerprint(st)
        _record(folder, st.st_dev, found)
    return found


def _record(path: str, dev: int, found: Snapshot) -> None:
    for entry in os.scandir(path):
        st = entry.stat(follow_symlinks=False)
        found[entry.path] = _fingerprint(st)
        if stat.S_ISDIR(st.st_mode) and st.st_dev == dev:
            _record(entry.path, dev, found)


def sweep(me: int, keep: Snapshot, frozen: Snapshot | None = None, state: tuple | None = None) -> bool:
    """End every process but init and the zygote ``me``; restore the folders to ``keep``; True if clean.

    ``frozen``: ``snapshot(FROZEN)`` before the first runner; the sandbox is clean only if the
    read-only rest of it (``/``, ``/course``, ``/dev``) is exactly as it was, so a zygote is reused
    only when nothing outside its writable folders changed. ``state``: ``own_state()`` before the
    first runner; the zygote's limits and scheduling must be unchanged too.

    Clean means ``/proc`` lists nothing but those two: a zombie counts until init has reaped it,
    since a process whose main thread left with a bare ``exit`` reads as a zombie while its other
    threads run on. ``kill(-1)`` is sent every round, whatever ``/proc`` seems to say.
    """
    for _ in range(400):
        try:
            os.kill(-1, signal.SIGKILL)  # every process this one may signal (thread groups whole), except init and itself
        except OSError:
            pass
        if not [name for name in os.listdir("/proc") if name.isdigit() and int(name) not in (1, me)]:
            break
        time.sleep(0.005)
    else:
        return False
    for kind in ("shm", "msg", "sem"):  # System V objects outlive their process: the slot is not reused
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                if len(f.read().splitlines()) > 1:
                    return False
        except OSError:
            pass
    if state is not None and own_state() != state:
        return False  # a runner changed what the next ones inherit (its limits, its priority)
    return restore(keep) and (frozen is None or _unchanged(frozen))


def _unchanged(frozen: Snapshot) -> bool:
    try:
        return snapshot(FROZEN) == frozen
    except OSError:
        return False


def restore(keep: Snapshot, folders: tuple[str, ...] = WRITABLE) -> bool:
    """Remove what is not in ``keep``; True if every folder is exactly as recorded again."""
    try:
        for folder in folders:
            if folder not in keep:
                continue
            st = os.lstat(folder)
            if _fingerprint(st) != keep[folder] or not _prune(folder, st.st_dev, keep):
                return False
        return all(os.path.lexists(path) for path in keep)
    except OSError:
        return False


def _prune(path: str, dev: int, keep: Snapshot) -> bool:
    for entry in list(os.scandir(path)):
        st = entry.stat(follow_symlinks=False)
        if entry.path in keep:
            if _fingerprint(st) != keep[entry.path]:
                return False  # a recorded entry was changed or replaced
            if stat.S_ISDIR(st.st_mode) and st.st_dev == dev and not _prune(entry.path, dev, keep):
                return False
            continue
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(entry.path)  # a file, or a symlink: removed, never followed
            continue
        if st.st_dev != dev:
            return False  # a mount nobody recorded
        shutil.rmtree(entry.path, ignore_errors=True)
        if os.path.lexists(entry.path):  # locked (mode 000): open its own folders, then again
            _open_up(entry.path)
            shutil.rmtree(entry.path, ignore_errors=True)
        if os.path.lexists(entry.path):
            return False
    return True


def _open_up(top: str) -> None:
    """Mode 0700 on ``top`` and every folder below it that is not a symlink (walked without following any)."""
    os.chmod(top, 0o700)
    for root, dirs, _files in os.walk(top):
        for name in dirs:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o700)
