"""course_utils.release: exercises generated from solutions, stubs that fail only when called."""
import jupytext
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT
from course_utils import markers, release
from course_utils.errors import CourseError

SOLUTION = """def f(x):
    y = x + 1
    ### BEGIN SOLUTION
    secret = y * 2
    return secret
    ### END SOLUTION
"""


def test_region_becomes_an_indented_stub_naming_the_exercise():
    out = release.strip_solutions(SOLUTION, "mul")
    assert "secret" not in out and "BEGIN SOLUTION" not in out
    assert "    y = x + 1" in out
    ns: dict = {}
    exec(out, ns)  # defining the function works ...
    with pytest.raises(NotImplementedError, match="Exercise 'mul' is not attempted yet"):
        ns["f"](1)  # ... calling it raises


@pytest.mark.parametrize("source, words", [
    ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n", "inside a function body"),
    ("def f():\n    ### BEGIN SOLUTION\n    return 1\n", "never closed"),
    ("def f():\n    ### END SOLUTION\n", "without a matching"),
    ("def f():\n    ### BEGIN SOLUTION\n    ### BEGIN SOLUTION\n", "inside another solution region"),
])
def test_malformed_regions_get_one_clear_sentence(source, words):
    with pytest.raises(CourseError, match=words):
        release.strip_solutions(source, "x", "demo")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="abcxyz =+1()", min_size=0, max_size=12), min_size=0, max_size=6),
       st.lists(st.text(alphabet="abcxyz =+1()", min_size=1, max_size=12), min_size=1, max_size=6))
def test_lines_outside_regions_are_kept_verbatim(outside, inside):
    source = "\n".join(["def f():", *[f"    {line}" for line in outside], "    ### BEGIN SOLUTION",
                        *[f"    SECRET{line}" for line in inside], "    ### END SOLUTION", "    tail = 1"])
    out = release.strip_solutions(source, "ex")
    assert "SECRET" not in out
    kept = [line for line in out.splitlines() if "NotImplementedError" not in line]
    assert kept == ["def f():", *[f"    {line}" for line in outside], "    tail = 1"]


def test_exercises_contain_no_solution_code():
    for py in release.solution_sources():
        text = (ROOT / "exercises" / py.name).read_text()
        assert markers.BEGIN not in text and markers.END not in text
        solution_lines = []
        for cell in jupytext.read(py).cells:
            if markers.BEGIN in cell.source:
                inside = False
                for line in cell.source.splitlines():
                    if line.strip() == markers.BEGIN:
                        inside = True
                    elif line.strip() == markers.END:
                        inside = False
                    elif inside and len(line.strip()) > 25:
                        solution_lines.append(line.strip())
        leaked = [line for line in solution_lines if line in text]
        assert not leaked, f"{py.name}: solution lines leaked into the exercise: {leaked[:3]}"


def test_answer_cells_without_solution_metadata_are_refused():
    nb = jupytext.reads("# %%\ndef f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n",
                        fmt="py:percent")
    with pytest.raises(CourseError, match="no nbgrader solution metadata"):
        release.release_notebook(nb, "demo.py")


def test_tag_cells_needs_a_check_after_each_answer():
    nb = jupytext.reads("# %%\ndef f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n",
                        fmt="py:percent")
    with pytest.raises(CourseError, match="needs a check cell after it"):
        release.tag_cells(nb, "demo")


# ---- the student edition (./course release DIR) --------------------------------------------

@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    dest = tmp_path_factory.mktemp("edition") / "student"
    files = release.student_edition(dest, "https://github.com/my-uni/autograd-2027")
    return dest, files


def test_the_student_edition_has_lessons_exercises_and_the_package_but_no_solutions_or_tests(edition):
    import subprocess
    from pathlib import Path

    dest, files = edition
    assert not (dest / "solutions").exists() and not (dest / "tests").exists()
    committed = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", "HEAD", "solutions/"],
                               capture_output=True, text=True, check=True).stdout.split()
    numbers = sorted(Path(p).name[:2] for p in committed if p.endswith("_exercises.py"))
    assert numbers
    for n in numbers:  # every committed lesson, whatever its number: not a fixed list
        assert (dest / "exercises" / f"{n}_exercises.ipynb").exists()
    assert (dest / "notebooks" / "00_start_here.ipynb").exists() and (dest / "course_utils" / "checks").is_dir()
    assert not [f for f in files if "__pycache__" in f]
    assert release.leaks(dest, release.solution_regions(ROOT)) == []


def test_links_point_at_the_students_repository(edition):
    dest, _ = edition
    ours = "autograd-course/custom-autograd-functions"
    assert not [p for p in dest.rglob("*") if p.is_file() and ours in p.read_text(errors="replace")]
    assert 'Repository = "https://github.com/my-uni/autograd-2027"' in (dest / "pyproject.toml").read_text()
    assert "colab.research.google.com/github/my-uni/autograd-2027/blob/main/" in (dest / "README.md").read_text()


def test_a_check_runs_from_the_released_folder(edition):
    """The released package alone grades an answer (here the solution of mul, typed in by a student)."""
    import subprocess
    import sys

    dest, _ = edition
    code = ("import torch\nfrom torch.autograd import Function\n"
            "class Mul(Function):\n    @staticmethod\n    def forward(ctx, a, b):\n"
            "        ctx.save_for_backward(a, b)\n        return a * b * b\n"
            "    @staticmethod\n    def backward(ctx, g):\n        a, b = ctx.saved_tensors\n"
            "        return g * b * b, 2 * g * a * b\n")
    probe = (f"import course_utils\nfrom course_utils.checks import run_check\nns = {{}}\nexec({code!r}, ns)\n"
             "r = run_check('mul', ns)\nprint(course_utils.__file__)\nprint(r.points)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=dest, env={"PYTHONPATH": str(dest), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    where, points = done.stdout.split()[-2:]
    assert where.startswith(str(dest)) and float(points) == 2.0


def test_solution_text_anywhere_refuses_the_release(tmp_path):
    regions = release.solution_regions(ROOT)
    name, own = next((n, o) for n, o in regions if len(o) >= release.RUN)
    (tmp_path / "course_utils").mkdir()
    (tmp_path / "course_utils" / "helper.py").write_text("def f():\n" + "".join(f"    {x}\n" for x in own[:3]))
    (tmp_path / "note.md").write_text(f"text\n{markers.BEGIN}\n")
    found = release.leaks(tmp_path, regions)
    assert found == ["course_utils/helper.py: lines of a solution in solutions/" + name,
                     "note.md: a solution marker line"]
    with pytest.raises(CourseError, match="not empty"):
        release.student_edition(tmp_path, "https://github.com/my-uni/x")


def test_the_edition_can_be_published_as_a_branch_without_touching_the_work_tree(edition, tmp_path):
    import subprocess

    dest, files = edition
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    commit = release.publish_branch(dest, "student", repo)
    listed = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", "student"], capture_output=True,
                            text=True, check=True).stdout.split()
    assert sorted(listed) == sorted(files) and len(commit) == 40
    assert not [p for p in repo.iterdir() if p.name != ".git"]  # nothing checked out
    again = release.publish_branch(dest, "student", repo)
    parents = subprocess.run(["git", "-C", str(repo), "rev-list", "--parents", "-n1", again], capture_output=True,
                             text=True, check=True).stdout.split()
    assert parents == [again, commit]  # a new release is a new commit on the branch


def test_git_ignores_submissions_terms_and_grade_books():
    import subprocess

    done = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "submissions/a.ipynb", "term/gradebook.db",
                           "grading/course.sqlite"], capture_output=True, text=True, check=False)
    assert done.stdout.split() == ["submissions/a.ipynb", "term/gradebook.db", "grading/course.sqlite"]
