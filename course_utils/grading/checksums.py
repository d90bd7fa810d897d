"""nbgrader-style cell checksums, and whether a submission's locked cell is one of the forms the course gives it."""
from __future__ import annotations

import hashlib
import re

from ..markers import REPOSITORY, retarget
from ..paths import repo_url


def checksum(source: str) -> str:
    """nbgrader-style cell checksum: of the source with trailing whitespace normalised."""
    text = "\n".join(line.rstrip() for line in source.strip().splitlines())
    return hashlib.sha256(text.encode()).hexdigest()


GITHUB_PATH = re.compile(r"/github/([\w.-]+)/([\w.-]+)")  # a repository in a Colab link (colab.../github/O/N/blob)


def untouched(theirs: str, course: str) -> bool:
    """Whether a submission's copy of a locked cell is one of the forms the course itself gives it.

    The course's own copy, or that copy as ``release --repository URL`` writes it for any repository
    the instructor may have named (``markers.retarget``, the one rewrite release applies to every
    file: the set-up cell's install line, links): derived from the course's cell, so a set-up cell
    that changes stays recognised. Any other change is not.
    """
    if checksum(theirs) == checksum(course):
        return True
    try:
        ours = repo_url().rstrip("/")
    except (OSError, KeyError, ValueError):  # no pyproject.toml (an old Gradescope archive): only the exact copy
        return False
    if ours not in course and ours.removeprefix("https://github.com/") not in course:
        return False
    # every repository the cell may now name: as a URL, or as the owner/name path of a Colab link
    named = [m.group(0) for m in REPOSITORY.finditer(theirs)] + [
        f"https://github.com/{owner}/{name}" for owner, name in GITHUB_PATH.findall(theirs)]
    candidates = dict.fromkeys(x for url in named for x in (url, url.rstrip(".")) if REPOSITORY.fullmatch(x))
    return any(checksum(retarget(course, ours, url)) == checksum(theirs) for url in list(candidates)[:16])

