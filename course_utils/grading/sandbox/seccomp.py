"""A seccomp filter for the grader's sandbox, written as classic BPF (no libseccomp needed).

bubblewrap loads it (``--seccomp FD``) right before it starts the runner. It refuses the
system calls student code never needs and that widen what a process can reach: mounting,
namespaces, kernel modules and keys, tracing other processes, eBPF, io_uring, changing
CPU affinity (the grader pins each worker), clock and host settings, and memory that no
resident size or folder shows (``memfd_create`` and System V IPC objects: where no cgroup
counts them, the judge could not see a runner hold gigabytes in an unmapped memfd), and kernel memory
that none shows either (issue 48, measured where no cgroup counts it): pages referenced from pipes
(``vmsplice`` of transparent huge pages then unmapped pinned 32 MiB per pipe; ``splice``, ``tee``
and ``sendfile`` into a pipe reference pages the same way), socket buffers (``socket``,
``socketpair``: 16 MiB per filled pair where ``net.core.wmem_max`` is 4 MiB), extended attributes
(the ``setxattr`` family: gigabytes on one empty file in a shared tmpfs), epoll or inotify
watches (each pins kernel objects, bounded only per user) and AIO contexts (``io_setup``: bounded only
machine-wide, by ``fs.aio-max-nr``, which one runner could take whole); ``fcntl``'s record locks
(``RECORD_LOCKS``: counted by no cgroup). ``clone`` is allowed
only without namespace flags; ``clone3`` answers ENOSYS so libc falls back to ``clone``.
Other architectures get no filter (``filter_for`` returns None) and the README says so.
"""
from __future__ import annotations

import errno
import platform
import struct

# syscall numbers: x86_64 from asm/unistd_64.h, aarch64 from asm-generic/unistd.h
DENIED = {
    "x86_64": {
        "ptrace": 101, "syslog": 103, "uselib": 134, "personality": 135, "ustat": 136, "sysfs": 139, "vhangup": 153,
        "pivot_root": 155, "_sysctl": 156, "adjtimex": 159, "chroot": 161, "acct": 163, "settimeofday": 164,
        "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "sethostname": 170,
        "setdomainname": 171, "iopl": 172, "ioperm": 173, "init_module": 175, "delete_module": 176, "quotactl": 179,
        "nfsservctl": 180, "sched_setaffinity": 203, "lookup_dcookie": 212, "clock_settime": 227, "mbind": 237,
        "set_mempolicy": 238, "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250,
        "migrate_pages": 256, "unshare": 272, "move_pages": 279, "perf_event_open": 298, "fanotify_init": 300,
        "name_to_handle_at": 303, "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308,
        "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "kexec_file_load": 320,
        "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "pidfd_getfd": 438, "mount_setattr": 442, "quotactl_fd": 443, "memfd_secret": 447,
        # memory that no resident size and no folder shows: where no cgroup does, nothing would count it
        "shmget": 29, "semget": 64, "msgget": 68, "memfd_create": 319,
        # kernel memory nothing counts (issue 48): pages pinned in pipes, socket buffers, xattrs, watches
        "sendfile": 40, "splice": 275, "tee": 276, "vmsplice": 278, "socket": 41, "socketpair": 53,
        "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "setxattrat": 463, "epoll_create": 213,
        "epoll_create1": 291, "inotify_init": 253, "inotify_init1": 294,
        # AIO contexts: 16 of them took the whole machine's fs.aio-max-nr (other users' io_setup then fails)
        "io_setup": 206,
    },
    "aarch64": {
        "lookup_dcookie": 18, "umount2": 39, "mount": 40, "pivot_root": 41, "nfsservctl": 42, "chroot": 51,
        "vhangup": 58, "quotactl": 60, "acct": 89, "personality": 92, "unshare": 97, "kexec_load": 104,
        "init_module": 105, "delete_module": 106, "clock_settime": 112, "syslog": 116, "ptrace": 117,
        "sched_setaffinity": 122, "reboot": 142, "sethostname": 161, "setdomainname": 162, "settimeofday": 170,
        "adjtimex": 171, "add_key": 217, "request_key": 218, "keyctl": 219, "swapon": 224, "swapoff": 225,
        "migrate_pages": 238, "move_pages": 239, "perf_event_open": 241, "fanotify_init": 262,
        "name_to_handle_at": 264, "open_by_handle_at": 265, "clock_adjtime": 266, "setns": 268,
        "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "finit_module": 273, "bpf": 280,
        "userfaultfd": 282, "kexec_file_load": 294, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "pidfd_getfd": 438, "mount_setattr": 442,
        "msgget": 186, "semget": 190, "shmget": 194, "memfd_create": 279,  # memory out of sight, as on x86_64
        "sendfile": 71, "splice": 76, "tee": 77, "vmsplice": 75, "socket": 198, "socketpair": 199,
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "setxattrat": 463, "epoll_create1": 20, "inotify_init1": 26,
        "io_setup": 0,
    },
}
CLONE = {"x86_64": 56, "aarch64": 220}
# fcntl's record locks (F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW): each locked range is kernel memory that no
# memory cgroup counts (Linux 6.8 dropped their accounting), with no limit per user: 20 small processes held
# 2.9 million locks (527 MiB of slab) in root mode's cgroup under ``--memory 0.5``. Other fcntl commands pass.
FCNTL = {"x86_64": 72, "aarch64": 25}
RECORD_LOCKS = (6, 7, 37, 38)
CLONE3 = 435
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80

# classic BPF opcodes and seccomp return values
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_KILL_PROCESS = 0x7FFF0000, 0x80000000


def _errno(code: int) -> int:
    return 0x00050000 | code


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def filter_for(machine: str | None = None) -> bytes | None:
    """The compiled filter for this machine's architecture, or None where we have no table."""
    arch = machine or platform.machine()
    if arch not in DENIED:
        return None
    prog = [
        _insn(LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        _insn(JEQ_K, 1, 0, AUDIT_ARCH[arch]),
        _insn(RET_K, 0, 0, RET_KILL_PROCESS),
        _insn(LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch == "x86_64":  # the x32 ABI reuses numbers with bit 30 set: refuse it outright
        prog += [_insn(JGE_K, 0, 1, 0x40000000), _insn(RET_K, 0, 0, _errno(errno.EPERM))]
    for nr in sorted(set(DENIED[arch].values())):
        prog += [_insn(JEQ_K, 0, 1, nr), _insn(RET_K, 0, 0, _errno(errno.EPERM))]
    prog += [_insn(JEQ_K, 0, 1, CLONE3), _insn(RET_K, 0, 0, _errno(errno.ENOSYS))]
    locks = len(RECORD_LOCKS)
    prog += [_insn(JEQ_K, 0, locks + 3, FCNTL[arch]), _insn(LD_W_ABS, 0, 0, 24)]  # low 32 bits of args[1]: the command
    prog += [_insn(JEQ_K, locks - 1 - i, 0 if i < locks - 1 else 1, cmd) for i, cmd in enumerate(RECORD_LOCKS)]
    prog += [_insn(RET_K, 0, 0, _errno(errno.EPERM)), _insn(RET_K, 0, 0, RET_ALLOW)]
    prog += [
        _insn(JEQ_K, 0, 4, CLONE[arch]),
        _insn(LD_W_ABS, 0, 0, 16),  # low 32 bits of args[0]: the clone flags
        _insn(JSET_K, 0, 1, CLONE_NAMESPACES),
        _insn(RET_K, 0, 0, _errno(errno.EPERM)),
        _insn(RET_K, 0, 0, RET_ALLOW),
        _insn(RET_K, 0, 0, RET_ALLOW),
    ]
    return b"".join(prog)
