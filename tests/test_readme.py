"""README's grading commands keep the repository clean: every file they write is ignored by git."""
import re
import shlex
import shutil
import subprocess

import pytest

from conftest import ROOT

OUTPUT_OPTIONS = ("--out", "--feedback-dir", "--report", "--results", "--similarity")


def grading_outputs() -> list[str]:
    text = (ROOT / "README.md").read_text().replace("\\\n", " ")
    outputs = []
    for line in re.findall(r"^\./course grade .*$", text, re.M):
        words = shlex.split(line.split("#")[0])
        outputs += [words[i + 1] for i, w in enumerate(words[:-1]) if w in OUTPUT_OPTIONS]
    return outputs


def test_readme_grading_commands_write_only_ignored_paths():
    outputs = grading_outputs()
    assert len(outputs) >= 8 and any(o.endswith("report.html") for o in outputs), outputs
    if not (ROOT / ".git").exists() or not shutil.which("git"):
        pytest.skip("not a git checkout")
    probes = [o + ".results/x" if o.endswith(".csv") else o + "/x" if o.endswith("/") else o for o in outputs]
    proc = subprocess.run(["git", "check-ignore", "--no-index", *probes], check=False, cwd=ROOT, capture_output=True, text=True)
    ignored = set(proc.stdout.split())
    assert ignored == set(probes), f"written into the repository and not ignored: {sorted(set(probes) - ignored)}"
