"""``python -m course_utils.grade``: the instructors' grader (the code lives in ``course_utils.grading``).

Run as root, it first starts itself again with its arguments in its environment instead of on its
command line: any user of the machine may read a process's ``/proc/PID/cmdline``, and a uid-sandbox
runner once read the submissions folder there; ``/proc/PID/environ`` is the owner's alone.
"""
from __future__ import annotations

import json
import os
import sys

ARGS = "COURSE_GRADE_ARGS"  # the arguments, moved off the command line (a JSON list)


def hide_arguments() -> list[str]:
    """The arguments; as root, after starting this module again without them on its command line."""
    if ARGS in os.environ:
        return list(json.loads(os.environ.pop(ARGS)))
    if os.geteuid() == 0 and len(sys.argv) > 1:
        os.execve(sys.executable, [sys.executable, "-m", "course_utils.grade"],
                  dict(os.environ, **{ARGS: json.dumps(sys.argv[1:])}))
    return sys.argv[1:]


if __name__ == "__main__":
    arguments = hide_arguments()
    from .grading.cli import main

    sys.exit(main(arguments))
