"""One runner start: the sandboxed process, its limits, its channel, and how it ends.

The judge (``grade_file._run_all``) starts a ``Worker`` per runner start and feeds ``wait`` its
deadline and the session's ``on_message`` (``session.py``); everything about the process lives
here: the command for the sandbox mode, the limits, the job written on stdin, the reader thread that counts every byte against
``MAX_TOTAL`` and turns any failure into a mark (``flood``, ``garbled``, ``unreadable``), never
an exception, and the end: the process tree, its cgroup and, in uid mode, every process of its
uid killed, a setsid daemon included.
"""
from __future__ import annotations

import os
import queue
import subprocess
import tempfile
import threading
import time
from typing import IO, Protocol

from . import sandbox, uids, zygote
from .limits import MAX_PROCESSES, Limits, slot_cpu, uid_memory
from .protocol import MAX_FRAME, MAX_MESSAGES, MAX_TOTAL, TIME_UP, ProtocolError, TooLarge, frame, read_frame
from .session import Deadline, Outcome, ended_by


class RunnerOptions(Protocol):
    """What a runner start needs of the grading options (``grade_file.Options`` has it)."""

    memory: int
    slots: int
    sandbox: sandbox.Sandbox


class Worker:
    """One runner start: the process, its limits, and the messages it sent.

    In the bubblewrap modes the runner is forked by the slot's zygote (``zygote.py``: torch is
    imported once per slot, not once per runner); in uid mode and without a sandbox it is a
    process of its own. Either way it gets its job on a pipe and answers on another.
    """

    def __init__(self, job: dict, options: RunnerOptions, slot: int) -> None:
        """Start the runner (fork it from the slot's zygote, or start its process) and write it ``job``."""
        self.messages: queue.Queue = queue.Queue()
        self.bytes = 0  # read from the runner's channel
        self.flood = False
        self.garbled = False
        self.unreadable = ""  # why the reader thread failed (an exception's type), if it did
        self.scratch: str | None = None
        self.zygote: zygote.Zygote | None = None
        self.proc: subprocess.Popen[bytes] | None = None  # uid mode and no sandbox: the runner's own process
        self.end: dict | None = None  # zygote mode: the runner's end as the zygote reported it
        self.cpu: float | None = None  # uid mode and no sandbox: the runner's CPU-seconds, from the judge's wait4
        self.cpu_limit = float(job["cpu_seconds"])  # its RLIMIT_CPU (soft): reached, it ended in a timeout
        self.oom = False  # zygote mode: the kernel killed one of its processes for memory (set by ``stop``)
        self.uid: int | None = None  # uid mode: every process of this uid is killed when the runner ends
        self.lease: uids.Lease | None = None  # uid mode: holds ``uid`` for this runner alone until it has ended
        self.held = (0.0, 0, 0)  # uid mode: (when, bytes in files and System V memory, in its processes)
        mode = options.sandbox.mode
        if mode in zygote.MODES:
            self._fork(options, slot)
        else:
            self._spawn(options, slot)
        self.started = time.monotonic()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        job = dict(job, memory=options.memory, processes=0 if self.limits.cgroups else MAX_PROCESSES)
        threading.Thread(target=self._write, args=(frame(job),), daemon=True).start()

    def _fork(self, options: RunnerOptions, slot: int) -> None:
        for attempt in range(2):  # a zygote that died since its last runner is replaced once
            z = zygote.for_slot(options.sandbox.mode, options.memory, slot, options.slots)
            try:
                job_w, result_r = z.fork()
                break
            except OSError:
                zygote.discard(z)
                if attempt:
                    raise
        self.zygote = z
        self.limits = z.limits
        self.job_pipe: IO[bytes] = os.fdopen(job_w, "wb")
        self.channel: IO[bytes] = os.fdopen(result_r, "rb", buffering=0)

    def _spawn(self, options: RunnerOptions, slot: int) -> None:
        self.limits = Limits(options.memory, slot_cpu(slot, options.slots))
        mode = options.sandbox.mode
        try:
            if mode == "uid":
                self.lease = uids.Lease(sandbox.UID_MODE_FIRST_UID)  # a uid no other live runner has
                self.uid = self.lease.uid
                self.scratch, home = sandbox.uid_dir(self.uid)
                cmd = sandbox.uid_command(self.scratch, self.uid)
                env, cwd = sandbox.runner_env({"HOME": home, "TMPDIR": home}), home
            else:
                self.scratch = tempfile.mkdtemp(prefix="grade-")
                cmd = sandbox.plain_command()
                env = sandbox.runner_env({"HOME": self.scratch, "TMPDIR": self.scratch})
                cwd = self.scratch
            proc = subprocess.Popen(self.limits.wrap(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, cwd=cwd, env=env, start_new_session=True)
        except BaseException:
            self.limits.close(None)
            if self.scratch:
                uids.remove_tree(self.scratch)
            if self.lease is not None:
                self.lease.release()
            raise
        assert proc.stdin is not None and proc.stdout is not None  # started with PIPEs
        self.proc, self.job_pipe, self.channel = proc, proc.stdin, proc.stdout

    def ended(self) -> bool:
        """Whether the runner process has ended (zygote mode: the zygote said so, or is gone)."""
        if self.proc is not None:
            if self.proc.returncode is None:
                self.cpu = reap(self.proc)
            return self.proc.returncode is not None
        if self.end is None:
            assert self.zygote is not None
            self.end = self.zygote.poll()
        return self.end is not None

    def returncode(self) -> int:
        if self.proc is not None:
            return self.proc.returncode
        return self.end["rc"] if self.end is not None else -9

    def cpu_used(self) -> float | None:
        """The ended runner's CPU-seconds as the kernel counted them (never as it reported them); None: unknown."""
        if self.proc is not None:
            return self.cpu
        return self.end.get("cpu") if self.end is not None else None

    def over_memory(self) -> bool:
        if self.zygote is not None:
            return self.zygote.over_memory()
        if self.proc is None or (self.limits.cgroups and self.uid is None):
            return False  # the kernel enforces it (files in tmpfs folders are charged to the cgroup too)
        if self.uid is None:
            return self.limits.over_memory(self.proc.pid)
        if time.monotonic() - self.held[0] > 0.2:  # a walk of the shared folders: a few times a second
            # its private home too (under the grader's TMPDIR, a tmpfs on many systems: issue 48 item 3)
            files = uids.held_bytes(self.uid, uids.SHARED + ((self.scratch,) if self.scratch else ()))
            # every process of its uid (a setsid daemon is no descendant of the runner), and the removed files
            # they keep open or mapped (in no folder: on a disk, no cgroup's memory either)
            resident, removed = uid_memory(self.uid)
            self.held = (time.monotonic(), files + removed, resident)
        if self.limits.cgroups:  # files on a disk are no cgroup's memory: bounded by the cap all the same
            return self.held[1] > self.limits.memory
        return self.limits.over_memory(self.proc.pid, self.held[1], self.held[2])

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this runner for passing the memory cap (after ``stop``)."""
        return self.oom if self.zygote is not None else self.limits.oom_killed()

    def _write(self, data: bytes) -> None:
        try:  # a runner that never reads its input only blocks this thread, which ends when it is killed
            self.job_pipe.write(data)
            self.job_pipe.close()
        except (OSError, ValueError):
            pass

    def _read(self) -> None:
        """Read frames until the runner ends; any failure stops it and marks the row, never the batch."""
        count = 0
        worker = self

        channel: IO[bytes] = worker.channel

        class Counted:  # the channel, counting what the judge reads from it
            def read(self, n: int) -> bytes:
                data = channel.read(n)
                worker.bytes += len(data)
                return data

        stream = Counted()
        try:
            while True:
                left = MAX_TOTAL - self.bytes - 4  # every byte counts, the frame heads too
                if left < 0:
                    self.flood = True
                    break
                message = read_frame(stream, min(MAX_FRAME, left))
                if message is None:
                    break
                count += 1
                if count > MAX_MESSAGES:
                    self.flood = True
                    break
                self.messages.put(message)
        except TooLarge:
            self.flood = True
        except (ProtocolError, OSError, ValueError):
            self.garbled = True  # nothing after this point can be read: stop the runner now
        except Exception as exc:  # MemoryError, the allocator's RuntimeError...: this row, never the batch
            self.unreadable = f"{type(exc).__name__}"

    def wait(self, deadline: Deadline, on_message, on_late=None) -> Outcome:
        """Feed messages to ``on_message`` until the runner ends; return how it ended.

        Once the judge decides to stop the runner (a limit, a broken channel), what is read after
        goes to ``on_late`` instead: sent after the limit passed, or too late to tell, it must not
        count nor move the blame to the next exercise (a looping answer interrupted at the limit
        could otherwise confirm its own result and begin the next exercise, which then scored 0).

        The runner is stopped at ``deadline.due()``, ``min(hard, step)``: the hard deadline is
        fixed at start (the judge adds a short grace once per exercise, after its first result, so a
        loaded machine can still confirm it); ``step`` (the per-exercise limit after the last sign of progress) can only
        be moved by ``on_message`` to a time that is still before the hard one.
        """
        outcome = Outcome.DONE
        while True:
            self._drain(on_message)
            # first: a channel the runner broke decides, even if the runner has ended since (a fast
            # runner can finish the rest of its job after the reader stopped reading it)
            if self.flood or self.garbled or self.unreadable:
                outcome = Outcome.FLOOD if self.flood else Outcome.GARBLED if self.garbled else Outcome.UNREADABLE
                break
            if self.ended() and self.uid is not None and self.reader.is_alive():
                uids.kill_uid(self.uid)  # a daemon it left may hold the channel open: end it now
            if self.ended() and not self.reader.is_alive():
                break
            if time.monotonic() > deadline.due():
                outcome = Outcome.TIMEOUT
                break
            if self.over_memory():
                outcome = Outcome.MEMORY
                break
            time.sleep(0.02)
        self.stop(reuse=outcome == Outcome.DONE)
        self._drain(on_message if outcome == Outcome.DONE or on_late is None else on_late)
        if outcome == Outcome.DONE and self.returncode() != 0:  # its CPU limit reads as the judge's timeout
            outcome = Outcome.MEMORY if self.oom_killed() else ended_by(self.returncode(), self.cpu_used(),
                                                                        self.cpu_limit)
        return outcome

    def _drain(self, on_message) -> None:
        while True:
            try:
                on_message(self.messages.get_nowait())
            except queue.Empty:
                return

    def stop(self, reuse: bool = False) -> None:
        """End the runner and everything it started.

        A zygote is kept only when ``reuse`` (the judge saw the runner through to its end) and the
        runner exited by itself with status 0 and the zygote reported its sandbox clean; a runner
        the judge stopped, one that died, or any doubt: the sandbox goes with it.
        """
        if self.zygote is not None:
            self.oom = self.zygote.oom_killed()
            # status 0, or TIME_UP: the runner ended itself after its exercise's time ran out (as trusted as 0)
            ended_well = (self.ended() and self.end is not None and self.end["clean"]
                          and self.end["rc"] in (0, TIME_UP))
            if not (reuse and ended_well):
                zygote.discard(self.zygote)
        else:
            assert self.proc is not None
            self.limits.end(self.proc)
        left: list[str] = []
        if self.uid is not None:
            uids.kill_uid(self.uid)  # setsid daemons are no descendants, but they keep the uid
            left = uids.take_back(self.uid)  # its files in /tmp, /var/tmp, /dev/shm...; its System V objects
        self.reader.join(timeout=5)
        for stream in (self.channel, self.job_pipe):
            try:
                stream.close()
            except (OSError, ValueError):
                pass
        if self.scratch:
            uids.remove_tree(self.scratch)
            left += [self.scratch] if os.path.lexists(self.scratch) else []
        if self.lease is not None and not left:  # nothing of the uid is left: another runner may have it now
            self.lease.release()  # (else it stays held by this judge: no later runner inherits what is left)


def reap(proc: subprocess.Popen) -> float | None:
    """Reap ``proc`` if it has ended (setting its ``returncode``) and return its CPU-seconds as the kernel counted
    them (``wait4``: the process and the children it reaped); None while it runs, or when it was reaped elsewhere."""
    try:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    except ChildProcessError:  # reaped already: Popen knows its code, the CPU time is lost
        proc.poll()
        return None
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime
