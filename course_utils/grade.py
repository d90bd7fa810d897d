"""``python -m course_utils.grade``: the instructors' grader (the code lives in ``course_utils.grading``)."""
from __future__ import annotations

import sys

from .grading.cli import main

if __name__ == "__main__":
    sys.exit(main())
