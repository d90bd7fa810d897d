"""One runner start: the sandboxed process, its limits, its channel, and how it ends.

The judge (``judge._run_all``) starts a ``Worker`` per runner start and feeds ``wait`` its
deadlines; everything about the process lives here: the command for the sandbox mode, the
limits, the job written on stdin, the reader thread that counts every byte against
``MAX_TOTAL`` and turns any failure into a mark (``flood``, ``garbled``, ``unreadable``), never
an exception, and the end: the process tree, its cgroup and, in uid mode, every process of its
uid killed, a setsid daemon included.
"""
from __future__ import annotations

import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from typing import IO, Protocol

from ..paths import PACKAGE as COURSE_UTILS
from . import sandbox
from .limits import MAX_PROCESSES, Limits
from .protocol import MAX_FRAME, MAX_MESSAGES, MAX_TOTAL, ProtocolError, TooLarge, frame, read_frame

SCRATCH_BYTES = 256 << 20


class RunnerOptions(Protocol):
    """What a runner start needs of the grading options (``judge.Options`` has it)."""

    memory: int
    slots: int
    sandbox: sandbox.Sandbox


class Worker:
    """One runner start: the process, its limits, and the messages it sent."""

    def __init__(self, options: RunnerOptions, slot: int) -> None:
        """Start the runner now; it imports torch and the probes, then waits for ``send_job``.

        Starting it before the job is chosen lets the judge's own work (importing the checks,
        choosing inputs) overlap the runner's start-up (``batch.grade_batch`` starts one per slot
        first thing); nothing of the student's is in the runner before its job arrives.
        """
        self.messages: queue.Queue = queue.Queue()
        self.bytes = 0  # read from the runner's channel
        self.flood = False
        self.garbled = False
        self.unreadable = ""  # why the reader thread failed (an exception's type), if it did
        self.scratch: str | None = None
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        pin = cpus[slot % len(cpus)] if cpus and options.slots <= len(cpus) else None
        self.limits = Limits(options.memory, pin)
        self.memory = options.memory
        self.job_sent = False
        mode = options.sandbox.mode
        self.uid: int | None = None  # uid mode: every process of this uid is killed when the runner ends
        seccomp_fd = sandbox.seccomp_pipe() if mode in ("root", "user") else None
        try:
            if mode == "uid":
                self.uid = sandbox.uid_for(slot)
                self.scratch, home = sandbox.uid_dir(self.uid)
                cmd = sandbox.uid_command(self.scratch, self.uid)
                env, cwd = sandbox.runner_env({"HOME": home, "TMPDIR": home}), home
            elif mode == "none":
                self.scratch = tempfile.mkdtemp(prefix="grade-")
                cmd = sandbox.plain_command()
                env = sandbox.runner_env({"HOME": self.scratch, "TMPDIR": self.scratch})
                cwd = self.scratch
            else:
                uid = sandbox.ROOT_MODE_FIRST_UID + slot if mode == "root" else None
                cmd = sandbox.bwrap_command(mode, COURSE_UTILS, SCRATCH_BYTES, seccomp_fd, uid)
                env, cwd = {"PATH": "/usr/bin:/bin"}, "/"
            self.proc = subprocess.Popen(self.limits.wrap(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, cwd=cwd, env=env, start_new_session=True,
                                         pass_fds=(seccomp_fd,) if seccomp_fd is not None else ())
        except BaseException:
            self.limits.close(None)
            if self.scratch:
                shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        self.started = time.monotonic()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def send_job(self, job: dict) -> None:
        """Hand the runner its job (once): the cells, the exercises to grade and their inputs."""
        assert not self.job_sent, "a runner takes one job"
        self.job_sent = True
        job = dict(job, memory=self.memory, processes=0 if self.limits.cgroups else MAX_PROCESSES)
        threading.Thread(target=self._write, args=(frame(job),), daemon=True).start()

    def _write(self, data: bytes) -> None:
        try:  # a runner that never reads its input only blocks this thread, which ends when it is killed
            stdin = self.proc.stdin
            assert stdin is not None  # started with stdin=PIPE
            stdin.write(data)
            stdin.close()
        except (OSError, ValueError):
            pass

    def _read(self) -> None:
        """Read frames until the runner ends; any failure stops it and marks the row, never the batch."""
        count = 0
        worker = self

        stdout = worker.proc.stdout
        assert stdout is not None  # started with stdout=PIPE
        channel: IO[bytes] = stdout

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

    def wait(self, deadline: dict, on_message) -> str:
        """Feed messages to ``on_message`` until the runner ends; return done | timeout | memory | flood | garbled | died.

        The runner is stopped at ``min(deadline["hard"], deadline["step"])``: the hard deadline is
        fixed at start (the judge adds a short grace once per exercise, after its first result, so a
        loaded machine can still confirm it); ``step`` (the per-exercise limit after the last sign of progress) can only
        be moved by ``on_message`` to a time that is still before the hard one.
        """
        outcome = "done"
        while True:
            self._drain(on_message)
            if self.proc.poll() is not None and self.uid is not None and self.reader.is_alive():
                sandbox.kill_uid(self.uid)  # a daemon it left may hold the channel open: end it now
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            if time.monotonic() > min(deadline["hard"], deadline["step"]):
                outcome = "timeout"
                break
            if self.flood or self.garbled or self.unreadable:
                outcome = "flood" if self.flood else "garbled" if self.garbled else "unreadable"
                break
            if self.limits.over_memory(self.proc.pid):
                outcome = "memory"
                break
            time.sleep(0.02)
        self.stop()
        self._drain(on_message)
        if outcome == "done" and self.proc.returncode != 0:
            outcome = "memory" if self.limits.oom_killed() else "died"
        return outcome

    def _drain(self, on_message) -> None:
        while True:
            try:
                on_message(self.messages.get_nowait())
            except queue.Empty:
                return

    def stop(self) -> None:
        self.limits.close(self.proc.pid if self.proc.poll() is None else None)
        try:
            self.proc.kill()
        except OSError:
            pass
        self.proc.wait()
        if self.uid is not None:
            sandbox.kill_uid(self.uid)  # setsid daemons are no descendants, but they keep the uid
        self.reader.join(timeout=5)
        for stream in (self.proc.stdout, self.proc.stdin):
            try:
                if stream is not None:
                    stream.close()
            except (OSError, ValueError):
                pass
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
