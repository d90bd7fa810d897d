"""One check run per (exercise, answer source, variant) per test session, shared by the tests that read it.

test_variants runs every variant's answer on every variant; test_hints reads the level-1 hints of some of those
same runs (an answer met by another variant). Under ``--dist loadscope`` the two modules may sit on different
workers, so each run's result is a pickle in the session's shared temp directory: the first worker to need it runs
the check (holding a lock, so the other waits for it instead of running the same check again), every later reader
loads it. The check itself is seeded, so a result read back is the one a fresh run would give.
"""
import hashlib
import pickle
from pathlib import Path

from filelock import FileLock

from check_helpers import ns_from
from course_utils.checks import run_check
from course_utils.exercise_result import ExerciseResult


class VariantRuns:
    """``run(grade_id, source, variant)``: ``run_check`` of ``source`` on ``variant``, run once per session."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.memo: dict[str, ExerciseResult] = {}

    def run(self, grade_id: str, source: str, variant: str) -> ExerciseResult:
        key = hashlib.sha256(f"{grade_id}\0{variant}\0{source}".encode()).hexdigest()
        if key in self.memo:
            return self.memo[key]
        path = self.folder / f"{grade_id}-{key[:24]}.pickle"
        with FileLock(str(path) + ".lock"):
            if path.exists():
                result = pickle.loads(path.read_bytes())
            else:
                result = run_check(grade_id, ns_from(source), variant=variant)
                part = path.with_suffix(".part")
                part.write_bytes(pickle.dumps(result))
                part.replace(path)
        self.memo[key] = result
        return result
