"""One warm sandbox per worker slot: torch imported once, a forked runner per runner start.

Starting a runner costs a Python start and ``import torch`` (about 1.4 s), more than most
submissions' own work. In the bubblewrap modes each slot therefore keeps one sandbox whose
first process, the zygote (``runner.serve``), imports torch and the probes and then forks
a fresh runner for each job. The zygote never runs student code and never reads anything
a runner wrote. Between two runners it ends every other process of the sandbox, checks that
no System V object survived, puts ``/tmp``, ``/scratch`` and ``/dev/shm`` back as they were
before the first runner and checks that the read-only rest is unchanged (``sweep.py``). A sandbox
is used again only after a runner that ended by itself with status 0, read to its end by
the judge, and a clean report (``Worker.stop``); anything else (a timeout, memory, a flood
or broken channel, a crash) takes the whole sandbox with it: the next runner start makes a
new one. Memory and process caps (``Limits``) are the slot's and hold for the zygote and its
runner together, as they held for one runner process before; without cgroups the judge adds
what the sandbox's tmpfs folders hold to their resident memory. In root mode the sandbox leases
its runners' uid (``uids.Lease``) for as long as it lives.
"""
from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import threading

from ...paths import PACKAGE as COURSE_UTILS
from . import sandbox
from .limits import Limits, slot_cpu
from .uids import Lease

MODES = ("root", "user")  # where a zygote is used; uid mode and no sandbox start one process per runner
SCRATCH_BYTES = 256 << 20


class Zygote:
    """A slot's sandbox: the bubblewrap process, its limits, and the socket its zygote listens on."""

    def __init__(self, mode: str, memory: int, slot: int, slots: int) -> None:
        self.limits = Limits(memory, slot_cpu(slot, slots))
        self.memory = memory
        self.ready = False
        self.baseline = 0  # the zygote's resident bytes, not counted against a runner (rlimit fallback)
        self.dead = False
        judge_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        seccomp_fd = sandbox.seccomp_pipe()
        self.lease = Lease(sandbox.ROOT_MODE_FIRST_UID) if mode == "root" else None  # no other live runner's uid
        uid = self.lease.uid if self.lease is not None else None
        try:
            cmd = sandbox.bwrap_command(mode, COURSE_UTILS, SCRATCH_BYTES, seccomp_fd, uid, zygote=True)
            self.proc = subprocess.Popen(self.limits.wrap(cmd), stdin=zygote_end.fileno(), stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, cwd="/", env={"PATH": "/usr/bin:/bin"},
                                         start_new_session=True,
                                         pass_fds=(seccomp_fd,) if seccomp_fd is not None else ())
        except BaseException:
            self.limits.close(None)
            if self.lease is not None:
                self.lease.release()
            judge_end.close()
            raise
        finally:
            zygote_end.close()
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        judge_end.setblocking(False)
        self.control = judge_end
        self.oom_before = 0

    def fork(self) -> tuple[int, int]:
        """Ask for a runner; returns (job pipe to write, result channel to read), the runner's ends sent over."""
        job_r, job_w = os.pipe()
        result_r, result_w = os.pipe()
        try:
            self.oom_before = self.limits.oom_count()
            socket.send_fds(self.control, [b"run"], [job_r, result_w])
        except OSError:
            for fd in (job_w, result_r):
                os.close(fd)
            self.dead = True
            raise
        finally:
            os.close(job_r)
            os.close(result_w)
        return job_w, result_r

    def poll(self) -> dict | None:
        """The runner's end ``{"rc": int, "clean": bool, "cpu": float | None}`` once the zygote reports it (or died),
        else None; ``cpu``: the runner's CPU-seconds as the kernel counted them for the zygote (None: unknown)."""
        while True:
            try:
                data = self.control.recv(4096)  # one datagram: a small JSON object from the zygote
            except BlockingIOError:
                if self.proc.poll() is not None:
                    self.dead = True
                    return {"rc": -9, "clean": False, "cpu": None}
                return None
            except OSError:
                data = b""
            if not data:  # the zygote is gone (a runner in user mode may kill it): this sandbox is done
                self.dead = True
                return {"rc": -9, "clean": False, "cpu": None}
            try:
                message = json.loads(data)
            except ValueError:
                message = None
            if not isinstance(message, dict):
                self.dead = True
                return {"rc": -9, "clean": False, "cpu": None}
            if message.get("kind") == "ready":
                self.ready = True
                self.baseline = int(message.get("rss", 0))
                continue
            if message.get("kind") == "ended":
                cpu = message.get("cpu")
                return {"rc": int(message.get("rc", -9)), "clean": message.get("clean") is True,
                        "cpu": float(cpu) if isinstance(cpu, (int, float)) else None}
            self.dead = True
            return {"rc": -9, "clean": False, "cpu": None}

    def over_memory(self) -> bool:
        if self.limits.cgroups:
            return False  # the kernel enforces it (files in the sandbox's tmpfs folders are charged to the cgroup)
        from .limits import folders_used, tree_rss

        held = tree_rss(self.proc.pid) - self.baseline
        return held > self.memory or held + folders_used(self.proc.pid, sandbox.WRITABLE) > self.memory

    def oom_killed(self) -> bool:
        return self.limits.oom_count() > self.oom_before

    def kill(self) -> None:
        """End the sandbox and everything in it."""
        self.dead = True
        self.limits.end(self.proc)
        self.control.close()
        if self.lease is not None:  # the sandbox and its pid namespace are gone: the uid is free again
            self.lease.release()


_slots: dict[tuple[int, str, int], Zygote] = {}
_lock = threading.Lock()


def for_slot(mode: str, memory: int, slot: int, slots: int) -> Zygote:
    """The slot's live zygote, started now if there is none (or the last one was not clean)."""
    key = (slot, mode, memory)
    with _lock:
        z = _slots.get(key)
        if z is not None and (z.dead or z.proc.poll() is not None):
            z.kill()
            z = None
        if z is None:
            z = _slots[key] = Zygote(mode, memory, slot, slots)
        return z


def warm_up(mode: str, memory: int, count: int, slots: int) -> None:
    """Start the zygotes of the first ``count`` of ``slots`` slots now (they import torch while the judge
    imports the checks)."""
    if mode in MODES:
        for slot in range(count):
            for_slot(mode, memory, slot, slots)


def close_all() -> None:
    """End every zygote of this process (the batch is over)."""
    with _lock:
        zygotes = list(_slots.values())
        _slots.clear()
    for z in zygotes:
        z.kill()


def discard(z: Zygote) -> None:
    """Never use ``z`` again: end it and forget it."""
    with _lock:
        for key, value in list(_slots.items()):
            if value is z:
                del _slots[key]
    z.kill()


atexit.register(close_all)
