"""Instructor tooling: grade a batch of submissions so that student code can neither fool
nor escape the grader. Three folders and a thin core; every module is listed here (a test checks it).

Floors (a module imports only its own floor or lower ones: ``tests/test_import_graph.py``):
``sandbox/`` (0) < the core's data (1) < ``reports/`` (2) < ``book/`` (3) < the core's pipeline (4).

The core's data (floor 1)
* ``errors``: ``UsageError`` (bad command-line input), imported from here by every module.
* ``results``: the one results model (submission -> exercises -> parts), built once per submission.
* ``collect``: finding submissions (links not followed); ``names``: a file's name as every output shows it.
* ``notebook``: a notebook read strictly (``Cell``, ``NotebookError``) and what kind each cell is.
* ``assignment``: the course's exercise notebooks (``Assignment``) and the one rule for which cells are answers.
* ``checksums``: nbgrader-style cell checksums; whether a locked cell is as the course gave it.
* ``version``: the course version a stored result depends on.
* ``submission``: a submission read and parsed once (``read``, ``ParsedSubmission``): what the judging,
  ``similarity`` and ``copies`` all read; ``plan``: the cells a runner executes.
* ``policy``: the reading of answer cells (names resolved): held for review, learning flags.
* ``attention``: which rows need an instructor's decision (the review queue).
* ``store``: results on disk, resume and ``--merge``. ``options``: how a batch is graded (``Options``; no torch).

``sandbox/``: running student code, and the judge's side of talking to it (floor 0)
* ``runner``: the sandboxed process that runs student code and the probes. Decides nothing.
* ``audit``: the runner's audit hook (what answer code does at run time); ``sweep``: between two runners
  of one zygote, every leftover process ended and the writable folders put back.
* ``protocol``: framing and validation of what crosses between runner and judge (no pickle).
* ``sandbox`` + ``seccomp`` + ``limits`` + ``uids``: bubblewrap (or a uid), the syscall filter,
  memory/process/CPU caps, one uid per live runner (and what a uid-mode runner leaves, taken back).
* ``zygote``: one torch import per job slot, forked per runner. ``worker``: one runner start.
* ``session``: what a runner's messages are worth (the trust rules: forged, duplicate, unconfirmed, late).

``reports/``: every output a grading run writes, each reading the results model only (floor 2)
* ``outputs``: every output format behind one interface; ``reports``: the grade table and feedback
  files; ``dashboard``: the instructor's page (``--report``).
* ``similarity``: the copy report between students (copydetect); ``copies`` (+ ``normalise``, the
  statements compared): "copied from the solutions" flags on a row, with their evidence.

``book/``: the course's store of record (floor 3)
* ``gradebook``: the SQLite grade book (results and instructor decisions); ``book_cli``: its commands
  (accept, override, regrade, choose, dismiss, export, review).
* ``book_outputs``: the outputs rewritten from the book after every decision, and the exports.
* ``roster``, ``late`` (due dates, extensions, the late policy), ``records`` (whom each line of the times
  and due-dates CSVs names), ``tables`` (the instructor's CSV files, read strictly) and ``lms`` (Canvas,
  Moodle, nbgrader exports) feed the export.
* ``review``: the review page's local server; ``review_page``: its HTML.

The core's pipeline (floor 4)
* ``cli``: the command line (``python -m course_utils.grade``): parses arguments, wires the steps.
* ``batch``: a batch's files over the job slots (threads). ``grade_file``: one submission file: starts
  runners (``sandbox.worker``), decides points from their facts with a ``sandbox.session``. It runs in
  the judge, the grader's own process, which never runs student code.
* ``owners``: whose file a submission is (so which variant it is judged against), what its outputs show.
* ``gradescope``: grading on Gradescope (what ``run_autograder`` runs); ``gradescope_archive``: its archive.

CONTRIBUTING.md walks one submission file from ``cli`` to its grade-book row.
"""
