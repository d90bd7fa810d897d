"""roster.match looks only at the students whose pattern's literal part a name contains (linear at 1,000 students,
benchmarks/gradebook.py): it must place every file exactly as trying every student's pattern does."""
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.grading.book import roster

PATTERNS = ["*ada*", "*lovelace*", "*s0001_*", "*s00010_*", "a*b", "*", "*[ab]c*", "*[!x]y*", "x?y*", "*/dir/*",
            "*O'Connor*", "*ç*", "s01*", "*_02_*", "bc.ipynb", "*.ipynb"]
NAMES = ["ada_lovelace_02.ipynb", "dir/x1y.ipynb", "a/b/dir/s0001_03.ipynb", "t/s00010_02_x.ipynb", "bc.ipynb", "ac",
         "O'Connor_ç.ipynb", "s01_02_x", "zzz", "term/ada/bob.ipynb"]


def every_pattern(students, submissions) -> roster.Matched:
    """The definition: each file against each student's pattern."""
    out = roster.Matched(files={s.id: [] for s in students})
    for sub in sorted(submissions):
        owners = [s.id for s in students if s.owns(sub)]
        if not owners:
            out.unknown.append(sub)
        elif len(owners) > 1:
            out.ambiguous[sub] = owners
        else:
            out.files[owners[0]].append(sub)
    out.missing = [sid for sid, subs in out.files.items() if not subs]
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=8, unique=True),
       st.lists(st.sampled_from(NAMES), max_size=10, unique=True))
def test_match_places_every_file_as_trying_every_pattern_does(patterns, names):
    students = [roster.Student(f"{i:03d}", "", "", p) for i, p in enumerate(reversed(patterns))]
    assert roster.match(students, names) == every_pattern(students, names)


def test_a_class_of_a_thousand_is_placed_one_file_each():
    students = [roster.Student(f"{i:05d}", "", "", f"*s{i:05d}_*") for i in range(1000)]
    files = [f"term/{a:02d}/s{i:05d}_{a:02d}_exercises.ipynb" for i in range(1000) for a in (1, 2)]
    matched = roster.match(students, files + ["term/01/stray.ipynb"])
    assert all(len(v) == 2 for v in matched.files.values()) and matched.unknown == ["term/01/stray.ipynb"]
