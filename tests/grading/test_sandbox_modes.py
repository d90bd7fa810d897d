"""Issue 38: grading holds in every sandbox mode; each test runs the mode it concerns for real.

* user mode: the grader run by a normal (non-root) user, bubblewrap making a user namespace;
* uid mode: the grader as root in a private mount namespace without bubblewrap (a container,
  Gradescope's case), as ``test_gradescope``'s uid-sandbox test does.

Each test grades in-process through ``grade_file.grade_submission`` in a child process (run as that
user, or inside that namespace) and reads the rows it prints as JSON.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT
from private_paths import readable_view, why_unreadable

NORMAL_USER = 60038  # a uid with no account and no rights: what "as a normal user" means to the kernel
TESTS = ROOT / "tests" / "grading"

GRADE = r"""
import json, sys
from pathlib import Path
import nbformat
from grading_corpus import answer, submission
from course_utils.grading import grade_file
from course_utils.grading.assignment import load_assignments
from course_utils.grading.sandbox import sandbox, zygote
from course_utils.paths import ROOT

folder, mode, memory, slots = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
box = sandbox.detect(allow_uid=mode == "uid")
if box.mode != mode:
    print(json.dumps({"skip": f"no {mode} sandbox here: {box.reason}"}))
    sys.exit(0)
starts = []
_init = zygote.Zygote.__init__
def _counted(self, *args, **kwargs):
    starts.append(1)
    _init(self, *args, **kwargs)
zygote.Zygote.__init__ = _counted
options = grade_file.Options(sandbox=box, timeout=30, memory=int(memory * 2**30), slots=slots)
assignments = load_assignments(ROOT)
mul = answer("02", "mul_answer")

def grade(name, source, slot=0):
    path = folder / f"{name}.ipynb"
    nbformat.write(submission("02", {"mul_answer": source.replace("HONEST", mul)}), path)
    row = grade_file.grade_submission(path, assignments, options, slot)
    return {"name": name, "total": row.total, "max": row.max, "flags": row.flags,
            "mul": [row.exercises["mul"].points / row.exercises["mul"].max, row.exercises["mul"].feedback]}

jobs = json.loads(sys.stdin.read())  # [[name, answer source, slot], ...]; a list inside runs at once
rows = []
for job in jobs:
    if isinstance(job[0], list):
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(len(job)) as pool:
            rows += list(pool.map(lambda j: grade(*j), job))
    else:
        rows.append(grade(*job))
zygote.close_all()
print(json.dumps({"rows": rows, "starts": len(starts)}))
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_SLOW")}
    env.update(PYTHONPATH=f"{ROOT}:{ROOT / 'tests'}:{TESTS}", HOME=str(home), USER="grader", LOGNAME="grader")
    return env


def _shared_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="grade-modes-"))  # pytest's own folders are root's alone
    os.chmod(folder, 0o777)
    return folder


def _result(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if "skip" in out:
        pytest.skip(out["skip"])
    return out


def as_normal_user(jobs: list, memory: float = 4.0, slots: int = 1) -> dict:
    """Grade ``jobs`` as a normal user (bubblewrap's user mode), one slot."""
    if os.geteuid() != 0:
        pytest.skip("not root: cannot become another user (the tests run as root in CI)")
    if not shutil.which("setpriv") or not shutil.which("bwrap"):
        pytest.skip("needs setpriv and bubblewrap")
    folder = _shared_folder()
    try:
        proc = subprocess.run(as_user([sys.executable, "-c", GRADE, str(folder), "user", str(memory), str(slots)]),
                              input=json.dumps(jobs), capture_output=True, text=True, env=_env(folder), cwd=folder,
                              timeout=600, check=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return _result(proc)


def as_user(command: list[str]) -> list[str]:
    """``command`` as the normal user; in a private mount namespace where the checkout or Python lies in a
    private folder (a clone in a ``mktemp -d`` folder, root's home), which gives that user the view a
    readable installation has (``private_paths.readable_view``: issue 48, item 7)."""
    setpriv = ["setpriv", f"--reuid={NORMAL_USER}", f"--regid={NORMAL_USER}", "--clear-groups", *command]
    view = readable_view()
    if not view:
        return setpriv
    if why_unreadable():
        pytest.skip(f"the checkout or Python is in a private folder, and {why_unreadable()}")
    return ["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", view + ' && exec "$@"', "sh",
            *setpriv]


# a container: this mount namespace only; Python and the checkout readable by every uid (a private folder on
# their way, such as /root, is covered: private_paths.readable_view), no bubblewrap on PATH, with HIDE_CGROUPS
# no cgroup the grader could use, and with SEALABLE the checkout overlaid by a tmpfs, so what the uid sandbox
# seals before a batch (uids.hide_batch: modes of the course's files) changes the container's view only
CONTAINER = ('PATH=/usr/bin:/bin; if [ "$READABLE" = 1 ] && [ -n "$VIEW" ]; then eval "$VIEW" || exit 120; fi; '
             'if [ "$HIDE_CGROUPS" = 1 ]; then mount -t tmpfs none /sys/fs/cgroup; fi; '
             'if [ "$SEALABLE" = 1 ]; then O=$(mktemp -d) && mount -t tmpfs none "$O" && mkdir "$O/u" "$O/w" && '
             'mount -t overlay overlay -o "lowerdir=$COURSE,upperdir=$O/u,workdir=$O/w" "$COURSE" || exit 121; fi; '
             'if [ "$NO_ADMIN" = 1 ]; then PATH=/nonexistent exec /usr/bin/setpriv --bounding-set -sys_admin "$@"; fi; '
             'PATH=/nonexistent exec "$@"')


def in_container(args: list[str], stdin: str = "", readable: bool = True, cgroups: bool = True,
                 folder: Path | None = None, sealable: bool = False, admin: bool = True) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` as root in a private mount namespace without bubblewrap (uid mode).

    ``sealable``: the checkout is an overlay in there (the grader's ``--uid-sandbox`` seals it: ``uids.seal``).
    ``admin=False``: without ``CAP_SYS_ADMIN``, as in a Kubernetes pod or Docker's defaults (no mount namespace).
    """
    if why_unreadable():
        pytest.skip(why_unreadable())
    env = _env(folder or Path("/"))
    env.update(READABLE="1" if readable else "0", HIDE_CGROUPS="0" if cgroups else "1", VIEW=readable_view(),
               SEALABLE="1" if sealable else "0", COURSE=str(ROOT), NO_ADMIN="0" if admin else "1")
    return subprocess.run(["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", CONTAINER,
                           "sh", sys.executable, *args], input=stdin, capture_output=True, text=True, env=env,
                          cwd=folder or "/", timeout=600, check=False)


def in_uid_mode(jobs: list, memory: float = 4.0, slots: int = 1, cgroups: bool = True) -> dict:
    folder = _shared_folder()
    try:
        proc = in_container(["-c", GRADE, str(folder), "uid", str(memory), str(slots)], json.dumps(jobs),
                            cgroups=cgroups, folder=folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return _result(proc)


# ----------------------------------------------------------------------------------------- item 1: user mode
PLANT = """
import os
def _folders(top):
    dev = os.lstat(top).st_dev
    for root, dirs, _files in os.walk(top):
        dirs[:] = [d for d in dirs if os.lstat(os.path.join(root, d)).st_dev == dev]
        yield root
_planted = []
for _top in ("/", "/dev"):
    for _folder in list(_folders(_top)):
        if _folder.startswith(("/tmp", "/scratch", "/dev/shm")):
            continue  # swept between runners (test_zygote): this attack is on the rest
        try:  # modules the zygote has not imported yet: the next runner of the slot would import these
            for _name in ("colorsys.py", "getpass.py", "planted_by_the_attacker"):
                with open(os.path.join(_folder, _name), "w") as _f:
                    _f.write("import os\\nos._exit(0)\\n")
            _planted.append(_folder)
        except OSError:
            pass
        try:
            os.chmod(_folder, 0o777)
            _planted.append(_folder + " (chmod)")
        except OSError:
            pass
if _planted:
    raise RuntimeError(f"wrote outside the writable folders: {_planted}")
HONEST
"""

VICTIM = """
import os
_left = []
for _top in ("/", "/dev"):
    _dev = os.lstat(_top).st_dev
    for _root, _dirs, _files in os.walk(_top):
        _dirs[:] = [d for d in _dirs if os.lstat(os.path.join(_root, d)).st_dev == _dev]
        _left += [os.path.join(_root, n) for n in _files if n == "planted_by_the_attacker"]
if _left:
    raise RuntimeError(f"leftovers: {_left}")
import colorsys, getpass  # stdlib modules a later lesson's runner imports (SymPy, torch.compile)
HONEST
"""


@pytest.mark.slow  # two sandboxes' start-ups as another user (~20 s): CI and COURSE_SLOW=1 run it
def test_user_mode_a_runner_writes_nothing_the_next_runner_of_its_slot_sees():
    """Item 1: as a normal user, ``/``, ``/course`` and ``/dev`` were the sandbox uid's and writable;
    ``/course/getpass.py`` (``/course`` is ``sys.path[0]``) ran in the next student's runner."""
    out = as_normal_user([["attacker", PLANT, 0], ["victim", VICTIM, 0]])
    attacker, victim = out["rows"]
    assert attacker["mul"][0] == 1, attacker["mul"][1]  # nothing outside /tmp, /scratch, /dev/shm was writable
    assert victim["mul"][0] == 1, victim["mul"][1]  # and nothing of the attacker reached the victim
    assert out["starts"] == 1  # in the attacker's own sandbox, reused: the zygote found it clean


MEMORY_IN_FILES = """
import os, time
for _folder in ("/tmp", "/scratch", "/dev/shm"):
    with open(os.path.join(_folder, "ballast"), "wb") as _f:
        for _ in range(15):
            try:
                _f.write(b"x" * (16 << 20))
                _f.flush()
            except OSError:
                break
time.sleep(3)
HONEST
"""


@pytest.mark.slow  # a sandbox as another user (~15 s): CI and COURSE_SLOW=1 run it
def test_user_mode_files_in_the_sandbox_count_against_the_memory_cap():
    """Item 1: 720 MiB in the sandbox's tmpfs folders under ``--memory 0.75`` was not counted (no cgroup
    for a normal user: the judge sums resident memory, which files in a tmpfs are not)."""
    out = as_normal_user([["ballast", MEMORY_IN_FILES, 0], ["after", "HONEST", 0]], memory=0.75)
    ballast, after = out["rows"]
    assert ballast["mul"][0] == 0 and "more memory" in ballast["mul"][1], ballast["mul"]
    assert after["total"] == after["max"]


# ----------------------------------------------------------------------------------------- items 2-4: uid mode
LEAVE_SHARED = """
import os, time
for _folder in ("/tmp", "/var/tmp", "/dev/shm"):
    try:
        with open(os.path.join(_folder, "left-MARK"), "wb") as _f:
            _f.write(b"note")
    except OSError:
        pass
os.makedirs("/tmp/left-MARK-dir/deep", exist_ok=True)
os.chmod("/tmp/left-MARK-dir", 0)
for _part in range(2):  # 384 MiB, in files under the runner's 256 MiB file-size limit
    with open(f"/dev/shm/ballast-MARK-{_part}", "wb") as _f:
        for _ in range(12):
            _f.write(b"x" * (16 << 20))
            _f.flush()
time.sleep(3)
HONEST
"""


@pytest.mark.slow  # a uid-mode runner in a private mount namespace (~15 s): CI and COURSE_SLOW=1 run it
def test_uid_mode_what_the_runner_left_in_shared_folders_is_removed_and_counted():
    """Item 2: under ``--memory 0.5`` 384 MiB stayed in /dev/shm and a note in /tmp after the grader exited."""
    mark = f"{os.getpid()}-{os.urandom(4).hex()}"
    paths = [Path(f) / f"left-{mark}" for f in ("/tmp", "/var/tmp", "/dev/shm")] + [
        Path(f"/tmp/left-{mark}-dir"), Path(f"/dev/shm/ballast-{mark}-0"), Path(f"/dev/shm/ballast-{mark}-1")]
    try:
        out = in_uid_mode([["leaver", LEAVE_SHARED.replace("MARK", mark), 0]], memory=0.5, cgroups=False)
        left = [str(p) for p in paths if p.exists()]
    finally:
        for p in paths:
            if p.is_dir():
                os.chmod(p, 0o700)
                shutil.rmtree(p, ignore_errors=True)
            elif p.exists():
                p.unlink()
    row = out["rows"][0]
    assert not left, left
    assert row["mul"][0] == 0 and "more memory" in row["mul"][1], row["mul"]


KILL_THE_UID = """
import os, signal, time
_end = time.monotonic() + 12
while time.monotonic() < _end:  # every process of this uid but itself: a neighbour sharing the uid dies
    os.kill(-1, signal.SIGKILL)
    time.sleep(0.02)
HONEST
"""

SLOW_HONEST = """
import time
time.sleep(8)
HONEST
"""


@pytest.mark.slow  # two uid-mode runners at once (~20 s): CI and COURSE_SLOW=1 run it
def test_uid_mode_slots_sixteen_apart_never_share_a_uid():
    """Item 3: ``uid_for`` was ``slot % 16``: at --jobs 20, slots 0 and 16 ran as one uid, and one answer's
    ``kill(-1)`` cost its neighbour its points."""
    out = in_uid_mode([[["killer", KILL_THE_UID, 16], ["neighbour", SLOW_HONEST, 0]]], slots=20)
    neighbour = next(r for r in out["rows"] if r["name"] == "neighbour")
    assert neighbour["total"] == neighbour["max"], neighbour["mul"]


def test_uid_mode_refuses_where_its_uid_cannot_read_python(tmp_path):
    """Item 4: Python under /root (mode 0700): the runner could start (as root) but not import ``colorsys``
    later as its uid; lesson 02's own solution scored 2/5. Now nothing is graded, in one sentence."""
    if os.access("/root", os.R_OK) and os.stat("/root").st_mode & 0o005 == 0o005:
        pytest.skip("Python is readable by every uid on this machine")
    if not str(Path(sys.base_prefix).resolve()).startswith("/root/"):
        pytest.skip("this machine's Python is not in /root")
    folder = _shared_folder()
    try:
        (folder / "subs").mkdir()
        shutil.copy(ROOT / "solutions" / "02_exercises.ipynb", folder / "subs" / "s.ipynb")
        proc = in_container(["-m", "course_utils.grade", "--uid-sandbox", str(folder / "subs"), "--json"],
                            readable=False, folder=folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert proc.returncode == 2, (proc.stdout[-500:], proc.stderr[-2000:])
    assert "cannot read /root" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == ""  # no row: nothing was graded


# ----------------------------------------------------------------------------------------- red team (issue 38)
IN_MEMFDS = """
import os, time
_held = []
for _i in range(5):  # 960 MiB in memfds never mapped: no resident size and no folder shows them
    _fd = os.memfd_create(f"ballast{_i}")
    for _ in range(12):
        os.write(_fd, b"x" * (16 << 20))
    _held.append(_fd)
time.sleep(3)
HONEST
"""

IN_SYSV_SHM = """
import ctypes, time
_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
for _i in range(5):  # 960 MiB in System V segments, touched once and detached: in no resident size
    _id = _libc.shmget(0, 192 << 20, 0o1600)
    if _id < 0:
        raise OSError(ctypes.get_errno(), "shmget")
    _addr = _libc.shmat(_id, None, 0)
    ctypes.memset(_addr, 1, 192 << 20)
    _libc.shmdt(ctypes.c_void_p(_addr))
time.sleep(3)
HONEST
"""


@pytest.mark.slow  # sandboxes as another user (~40 s): CI and COURSE_SLOW=1 run it
def test_user_mode_memory_no_resident_size_shows_cannot_pass_the_cap():
    """Red team: 960 MiB in unmapped memfds, or in detached System V segments, under ``--memory 0.5``
    earned full points (no cgroup for a normal user; the judge sums resident memory and the sandbox's
    tmpfs folders, which neither is in). Now the sandbox cannot make either."""
    out = as_normal_user([["memfd", IN_MEMFDS, 0], ["sysv", IN_SYSV_SHM, 0], ["after", "HONEST", 0]], memory=0.5)
    memfd, sysv, after = out["rows"]
    assert memfd["mul"][0] == 0, memfd["mul"]
    assert sysv["mul"][0] == 0, sysv["mul"]
    assert after["total"] == after["max"], after["mul"]


HOPPER = """
import os, subprocess
# a process that starts its successor and exits at once: its pid changes faster than a scan of /proc
_hop = 'sh -c "$HOP" & exit 0'
subprocess.Popen(["/bin/sh", "-c", _hop], env={"PATH": "/usr/bin:/bin", "HOP": _hop}, start_new_session=True)
HONEST
"""


def _uid_mode_processes(with_pid: bool = False) -> list:
    """Processes of the uid sandbox's uids (62000 and up), from /proc: their uids (or (uid, pid) pairs)."""
    found: list = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/status") as f:
                uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
        except (OSError, ValueError, StopIteration):
            continue
        if 62000 <= uid < 63000:
            found.append((uid, int(pid)) if with_pid else uid)
    return found


def _hopping(pid: int) -> bool:
    """Whether ``pid`` is one of HOPPER's shells (its environment holds HOP), or gone while we looked (not one)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return b"\0HOP=" in b"\0" + f.read()
    except OSError:
        return False


def _end_uid(uid: int) -> None:
    pid = os.fork()
    if pid == 0:
        try:
            os.setresuid(uid, uid, uid)
            for _ in range(50):
                os.kill(-1, 9)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


@pytest.mark.slow  # a uid-mode runner in a private mount namespace (~15 s): CI and COURSE_SLOW=1 run it
def test_uid_mode_a_process_that_keeps_changing_its_pid_does_not_outlive_the_grader():
    """Red team: ``kill_uid`` listed /proc, then killed what it had listed; a chain of shells that each
    start the next and exit was never where the list said, outlived the grader and kept its uid, which
    the next runner would lease (and could be killed by it)."""
    out = in_uid_mode([["hopper", HOPPER, 0]], cgroups=False)
    import time
    time.sleep(1)
    # the hopper's chain only (its environment holds HOP): a test on the other worker may be running its own runners
    left = [uid for uid, pid in _uid_mode_processes(with_pid=True) if _hopping(pid)]
    for uid in set(left):
        _end_uid(uid)
    assert not left, f"{len(left)} process(es) of uids {sorted(set(left))} outlived the grader"
    assert out["rows"][0]["total"] == out["rows"][0]["max"]


LIMIT_THE_ZYGOTE = """
import os, resource
_zygote = os.getppid()  # the runner's parent: the slot's zygote, the same uid in user mode
with open(f"/proc/{_zygote}/status") as _f:
    _size = next(int(line.split()[1]) * 1024 for line in _f if line.startswith("VmSize:"))
resource.prlimit(_zygote, resource.RLIMIT_AS, (_size + (96 << 20),) * 2)  # inherited by every later runner
os.setpriority(os.PRIO_PROCESS, _zygote, 19)
HONEST
"""

NEEDS_MEMORY = """
import torch
_ballast = torch.ones(64 << 20)  # 256 MiB of honest work, well under --memory 4
HONEST
"""


@pytest.mark.slow  # sandboxes as another user (~30 s): CI and COURSE_SLOW=1 run it
def test_user_mode_a_runner_cannot_lower_the_limits_of_the_next_runners():
    """Red team: in user mode a runner shares its zygote's uid, so ``prlimit`` (no ptrace needed) lowered the
    zygote's address-space limit; the zygote was still reported clean and every later runner of the slot
    inherited the limit: an honest answer that needs 256 MiB got a MemoryError and 0 points."""
    out = as_normal_user([["attacker", LIMIT_THE_ZYGOTE, 0], ["victim", NEEDS_MEMORY, 0]])
    attacker, victim = out["rows"]
    assert attacker["total"] == attacker["max"], attacker["mul"]
    assert victim["total"] == victim["max"], victim["mul"]
    assert out["starts"] == 2  # the attacker's sandbox was not reused


IN_EMPTY_FILES = """
import os, time
_made = 0
for _folder in ("/scratch", "/tmp", "/dev/shm"):
    for _i in range(400_000):  # empty files: no block used, ~1 KiB of kernel memory each (inode, dentry)
        try:
            os.close(os.open(f"{_folder}/{_i}", os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError:
            break
        _made += 1
if _made < 1_000_000:
    raise RuntimeError(f"only {_made} files")
time.sleep(3)
HONEST
"""


@pytest.mark.slow  # a sandbox as another user (~40 s): CI and COURSE_SLOW=1 run it
def test_user_mode_empty_files_in_the_sandbox_count_against_the_memory_cap():
    """Red team: 1.2 million empty files in the sandbox's tmpfs folders (over 1 GiB of kernel memory, no block
    used) under ``--memory 0.5`` earned full points: the judge counted the folders' blocks, not their inodes."""
    out = as_normal_user([["inodes", IN_EMPTY_FILES, 0]], memory=0.5)
    row = out["rows"][0]
    assert row["mul"][0] == 0 and "more memory" in row["mul"][1], row["mul"]
