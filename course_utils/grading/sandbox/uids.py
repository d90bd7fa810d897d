"""Sandbox uids: one per live runner machine-wide, and what a uid-mode runner leaves is taken back.

Root mode and uid mode run student code as a host uid that is no account. Two runners that
share one may signal each other (uid mode has no pid namespace: ``kill(-1)`` reaches every
process of the uid) and share the per-uid process count, so each runner (each zygote in root
mode) leases its uid here: a lock file in a folder only root can enter, held while it runs, so
no other slot and no other grader on the machine gets that uid until it is given back.

Uid mode has no private mounts: the runner can write its home, and every world-writable folder
of the machine. When it ends, ``take_back`` removes whatever its uid owns in the usual ones
(``SHARED``) and its System V IPC objects; while it runs, ``held_bytes`` counts them against
the memory cap where no cgroup does.

Nor does it have a private view of the files: every runner is an "other" user of the machine. So
before a uid-mode batch, ``seal`` takes the "other" permission bits off what no runner may read (the
course's checkout but for the way to its Python installation, the submissions, the results), and
``readable_by`` checks, as a leased uid, that none of it can be read (``cli``: else nothing is graded).
"""
from __future__ import annotations

import ctypes
import fcntl
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

from .limits import INODE_BYTES  # kernel memory of one file in a tmpfs, blocks aside

LEASES = 1000  # uids per mode: first, first + 1, ... (never real accounts)
SHARED = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue")  # world-writable on most systems
DEPTH = 16  # how deep the walks go into folders the uid could write
ENTRIES = 100_000  # entries under one of the uid's folders that are counted, at most
UNBOUNDED = 1 << 62  # what a tree past those bounds counts as


class Lease:
    """A uid held for one runner (or one zygote) until ``release``."""

    def __init__(self, first: int) -> None:
        folder = _lock_folder()
        for uid in range(first, first + LEASES):
            fd = os.open(os.path.join(folder, str(uid)), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # per open file: another thread of this judge too
            except OSError:
                os.close(fd)
                continue
            self.uid, self._fd = uid, fd
            kill_uid(uid)  # a grader that died left its runner's processes: they go before the uid is reused
            take_back(uid)
            return
        raise RuntimeError(f"all {LEASES} sandbox uids from {first} are in use by runners of this machine")

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _lock_folder() -> str:
    """Root's own folder for the leases (a runner that could open a lock file could hold a uid)."""
    base = "/run" if os.path.isdir("/run") and os.access("/run", os.W_OK) else tempfile.gettempdir()
    folder = os.path.join(base, "course-grader-uids")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise RuntimeError(f"{folder} is not a private folder of this user (mode {st.st_mode & 0o777:o}, owner "
                           f"{st.st_uid}): remove it and grade again")
    return folder


def _kill_all_as(uid: int) -> None:
    """``kill(-1, SIGKILL)`` from a child that became ``uid``: the kernel signals every process of the uid at once,
    under the lock that fork takes, so a chain of processes that each start the next and exit cannot slip between
    a listing of /proc and the kill (as it could, under load, from the listing alone)."""
    pid = os.fork()
    if pid == 0:  # only async-signal-safe calls here: the grader has threads
        try:
            os.setuid(uid)  # real, effective and saved: kill(-1) reaches exactly that uid's processes (not itself)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def kill_uid(uid: int) -> int:
    """SIGKILL every process of ``uid`` until none is left (a double-forked daemon too); how many were seen."""
    seen = 0
    for _ in range(100):
        if os.geteuid() == 0 and uid > 0:
            _kill_all_as(uid)
        found = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    if os.stat(f"/proc/{pid}").st_uid == uid:
                        found.append(int(pid))
                except OSError:
                    pass
        if not found:
            break
        seen += len(found)
        for victim in found:
            try:
                os.kill(victim, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
    return seen


def _owned(uid: int, folders: tuple[str, ...] = SHARED) -> list[tuple[str, os.stat_result]]:
    """The topmost paths ``uid`` owns in ``folders``, looking only into folders it could write (no link followed)."""
    found: list[tuple[str, os.stat_result]] = []

    def walk(path: str, dev: int, depth: int) -> None:
        try:
            entries = list(os.scandir(path))
        except OSError:
            return
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid == uid:
                found.append((entry.path, st))
            elif (stat.S_ISDIR(st.st_mode) and st.st_dev == dev and st.st_mode & 0o002 and depth < DEPTH):
                walk(entry.path, dev, depth + 1)  # world-writable: the uid may have put something inside

    for folder in folders:
        try:
            st = os.lstat(folder)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            walk(folder, st.st_dev, 0)
    return found


def _size(path: str, st: os.stat_result) -> int:
    """Bytes under ``path``; a tree deeper than ``DEPTH`` or wider than ``ENTRIES`` counts as unbounded."""
    if not stat.S_ISDIR(st.st_mode):
        return st.st_blocks * 512 + INODE_BYTES
    total, seen, todo = INODE_BYTES, 0, [(path, 0)]
    while todo:
        folder, depth = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        seen += len(entries)
        if depth > DEPTH or seen > ENTRIES:
            return UNBOUNDED  # no honest answer builds this: the runner is stopped for memory
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += info.st_blocks * 512 + INODE_BYTES  # an empty file still holds kernel memory
            if stat.S_ISDIR(info.st_mode):
                todo.append((entry.path, depth + 1))
    return total


def held_bytes(uid: int, folders: tuple[str, ...] = SHARED) -> int:
    """What ``uid`` holds in the shared folders and in System V shared memory (memory no resident size shows)."""
    return sum(_size(p, st) for p, st in _owned(uid, folders)) + sum(size for _kind, _id, size in _ipc(uid))


def take_back(uid: int, folders: tuple[str, ...] = SHARED) -> list[str]:
    """Remove what ``uid`` owns in the shared folders and its System V IPC objects; what could not be removed.

    Call it after ``kill_uid``: nothing of the uid runs any more, so nothing moves while it is removed.
    """
    left = []
    for path, _st in _owned(uid, folders):
        remove_tree(path)
        if os.path.lexists(path):
            left.append(path)
    libc = ctypes.CDLL(None, use_errno=True)
    for kind, ident, _bytes in _ipc(uid):  # IPC_RMID is 0: shmctl(id, 0, NULL), msgctl(id, 0, NULL), semctl(id, 0, 0)
        if kind == "sem":
            libc.semctl(ident, 0, 0)
        else:
            getattr(libc, f"{kind}ctl")(ident, 0, None)
    left += [f"System V {kind} {ident}" for kind, ident, _s in _ipc(uid)]
    return left


def remove_tree(path: str) -> None:
    """Remove ``path`` and everything below it: any depth, no link followed, no mode bit in the way (as root)."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            rm = shutil.which("rm", path="/usr/bin:/bin") or "rm"
            subprocess.run([rm, "-rf", "--one-file-system", "--", path], capture_output=True, timeout=120, check=False)
        else:
            os.unlink(path)
    except (OSError, subprocess.TimeoutExpired):
        pass


def _ipc(uid: int) -> list[tuple[str, int, int]]:
    """(kind, id, bytes) of every System V IPC object ``uid`` owns (from /proc/sysvipc)."""
    found = []
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                head, *rows = f.read().splitlines()
        except (OSError, ValueError):
            continue
        names = head.split()
        for row in rows:
            values = dict(zip(names, row.split()))
            try:
                if int(values["uid"]) == uid or int(values.get("cuid", -1)) == uid:
                    found.append((kind, int(values["shmid" if kind == "shm" else "msqid" if kind == "msg" else "semid"]),
                                  int(values.get("size", 0)) if kind == "shm" else 0))
            except (KeyError, ValueError):
                continue
    return found


def seal(paths: list[str], keep: list[str]) -> list[str]:
    """Take the "other" bits off each of ``paths`` (never following a link); the paths it changed.

    A folder on the way to one of ``keep`` (the Python installation a runner imports from, e.g. a
    checkout's ``.venv``) keeps only its "other" search bit, and each of its entries is sealed the
    same way, so a runner reaches ``keep`` and nothing beside it.
    """
    kept = [os.path.realpath(k) for k in keep]
    changed: list[str] = []

    def close(path: str, depth: int) -> None:
        try:
            st = os.lstat(path)
        except OSError:
            return
        real = os.path.realpath(path)
        if stat.S_ISLNK(st.st_mode) or real in kept or depth > DEPTH:
            return
        mode = stat.S_IMODE(st.st_mode)
        new = mode & ~0o007
        try:
            if stat.S_ISDIR(st.st_mode) and any(k.startswith(real.rstrip("/") + "/") for k in kept):
                for name in os.listdir(path):
                    close(os.path.join(path, name), depth + 1)
                new = mode & ~0o006
            if new != mode:
                os.chmod(path, new)
                changed.append(path)
        except OSError:  # a read-only or foreign file system: ``readable_by`` tells whether it matters
            pass

    for path in paths:
        close(os.path.abspath(path), 0)
    return changed


READ_PROBE = r"""
import json, os, sys
uid = int(sys.argv[1])
os.setgroups([])
os.setresgid(uid, uid, uid)
os.setresuid(uid, uid, uid)
seen = []
for path in json.loads(sys.argv[2]):
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as f:
                f.read(1)
        seen.append(path)
    except OSError:
        pass
print(json.dumps(seen))
"""


def readable_by(first: int, paths: list[str]) -> list[str]:
    """Which of ``paths`` a uid-mode runner could read or list (checked as a leased uid of ``first``'s range)."""
    lease = Lease(first)
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", READ_PROBE, str(lease.uid), json.dumps(paths)],
                              capture_output=True, text=True, timeout=60, check=False, cwd="/")
        return json.loads(done.stdout) if done.returncode == 0 else [f"(the check failed: {done.stderr[-160:]})"]
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        return [f"(the check failed: {type(exc).__name__})"]
    finally:
        lease.release()


def hide_batch(submissions: list[str], course: str, outputs: list[str], keep: list[str], first: int) -> str:
    """Before a uid-mode batch: what no runner may read is sealed, and checked; the first path still readable, or ''.

    Sealed: the submissions, the course's checkout (``solutions/``, the checks, the tests, its history) but for
    the way to ``keep`` (the Python installation), and the outputs that exist (a result store of an earlier run);
    the judge's umask becomes 077, so nothing it writes later (results, feedback) is readable by other users.
    """
    os.umask(0o077)
    existing = [p for p in outputs if os.path.lexists(p)]
    seal([*submissions, course, *existing], keep)
    secret = [os.path.join(course, name) for name in ("solutions", os.path.join("course_utils", "checks"), "tests")]
    seen = readable_by(first, [*submissions, course, *[p for p in secret if os.path.lexists(p)], *existing])
    return seen[0] if seen else ""
