"""tests/answers.py: a wrong answer is a base answer with named edits, and an edit that does not apply raises,
so a wrong answer can never silently be the base answer again."""
import pytest

from answers import MUL, MUL_GRADS, SWAPPED, MutationError, mutate


def test_an_edit_replaces_its_text_once_and_edits_apply_in_turn():
    swapped = mutate(MUL, SWAPPED)
    assert swapped.count(SWAPPED[1]) == 1 and MUL_GRADS not in swapped
    assert swapped.replace(SWAPPED[1], MUL_GRADS) == MUL  # nothing else changed
    assert mutate("p q", ("p", "r"), ("r q", "s")) == "s"  # the second edit reads the first one's answer


@pytest.mark.parametrize("edit, says", [
    (("return a + b", "return a * b"), "is not in the answer"),  # a typo, or a base answer that changed
    (("", "x"), "is not in the answer"),  # an empty text would match everywhere
    (("a, b", "x, y"), "stands 3 times in the answer"),  # ambiguous: which one is meant
    ((MUL_GRADS, MUL_GRADS), "replaces it with itself"),  # no change: the answer would be the base one
])
def test_an_edit_that_does_not_apply_raises(edit, says):
    with pytest.raises(MutationError, match=says):
        mutate(MUL, edit)


def test_an_edit_that_does_not_apply_after_another_raises():
    with pytest.raises(MutationError, match="is not in the answer"):
        mutate(MUL, SWAPPED, SWAPPED)  # the first edit took away the text the second one replaces


def test_no_edit_at_all_raises():
    with pytest.raises(MutationError, match="at least one edit"):
        mutate(MUL)

