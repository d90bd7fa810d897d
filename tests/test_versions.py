"""requirements.txt is the one place versions live; everything else must agree with it."""
import re
import subprocess
import sys

from conftest import ROOT


def pins(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(?:-\s+)?([A-Za-z0-9_.\-]+)==([^\s#]+)", line)
        if m:
            found[m.group(1).lower()] = m.group(2)
    return found


def test_environment_yml_matches_requirements():
    req = pins((ROOT / "requirements.txt").read_text())
    env = pins((ROOT / "environment.yml").read_text())
    assert env == req, f"environment.yml differs from requirements.txt: {set(env.items()) ^ set(req.items())}"


def test_environment_yml_has_graphviz_and_course_utils():
    text = (ROOT / "environment.yml").read_text()
    assert re.search(r"^\s*-\s+graphviz\s*$", text, re.M), "conda users need the graphviz binary package"
    assert "- -e ." in text


def test_torch_is_pinned_to_the_cpu_wheel():
    assert pins((ROOT / "requirements.txt").read_text())["torch"] == "2.13.0"


def test_pyproject_names_no_versions():
    """Versions live in requirements.txt only; pyproject lists names so Colab keeps its torch."""
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"^dependencies = \[(.*?)\]", text, re.M | re.S).group(1)
    assert not re.search(r"[=<>~]", deps), deps


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = re.search(r"^(\./course test)\b", readme, re.M).group(1)
    assert command in ci.splitlines()


def test_instructor_requirements_are_pinned_once():
    """requirements-instructor.txt pins its own packages exactly, and none that requirements.txt pins."""
    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements-instructor.txt").read_text().splitlines()]
    lines = [line for line in lines if line]
    extra = pins("\n".join(lines))
    assert len(extra) == len(lines), f"every line must be NAME==VERSION: {lines}"
    assert {"nbgrader", "copydetect"} <= set(extra)
    both = set(extra) & set(pins((ROOT / "requirements.txt").read_text()))
    assert not both, f"pinned in requirements.txt already (versions live once): {both}"


def test_students_set_up_does_not_install_the_instructor_tools():
    course = (ROOT / "course").read_text()
    shared = (ROOT / "lab" / "setup.sh").read_text()  # sourced by ./course and the student edition's ./course
    assert 'source "$ROOT/lab/setup.sh"' in course and "requirements-instructor.txt" not in shared
    body = {name: re.search(rf"^{name}\(\) \{{(.*?)^\}}", course + shared, re.M | re.S).group(1)
            for name in ("setup_common", "setup_instructor", "setup_test")}
    assert "requirements-instructor.txt" in body["setup_instructor"]
    assert course.count("requirements-instructor.txt") == body["setup_instructor"].count("requirements-instructor.txt")
    assert "setup_instructor" in body["setup_test"] and "setup_instructor" not in body["setup_common"]
    lab = re.search(r"^    lab\)(.*?);;", course, re.M | re.S).group(1) + shared.split("open_lab() {", 1)[1]
    grade = re.search(r"^    grade\)(.*?);;", course, re.M | re.S).group(1)
    assert "setup_instructor" not in lab and "setup_instructor" in grade and "course_utils.grade" in grade
    assert "nbgrader" not in (ROOT / "environment.yml").read_text()


def test_triton_is_pinned_and_other_torch_releases_bring_their_own():
    """triton==3.7.1 is what torch 2.13.0's own wheels require; ./course test --torch drops our pin for that torch's."""
    assert pins((ROOT / "requirements.txt").read_text())["triton"] == "3.7.1"
    course = (ROOT / "course").read_text()
    use_torch = re.search(r"^use_torch\(\) \{(.*?)^\}", course, re.M | re.S).group(1)
    assert '"/^triton==/d"' in use_torch


def test_the_set_up_installs_what_lesson_10s_extension_needs():
    course = (ROOT / "lab" / "setup.sh").read_text()  # setup_common: shared with the student edition
    setup_common = re.search(r"^setup_common\(\) \{(.*?)^\}", course, re.M | re.S).group(1)
    assert "ensure_system_tool g++ g++" in setup_common and "ensure_system_tool ninja ninja-build" in setup_common


def test_reading_a_notebook_compiles_no_grammar():
    """jsonschema 4.25+ imports rfc3987-syntax, which compiles about 35 Lark grammars at import: about 1 s of CPU in
    every process that imports nbformat or starts a Jupyter server (dozens in one ./course test). requirements.txt
    pins the jsonschema before it; this fails if a pin or a new package brings it back."""
    script = ("import sys, nbformat, jupyter_events.validators\n"
              "print(sorted(m for m in ('lark', 'rfc3987_syntax') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", f"importing nbformat and Jupyter's validators imported {done.stdout.strip()}"
