"""The sandbox's pieces: the seccomp filter really refuses what it lists, the command binds the minimum."""
import os
import subprocess
import sys

import pytest

from course_utils.grading.sandbox import sandbox, seccomp

LOAD_FILTER = r"""
import ctypes, errno, mmap, os, platform, select, shutil, socket, subprocess, sys, tempfile, threading
prog = open(sys.argv[1], "rb").read()  # the filter's program, as the sandbox loads it (no new privileges, then it)
libc = ctypes.CDLL(None, use_errno=True)
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(Fprog(len(prog) // 8, prog)), 0, 0) == 0
"""


LOAD_AND_TRY = LOAD_FILTER + r"""
def err(rc):
    return "ok" if rc == 0 else errno.errorcode[ctypes.get_errno()]
out = {
    "mount": err(libc.mount(b"none", b"/", None, 32 | 4096, None)),
    "unshare_user": err(libc.unshare(0x10000000)),
    "ptrace": err(libc.ptrace(0, 0, 0, 0)),
    "clone3": err(libc.syscall(435, 0, 0)),
    "setaffinity": err(libc.sched_setaffinity(0, 0, None)),
}
t = threading.Thread(target=lambda: None); t.start(); t.join()
out["thread"] = "ok"
out["subprocess"] = subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True).stdout.decode().strip()
print(out)
"""


@pytest.mark.skipif(seccomp.filter_for() is None, reason="no seccomp table for this architecture")
def test_filter_refuses_listed_calls_and_allows_normal_work(tmp_path):
    prog = tmp_path / "filter.bpf"
    prog.write_bytes(seccomp.filter_for())
    done = subprocess.run([sys.executable, "-c", LOAD_AND_TRY, str(prog)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    out = eval(done.stdout)  # our own child's dict of strings
    assert out == {"mount": "EPERM", "unshare_user": "EPERM", "ptrace": "EPERM", "clone3": "ENOSYS",
                   "setaffinity": "EPERM", "thread": "ok", "subprocess": "1"}


def test_filter_is_whole_instructions_for_known_architectures():
    for arch in ("x86_64", "aarch64"):
        prog = seccomp.filter_for(arch)
        assert prog and len(prog) % 8 == 0 and len(prog) // 8 < 255
    assert seccomp.filter_for("sparc") is None


def test_command_binds_only_what_the_runner_needs(tmp_path):
    cmd = sandbox.bwrap_command("root", sandbox.Path(sandbox.__file__).resolve().parents[2], 1 << 20, 7)
    binds = [cmd[i + 2] for i, a in enumerate(cmd) if a in ("--ro-bind", "--bind")]
    root = str(sandbox.Path(sandbox.__file__).resolve().parents[3])
    assert "--bind" not in cmd  # nothing of the host is writable
    mounted = sorted(b.removeprefix(f"{sandbox.COURSE_MOUNT}/course_utils/") for b in binds
                     if b.startswith(f"{sandbox.COURSE_MOUNT}/"))
    assert mounted == sorted(sandbox.RUNNER_FILES + sandbox.RUNNER_DIRS), mounted  # never checks/ or solutions/
    assert not any("checks" in b or "solutions" in b for b in binds)
    assert not any(b.startswith(root) and b != sys.prefix and not b.startswith(sys.prefix) for b in binds), binds
    assert all(x in cmd for x in ("--unshare-pid", "--unshare-net", "--clearenv", "--die-with-parent", "-I"))
    assert cmd[cmd.index("--seccomp") + 1] == "7"
    user = sandbox.bwrap_command("user", sandbox.Path("/x/course_utils"), 1 << 20, None)
    assert all(x in user for x in ("--unshare-user", "--disable-userns", "--cap-drop")) and "--seccomp" not in user


def test_the_environment_is_empty_but_for_what_the_runner_needs(monkeypatch):
    monkeypatch.setenv("INSTRUCTOR_TOKEN", "secret")
    env = sandbox.runner_env()
    assert "INSTRUCTOR_TOKEN" not in env and env["HOME"] == sandbox.SCRATCH


@pytest.mark.skipif(os.geteuid() != 0 or sandbox.detect().mode != "root", reason="root-mode sandbox only")
def test_root_mode_runner_drops_to_an_unprivileged_uid():
    cmd = sandbox.bwrap_command("root", sandbox.Path(sandbox.__file__).resolve().parents[2], 1 << 20, None, 61999)
    assert cmd[-1].endswith("main(61999)") and "COURSE_RUNNER_UID" not in " ".join(cmd)
    probe = ("import os; from course_utils.grading.sandbox.runner import drop_privileges; "
             "drop_privileges(61999); s = open('/proc/self/status').read(); "
             "print(os.getuid(), os.geteuid(), [l.split()[1] for l in s.splitlines() if l.startswith('Cap')])")
    cmd[-1] = cmd[-1].replace("from course_utils.grading.sandbox.runner import main; main(61999)", probe)
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["61999", "61999"] and done.stdout.count("0000000000000000") == 5


KERNEL_MEMORY = LOAD_FILTER + r"""
arm = platform.machine() == "aarch64"
out = {}
def attempt(name, call):
    try:
        rc = call()
        out[name] = "ok" if rc is None or rc >= 0 else errno.errorcode[ctypes.get_errno()]
    except OSError as exc:
        out[name] = errno.errorcode[exc.errno]
folder = sys.argv[2]
path = os.path.join(folder, "f")
with open(path, "wb") as f:
    f.write(b"data" * 1000)
r, w = os.pipe()
os.write(w, b"x")
fd = os.open(path, os.O_RDONLY)
attempt("vmsplice", lambda: libc.vmsplice(w, None, 0, 0))
attempt("splice", lambda: os.splice(r, w, 1))
attempt("tee", lambda: libc.tee(r, w, 1, 2))
attempt("sendfile", lambda: os.sendfile(w, fd, 0, 1))
attempt("socket", lambda: socket.socket(socket.AF_UNIX).fileno())
attempt("socketpair", lambda: socket.socketpair()[0].fileno())
attempt("epoll", lambda: select.epoll().fileno())
attempt("inotify", lambda: libc.inotify_init1(0))
attempt("setxattr", lambda: os.setxattr(path, "user.a", b"1"))
attempt("fsetxattr", lambda: os.setxattr(fd, "user.a", b"1"))
attempt("setxattrat", lambda: libc.syscall(463, -100, path.encode(), 0, b"user.a", None, 0))
attempt("keyctl", lambda: libc.syscall(219 if arm else 250, 0, -3, 1))
attempt("io_uring_setup", lambda: libc.syscall(425, 4, ctypes.create_string_buffer(120)))
attempt("userfaultfd", lambda: libc.syscall(282 if arm else 323, 1))
shutil.copyfile(path, path + ".copy")  # Python's fast copy gives up on sendfile's refusal and copies by hand
shutil.copy2(path, path + ".copy2")  # copying extended attributes: their refusal is skipped
out["copies"] = open(path + ".copy", "rb").read() == open(path + ".copy2", "rb").read() == b"data" * 1000
print(out)
"""


@pytest.mark.skipif(seccomp.filter_for() is None, reason="no seccomp table for this architecture")
def test_filter_refuses_what_holds_kernel_memory_no_cap_counts(tmp_path):
    """Issue 48: pages pinned in pipes, socket buffers, extended attributes, epoll and inotify watches (memory
    nothing counts where no cgroup does) and keys, io_uring and userfaultfd: refused, while copying files works."""
    prog = tmp_path / "filter.bpf"
    prog.write_bytes(seccomp.filter_for())
    done = subprocess.run([sys.executable, "-c", KERNEL_MEMORY, str(prog), str(tmp_path)], check=False, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = eval(done.stdout)  # our own child's dict
    assert out.pop("copies") is True
    assert out == dict.fromkeys(out, "EPERM") and len(out) == 14, out


MACHINE_WIDE = LOAD_FILTER + r"""
x86 = platform.machine() == "x86_64"
ctx = ctypes.c_ulong(0)
out = {"io_setup": "ok" if libc.syscall(206 if x86 else 0, 64, ctypes.byref(ctx)) == 0 else errno.errorcode[ctypes.get_errno()]}
import fcntl, struct, tempfile
f = tempfile.TemporaryFile()
for name, call in (("lockf", lambda: fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)),
                   ("ofd lock", lambda: fcntl.fcntl(f, 37, struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 0, 1, 0)))):
    try:
        call()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
out["getfl"] = "ok" if fcntl.fcntl(f, fcntl.F_GETFL) >= 0 else "failed"  # other fcntl commands still work
fcntl.flock(f, fcntl.LOCK_EX)  # one lock per open file: bounded by the descriptors, allowed
if x86:  # the x32 ABI's socket (number | 0x40000000): refused like the 64-bit one
    out["x32 socket"] = "ok" if libc.syscall(41 | 0x40000000, 1, 1, 0) >= 0 else errno.errorcode[ctypes.get_errno()]
print(out, flush=True)
if x86 and sys.argv[2] == "int80":  # the i386 ABI through int 0x80 (socket, 359): the filter kills the process
    code = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    code.write(bytes([0xB8, 0x67, 1, 0, 0, 0xBB, 1, 0, 0, 0, 0xB9, 1, 0, 0, 0, 0x31, 0xD2, 0xCD, 0x80, 0xC3]))
    ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(code)))()
    print("int 0x80 returned")
"""


@pytest.mark.skipif(seccomp.filter_for() is None, reason="no seccomp table for this architecture")
def test_filter_refuses_aio_contexts_record_locks_and_other_abis(tmp_path):
    """Issue 48, attacked again: 16 AIO contexts (``io_setup``, not in the list) took the whole machine's
    ``fs.aio-max-nr``, so every other process's ``io_setup`` failed while the runner lived; record locks
    (``fcntl``), which no memory cgroup counts, held 527 MiB of slab in root mode under ``--memory 0.5``.
    The x32 and i386 ABIs must not reach what the 64-bit filter refuses."""
    prog = tmp_path / "filter.bpf"
    prog.write_bytes(seccomp.filter_for())
    done = subprocess.run([sys.executable, "-c", MACHINE_WIDE, str(prog), "int80"], check=False, capture_output=True, text=True,
                          timeout=60)
    out = eval(done.stdout.splitlines()[0])  # our own child's dict
    assert out.pop("getfl") == "ok"
    assert set(out.values()) == {"EPERM"}, out
    if "x32 socket" in out:
        assert done.returncode == -31 and "int 0x80 returned" not in done.stdout  # SIGSYS: killed by the filter
