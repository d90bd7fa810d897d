"""Sandbox uids (issue 38, items 2 and 3): one per live runner, and what a uid-mode runner leaves is taken back."""
import os
import threading

import pytest

from course_utils.grading import uids

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
