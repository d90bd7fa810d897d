"""``./course release``: the student edition as a git repository ready to push, and each next lesson on top of it.

The first release writes the edition (``release.student_edition``) into a new folder, makes it a git
repository on branch ``main`` with one commit, adds the students' repository as its remote ``origin``
and prints the exact commands left to run (a push). Releasing again into the same folder (a larger
``--up-to``, fixed lessons) writes the edition anew and commits only what changed, on top of the last
release: students who pull get a fast-forward, and their own commits merge, since the edition never
changes a file whose lesson did not change (its notebooks are the instructors' committed ones less their
jupytext pairing, written the same way every time: ``edition.notebooks_only``). ``--branch`` instead
commits the edition as a branch of the instructors' own repository (``release.publish_branch``).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import edition, release
from .errors import CourseError
from .paths import ROOT

BRANCH = "main"  # the students' repository's branch: every Colab and Binder link opens /blob/main/
MARK = "Student edition"  # every release commit's subject starts with it: how a folder is known as an edition
FALLBACK_IDENTITY = ("-c", "user.name=Course release", "-c", "user.email=course-release@localhost")


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=False)
    if done.returncode:
        raise CourseError(f"git {' '.join(args[:2])} failed in {folder}: {done.stderr.strip()[-300:]}")
    return done.stdout.strip()


def _identity(folder: Path) -> tuple[str, ...]:
    """The instructor's git identity if set, else a neutral one (a release needs an author, not a person)."""
    known = subprocess.run(["git", "-C", str(folder), "config", "user.email"], capture_output=True, text=True,
                           check=False).stdout.strip()
    return () if known else FALLBACK_IDENTITY


def subject(up_to: int | None, fixes: bool, lessons: list[int]) -> str:
    last = lessons[-1] if up_to is None else up_to
    return f"{MARK}: lessons 00-{last:02d}" + ("" if fixes else ", hints only")


def is_edition(folder: Path) -> bool:
    """Whether ``folder`` is a repository that ``./course release`` made (its first commit says so)."""
    if not (folder / ".git").exists():
        return False
    first = subprocess.run(["git", "-C", str(folder), "log", "--reverse", "--format=%s"], capture_output=True,
                           text=True, check=False).stdout.splitlines()
    return bool(first) and first[0].startswith(MARK)


def _replace_contents(folder: Path, staged: Path) -> None:
    """Make ``folder``'s committed files those of ``staged``: files the new edition lacks are removed, and what git
    ignores there (a ``.venv`` the instructor made to try the edition) stays."""
    for name in git(folder, "ls-files", "-z").split("\0"):
        path = folder / name
        if name and path.is_file():
            path.unlink()
            for parent in path.parents:
                if parent == folder or any(parent.iterdir()):
                    break
                parent.rmdir()
    shutil.copytree(staged, folder, dirs_exist_ok=True)


def release_repository(dest: Path, repository: str | None, *, remote: str | None = None, keep_links: bool = False,
                       up_to: int | None = None, fixes: bool = True, course: Path = ROOT) -> tuple[str, bool]:
    """Write or update the edition repository in ``dest``; returns (the new commit or "", whether it is new).

    "" means the edition did not change since the last release (nothing committed).
    """
    fresh = not dest.exists() or not any(dest.iterdir())
    if not fresh and not is_edition(dest):
        raise CourseError(f"{dest} is not empty and is not a student edition made by ./course release: give a new "
                          "folder, or the folder of an earlier release to add the next lessons to it.")
    if not fresh and git(dest, "status", "--porcelain"):
        raise CourseError(f"{dest} has uncommitted changes (git status): commit or discard them there, then "
                          "release again; a release replaces every file of the edition.")
    with tempfile.TemporaryDirectory(prefix="edition-") as tmp:
        staged = Path(tmp) / "edition"
        release.student_edition(staged, repository, course, keep_links=keep_links, up_to=up_to, fixes=fixes)
        lessons = edition.lessons_in(staged)
        if not fresh:
            lost = sorted(set(edition.lessons_in(dest)) - set(lessons))
            if lost:
                raise CourseError(f"this release would take lesson{'s' if len(lost) > 1 else ''} "
                                  f"{', '.join(f'{n:02d}' for n in lost)} away from students who have it: "
                                  f"give --up-to {max(lost):02d} or more.")
        if fresh:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copytree(staged, dest, dirs_exist_ok=True)
            git(dest, "init", "-q", "-b", BRANCH)
            git(dest, "remote", "add", "origin", remote or f"{(repository or release._repo_of(course)).rstrip('/')}.git")
        else:
            _replace_contents(dest, staged)
    git(dest, "add", "--all", ".")
    if not fresh and not git(dest, "status", "--porcelain"):
        return "", False
    git(dest, *_identity(dest), "commit", "-q", "-m", subject(up_to, fixes, lessons))
    return git(dest, "rev-parse", "HEAD"), fresh


def next_steps(dest: Path, repository: str, fresh: bool, up_to: int | None) -> str:
    """The exact commands left to run, and what students and the next release do."""
    remote = git(dest, "remote", "get-url", "origin")
    push = f"git push -u origin {BRANCH}" if fresh else "git push"
    following = "N" if up_to is None else f"{up_to + 1:02d}"
    return "\n".join([
        "Next, publish it (origin is " + remote + "; create that repository first, empty and public, so that "
        "Colab and pip can open it):",
        f"  cd {dest}",
        f"  {push}",
        "Students then run:",
        f"  git clone {repository}.git" if fresh else "  git pull      (a fast-forward; their own commits merge)",
        "To release the next lesson later (a new commit on top of this one), from the instructors' repository:",
        f"  ./course release {dest} --repository {repository} --up-to {following}",
    ])


def main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="./course release", description="Write the student edition of the committed "
                                "course (lessons, exercises, course_utils without the grader, its own README and "
                                "./course; no solutions, no tests) into DIR as a git repository ready to push to the "
                                "students' repository; run again on the same DIR to release the next lessons.")
    p.add_argument("dir", type=Path, help="a new (or empty) folder, or the folder of an earlier release")
    p.add_argument("--repository", help="the students' repository URL (required): Colab, Binder and install links "
                   "point at it")
    p.add_argument("--remote", help="the URL to push to, if not REPOSITORY.git (e.g. git@github.com:ORG/NAME.git)")
    p.add_argument("--keep-links", action="store_true", help="release without --repository: links keep opening this "
                   "(instructors') repository")
    p.add_argument("--up-to", type=int, metavar="N", help="only lessons 00 to N (release lesson by lesson: later "
                   "lessons hold earlier exercises' answers)")
    p.add_argument("--no-fixes", action="store_true", help="leave out the level-2 fixes (check(..., fix=True)) for a "
                   "graded course: the checks give hints only")
    p.add_argument("--branch", help="instead of a repository in DIR, also commit the edition as this branch of THIS "
                   "(the instructors') repository, e.g. student; push that branch to the students' repository")
    args = p.parse_args(argv)
    try:
        if args.branch:
            files = release.student_edition(args.dir, args.repository, keep_links=args.keep_links, up_to=args.up_to,
                                            fixes=not args.no_fixes)
            commit = release.publish_branch(args.dir, args.branch, message=subject(args.up_to, not args.no_fixes,
                                                                                   edition.lessons_in(args.dir)))
            steps = (f"branch {args.branch} of this repository is at {commit[:12]} ({len(files)} files); push it to "
                     f"the students' repository as its {BRANCH}: git push STUDENTS-REMOTE {args.branch}:{BRANCH}")
        else:
            commit, fresh = release_repository(args.dir, args.repository, remote=args.remote,
                                               keep_links=args.keep_links, up_to=args.up_to, fixes=not args.no_fixes)
            repository = (args.repository or release._repo_of(ROOT)).rstrip("/")
            steps = (f"{args.dir} already holds this edition: nothing to release." if not commit else
                     f"{'wrote' if fresh else 'updated'} the student edition in {args.dir} (commit {commit[:12]} on "
                     f"{BRANCH}).\n" + next_steps(args.dir, repository, fresh, args.up_to))
    except CourseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.repository:
        print(f"WARNING: every Colab, Binder and install link in {args.dir} opens {release._repo_of(ROOT)} "
              "(--keep-links): students cannot open them if that repository is private.", file=sys.stderr)
    print(steps)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
