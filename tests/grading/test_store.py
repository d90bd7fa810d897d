"""The result store and --merge: a row read back from disk is verified, never trusted.

The forged shards are the red team's shapes (issue 29, item 9): absurd points, a duplicate
row, a stale course version, markup where a number belongs, other options; the store is
keyed by every option that changes a grade (item 10: a timeout raised after a run that
timed out must not "resume" the old zero).
"""
import json

import pytest

from course_utils.grading.errors import UsageError
from course_utils.grading.results import ExerciseResult, StageOutcome, Status, SubmissionResult
from course_utils.grading.store import Store, merge, options_key, problem, result_key
from course_utils.status import CheckStatus

MAXIMA = {"mul": 2.0, "div": 3.0}
OPTS = options_key(20, 4 << 30, "root", None)


def row(name: str = "s/a.ipynb", **fields) -> SubmissionResult:
    r = SubmissionResult(name, "02_exercises", sha256="ab" * 32, course_version="v1", options=OPTS, sandbox="root",
                         exercises={"mul": ExerciseResult("mul", 1.0, 2.0, CheckStatus.FAILED, feedback="✗ mul", stages=[
                                        StageOutcome("forward", 1.0, 1.0, CheckStatus.PASSED),
                                        StageOutcome("backward", 0.0, 1.0, CheckStatus.FAILED, "swapped",
                                                     code="swapped_gradients")]),
                                    "div": ExerciseResult("div", 3.0, 3.0, CheckStatus.PASSED, feedback="✓ div")})
    for k, v in fields.items():
        setattr(r, k, v)
    return r


def shard(folder, *rows_or_json) -> None:
    folder.mkdir(exist_ok=True)
    for i, r in enumerate(rows_or_json):
        data = r.to_json() if isinstance(r, SubmissionResult) else r
        (folder / f"{i}-{data['submission'].replace('/', '_')}.json").write_text(json.dumps(data))


def test_options_are_part_of_the_key_so_a_longer_timeout_regrades(tmp_path):
    Store(tmp_path, "v1", OPTS).save(row())
    assert Store(tmp_path, "v1", OPTS).lookup("s/a.ipynb", "ab" * 32) == row()
    for other in (options_key(60, 4 << 30, "root", None), options_key(20, 2 << 30, "root", None),
                  options_key(20, 4 << 30, "none", None), options_key(20, 4 << 30, "root", "02_exercises")):
        assert Store(tmp_path, "v1", other).lookup("s/a.ipynb", "ab" * 32) is None, other
    assert Store(tmp_path, "v2", OPTS).lookup("s/a.ipynb", "ab" * 32) is None


def test_a_tampered_stored_row_is_graded_again_not_served(tmp_path):
    store = Store(tmp_path, "v1", OPTS)
    store.save(row())
    [path] = tmp_path.glob("*.json")
    data = json.loads(path.read_text())
    data["exercises"]["mul"]["points"] = 1e300
    path.write_text(json.dumps(data))
    assert store.lookup("s/a.ipynb", "ab" * 32) is None
    assert path.name == result_key("ab" * 32, "s/a.ipynb", "v1\0" + OPTS)


def test_good_shards_merge(tmp_path):
    shard(tmp_path / "1", row("s/a.ipynb"))
    shard(tmp_path / "2", row("s/b.ipynb"), row("s/c.ipynb", status="not a notebook", exercises={}))
    rows = merge([tmp_path / "1", tmp_path / "2"], "v1", MAXIMA)
    assert [r.submission for r in rows] == ["s/a.ipynb", "s/b.ipynb", "s/c.ipynb"]


def forged_points(data):
    data["exercises"]["mul"]["points"] = 1e300


def forged_max(data):
    data["exercises"]["mul"].update(points=1e300, max=1e300)


def markup(data):
    data["exercises"]["mul"]["points"] = "<img src=x onerror=alert(1)>"


def negative_part(data):
    data["exercises"]["mul"]["stages"][1]["points"] = -5


def flags_not_text(data):
    data["flags"] = [{"html": "<b>"}]


def nan_points(data):
    data["exercises"]["div"]["points"] = float("nan")


@pytest.mark.parametrize("forge, words", [
    (forged_points, "points outside"), (forged_max, "its maximum"), (markup, "points outside"),
    (negative_part, "stage with points outside"), (flags_not_text, "wrong type"), (nan_points, "points outside"),
])
def test_forged_rows_refuse_the_merge_with_one_sentence(tmp_path, forge, words):
    data = row("s/b.ipynb").to_json()
    forge(data)
    shard(tmp_path / "1", row())
    shard(tmp_path / "2", json.loads(json.dumps(data)))
    with pytest.raises(UsageError, match="refusing to merge .*" + words):
        merge([tmp_path / "1", tmp_path / "2"], "v1", MAXIMA)


@pytest.mark.parametrize("second, words", [
    (row(), "already merged from"),
    (row("s/b.ipynb", course_version="v0"), "another version of the course"),
    (row("s/b.ipynb", options=options_key(60, 4 << 30, "root", None)), "other options"),
    (row("s/b.ipynb", options=options_key(20, 4 << 30, "none", None)), "other options"),
])
def test_duplicates_stale_versions_and_other_options_are_refused(tmp_path, second, words):
    shard(tmp_path / "1", row())
    shard(tmp_path / "2", second)
    with pytest.raises(UsageError, match=words):
        merge([tmp_path / "1", tmp_path / "2"], "v1", MAXIMA)


def test_problem_accepts_an_unusual_but_valid_row():
    """Integer points, a refused row whose exercises were never judged (max 0), no parts."""
    r = row(status=Status.REFUSED, exercises={"mul": ExerciseResult("mul", 0, 0.0, Status.REFUSED),
                                              "div": ExerciseResult("div", 3, 3, CheckStatus.PASSED)})
    assert problem(r, MAXIMA) is None


def test_cli_merge_of_a_forged_shard_exits_2_and_writes_nothing(tmp_path, capsys):
    from course_utils.grading import cli

    data = row().to_json()
    data["exercises"]["mul"]["points"] = "<img>"
    shard(tmp_path / "1", data)
    assert cli.main(["--merge", str(tmp_path / "1"), "--out", str(tmp_path / "g.csv")]) == 2
    err = capsys.readouterr().err
    assert "refusing to merge" in err and "Traceback" not in err and not (tmp_path / "g.csv").exists()


def test_a_shard_graded_again_after_an_upgrade_merges_its_fresh_results(tmp_path, capsys):
    """Grading a shard again into its folder after the course changed keeps the old version's files beside the
    new ones: the merge refused them forever ("regrade that shard", which had just been done)."""
    shard(tmp_path / "1", row("s/a.ipynb", course_version="v0", sha256="cd" * 32), row("s/a.ipynb"))
    shard(tmp_path / "2", row("s/b.ipynb"))
    rows = merge([tmp_path / "1", tmp_path / "2"], "v1", MAXIMA)
    assert [(r.submission, r.course_version) for r in rows] == [("s/a.ipynb", "v1"), ("s/b.ipynb", "v1")]
    assert "skipped 1 result(s) of an earlier version of the course" in capsys.readouterr().err


def test_two_results_of_one_file_in_one_shard_folder_say_how_to_get_out(tmp_path):
    shard(tmp_path / "1", row("s/a.ipynb", sha256="cd" * 32), row("s/a.ipynb"))
    with pytest.raises(UsageError, match=r"holds another result of s/a.ipynb \(the file changed between two runs\); "
                       "empty .* and grade that shard again"):
        merge([tmp_path / "1"], "v1", MAXIMA)
