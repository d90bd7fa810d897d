"""Instructor tooling: grade a batch of submissions so that student code can neither fool
nor escape the grader.

* ``cli``: the command line (``python -m course_utils.grade``): parses arguments, wires the steps.
* ``collect``: finding submissions, strict notebook reading, which cells are answers, the cells a runner executes.
* ``submission``: a submission read and parsed once (``ParsedSubmission``): what the judge, ``similarity``
  and ``copies`` all read.
* ``policy``: the judge's reading of answer cells (names resolved): held for review, learning flags.
* ``options``: how a batch is graded (``Options``; no torch). ``judge``: one submission: starts runners
  (``worker``), decides points from their facts with a ``session`` (the trust rules for runner
  messages). Never runs student code.
* ``runner``: the sandboxed process that runs student code and the checks' probes. Decides nothing.
* ``protocol``: framing and validation of what crosses between the two (no pickle).
* ``sandbox`` + ``seccomp`` + ``limits``: bubblewrap, the syscall filter, memory/process/CPU caps.
* ``results``: the one results model (submission -> exercises -> parts), built once per submission.
* ``store``: results on disk, resume and ``--merge``; ``outputs``: every output format behind one
  interface, each reading the model only: ``reports`` (grade table, feedback files), ``dashboard``
  (``--report``), JSON lines; ``gradescope.results`` writes Gradescope's results.json from it too.
* ``gradescope_archive``: the autograder archive for Gradescope; ``gradescope``: grading there (what
  ``run_autograder`` runs); ``similarity``: the copy report (copydetect).
* ``gradebook``: the course's SQLite store of record (results and instructor decisions); ``book_cli``:
  its commands (accept, override, regrade, export); ``roster``, ``late`` (due dates) and ``lms`` (Canvas,
  Moodle, nbgrader exports) feed the export; ``copies``: "copied from the solutions" flags on a row.
"""
