"""Sandbox uids (issue 38, items 2 and 3): one per live runner, and what a uid-mode runner leaves is taken back."""
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from course_utils.grading.sandbox import uids

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="leases and chown need root (the tests run as root in CI)")
UID = 62999  # what a runner's uid would be: no account, no process


def test_concurrent_leases_never_share_a_uid_and_a_released_uid_is_leased_again():
    """``uid_for`` was ``slot % 16``: slots 0 and 16 (--jobs 20) ran as one uid and killed each other."""
    leases: list[uids.Lease] = []
    lock = threading.Lock()

    def take() -> None:
        lease = uids.Lease(61500)
        with lock:
            leases.append(lease)

    threads = [threading.Thread(target=take) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert len({lease.uid for lease in leases}) == 40
        first = min(leases, key=lambda lease: lease.uid)
        first.release()
        again = uids.Lease(61500)
        assert again.uid == first.uid
        again.release()
    finally:
        for lease in leases:
            lease.release()


def test_what_a_uid_left_in_shared_folders_is_removed_and_counted_and_nothing_else(tmp_path):
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    outside = tmp_path / "host_file"
    outside.write_text("the host's")
    (shared / "note").write_bytes(b"x" * 8192)
    os.chown(shared / "note", UID, UID)
    (shared / "link").symlink_to(outside)
    os.lchown(shared / "link", UID, UID)
    other = shared / "someone_elses"  # world-writable, not the uid's: looked into, kept
    other.mkdir()
    os.chmod(other, 0o1777)
    (other / "kept").write_text("theirs")
    deep = other / "deep"  # deeper than any path: 600 levels of 'd' + a locked folder, all the uid's
    deep.mkdir()
    os.chown(deep, UID, UID)
    fd = os.open(deep, os.O_RDONLY)
    for _ in range(600):
        os.mkdir("d", dir_fd=fd)
        os.chown("d", UID, UID, dir_fd=fd, follow_symlinks=False)
        fd, old = os.open("d", os.O_RDONLY, dir_fd=fd), fd
        os.close(old)
    os.chmod(fd, 0)
    os.close(fd)
    assert uids.held_bytes(UID, (str(shared),)) >= 8192
    assert uids.take_back(UID, (str(shared),)) == []
    assert sorted(p.name for p in shared.rglob("*")) == ["kept", "someone_elses"]
    assert outside.read_text() == "the host's"
    assert uids.held_bytes(UID, (str(shared),)) == 0


@pytest.fixture
def shared():
    """A folder every uid may enter (pytest's own are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="course-seal-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _course(tmp_path):
    """A checkout readable by all (as git clone makes it) with its venv inside, and a link out of it."""
    course = tmp_path / "course"
    for folder in ("solutions", ".venv/lib", "course_utils/checks"):
        (course / folder).mkdir(parents=True)
    (course / "solutions" / "02.py").write_text("answers")
    (course / ".venv" / "lib" / "torch.py").write_text("x = 1")
    (course / "README.md").write_text("readme")
    outside = tmp_path / "outside"
    outside.mkdir()
    (course / "link").symlink_to(outside)
    for path in [*tmp_path.rglob("*")]:
        if not path.is_symlink():
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return course, outside


def test_seal_closes_the_course_to_other_users_but_the_way_to_its_python(shared):
    """Issue 48, item 4: a uid-mode runner read solutions/; every runner is an 'other' user of the machine."""
    course, outside = _course(shared)
    changed = uids.seal([str(course)], [str(course / ".venv")])
    mode = {p: os.stat(course / p).st_mode & 0o777 for p in ("", "solutions", "solutions/02.py", "course_utils",
                                                            "README.md", ".venv", ".venv/lib/torch.py")}
    assert mode == {"": 0o751, "solutions": 0o750, "solutions/02.py": 0o644, "course_utils": 0o750,
                    "README.md": 0o640, ".venv": 0o755, ".venv/lib/torch.py": 0o644}
    assert os.stat(outside).st_mode & 0o777 == 0o755  # a link is never followed
    assert uids.readable_by(61700, [str(course / "solutions" / "02.py"), str(course / "README.md"), str(course),
                                    str(course / ".venv" / "lib" / "torch.py")]) == [str(course / ".venv/lib/torch.py")]
    assert uids.seal([str(course)], [str(course / ".venv")]) == [] and len(changed) == 4  # nothing left to change


def test_a_batch_that_stays_readable_is_named_so_nothing_is_graded(shared, monkeypatch):
    """Where sealing cannot take the access away (a read-only file system, an ACL), the check says which path."""
    course, _outside = _course(shared)
    subs = shared / "subs"
    subs.mkdir(mode=0o755)
    os.chmod(subs, 0o755)
    monkeypatch.setattr(uids, "seal", lambda paths, keep: [])
    monkeypatch.setattr(os, "umask", lambda mask: 0o022)  # this test process keeps its own
    assert uids.hide_batch([str(subs)], str(course), [], [str(course / ".venv")], 61700) == str(subs)
