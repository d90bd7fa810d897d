"""``python -m course_utils.grade``: the instructors' grader (the code lives in ``course_utils.grading``).

Run as root, it first starts itself again with its arguments in its environment instead of on its
command line: any user of the machine may read a process's ``/proc/PID/cmdline``, and a uid-sandbox
runner once read the submissions folder there; ``/proc/PID/environ`` is the owner's alone.
"""
from __future__ import annotations

import atexit
import json
import os
import sys
import threading
from typing import NoReturn

ARGS = "COURSE_GRADE_ARGS"  # the arguments, moved off the command line (a JSON list)


def hide_arguments() -> list[str]:
    """The arguments; as root, after starting this module again without them on its command line."""
    if ARGS in os.environ:
        return list(json.loads(os.environ.pop(ARGS)))
    if os.geteuid() == 0 and len(sys.argv) > 1:
        os.execve(sys.executable, [sys.executable, "-m", "course_utils.grade"],
                  dict(os.environ, **{ARGS: json.dumps(sys.argv[1:])}))
    return sys.argv[1:]


def finish(code: int) -> NoReturn:
    """End the command with ``code`` now that its work is done, without the interpreter's teardown.

    Tearing down torch's and the checks' modules cost about half a CPU-second after the last output was
    written (0.55 s measured on a 3-notebook batch), on every run and at any ``--jobs``: time in which the
    batch is over but the command has not ended. What a normal exit does first still happens, in the same
    order: the other threads are waited for (``threading``'s own shutdown), the ``atexit`` handlers run (the
    slots' sandboxes end, logging flushes), stdout and stderr are flushed (status 120 if that fails, as
    Python's own exit gives). The runners end the same way (``runner.run_job``).
    """
    threading._shutdown()  # type: ignore[attr-defined]  # what Python's exit calls first: non-daemon threads end
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a closed stream
            code = code or 120
    os._exit(code)


if __name__ == "__main__":
    from .grading.sandbox.limits import one_torch_thread

    one_torch_thread()  # the process's own entry, before any thread or torch exists (kept by hide_arguments)
    arguments = hide_arguments()
    from .grading.cli import main

    finish(main(arguments))
