"""The JupyterLab that ``./course lab`` starts (loaded with --config; the user's own settings stay as they are).

It opens on the start page, never asks about fetching news, and its file browser shows a
student the lessons and the exercises: the text twins (.py), solutions/, the helper package,
tests and build folders stay in the repository but out of sight.
"""
from pathlib import Path

HERE = Path(__file__).resolve().parent
c = get_config()  # noqa: F821 - provided by Jupyter when it loads this file
c.LabApp.default_url = "/lab/tree/notebooks/00_start_here.ipynb"
c.LabApp.app_settings_dir = str(HERE / "settings")  # overrides.json: JupyterLab defaults for this project
c.ContentsManager.hide_globs = [
    "__pycache__", "*.pyc", "*.pyo", ".DS_Store", "*~",  # Jupyter's own defaults
    "*.py", "solutions", "course_utils", "*.egg-info", "build", "_build", "artifacts", "tests", "benchmarks",
    "lab", "course", "requirements*.txt", "pyproject.toml", "environment.yml", "nbval_sanitize.cfg",
]
