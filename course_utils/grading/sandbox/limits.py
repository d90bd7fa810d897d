"""Resource limits for one runner start: memory for all its processes together, number of
processes, CPU share, and a way to end everything it started.

Where the machine allows (root, cgroup v1 or v2 with the controllers), each worker gets
its own cgroup: ``memory`` (swap included where the kernel counts it), ``pids``, ``cpu``
(one CPU's worth), created before the runner starts, so nothing it forks can escape them.
Elsewhere the runner caps itself with rlimits (address space per process, processes,
CPU seconds), and the judge sums the resident memory of the worker's process tree
every few milliseconds and stops the worker when the total passes the cap. Either way the
worker is pinned to one CPU when there are enough for every job, and seccomp keeps it
from un-pinning itself.
"""
from __future__ import annotations

import itertools
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
MAX_PROCESSES = 64  # threads included
INODE_BYTES = 1024  # kernel memory of one file in a tmpfs (inode and dentry): an empty file uses no block
_counter = itertools.count()


class Limits:
    """The limits of one worker start; ``close`` kills whatever is left and removes the cgroups."""

    def __init__(self, memory: int, cpu: int | None) -> None:
        self.memory, self.cpu = memory, cpu
        self.dirs: list[Path] = []
        self.kind = "rlimits"
        self.oom = False
        name = f"course-grader-{os.getpid()}-{next(_counter)}"
        try:
            if (CGROUP / "cgroup.controllers").exists():
                self._v2(name)
            elif os.access(CGROUP / "memory", os.W_OK) and os.access(CGROUP / "pids", os.W_OK):
                self._v1(name)
        except OSError:
            self._remove()
            self.dirs, self.kind = [], "rlimits"

    def _v1(self, name: str) -> None:
        mem, pids = CGROUP / "memory" / name, CGROUP / "pids" / name
        for d in (mem, pids):
            d.mkdir()
            self.dirs.append(d)
        (mem / "memory.limit_in_bytes").write_text(str(self.memory))
        swap = mem / "memory.memsw.limit_in_bytes"
        if swap.exists():
            swap.write_text(str(self.memory))
        (pids / "pids.max").write_text(str(MAX_PROCESSES))
        cpu = CGROUP / "cpu" / name
        if os.access(CGROUP / "cpu", os.W_OK):
            cpu.mkdir()
            self.dirs.append(cpu)
            (cpu / "cpu.cfs_period_us").write_text("100000")
            (cpu / "cpu.cfs_quota_us").write_text("100000")
        self.kind = "cgroup v1"

    def _v2(self, name: str) -> None:
        parent = CGROUP / "course-grader"
        parent.mkdir(exist_ok=True)
        wanted = {"memory", "pids", "cpu"}
        have = set((CGROUP / "cgroup.controllers").read_text().split())
        if not {"memory", "pids"} <= have:
            raise OSError("controllers missing")
        for level in (CGROUP, parent):
            (level / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(wanted & have)))
        d = parent / name
        d.mkdir()
        self.dirs.append(d)
        (d / "memory.max").write_text(str(self.memory))
        if (d / "memory.swap.max").exists():
            (d / "memory.swap.max").write_text("0")
        (d / "pids.max").write_text(str(MAX_PROCESSES))
        if (d / "cpu.max").exists():
            (d / "cpu.max").write_text("100000 100000")
        self.kind = "cgroup v2"

    @property
    def cgroups(self) -> bool:
        return bool(self.dirs)

    def wrap(self, cmd: list[str]) -> list[str]:
        """Prefix ``cmd`` so it starts inside the cgroups (and pinned), before it can fork."""
        prefix: list[str] = []
        if self.cpu is not None and shutil.which("taskset"):
            prefix = ["taskset", "-c", str(self.cpu)]
        if not self.dirs:
            return prefix + cmd
        join = "".join(f'echo $$ > "{d}/cgroup.procs" || exit 121; ' for d in self.dirs)
        return ["/bin/sh", "-c", join + 'exec "$@"', "sh"] + prefix + cmd

    def over_memory(self, root_pid: int, elsewhere: int = 0, processes: int = 0) -> bool:
        """True when the worker's processes together, plus ``elsewhere`` bytes (its files in tmpfs folders),
        hold more than the cap (the rlimit fallback); ``processes``: what its processes hold counted another
        way (uid mode: every process of its uid, ``uid_memory``), used when it is more than its tree's."""
        if self.dirs:
            return False  # the kernel enforces it
        return max(tree_rss(root_pid), processes) + elsewhere > self.memory

    def close(self, root_pid: int | None) -> None:
        if root_pid is not None:
            for pid in [root_pid, *descendants(root_pid)]:
                _kill(pid)
        for _ in range(200):
            pids = self._members()
            if not pids:
                break
            for pid in pids:
                _kill(pid)
            time.sleep(0.01)
        self.oom = self.oom or self.oom_count() > 0
        self._remove()

    def end(self, proc: subprocess.Popen) -> None:
        """Kill ``proc``, everything below it and everything in its cgroups; reap it; remove the cgroups."""
        self.close(proc.pid if proc.poll() is None else None)
        try:
            proc.kill()
        except OSError:
            pass
        proc.wait()

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this worker for passing the memory cap."""
        return self.oom or self.oom_count() > 0

    def oom_count(self) -> int:
        """How many processes the kernel has killed in this worker's cgroups for passing the cap (0 without)."""
        for d in self.dirs:
            for name in ("memory.oom_control", "memory.events"):
                try:
                    for line in (d / name).read_text().splitlines():
                        if line.startswith("oom_kill "):
                            return int(line.split()[1])
                except (OSError, ValueError, IndexError):
                    pass
        return 0

    def _members(self) -> list[int]:
        found: list[int] = []
        for d in self.dirs:
            try:
                found += [int(p) for p in (d / "cgroup.procs").read_text().split()]
            except OSError:
                pass
        return found

    def _remove(self) -> None:
        for d in reversed(self.dirs):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


def slot_cpu(slot: int, slots: int) -> int | None:
    """The CPU a worker slot is pinned to: its own when there is one for every slot, else None (not pinned)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return cpus[slot % len(cpus)] if cpus and slots <= len(cpus) else None


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (host view), from /proc/PID/task/TID/children."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                kids = [int(c) for c in Path(f"/proc/{p}/task/{tid}/children").read_text().split()]
            except (OSError, ValueError):
                continue
            found += kids
            todo += kids
    return found


HELD = ("VmRSS:", "VmPTE:", "VmPMD:")  # resident pages, and the page tables that map them (VmPMD: kernels < 4.17)


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and everything below it, their page tables included.

    Page tables are kernel memory no resident size shows: a read-only mapping read once every
    2 MiB maps only the shared zero page but allocates a page-table page per read (issue 48: 1.5 GiB
    held with a VmRSS of 200 MiB under ``--memory 0.5``, in pure Python); a cgroup counts them.
    """
    total = 0
    for p in [pid, *descendants(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith(HELD):
                    total += int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
    return total


def uid_memory(uid: int) -> tuple[int, int]:
    """What every process whose real uid is ``uid`` holds (uid mode): (resident bytes and page tables,
    bytes of the files they keep open or mapped after removing them).

    There is no pid namespace there: a double-forked ``setsid`` daemon is re-parented to init and is
    no descendant of the runner, so ``tree_rss`` misses it (issue 48: four daemons held 1.2 GiB under
    ``--memory 0.5``); its uid, which it cannot change, still names it. A removed file that a descriptor
    or a mapping keeps is in no folder the walk of the shared folders reads (1.4 GiB in ``/dev/shm`` and
    the private home, uncounted); its blocks count here, once per file.
    """
    total, files = 0, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            lines = Path(f"/proc/{name}/status").read_text().splitlines()
        except OSError:
            continue
        held, real = 0, -1
        try:
            for line in lines:
                if line.startswith("Uid:"):
                    real = int(line.split()[1])
                elif line.startswith(HELD):
                    held += int(line.split()[1]) * 1024
        except (ValueError, IndexError):
            continue
        if real == uid:
            total += held
            files.update(_removed_files(name))
    return total, sum(files.values())


def _removed_files(pid: str) -> dict[tuple[int, int], int]:
    """(device, inode) -> bytes of each removed file that process ``pid`` keeps open or mapped (as root)."""
    paths = []
    try:
        paths += [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
        with open(f"/proc/{pid}/maps") as f:
            paths += [f"/proc/{pid}/map_files/{line.split()[0]}" for line in f if line.endswith(" (deleted)\n")]
    except OSError:
        pass
    found = {}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 0:
            found[(st.st_dev, st.st_ino)] = st.st_blocks * 512 + INODE_BYTES
    return found


def folders_used(pid: int, folders: tuple[str, ...]) -> int:
    """Bytes held in ``folders`` (tmpfs mounts) as the sandbox below ``pid`` sees them; 0 before it has any process.

    Files in a tmpfs are memory that no process's resident size shows, their blocks and, for each
    file, its inode (a million empty files hold a GiB); where no cgroup counts them (the rlimit
    fallback), the judge adds them to the worker's total (``statvfs`` through
    ``/proc/PID/root`` of the sandbox's first process, bubblewrap's init).
    """
    for p in descendants(pid):
        try:
            used = 0
            for folder in folders:
                st = os.statvfs(f"/proc/{p}/root{folder}")
                used += (st.f_blocks - st.f_bfree) * st.f_frsize + (st.f_files - st.f_ffree) * INODE_BYTES
            return used
        except OSError:
            continue
    return 0


def one_torch_thread() -> None:
    """The judge's torch computes on one thread, as every runner's does (``runner._prepare``): at a judge command's entry,
    before torch loads (``course_utils.grade``, ``grading.gradescope``).

    ``--jobs`` is what grades in parallel. With torch's default pool (a thread per core), each check's small
    tensors woke a second thread that then spun waiting for work: the judge of a 33-notebook batch used 3.4
    CPU-s at ``--jobs 1`` and 2.6 at ``--jobs 2``, against 2.4 and 2.5 on one thread (2 cores, same wall time).
    A reference computed the way the runner computes also sums in the same order on a machine of any size.
    """
    os.environ["OMP_NUM_THREADS"] = "1"  # read once, when torch starts its thread pool
    torch = sys.modules.get("torch")
    if torch is not None:  # imported already (the Gradescope entry's module imports the checks)
        torch.set_num_threads(1)


def cap_judge_memory(extra: int) -> int | None:
    """Bound this process (the judge): its address space may grow by ``extra`` bytes beyond what it has now.

    Only the soft limit is set, so runners can set their own caps (an unprivileged process may
    raise its soft limit up to the unchanged hard one). A hostile submission that makes the
    judge allocate past it gets a MemoryError in its own row (``refused``), not a dead batch.
    Returns the cap in bytes, or None where the platform has no such limit.
    """
    try:
        import resource

        size = 0
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                size = int(line.split()[1]) * 1024
        if not size:
            return None
        cap = size + extra
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        if soft != resource.RLIM_INFINITY:
            cap = min(cap, soft)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        return cap
    except (ImportError, OSError, ValueError):
        return None
