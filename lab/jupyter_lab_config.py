"""The JupyterLab that ``./course lab`` starts (loaded with --config; the user's own settings stay as they are).

It opens on the start page, never asks about fetching news, and its file browser shows a
student the lessons and the exercises: the text twins (.py), solutions/, the helper package,
tests and build folders stay in the repository but out of sight. Kernels left idle with no tab
open are shut down after 20 minutes.
"""
from pathlib import Path

HERE = Path(__file__).resolve().parent
c = get_config()  # noqa: F821 - provided by Jupyter when it loads this file
c.LabApp.default_url = "/lab/tree/notebooks/00_start_here.ipynb"
c.LabApp.app_settings_dir = str(HERE / "settings")  # overrides.json: JupyterLab defaults for this project
# idle kernels are shut down: a notebook's kernel holds hundreds of MiB (torch), and Lab keeps it after its tab
# is closed; a kernel with an open tab, or one still running a cell, is never culled
c.MappingKernelManager.cull_idle_timeout = 20 * 60  # seconds without activity
c.MappingKernelManager.cull_interval = 60
c.MappingKernelManager.cull_connected = False
c.MappingKernelManager.cull_busy = False
c.ContentsManager.hide_globs = [
    "__pycache__", "*.pyc", "*.pyo", ".DS_Store", "*~",  # Jupyter's own defaults
    "*.py", "solutions", "course_utils", "*.egg-info", "build", "_build", "artifacts", "tests", "benchmarks",
    "lab", "course", "requirements*.txt", "pyproject.toml", "environment.yml", "nbval_sanitize.cfg",
]
# Answer cells are marked by their first line (the ✎ banner written by course_utils/build.py) and the "answer"
# tag. JupyterLab 4.6 does not put a cell's tags into the page (they show only in the property inspector), so no
# custom.css (LabApp.custom_css) selector can colour tagged cells; the banner is the visible mark.
