"""Issue 48, item 7: the tests that grade as another uid pass where the checkout is private.

A clone inside a ``mktemp -d`` folder (mode 0700, as root's home is) holds a venv no other uid can
reach: five user-mode tests failed with ``No module named 'nbformat'`` and the Gradescope uid test
got "Nothing was graded". Here the checkout is put inside such a folder for real (in a private
mount namespace: a 0700 tmpfs over its parent), and the other uid imports the grader's packages
only through ``private_paths.readable_view``, which those tests now use.
"""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from private_paths import why_unreadable

IMPORT = "import nbformat, course_utils.grading.cli"
SCRIPT = r"""
set -e
# a folder outside the checkout's parent, which the tmpfs below covers (a clone in /tmp: not /tmp)
for d in /tmp /var/tmp /dev/shm /run; do
    case "$d/" in "$PARENT"/*) ;; *) K=$(mktemp -d -p "$d"); break ;; esac
done
mount --bind "$COURSE" "$K"
mount -t tmpfs -o mode=0700 none "$PARENT"
mkdir "$COURSE"
mount --bind "$K" "$COURSE"
cd /
as_other() { setpriv --reuid=60038 --regid=60038 --clear-groups "$PY" -c "$IMPORT" >/dev/null 2>&1 && echo ok || echo fails; }
echo "private: $(stat -c %a "$PARENT") before: $(as_other)"
VIEW=$(cd "$TESTS" && "$PY" -c "from private_paths import readable_view; print(readable_view())")
eval "$VIEW"
echo "after: $(as_other)"
"""


def test_another_uid_reaches_the_venv_of_a_private_checkout_through_the_view():
    if why_unreadable() or not shutil.which("setpriv"):
        pytest.skip(why_unreadable() or "needs setpriv")
    env = dict(os.environ, COURSE=str(ROOT), PARENT=str(ROOT.parent), PY=sys.executable, IMPORT=IMPORT,
               TESTS=str(ROOT / "tests" / "grading"), PYTHONPATH=f"{ROOT}:{ROOT / 'tests'}")
    proc = subprocess.run(["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", SCRIPT],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["private:", "700", "before:", "fails", "after:", "ok"], proc.stdout
