"""Instructor tooling: grade a batch of submissions so that student code can neither fool
nor escape the grader.

* ``cli``: the command line (``python -m course_utils.grade``).
* ``collect``: finding submissions, strict notebook reading, the cells a runner executes.
* ``policy``: the judge's reading of answer cells (names resolved): held for review, learning flags.
* ``judge``: one submission: starts runners, decides points from their facts. Never runs student code.
* ``runner``: the sandboxed process that runs student code and the checks' probes. Decides nothing.
* ``protocol``: framing and validation of what crosses between the two (no pickle).
* ``sandbox`` + ``seccomp`` + ``limits``: bubblewrap, the syscall filter, memory/process/CPU caps.
* ``store`` + ``reports``: results on disk (resume, shards) and the CSV / feedback files.
* ``gradescope``: the autograder archive for Gradescope; ``similarity``: the copy report (copydetect).
"""
