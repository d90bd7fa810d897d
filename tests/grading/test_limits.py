"""``limits.py``: what the judge counts against ``--memory`` where no cgroup does (user mode, the uid sandbox).

Issue 48, attacked again: page tables (kernel memory no resident size shows) and, in the uid sandbox
(no pid namespace), the processes of a setsid daemon (no descendant of the runner) were never counted.
The fast tests measure the counting itself on real processes; the slow ones grade a real attack in
each mode it concerns, with ``test_kernel_memory``'s helpers.
"""
import os
import subprocess
import sys

import pytest

from course_utils.grading.sandbox import limits
from test_kernel_memory import in_uid
from test_sandbox_modes import as_normal_user

# a read-only private mapping read once every 2 MiB: the shared zero page (no resident size) behind a
# 4 KiB page-table page per read; SIZE GiB of address space hold SIZE * 2 MiB of page tables
PAGE_TABLES = """
import mmap, time
_G, _H = 1 << 30, 2 << 20
_m = mmap.mmap(-1, SIZE * _G, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=mmap.PROT_READ)
_m.madvise(15)  # MADV_NOHUGEPAGE: no huge zero page, one page-table page per 2 MiB
for _off in range(0, SIZE * _G, _H):
    _m[_off]
_status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
READY
"""


def _holding(source: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-I", "-c", source.replace("READY", "print('ready', flush=True); time.sleep(60)")],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def test_page_tables_count_as_held_memory():
    """128 MiB of page tables behind a resident size of ~10 MiB: counted (the old count saw ~10 MiB)."""
    proc = _holding(PAGE_TABLES.replace("SIZE", "64"))
    try:
        assert limits.tree_rss(proc.pid) > 120 << 20
    finally:
        proc.kill()
        proc.wait()


# a process of another uid: 96 MiB resident, a removed file of 64 MiB kept open and one of 32 MiB kept
# only by a mapping (never touched: no resident size), both in /dev/shm, where no folder lists them
OTHER_UID = """
import mmap, os, time
b = bytearray(96 << 20)
b[::4096] = b"1" * len(b[::4096])
kept = []
for name, size in (("open", 64), ("mapped", 32)):
    path = f"/dev/shm/test-limits-{os.getpid()}-{name}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.unlink(path)
    os.write(fd, b"x" * (size << 20))
    kept.append(fd if name == "open" else mmap.mmap(fd, 0, prot=mmap.PROT_READ))
    if name == "mapped":
        os.close(fd)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as another uid")
def test_every_process_of_a_uid_counts_with_the_removed_files_it_keeps():
    """uid mode: a process that is no descendant of the runner (a setsid daemon, re-parented to init) still
    counts by its uid, and so do the files its processes removed but keep open or mapped."""
    uid = 62999  # the last uid-mode lease (uids.LEASES): never an account
    proc = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", sys.executable, "-I", "-c",
                             OTHER_UID], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        resident, removed = limits.uid_memory(uid)
        assert resident > 96 << 20
        assert 96 << 20 <= removed < 100 << 20  # each file once, whatever holds it
        assert limits.uid_memory(uid - 1) == (0, 0)
    finally:
        proc.kill()
        proc.wait()


IN_PAGE_TABLES = PAGE_TABLES.replace("SIZE", "512").replace(
    "READY", "time.sleep(3)\nraise RuntimeError(f\"held page tables: VmPTE {_status['VmPTE'].strip()}\")\nHONEST")

# four setsid daemons, each under the runner's data limit, 1.2 GiB together
IN_DAEMONS = """
import os, time
_r, _w = os.pipe()
for _i in range(4):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            try:
                _b = bytearray(300 << 20)
                _b[::4096] = b"1" * len(_b[::4096])
                os.write(_w, b"1")
            except MemoryError:
                os.write(_w, b"0")
            time.sleep(60)
        os._exit(0)
    os.wait()
os.close(_w)
time.sleep(2)
_got = os.read(_r, 16)
time.sleep(3)
raise RuntimeError(f"daemons held {_got.count(b'1') * 300} MiB")
HONEST
"""


# removed files kept open or mapped: in /dev/shm, the private home (TMPDIR on a disk or a tmpfs) and /tmp
IN_REMOVED_FILES = """
import mmap, os, time
_held, _keep = 0, []
for _dir in ("/dev/shm", os.environ["HOME"], "/tmp"):
    for _i in range(2):
        _p = os.path.join(_dir, f"gone{_i}-{os.getpid()}")
        _fd = os.open(_p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.unlink(_p)
        for _ in range(15):
            os.write(_fd, b"x" * (16 << 20))
            _held += 16 << 20
        if _i:  # kept by a mapping alone (never touched: no resident size)
            _keep.append(mmap.mmap(_fd, 0, prot=mmap.PROT_READ))
            os.close(_fd)
        else:
            _keep.append(_fd)
time.sleep(3)
raise RuntimeError(f"held {_held >> 20} MiB in removed files")
HONEST
"""


def _stopped_for_memory(row: dict) -> None:
    points, feedback = row["mul"]
    assert points == 0 and "more memory" in feedback and "held" not in feedback, row["mul"]


@pytest.mark.slow  # a sandbox as another user (~30 s): CI and COURSE_SLOW=1 run it
def test_user_mode_page_tables_count_against_the_memory_cap():
    """User mode, no cgroup: 1.5 GiB of page tables were held under ``--memory 0.5`` with a VmRSS of 195 MiB."""
    attack, after = as_normal_user([["tables", IN_PAGE_TABLES, 0], ["after", "HONEST", 0]], memory=0.5)["rows"]
    _stopped_for_memory(attack)
    assert after["total"] == after["max"], after["mul"]


@pytest.mark.slow  # uid-mode runners in a private mount namespace (~60 s each): CI and COURSE_SLOW=1 run it
@pytest.mark.parametrize("tmpfs", [False, True], ids=["tmpdir_on_disk", "tmpdir_on_tmpfs"])
def test_uid_mode_page_tables_daemons_and_removed_files_count_against_the_memory_cap(tmpfs):
    """The uid sandbox without cgroups, each held under ``--memory 0.5``: 1.5 GiB of page tables; 1.2 GiB in
    four setsid daemons (no descendants of the runner); 1.4 GiB of removed files kept open or mapped in
    ``/dev/shm``, ``/tmp`` and the private home (Shmem rose, or the disk filled)."""
    jobs = [["tables", IN_PAGE_TABLES, 0], ["daemons", IN_DAEMONS, 0], ["removed", IN_REMOVED_FILES, 0],
            ["after", "HONEST", 0]]
    *attacks, after = in_uid(jobs, memory=0.5, tmpfs=tmpfs)["rows"]
    for row in attacks:
        _stopped_for_memory(row)
    assert after["total"] == after["max"], after["mul"]
