"""The slot's zygote (issue 29's speed): torch imported once per slot, and no runner ever sees another's leftovers.

Runners of one slot come from one zygote while each ends cleanly; the zygote ends every process
a runner left (a double-forked ``setsid`` daemon included) and empties ``/tmp``, ``$HOME`` and
``/dev/shm`` before the next runner starts, which checks that from the inside: a leftover makes
its answer raise, so its exercise scores 0. A runner the judge had to stop takes its sandbox with
it. The zygote itself is beyond the runner's reach.
"""

import nbformat
import pytest

from conftest import ROOT
from course_utils.grading import grade_file
from course_utils.grading.assignment import load_assignments
from course_utils.grading.sandbox import sandbox, zygote
from grading_corpus import answer, submission

LEAVE_BEHIND = """
import os, time
def _writable_folders():
    for top in ("/tmp", os.environ["HOME"], "/dev/shm"):
        if not os.path.isdir(top):
            continue
        dev = os.lstat(top).st_dev
        for root, dirs, _files in os.walk(top):
            dirs[:] = [d for d in dirs if os.lstat(os.path.join(root, d)).st_dev == dev]
            if os.access(root, os.W_OK):
                yield root
for folder in list(_writable_folders()):
    try:
        os.makedirs(os.path.join(folder, "left", "deep"), exist_ok=True)
        with open(os.path.join(folder, "left", "deep", "poison.py"), "w") as f:
            f.write("x = 1")
        os.chmod(os.path.join(folder, "left"), 0)
    except OSError:
        pass
if os.fork() == 0:  # a daemon: its own session, no longer the runner's child
    os.setsid()
    if os.fork() == 0:
        while True:
            time.sleep(0.05)
    os._exit(0)
# the zygote is out of reach: not dumpable (no memory to read), and in root mode another uid (no signal)
_zygote = os.getppid()
_attempts = [lambda: open(f"/proc/{_zygote}/mem", "rb").read(1)]
if ROOT_MODE:
    _attempts.append(lambda: os.kill(_zygote, 9))
for _reach in _attempts:
    try:
        _reach()
    except OSError:
        continue
    raise RuntimeError("the runner reached its zygote")
"""

# the red team's leftover (issue 29 follow-up): a daemon whose main thread leaves with a bare exit (SYS_exit, not
# exit_group), so /proc shows it as a zombie while its other thread runs on, sending SIGALRM (the runner's cell
# timer) to every new process of its uid; it also points every descriptor it has at /dev/null
ZOMBIE_LEADER = """
import ctypes, os, platform, signal, threading, time
def _harass():
    seen = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    while True:
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) not in seen:
                try:
                    if os.stat("/proc/" + p).st_uid == os.getuid():
                        seen.add(int(p))
                        for _ in range(100):
                            os.kill(int(p), signal.SIGALRM)
                            time.sleep(0.02)
                except OSError:
                    pass
        time.sleep(0.005)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        _null = os.open("/dev/null", os.O_WRONLY)
        for _fd in range(3, 256):
            if _fd != _null:
                try:
                    os.fstat(_fd)
                    os.dup2(_null, _fd)
                except OSError:
                    pass
        threading.Thread(target=_harass).start()
        time.sleep(0.1)
        ctypes.CDLL(None).syscall(60 if platform.machine() == "x86_64" else 93, 0)
    os._exit(0)
os.wait()
time.sleep(0.3)
"""

# a POSIX message queue would outlive its runner in the sandbox's IPC namespace: creating one must fail
MESSAGE_QUEUE = """
import ctypes, os
_rt = ctypes.CDLL("librt.so.1", use_errno=True)
if _rt.mq_open(b"/left_for_the_next", os.O_CREAT | os.O_WRONLY, 0o600, None) >= 0:
    raise RuntimeError("a message queue was created")
"""

MUST_BE_CLEAN = """
import os
_left = []
for _top in ("/tmp", os.environ["HOME"], "/dev/shm"):
    if os.path.isdir(_top):
        _dev = os.lstat(_top).st_dev
        for _root, _dirs, _files in os.walk(_top):
            _dirs[:] = [d for d in _dirs if os.lstat(os.path.join(_root, d)).st_dev == _dev]
            _left += [os.path.join(_root, n) for n in _dirs + _files if n == "left"]
_others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid(), os.getppid())]
if _left or _others:
    raise RuntimeError(f"leftovers: files {_left}, processes {_others}")
"""


@pytest.fixture
def bwrap_options():
    box = sandbox.detect()
    if box.mode not in zygote.MODES:
        pytest.skip(f"no bubblewrap here ({box.reason})")
    zygote.close_all()
    yield grade_file.Options(sandbox=box, timeout=20)
    zygote.close_all()


@pytest.fixture
def starts(monkeypatch):
    made = []
    original = zygote.Zygote.__init__

    def counted(self, *args, **kwargs):
        made.append(args)
        original(self, *args, **kwargs)

    monkeypatch.setattr(zygote.Zygote, "__init__", counted)
    return made


def _grade(tmp_path, name, answers, options):
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(submission("02", answers), path)
    return grade_file.grade_submission(path, load_assignments(ROOT), options)


def test_one_zygote_serves_the_slot_and_each_runner_starts_clean(tmp_path, bwrap_options, starts):
    mul = answer("02", "mul_answer")
    leave = f"ROOT_MODE = {bwrap_options.sandbox.mode == 'root'}\n" + LEAVE_BEHIND
    attacker = _grade(tmp_path, "attacker", {"mul_answer": leave + mul}, bwrap_options)
    assert attacker.exercises["mul"].points == attacker.exercises["mul"].max > 0  # leaving things costs nothing...
    victim = _grade(tmp_path, "victim", {"mul_answer": MUST_BE_CLEAN + mul}, bwrap_options)
    assert victim.total == victim.max, victim.exercises["mul"].feedback  # ...nor helps (held: it lists folders)
    assert len(starts) == 1  # the same zygote graded both: the check above ran in a reused sandbox
    honest = _grade(tmp_path, "honest", {}, bwrap_options)
    assert honest.total == honest.max and len(starts) == 1
    # the zygote that served all three reported ready with torch imported: its resident size is known (asked here,
    # of the slot's live zygote, rather than of one more started for it alone)
    z = zygote.for_slot(bwrap_options.sandbox.mode, bwrap_options.memory, 0, 1)
    assert len(starts) == 1 and z.ready and z.baseline > 50 << 20


@pytest.mark.parametrize("attack", ["zombie_leader", "message_queue"])
def test_what_the_red_team_left_behind_reaches_no_later_runner(tmp_path, bwrap_options, starts, attack):
    mul = answer("02", "mul_answer")
    source = {"zombie_leader": ZOMBIE_LEADER, "message_queue": MESSAGE_QUEUE}[attack]
    attacker = _grade(tmp_path, "attacker", {"mul_answer": source + mul}, bwrap_options)
    assert attacker.exercises["mul"].points == attacker.exercises["mul"].max, attacker.exercises["mul"].feedback
    for name in ("victim", "second_victim"):  # the same slot, one after another: graded as if alone
        victim = _grade(tmp_path, name, {"mul_answer": MUST_BE_CLEAN + mul}, bwrap_options)
        assert victim.total == victim.max, [e.feedback for e in victim.exercises.values()]
    assert len(starts) == 1  # ...and in the attacker's sandbox: the sweep ended the leftover, it did not hide


def test_a_runner_whose_channel_broke_takes_its_sandbox_with_it_even_if_it_ended_cleanly(tmp_path, bwrap_options,
                                                                                         starts):
    from grading_corpus import OVERLAP

    broke = _grade(tmp_path, "broke", {"mul_answer": OVERLAP}, bwrap_options)
    assert "not valid" in " ".join(broke.flags)
    after = _grade(tmp_path, "after", {}, bwrap_options)
    assert after.total == after.max and len(starts) >= 2  # the judge stopped trusting that sandbox


def test_a_runner_stopped_by_the_judge_takes_its_sandbox_with_it(tmp_path, bwrap_options, starts):
    # the loop runs until the judge's backstop, 3 x timeout: the shortest limit at which test_loops' honest mul and
    # div finish under load; the clean answer after it is graded at the fixture's timeout. It waits rather than
    # spins: the runner's wall alarm (2 x timeout) fires into it as its CPU alarm would into a spin, it swallows
    # both alike, and the judge stops a sleeping runner as it stops a busy one, without 6 s of CPU spent meanwhile
    options = grade_file.Options(sandbox=bwrap_options.sandbox, timeout=2)
    endless = (f"ROOT_MODE = {options.sandbox.mode == 'root'}\n" + LEAVE_BEHIND
               + "while True:  # the runner's own alarms cannot end it: the judge must\n"
               "    try:\n        while True:\n            time.sleep(60)\n    except BaseException:\n        pass\n")
    stuck = _grade(tmp_path, "stuck", {"mul_answer": endless}, options)
    assert stuck.exercises["mul"].points == 0 and "time limit" in stuck.exercises["mul"].feedback
    assert stuck.exercises["div"].points == stuck.exercises["div"].max  # a fresh sandbox ran the rest
    after = _grade(tmp_path, "after", {"mul_answer": MUST_BE_CLEAN + answer("02", "mul_answer")}, bwrap_options)
    assert after.total == after.max, after.exercises["mul"].feedback
    assert len(starts) == 2  # the stuck runner's sandbox was not used again


def test_restoring_the_folders_removes_what_is_new_keeps_what_was_there_and_follows_no_symlink(tmp_path):
    from course_utils.grading.sandbox import sweep

    inside, outside = tmp_path / "tmp", tmp_path / "host"
    (inside / "work" / "course").mkdir(parents=True)  # like bubblewrap's mount points for a course under /tmp
    outside.mkdir()
    host_mode = outside.stat().st_mode
    (outside / "keep").write_text("the host's")
    (outside / "keep").chmod(0o644)
    keep = sweep.snapshot((str(inside),))
    (inside / "a" / "b").mkdir(parents=True)
    (inside / "a" / "b" / "f").write_text("1")
    (inside / "a" / "to_host").symlink_to(outside)
    (inside / "to_file").symlink_to(outside / "keep")
    (inside / "work" / "course" / "planted.py").write_text("x = 1")
    (inside / "a" / "b").chmod(0)
    (inside / "a").chmod(0)
    assert sweep.restore(keep, (str(inside),))
    assert sorted(p.relative_to(inside).as_posix() for p in inside.rglob("*")) == ["work", "work/course"]
    assert (outside / "keep").read_text() == "the host's" and (outside / "keep").stat().st_mode & 0o777 == 0o644
    assert outside.stat().st_mode == host_mode
    (inside / "work" / "course").chmod(0o777)  # a recorded folder changed: not clean, the sandbox is not reused
    assert not sweep.restore(keep, (str(inside),))
