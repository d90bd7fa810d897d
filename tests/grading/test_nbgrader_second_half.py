"""Real nbgrader against our grader, the other half of the assignments (see test_nbgrader).

The tests are test_nbgrader's own, collected again here with this module's ``graded``
fixture, so the two halves of minutes of notebook execution run on separate test workers.
"""
import pytest

from test_nbgrader import (  # noqa: F401
    ALL_ASSIGNMENTS,
    grade_with_both,
    test_nbgrader_gives_the_points_our_grader_gives,
    test_scores_tell_the_students_apart,
    test_the_issue_case_no_longer_gets_full_marks,
)

ASSIGNMENTS = ALL_ASSIGNMENTS[1::2]

# CI runs both halves; a developer's ./course test runs the first (about 90 s of notebook execution each)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_with_both(tmp_path_factory, ASSIGNMENTS)
