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
            check=False, capture_output=True, text=True, timeout=600)
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


def make_venv(folder: Path, extra: list[Path] = (), startup: str = "", main: bool = True) -> Path:
    """A venv in ``folder`` seeing ``extra`` then (``main``) the main .venv's packages; returns its python.

    ``startup`` is a line of Python run at every interpreter start (via a ``.pth`` file).
    """
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   capture_output=True, timeout=120)
    python = folder / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    lines = [str(p) for p in extra] + ([str(MAIN_SITE)] if main else [])
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
        f'{{"argv": ["{python}", "-m", "ipykernel_launcher", "-f", "{{connection_file}}"], '
        '"display_name": "colab-like", "language": "python"}')
    return spec.parent


# --------------------------------------------------------------------------- only what Colab preinstalls
# Colab's own packages the course relies on (its image has many more; none of the course's tools): the roots, whose
# dependencies come along. The ipywidgets 7 stack comes from widgets7_site(); torchviz is not preinstalled in Colab.
COLAB_ROOTS = ("torch", "numpy", "matplotlib", "ipykernel", "ipython", "pip", "setuptools", "graphviz")
NOT_COLABS = {"ipywidgets", "widgetsnbextension", "jupyterlab-widgets", "torchviz"}


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _closure(roots: tuple[str, ...]) -> dict[str, object]:
    """name -> distribution, for ``roots`` and everything they require (markers evaluated, no extras)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    found: dict[str, object] = {}
    todo = list(roots)
    while todo:
        name = _norm(todo.pop())
        if name in found or name in NOT_COLABS:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found[name] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


def colab_only_site() -> Path:
    """A folder that holds (as links into the main .venv) only Colab's preinstalled packages and their dependencies.

    No jupytext, nbformat, jupyterlab or course tool, no course_utils: whatever the course needs beyond these
    must come from the notebook's set-up cell, as in Colab. Made once per stamp, in .cache/.
    """
    target = CACHE / f"colab-only-{_stamp()}"
    if (target / ".complete").exists():
        return target
    CACHE.mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="colab-only-", dir=CACHE))
    for dist in _closure(COLAB_ROOTS).values():
        for top in {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            source = MAIN_SITE / top
            if source.exists() and not (scratch / top).exists() and not top.endswith(".pth") and top != "__pycache__":
                (scratch / top).symlink_to(source)
    (scratch / ".complete").write_text("\n".join(sorted(p.name for p in scratch.iterdir())))
    try:
        scratch.rename(target)
    except OSError:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def wheel_of_installed(name: str, folder: Path) -> Path:
    """A wheel of the installed pure-Python distribution ``name`` in ``folder`` (pip then installs it offline)."""
    import base64
    import zipfile
    from importlib import metadata

    dist = metadata.distribution(name)
    version = dist.version
    wheel = folder / f"{_norm(name).replace('-', '_')}-{version}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    with zipfile.ZipFile(wheel, "w") as out:
        for f in dist.files or []:
            rel = str(f)
            path = MAIN_SITE / rel
            if rel.startswith("..") or rel.endswith(("RECORD", "INSTALLER", "direct_url.json")) or \
                    "__pycache__" in rel or not path.is_file():
                continue
            data = path.read_bytes()
            out.writestr(rel, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{rel},sha256={digest},{len(data)}")
        info = next(str(f).split("/")[0] for f in dist.files if ".dist-info/" in str(f))
        if not any(r.startswith(f"{info}/WHEEL,") for r in records):
            text = "Wheel-Version: 1.0\nGenerator: colab_env\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
            out.writestr(f"{info}/WHEEL", text)
            records.append(f"{info}/WHEEL,,")
        out.writestr(f"{info}/RECORD", "\n".join([*records, f"{info}/RECORD,,"]) + "\n")
    return wheel
