"""Variants turned off per assignment (``course_utils.variant_settings``): one setting, recorded by the build in the
notebook's metadata, and a notebook built under another setting refused in one sentence by the release."""
import json

import nbformat
import pytest

from course_utils import variant_settings
from course_utils.errors import CourseError
from course_utils.paths import ASSIGNMENT_KEY
from course_utils.release import tag_cells
from course_utils.variant_settings import settings_agree


def test_the_setting_is_recorded_in_the_notebooks_metadata_only_when_off(monkeypatch):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    assert tag_cells(nb, "02_exercises").metadata[ASSIGNMENT_KEY] == {"assignment": "02_exercises"}
    monkeypatch.setattr(variant_settings, "VARIANTS_OFF", frozenset({"02_exercises"}))
    assert tag_cells(nb, "02_exercises").metadata[ASSIGNMENT_KEY] == {"assignment": "02_exercises", "variants": "off"}
    assert not variant_settings.variants_on("02_exercises") and variant_settings.variants_on("03_exercises")
    assert variant_settings.assignment_of("lesson07_twice") == "07_exercises"


def test_a_notebook_built_under_another_setting_is_refused_in_one_sentence(tmp_path, monkeypatch):
    def built(meta):
        (tmp_path / "02_exercises.ipynb").write_text(json.dumps({"cells": [], "metadata": {ASSIGNMENT_KEY: meta}}))

    built({"assignment": "02_exercises"})
    settings_agree(tmp_path)  # on and on: nothing to say
    monkeypatch.setattr(variant_settings, "VARIANTS_OFF", frozenset({"02_exercises"}))
    with pytest.raises(CourseError, match=r"^exercises/02_exercises.ipynb was built with variants on, but course_utils/"
                       r"variant_settings.py turns them off for 02_exercises: run ./course build 02_exercises so the "
                       r"notebooks and the grader agree.$"):
        settings_agree(tmp_path)
    built({"assignment": "02_exercises", "variants": "off"})
    settings_agree(tmp_path)
    monkeypatch.setattr(variant_settings, "VARIANTS_OFF", frozenset())
    with pytest.raises(CourseError, match=r"built with variants off, but .* turns them on"):
        settings_agree(tmp_path)


@pytest.mark.parametrize("source, shows_only", [
    ('from course_utils.checks import task\ntask("mul")', True),
    ('task("mul")  # the variant of your id\n', True),
    ('from course_utils.checks import task\ntask("mul")\nx = 1', False),  # other code: the grader runs it
    ("from course_utils.checks import task", False),
    ("", False),
])
def test_a_task_cell_is_one_that_only_shows_a_task(source, shows_only):
    from course_utils.markers import is_task_cell

    assert is_task_cell(source) is shows_only
