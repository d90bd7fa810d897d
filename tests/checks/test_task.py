"""The task cell (``checks.task``), the verdict's variant line and variants turned off, on a fake family
(``variant_helpers``): the plumbing is tested whether or not a real family exists yet."""
import pytest

from answers import MUL
from check_helpers import ns_from
from course_utils import student, variant_settings
from course_utils.checks import CourseError, check, registry, run_check, task
from course_utils.checks.verdict import verdict_html
from variant_helpers import fake_family, student_for


@pytest.fixture
def family(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # nothing remembered
    monkeypatch.delenv(student.HUB_USER, raising=False)
    return fake_family(monkeypatch, "mul")


def as_student(monkeypatch, who):
    monkeypatch.delenv(student.NO_ID, raising=False)
    monkeypatch.setenv(student.HUB_USER, who)


def test_without_an_id_the_task_is_the_default_and_says_how_to_get_yours(family):
    text = task("mul")
    assert text.startswith("**Variant `plain` of `mul`** (one of 2, the default): no student id is set")
    assert 'remember("your-id")' in text and "Build the function the heading names." in text
    assert text._repr_markdown_() == text and repr(text) == text  # Markdown in Jupyter, plain text in a script


def test_the_task_follows_the_student(family, monkeypatch):
    plain, never = student_for("mul", 0), student_for("mul", 1)
    assert "Variant `never` of `mul`** (one of 2), for student `" + never + "`" in task("mul", never)
    assert "another function" in task("mul", never) and "Variant `plain`" in task("mul", plain)
    as_student(monkeypatch, never)
    assert f"for student `{never}`" in task("mul") and "`never`" in task("mul")


def test_the_check_assesses_the_students_variant_and_the_verdict_names_it(family, monkeypatch):
    plain, never = student_for("mul", 0), student_for("mul", 1)
    as_student(monkeypatch, never)
    verdict = check("mul", ns_from(MUL))
    assert float(verdict) == 0 and verdict.result.variant == "never"
    assert f"variant `never`, for student `{never}`" in str(verdict)
    assert f"variant <code>never</code>, for student <code>{never}</code>" in verdict._repr_html_()
    as_student(monkeypatch, plain)
    verdict = check("mul", ns_from(MUL))
    assert float(verdict) == verdict.result.max > 0 and f"variant `plain`, for student `{plain}`" in str(verdict)


def test_run_check_names_the_variant_and_an_exercise_without_a_family_names_none(family):
    assert run_check("mul", ns_from(MUL)).variant == "plain"
    assert run_check("mul", ns_from(MUL), variant="never").points == 0
    other = next(g for g in registry.EXERCISES if g not in registry.FAMILIES)
    result = run_check(other, {})
    assert result.variant == "" and "variant `" not in result.report()
    assert "variant" not in verdict_html(registry.EXERCISES[other], result)
    assert "has one variant" in task(other)


def test_variants_off_give_everyone_the_default_and_say_so(family, monkeypatch):
    never = student_for("mul", 1)
    monkeypatch.setattr(variant_settings, "VARIANTS_OFF", frozenset({"02_exercises"}))
    as_student(monkeypatch, never)
    assert registry.pick("mul", never).key == "plain" and not registry.varied("mul")
    text = task("mul")
    assert "Variant `plain` of `mul`**: variants are off for this assignment" in text and never not in text
    verdict = check("mul", ns_from(MUL))
    assert float(verdict) == verdict.result.max and "variant `plain`" in str(verdict) and never not in str(verdict)


def test_an_unknown_exercise_is_refused_in_one_sentence():
    with pytest.raises(CourseError, match="unknown exercise 'nope'; known: "):
        task("nope")
