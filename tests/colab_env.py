"""Colab-like Python environments for the tests, cheap to make and cached.

Colab ships ipywidgets 7.7.1 while the course pins ipywidgets 8. Reinstalling torch and
friends for a second environment would take minutes, so the environments here are thin:

* ``widgets7_site()``: a folder under ``.cache/`` (git-ignored) holding only the packages of
  ``requirements-colab.txt`` (the ipywidgets 7 stack), installed once with ``pip --target``
  and rebuilt when that file changes. Nothing of the main ``.venv`` is touched.
* ``make_venv(folder, extra)``: a venv without pip whose site-packages holds one ``.pth``
  file listing ``extra`` folders and then the main ``.venv``'s site-packages, so torch,
  matplotlib, ipykernel and pip are reused. The main venv's own ``.pth`` files are not run,
  so the editable ``course_utils`` of the checkout is *not* importable there: in the Colab
  test only the notebook's set-up cell can install it, as in Colab. Takes well under a second.
* ``start_kernel(python, ...)``: a Jupyter kernel running that interpreter.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from conftest import ROOT

REQUIREMENTS = ROOT / "requirements-colab.txt"
CACHE = ROOT / ".cache"
MAIN_SITE = Path(sysconfig.get_paths()["purelib"])  # the main .venv's site-packages (tests run in it)


def _stamp() -> str:
    text = REQUIREMENTS.read_text() + sys.version + str(MAIN_SITE)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def widgets7_site() -> Path:
    """Folder with the ipywidgets 7 stack (created on first use; a few seconds, then cached)."""
    target = CACHE / f"colab-widgets7-{_stamp()}"
    if (target / ".complete").exists():
        return target
    CACHE.mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="colab-widgets7-", dir=CACHE))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
             "--target", str(scratch), "-r", str(REQUIREMENTS)],
            capture_output=True, text=True, timeout=600)
        if done.returncode:
            raise RuntimeError(f"installing requirements-colab.txt failed:\n{done.stderr[-3000:]}")
        (scratch / ".complete").write_text(REQUIREMENTS.read_text())
        try:
            scratch.rename(target)  # atomic: a concurrent run either sees all of it or nothing
        except OSError:  # someone else finished first
            shutil.rmtree(scratch, ignore_errors=True)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)
    return target


def make_venv(folder: Path, extra: list[Path] = (), startup: str = "") -> Path:
    """A venv in ``folder`` seeing ``extra`` then the main .venv's packages; returns its python.

    ``startup`` is a line of Python run at every interpreter start (via a ``.pth`` file).
    """
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   capture_output=True, timeout=120)
    python = folder / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    lines = [str(p) for p in extra] + [str(MAIN_SITE)]
    (site / "zz_course_paths.pth").write_text("\n".join(lines) + "\n")
    if startup:
        (site / "zzz_course_startup.pth").write_text(f"import sys; exec({startup!r})\n")
    return python


def start_kernel(python: Path, scratch: Path, env: dict[str, str] | None = None, cwd: Path | None = None):
    """(KernelManager, BlockingKernelClient) for a kernel run by ``python``."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    specs = KernelSpecManager(kernel_dirs=[str(kernel_spec_dir(python, scratch))])
    km = KernelManager(kernel_name="colab", kernel_spec_manager=specs)
    km.start_kernel(env=dict(os.environ, **(env or {})), cwd=str(cwd or scratch))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    return km, kc


def kernel_spec_dir(python: Path, scratch: Path) -> Path:
    """A folder with a kernelspec 'colab' for ``python`` (for nbclient's KernelManager)."""
    spec = scratch / "kernels" / "colab"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(
        '{"argv": ["%s", "-m", "ipykernel_launcher", "-f", "{connection_file}"], '
        '"display_name": "colab-like", "language": "python"}' % python)
    return spec.parent
