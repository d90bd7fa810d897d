"""The grading settings are torch-free (issue 42, item 5): the command line, Gradescope's run and the
batch loop build ``Options`` before anything imports torch or the checks, with no lazy import."""
import subprocess
import sys

from conftest import ROOT
from course_utils.grading import grade_file, options


def test_options_and_the_modules_that_build_them_import_without_torch():
    code = ("import sys\n"
            "from course_utils.grading import batch, cli, gradescope, gradescope_archive, options\n"
            "o = options.Options(timeout=5, slots=2)\n"
            "assert o.memory == 4 << 30 and not o.sandbox.usable\n"
            "heavy = sorted(m for m in sys.modules if m == 'torch' or m.startswith(('course_utils.checks', "
            "'course_utils.grading.grade_file')))\n"
            "print(heavy)\n")
    proc = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_judge_takes_the_one_options_type():
    assert grade_file.Options is options.Options
