"""Run the benchmarks and update benchmarks/results.md (also printed).

``python -m benchmarks`` runs all of them; ``python -m benchmarks silu implicit`` runs only
those. Each benchmark owns one section of results.md, between its own markers, and only
the sections that ran are rewritten: the others keep their last results.
"""
import re
import sys
from pathlib import Path

from . import checks, fused_ce, gradebook, grading, implicit, kernels, linear, silu, widgets

BENCHMARKS = {"linear": linear.run, "grading": grading.run, "silu": silu.run, "implicit": implicit.run,
              "widgets": widgets.run, "kernels": kernels.run,
              "fused_ce": fused_ce.run, "gradebook": gradebook.run, "checks": checks.run}
HEADER = "# Benchmark results\n\nWritten by `./course bench` (`./course bench NAME...` reruns only those sections).\n"
OUT = Path(__file__).with_name("results.md")


def markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"


def update(text: str, name: str, body: str) -> str:
    """Replace the section of ``name`` in ``text`` (or append it) with ``body``."""
    begin, end = markers(name)
    block = f"{begin}\n{body.strip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        return pattern.sub(lambda _m: block, text, count=1)
    return text.rstrip() + "\n\n" + block + "\n"


def main(argv: list[str]) -> int:
    names = argv or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    text = OUT.read_text() if OUT.exists() else HEADER
    for name in names:
        text = update(text, name, BENCHMARKS[name]())
        OUT.write_text(text)  # after each one, so a later failure keeps the finished sections
    print(f"\nwrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
