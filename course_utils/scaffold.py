"""``./course new-exercise``: write a new custom-Function exercise's skeleton and register it.

An exercise is four pieces of hand-written code, each where the trust model needs it: the check
(``checks/lessonNN_ID.py``: references, assess functions, hints; never in the grader's sandbox), its probe
(``probes/lessonNN_ID.py``, the same module name: all the sandbox holds), its tests
(``tests/checks/test_lessonNN_ID.py``) and its solution (cells appended to
``solutions/NN_exercises.py``, from which the student's notebook is generated). The registry and
the probes find the two modules by their names; stages pair with probes by name; the id's
contract (what the answer defines) goes into ``CONTRACT`` in ``tests/checks/test_engine.py``.

Everything is checked before anything is written: a bad id, an id that exists, a lesson without
exercises, a module that exists or a reference that is not an expression is refused in one sentence.
"""
from __future__ import annotations

import argparse
import ast
import keyword
import math
import re
import sys
import textwrap
from pathlib import Path

from . import exercise_tests
from .paths import ROOT
from .scaffold_text import PREFILLED, NewExercise, check_text, prefilled, probe_text, solution_cells, tests_text

__all__ = ["NewExercise", "Refused", "main", "validate", "write"]

ID = re.compile(r"[a-z][a-z0-9_]*\Z")
CONTRACT_FILE = Path("tests/checks/test_engine.py")
CONTRACT_START = "CONTRACT = {"


class Refused(Exception):
    """Input the scaffold will not act on; the message is one sentence for the author."""


def existing_ids(root: Path) -> dict[str, str]:
    """Every exercise id the course has, with where it is: check cells of the solutions, and CONTRACT's keys."""
    found: dict[str, str] = {}
    for py in sorted((root / "solutions").glob("*_exercises.py")):
        for gid in re.findall(r'^check\("(\w+)"', py.read_text(), re.M):
            found.setdefault(gid, str(py.relative_to(root)))
    table = _contract_table(root)
    for gid in re.findall(r'"(\w+)":', table):
        found.setdefault(gid, str(CONTRACT_FILE))
    return found


def _contract_table(root: Path) -> str:
    text = (root / CONTRACT_FILE).read_text()
    start = text.find(CONTRACT_START)
    end = text.find("\n}", start)
    if start < 0 or end < 0:
        raise Refused(f"{CONTRACT_FILE} holds no `{CONTRACT_START} ... }}` table to add the new id to; restore it first.")
    return text[start:end]


def validate(ex: NewExercise, root: Path) -> None:
    """Raise ``Refused`` (one sentence) for anything that would make the new exercise wrong or clash."""
    if not ID.match(ex.grade_id):
        raise Refused(f"the exercise id must be lowercase letters, digits and underscores, starting with a letter "
                      f"(it names the check, its modules and the grade column), not {ex.grade_id!r}.")
    known = existing_ids(root)
    if ex.grade_id in known:
        raise Refused(f"exercise {ex.grade_id!r} exists already ({known[ex.grade_id]}): choose another id.")
    if not (root / ex.solution).exists():
        numbers = sorted(p.name[:2] for p in (root / "solutions").glob("*_exercises.py"))
        raise Refused(f"--lesson must name a lesson with an exercise notebook ({numbers[0]} to {numbers[-1]}: "
                      f"solutions/NN_exercises.py), not {ex.lesson!r}.")
    for path in ex.files.values():
        if (root / path).exists():
            raise Refused(f"{path} exists already: choose another id.")
    _check_names(ex, root)
    try:
        tree = ast.parse(ex.reference, mode="eval")
    except SyntaxError as exc:
        raise Refused(f"--reference must be one Python expression of {', '.join(ex.args)} (e.g. 'torch.sin(x)'), "
                      f"not {ex.reference!r}: {exc.msg}.") from None
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - {"torch", "math"}
    if used - set(ex.args):
        raise Refused(f"--reference uses {', '.join(sorted(used - set(ex.args)))}, which is neither an argument "
                      f"(--args {','.join(ex.args)}) nor torch or math.")
    if set(ex.args) - used:
        raise Refused(f"--reference never uses {', '.join(sorted(set(ex.args) - used))}: every argument of --args "
                      "must appear in it (or leave that argument out of --args).")
    _try_reference(ex, tree)
    if ex.precision is not None and len(ex.args) != 1:
        raise Refused(f"--precision assesses a function of one input over a grid, and --args names {len(ex.args)}: "
                      "leave --precision out, or give the exercise one argument.")
    _contract_table(root)


def _check_names(ex: NewExercise, root: Path) -> None:
    """The class and each argument a Python name, each once, and the class new to its lesson's notebook."""
    if not ex.cls.isidentifier() or keyword.iskeyword(ex.cls):
        raise Refused(f"--defines must be a Python class name (e.g. Sin), not {ex.cls!r}.")
    for name in ex.args:
        if not name:
            raise Refused(f"--args has an empty name ({','.join(ex.args)!r}): separate names by single commas, "
                          "with none at the end.")
        if keyword.iskeyword(name) or not name.isidentifier():
            why = "a Python keyword" if keyword.iskeyword(name) else "not a Python name"
            raise Refused(f"--args {name!r} is {why}: name forward's tensor arguments like x or x,y.")
    if len(set(ex.args)) != len(ex.args):
        raise Refused(f"--args names an argument twice ({','.join(ex.args)}): name each once.")
    if ex.cls in ex.args:
        raise Refused(f"--args uses the class name {ex.cls!r} as an argument: give the argument another name.")
    defined = re.search(rf"^(class|def) {re.escape(ex.cls)}\b|^{re.escape(ex.cls)} =", (root / ex.solution).read_text(),
                        re.M)
    if defined:
        raise Refused(f"{ex.solution} defines {ex.cls} already (another exercise's answer): choose another class "
                      "name, or the new answer cell would replace it.")
    lesson = lesson_defining(ex.cls, ex.lesson, root)
    if lesson:
        raise Refused(f"{lesson}, a lesson, defines class {ex.cls} already: choose another class name (the "
                      "exercise asks students to write a class of their own, not one a lesson shows them).")


def lesson_defining(cls: str, lesson: str, root: Path) -> str:
    """The lesson notebook source (notebooks/*.py, the exercise's own lesson first) that defines class ``cls``, if any."""
    sources = sorted((root / "notebooks").glob("*.py"), key=lambda p: (not p.name.startswith(lesson), p.name))
    pattern = re.compile(rf"^\s*class {re.escape(cls)}\b", re.M)
    return next((str(p.relative_to(root)) for p in sources if pattern.search(p.read_text())), "")


def _try_reference(ex: NewExercise, tree: ast.Expression) -> None:
    """The reference computes a differentiable tensor from float64 tensors: refused now, not at ./course build."""
    import torch  # only here: the scaffold's other work needs no torch

    gen = torch.Generator().manual_seed(0)
    values = {a: (torch.rand(4, generator=gen, dtype=torch.float64) + 0.5).requires_grad_() for a in ex.args}
    try:
        out = eval(compile(tree, "--reference", "eval"), {"torch": torch, "math": math}, values)  # the author's own
    except Exception as exc:  # any error of the author's expression is reported, in one sentence
        raise Refused(f"--reference {ex.reference!r} fails on float64 tensors of shape (4,): "
                      f"{type(exc).__name__}: {exc}.") from None
    if not isinstance(out, torch.Tensor) or out.grad_fn is None:
        what = f"a {type(out).__name__}" if not isinstance(out, torch.Tensor) else "a tensor autograd cannot trace"
        raise Refused(f"--reference {ex.reference!r} gives {what}: it must compute a tensor from the arguments "
                      "with torch operations (the check differentiates it).")


# --------------------------------------------------------------------------- writing, all or nothing
def write(ex: NewExercise, root: Path = ROOT) -> list[str]:
    """Validate, then write the three modules, append the solution's cells and the CONTRACT entry; what was done."""
    validate(ex, root)
    texts = {"check": check_text(ex), "probe": probe_text(ex), "tests": tests_text(ex)}
    for text in texts.values():
        compile(text, ex.grade_id, "exec")  # a template that does not parse is a bug here: nothing written
    contract = (root / CONTRACT_FILE).read_text()
    end = contract.find("\n}", contract.find(CONTRACT_START))
    contract = contract[:end] + f'\n    "{ex.grade_id}": ("{ex.cls}",),  # ./course new-exercise' + contract[end:]
    for kind, path in ex.files.items():
        (root / path).write_text(texts[kind])
    with (root / ex.solution).open("a") as out:
        out.write(solution_cells(ex))
    (root / CONTRACT_FILE).write_text(contract)
    tests = exercise_tests.listed(str(ex.files["tests"]), ex.lesson)
    return [f"wrote {ex.files['check']} (the check: reference, cases; add its mistakes and hints)",
            f"wrote {ex.files['probe']} (its probes: what runs beside the student's code)",
            f"wrote {ex.files['tests']} (its tests: BUGS, and unusual answers that must pass)",
            f"added exercise `{ex.grade_id}` to {ex.solution} (write backward between ### BEGIN SOLUTION and "
            "### END SOLUTION)",
            f"added `{ex.grade_id}` to CONTRACT in {CONTRACT_FILE}",
            "pre-filled (CONTRIBUTING.md, 'Adding an exercise', step 1):",
            *(f"  - {line}" for line in prefilled(ex)),
            f"next: write the backward (its tests fail until then), ./course build {ex.lesson}_exercises, then "
            f"./course test --exercise {ex.grade_id}, which runs what these need of `{ex.grade_id}` "
            "(CONTRIBUTING.md, 'Adding an exercise', step 6):",
            *(f"  {path}" for path in tests)]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """One sentence and the way to help, not argparse's usage dump."""
        self.exit(2, f"./course new-exercise: {message} (./course new-exercise --help shows the options)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="./course new-exercise", description=textwrap.fill(
                "Write a new custom-Function exercise's check, probe, tests and solution cells, and register it "
                "(CONTRIBUTING.md, 'Adding an exercise').", 100),
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="example: ./course new-exercise sin --lesson 03 --defines Sin --reference 'torch.sin(x)'\n\n"
                "what it pre-fills (<args>, <reference>: the options' values):\n"
                + "\n".join(textwrap.fill(line, 100, initial_indent="  - ", subsequent_indent="    ")
                            for line in PREFILLED))
    p.add_argument("grade_id", metavar="ID", help="the exercise id: lowercase, e.g. sin (the check, modules, grade)")
    p.add_argument("--lesson", required=True, help="the lesson number whose exercise notebook gets it, e.g. 03")
    p.add_argument("--defines", required=True, metavar="CLASS", help="the Function class the answer cell defines")
    p.add_argument("--reference", required=True, metavar="EXPR",
                   help="what forward must compute, one expression of the arguments, e.g. 'torch.sin(x)'")
    p.add_argument("--args", default="x", help="forward's tensor arguments, comma-separated (default: x)")
    p.add_argument("--title", help="the exercise's title (default: the class name)")
    p.add_argument("--precision", metavar="LOW,HIGH", type=_interval,
                   help="add a stage (1 point) that wants values and gradients accurate relative to themselves on a "
                   "wide grid of x in [LOW, HIGH], e.g. --precision=-1e4,1e4 (numerics exercises of one input)")
    return p


def _interval(text: str) -> tuple[float, float]:
    """--precision's LOW,HIGH: two finite numbers, LOW below HIGH."""
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--precision takes LOW,HIGH, two numbers such as -1e4,1e4, not {text!r}") \
            from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise argparse.ArgumentTypeError(f"--precision needs finite LOW < HIGH, not {text!r}")
    return low, high


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    args = build_parser().parse_args(argv)
    lesson = args.lesson.zfill(2) if args.lesson.isdigit() else args.lesson
    ex = NewExercise(args.grade_id, lesson, args.defines, tuple(a.strip() for a in args.args.split(",")),
                     args.reference, args.title or args.defines, args.precision)
    try:
        done = write(ex, root)
    except Refused as refused:
        print(f"./course new-exercise: {refused}", file=sys.stderr)
        return 2
    print("\n".join(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
