"""What another uid can read, for the tests of the modes that grade as one (issue 48, item 7).

A checkout inside a private folder (a ``mktemp -d`` folder, root's home: mode 0700) holds a venv
no other uid can reach, so a test that runs the grader as a normal user, or the uid sandbox's
runners, would fail on the machine and not on the grader. ``readable_view`` gives such a test,
inside a private mount namespace only, the view a readable installation has: each private folder
on the way is covered by a folder every uid may enter, holding only the entries on the way.
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from conftest import ROOT


def python_paths() -> list[str]:
    """The interpreter's folders (the venv and its base installation), as the sandbox binds them."""
    return sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, os.path.dirname(sys.executable))})


def private_folders(paths: list[str]) -> dict[str, set[str]]:
    """Each folder on the way to ``paths`` that other users cannot enter, with its entries on the way."""
    needed: dict[str, set[str]] = {}
    for path in paths:
        parts = Path(os.path.realpath(path)).parts
        for i in range(1, len(parts)):
            folder = str(Path(*parts[:i]))
            if os.stat(folder).st_mode & 0o005 != 0o005:
                needed.setdefault(folder, set()).add(parts[i])
    return needed


def readable_view(paths: list[str] | None = None) -> str:
    """Shell commands (root, in a private mount namespace) after which every uid can reach ``paths``
    (default: the checkout and the Python installation); '' where it can already."""
    needed = private_folders(paths if paths is not None else [str(ROOT), *python_paths()])
    commands = []
    for folder in sorted(needed, key=lambda f: -len(Path(f).parts)):  # the deepest first: its view is bound above
        commands.append('V=$(mktemp -d) && chmod 755 "$V"')
        for name in sorted(needed[folder]):
            inside, source = shlex.quote(name), shlex.quote(os.path.join(folder, name))
            commands.append(f'mkdir "$V"/{inside}' if os.path.isdir(os.path.join(folder, name))
                            else f'touch "$V"/{inside}')
            commands.append(f'mount --rbind {source} "$V"/{inside}')
        commands.append(f'mount --rbind "$V" {shlex.quote(folder)}')
    return " && ".join(commands)


def why_unreadable() -> str:
    """Why a private mount namespace cannot be made here ('' if it can): then such a test is skipped, saying so."""
    if os.geteuid() != 0:
        return "not root: cannot make a private mount namespace"
    if not os.path.exists("/usr/bin/unshare"):
        return "needs unshare (util-linux)"
    return ""
