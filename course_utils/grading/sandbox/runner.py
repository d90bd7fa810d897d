"""The sandboxed process that runs one submission's code; it decides nothing.

It first makes itself harmless (``drop_privileges``, rlimits), then reads the job (cells,
and for each exercise the inputs the judge chose), runs the notebook's code cells in one
namespace, and at each check cell runs that exercise's probe and sends the facts back as
one frame on the result channel (the original stdout). Student output never reaches the
channel: Python-level output is captured and capped, fd-level output goes to /dev/null.
Points are computed by the judge, in another process, from these facts alone. Inside the
sandbox only this module, ``protocol``, ``wire`` and ``course_utils.probes`` exist (see
``sandbox.RUNNER_FILES``): no check code, reference implementation or expected value.
Under bubblewrap a runner is forked from the slot's zygote (``serve``; the judge's side is
``zygote.py``), which imported torch once; elsewhere it is a process of its own (``main``).
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import signal
import socket
import sys
import time

from ...probes.guard import CappedText, failure
from . import sweep
from .protocol import TIME_UP, read_frame, writer

FAKE_RESULT = re.compile(r"(\d+(\.\d+)?/\d+ points|All checks passed)")
CAPTURE_LIMIT = 20_000
CPU_HARD_MARGIN = 5  # CPU-seconds from SIGXCPU (the soft RLIMIT_CPU) to SIGKILL (the hard one)
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
PR_SET_DUMPABLE = 4
CLONE_NEWNS, MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x00020000, 0x4000, 1 << 18, 2, 4, 8


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_privileges(uid: int | None) -> None:
    """Become ``uid`` with no capabilities in any set and no way to regain them; exit if that fails.

    Without ``uid`` and as root, this is the unsandboxed mode (``--no-sandbox`` or no bubblewrap):
    nothing can be dropped without losing the Python installation, and every row says so.
    """
    if uid is None and os.geteuid() == 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if os.geteuid() == 0 and uid is not None:
        for cap in range(64):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    data = (_CapData * 2)()
    libc.capset(ctypes.byref(_CapHeader(0x20080522, 0)), data)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    caps = [int(status[k].strip(), 16) for k in ("CapInh", "CapPrm", "CapEff", "CapAmb")]
    if os.geteuid() == 0 or any(caps) or status["NoNewPrivs"].strip() != "1":
        os._exit(97)


def set_limits(memory: int, cpu_seconds: int, processes: int | None) -> None:
    """Caps that hold for this process and everything it starts (they can only be lowered).

    ``cpu_seconds``: the soft ``RLIMIT_CPU`` (``session.cpu_seconds``), the hard one ``CPU_HARD_MARGIN`` above it,
    so the kernel ends a runner at its limit with ``SIGXCPU``, which the judge can tell from any other death
    (with both equal, Linux sends ``SIGKILL`` at once).
    """
    # RLIMIT_MSGQUEUE 0: no POSIX message queue, which would outlive the runner in the sandbox's IPC namespace
    # RLIMIT_SIGPENDING 1024: POSIX timers and queued signals are kernel memory no --memory counts (96,365 timers,
    # the per-user default here, held 36 MiB); the runner's own limits need two timers
    limits = [(resource.RLIMIT_CORE, 0, 0), (resource.RLIMIT_NOFILE, 256, 256),
              (resource.RLIMIT_FSIZE, 256 << 20, 256 << 20),
              (resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + CPU_HARD_MARGIN), (resource.RLIMIT_MSGQUEUE, 0, 0),
              (resource.RLIMIT_SIGPENDING, 1024, 1024)]
    if memory:
        # RLIMIT_DATA (private writable memory), not RLIMIT_AS: a CUDA build of torch maps ~3 GB of
        # libraries at import (0.8 GB of it data), so an address-space cap of a few GiB would fail
        # every backward there; the data limit counts what code allocates (tensors, arrays, heaps)
        limits.append((resource.RLIMIT_DATA, memory, memory))
    if processes:
        limits.append((resource.RLIMIT_NPROC, processes, processes))
    for what, soft, hard in limits:
        try:
            resource.setrlimit(what, (soft, hard))
        except (ValueError, OSError):  # a lower hard limit was inherited: keep it, and the soft one within it
            try:
                inherited = resource.getrlimit(what)[1]
                resource.setrlimit(what, (min(soft, inherited) if inherited != resource.RLIM_INFINITY else soft,
                                          inherited))
            except (ValueError, OSError):
                pass


class Budget:
    """The runner's own time limit for one exercise: ``cpu`` seconds of CPU time, ``wall`` seconds of the clock.

    It runs from the runner's ``ready``, and again from each ``begin`` that follows a result: the
    events that give the judge's step its time (``session.py``), so every cell and probe between two
    of them shares one budget. The judge's step is a multiple of ``cpu`` and longer than ``wall``, so
    the runner's own limit fires first and an answer that loops gets the same points on every run;
    the judge's clock stops only a runner stuck where no signal reaches Python. The CPU limit
    (``ITIMER_PROF``: this process's CPU time) does not depend on the machine's other work; the wall
    limit catches waits that use none.
    """

    def __init__(self, cpu: float, wall: float) -> None:
        self.cpu, self.wall = cpu, wall
        self.cpu_end = self.wall_end = 0.0
        self.armed = self.fired = False

    def start(self) -> None:
        self.cpu_end, self.wall_end = time.process_time() + self.cpu, time.monotonic() + self.wall
        self.fired = False

    def wall_left(self) -> float:
        return self.wall_end - time.monotonic()

    def spent(self) -> bool:
        """Used up: what is left of the exercise is not started (a half-run cell would differ run to run)."""
        return self.fired or self.wall_left() <= 0 or time.process_time() >= self.cpu_end

    def _timeout(self, signum, frame) -> None:
        if self.armed:  # once per arming: a signal still pending after ``disarm`` raises nothing
            self.armed, self.fired = False, True
            raise TimeoutError

    def arm(self, wall: bool = True) -> None:
        """Raise TimeoutError in this thread when the budget's CPU time (and, with ``wall``, its clock) runs out."""
        self.armed = True
        signal.signal(signal.SIGPROF, self._timeout)
        signal.setitimer(signal.ITIMER_PROF, max(self.cpu_end - time.process_time(), 0.001))
        if wall:
            signal.signal(signal.SIGALRM, self._timeout)
            signal.setitimer(signal.ITIMER_REAL, max(self.wall_left(), 0.001))

    def disarm(self) -> None:
        self.armed = False
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)


def run_cell(source: str, ns: dict, label: str, time_limit: float, capture: CappedText, budget: Budget) -> str | None:
    """Execute one cell within ``budget``; return a one-line description of how it failed, or None.

    ``time_limit`` names the limit in the description (the same whichever of the budget's two fires).
    """
    if budget.spent():
        return failure(TimeoutError(), label, time_limit)[1]
    old = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = capture
    try:
        try:
            budget.arm()
            exec(compile(source, label, "exec"), ns)
        finally:
            budget.disarm()
        return None
    except BaseException as exc:  # student code may raise anything, SystemExit included
        line = ""
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == label:
                line = f", line {tb.tb_lineno}"
            tb = tb.tb_next
        if isinstance(exc, SyntaxError):
            line = f", line {exc.lineno}"
        return failure(exc, label, time_limit, line)[1]
    finally:
        sys.stdout, sys.stderr = old


def run_probes(probes, exercise: str, job: dict, ns: dict, budget: Budget) -> dict:
    """The exercise's probes (``probes``: the package) within ``budget`` (its CPU time here, its clock per call in
    ``guard``); every stage times out at once when the budget was used up before the check (an endless loop
    earlier in the exercise)."""
    names = job["probes"][exercise]
    if not budget.spent():
        try:
            try:
                budget.arm(wall=False)
                return probes.run(exercise, names, ns, job["requests"][exercise], job["time_limit"], budget.wall_left)
            finally:
                budget.disarm()
        except TimeoutError:  # fired in the probe's own code, between two calls of student code
            pass
    hint = (f"{exercise}: the time limit of {job['time_limit']:g} s was used up before the check finished "
            "(an endless loop in the exercise's code?)")
    return {"stages": [{"$error": {"code": "timeout", "hint": hint}} for _ in names], "printed": 0, "first_line": ""}


def load_seccomp(path: str) -> None:
    """Load the sandbox's seccomp filter into this process (uid mode, where no bubblewrap does); exit if it fails."""
    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    with open(path, "rb") as f:
        program = f.read()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(_Prog(len(program) // 8, program)), 0, 0) != 0:
        os._exit(95)


def hide_processes() -> bool:
    """Uid mode, as root before the drop: a mount namespace of its own whose ``/proc`` lists only its uid's processes.

    Where the container allows it (``CAP_SYS_ADMIN``), no other process of the machine (the judge, a shell that
    started it, other runners) is listed; elsewhere (a Kubernetes pod, Gradescope) they are, and what hides the
    files (``uids.hide_batch``) and the judge's arguments (``grade.hide_arguments``) still holds. Kernels before
    5.8 had one set of ``/proc`` options per pid namespace: there the host's ``/proc`` is never touched.
    """
    release = tuple(int(n) for n in re.findall(r"\d+", os.uname().release)[:2])
    if release < (5, 8):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0 or libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return False
    return libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, b"hidepid=invisible") == 0


def _prepare() -> None:
    """Import what every job needs (torch, the probes, the audit hook's module): before any job exists."""
    import torch

    torch.set_num_threads(1)
    from ... import probes  # noqa: F401 - the probes only: no check, reference or expected value is in the sandbox
    from . import audit  # noqa: F401


def _warm() -> None:
    """Run autograd once, before any job: its first call imports more of torch (``torch.autograd.grad``
    pulls in sympy, ~0.3 s), which a zygote then does once per slot instead of once per runner."""
    import torch

    x = torch.linspace(0.5, 1.5, 3, dtype=torch.float64, requires_grad=True)  # no random state is touched
    torch.autograd.gradcheck(torch.exp, (x,))


def main(uid: int | None = None, seccomp_file: str | None = None) -> None:
    """Run one job; ``uid``: the unprivileged user to become first (root and uid modes; see ``sandbox.boot``).

    ``seccomp_file``: the filter to load once unprivileged (uid mode: no bubblewrap loaded one).
    """
    if seccomp_file is not None and uid is not None:
        hide_processes()
    drop_privileges(uid)
    if seccomp_file is not None:
        load_seccomp(seccomp_file)
    # torch first, the job after: the runner imports while the judge is still choosing the job's
    # inputs; no student code exists in this process yet. Warmed as a zygote is, so no mode's first check pays
    # autograd's first-call imports (~0.3 CPU-s) out of its exercise's budget (a borderline answer scored 1 of 2
    # in the uid sandbox and 2 of 2 under bubblewrap)
    _prepare()
    _warm()
    run_job()


def serve(uid: int | None = None) -> None:
    """The zygote (bubblewrap modes): import once, then fork one runner per job; it never runs student code.

    Its stdin is a Unix socket to the judge. Each ``run`` message carries two descriptors, the job's
    pipe and the result channel: the child becomes a runner (``run_job``) on them, the zygote waits
    for it, then ends every other process of the sandbox and restores its writable folders before it
    reports ``ended`` with the exit code, the CPU time the kernel counted for it (``wait4``) and whether the
    sandbox is as clean as it started. The judge never reuses a zygote that is not clean, that answers late,
    or whose runner it had to stop.
    Children cannot reach the zygote: in root mode they are another uid; in user mode the zygote is
    not dumpable (no ``/proc/PID/mem``), seccomp forbids ``ptrace``, and a runner that kills it only
    ends its own run.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    control = socket.socket(fileno=0)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    _prepare()
    _warm()
    with open("/proc/self/status") as f:
        # resident pages and page tables, as the judge counts them (``limits.tree_rss``)
        rss = sum(int(line.split()[1]) * 1024 for line in f if line.startswith(("VmRSS:", "VmPTE:", "VmPMD:")))
    control.sendall(json.dumps({"kind": "ready", "rss": rss}).encode())  # one datagram per message
    me = os.getpid()
    keep = sweep.snapshot()  # the writable folders before any runner: bubblewrap's mount points only
    frozen = sweep.snapshot(sweep.FROZEN)  # the read-only rest: must never change
    state = sweep.own_state()  # its limits and scheduling, which every runner inherits: must never change
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(control, 64, 2)
        except OSError:
            os._exit(0)
        if message != b"run" or len(fds) != 2:
            os._exit(0)  # the judge closed the socket (or sent nonsense): the slot ends
        job_fd, channel_fd = fds
        pid = os.fork()
        if pid == 0:
            try:
                control.close()
                _forked_runner(job_fd, channel_fd, uid)
            finally:
                os._exit(99)  # never back into the zygote's loop
        os.close(job_fd)
        os.close(channel_fd)
        _, status, usage = os.wait4(pid, 0)  # the kernel's count of its CPU time: the judge believes no runner's
        clean = sweep.sweep(me, keep, frozen, state)
        control.sendall(json.dumps({"kind": "ended", "rc": os.waitstatus_to_exitcode(status), "clean": clean,
                                    "cpu": usage.ru_utime + usage.ru_stime}).encode())


def _forked_runner(job_fd: int, channel_fd: int, uid: int | None) -> None:
    """The zygote's child: the job's pipe on stdin, the channel on stdout, a session of its own, then ``run_job``."""
    os.dup2(job_fd, 0)
    os.dup2(channel_fd, 1)
    os.close(job_fd)
    os.close(channel_fd)
    os.setsid()
    # the zygote is not dumpable, and a child inherits that: in user mode /proc/self would then be
    # owned by a uid outside the sandbox's namespace and closed to the runner (it is student code's
    # own process: nothing of the zygote is in it); in root mode the drop to ``uid`` clears it again
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    with open("/proc/self/oom_score_adj", "w") as f:  # under the memory cap, the runner goes first
        f.write("1000")
    drop_privileges(uid)
    run_job()


def run_job() -> None:
    """Read the job on stdin, run it, report on the original stdout, and end the process."""
    channel = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    from ... import probes
    from . import audit

    job = read_frame(sys.stdin.buffer, nodes=None)  # the judge's own job: cells of any size
    if not isinstance(job, dict):
        os._exit(98)
    set_limits(int(job["memory"]), int(job["cpu_seconds"]), int(job["processes"]) or None)

    send = writer(channel)
    where = {"exercise": ""}  # the exercise whose cells run now: audit reports name it
    audit.install(lambda why: send(kind="audit", exercise=where["exercise"], reason=why))
    send(kind="ready")
    budget = Budget(float(job["time_limit"]), float(job["wall_limit"]))
    budget.start()
    checked = False  # a result was sent since the budget started: the next ``begin`` starts it again
    ns: dict = {"__name__": "__main__"}
    grade, skip = set(job["grade"]), set(job["skip_answers"])
    notes: list[str] = []
    capture = CappedText(CAPTURE_LIMIT)
    current = None
    for index, cell in enumerate(job["cells"]):
        exercise = cell.get("exercise")
        where["exercise"] = exercise or ""
        if exercise != current and exercise in grade:
            if checked or current is None:  # after a result, and at the start's first exercise (session: the same)
                budget.start()
                checked = False
            current = exercise
            send(kind="begin", exercise=exercise)
        if cell["kind"] == "check":
            if exercise in grade:
                facts = run_probes(probes, exercise, job, ns, budget)
                if budget.spent():  # the exercise's time ran out in code its check called: as in a cell (a stage's
                    os._exit(TIME_UP)  # own shorter limit, ``guard.limited``, fails that stage alone)
                checked = True
                send(kind="facts", exercise=exercise, facts=facts, cell_errors=notes, printed=capture.size,
                     fake_output=bool(FAKE_RESULT.search(capture.text())))
            notes, capture = [], CappedText(CAPTURE_LIMIT)
            continue
        if cell["kind"] == "answer" and exercise in skip:
            continue
        label = f"<{cell['kind']} cell {index}>"
        error = run_cell(cell["source"], ns, label, job["time_limit"], capture, budget)
        if exercise in grade and budget.spent():
            # the time ran out in this cell: end the start as the judge's clock ends one whose loop swallowed the
            # alarm (inside a try, or at the loop's back edge: chance), so both give one row (``protocol.TIME_UP``)
            os._exit(TIME_UP)
        if error:
            # read after the deadline, in a feedback file: say which cell of the submission, never "run it"
            notes.append(error.replace(label, f"in your submission, the answer cell of {exercise}"
                                       if cell["kind"] == "answer" else f"course cell {index}"))
    send(kind="done")
    os._exit(0)  # skip interpreter teardown (torch's takes a noticeable fraction of a second)
