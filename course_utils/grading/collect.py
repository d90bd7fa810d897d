"""Finding submissions: every file under the paths given, each with the reason it is skipped (links are not followed)."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import UsageError


def collect(paths: list[str]) -> list[tuple[Path, str | None]]:
    """(file, reason it is skipped or None) for every file under the given paths; links not followed."""
    found: dict[Path, str | None] = {}
    for p in paths:
        path = Path(p)
        try:
            path.stat()
        except PermissionError:
            raise UsageError(f"{p} cannot be read by this user: grade as a user who can read it.") from None
        except OSError:
            pass
        if path.is_dir():
            for folder, dirs, files in os.walk(path, followlinks=False):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if name.startswith("."):
                        continue
                    f = Path(folder) / name
                    found[f] = "a symbolic link (links are not followed)" if f.is_symlink() else None
                for d in dirs:
                    if (Path(folder) / d).is_symlink():
                        found[Path(folder) / d] = "a symbolic link to a folder (links are not followed)"
        elif path.is_file():
            found[path] = None
        else:
            raise UsageError(f"{p} does not exist: pass notebooks or folders of notebooks.")
    return sorted(found.items())

