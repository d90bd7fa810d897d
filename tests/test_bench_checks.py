"""benchmarks/checks.py: the prose says whether the machine was quiet from what the run measured (issue 49, item 7:
a run at load 0.9 still called its times "upper bounds, shared with other work")."""
from benchmarks.checks import QUIET_LOAD, load_words


def test_a_quiet_run_is_called_quiet():
    words = load_words([0.9, 1.2, QUIET_LOAD], 1.04)
    assert words.startswith("Measured on a quiet machine")
    assert "0.9 to 1.5" in words and "1.0x their CPU times" in words
    assert "upper bound" not in words and "shared" not in words


def test_a_shared_run_says_so_with_its_numbers():
    words = load_words([0.9, 8.2, 16.0], 2.6)
    assert words.startswith("Measured on a machine shared with other work")
    assert "0.9 to 16.0" in words and "2.6x their CPU times" in words and "upper bounds" in words
