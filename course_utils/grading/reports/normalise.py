"""Code as statements that compare equal when only what copying does not change differs (``copies`` reads them).

Each statement (a logical line: a call split over lines is one) is reduced to its tokens
without what a student may change freely and without meaning: comments, docstrings, blank
lines, indentation, line breaks, type hints (of parameters, returns and assignments), the
quotes and trailing commas of formatting, and every name the student chose (variables,
parameters, functions, classes) replaced by ``_``. What the code *does* stays: keywords,
operators, numbers, strings, attribute names (``.mm``, ``.saved_tensors``), keyword-argument
names (``keepdim=``), builtins and the names a course's imports bind (``torch``, ``nn``, ``math``).
So ``grad_input = grad_output.mm(weight)`` and ``gx: Tensor = g.mm(w)  # dL/dx`` are one
statement, and a copy with renamed variables or rewritten comments reads as what it is.

Pure functions of text: nothing here runs code.
"""
from __future__ import annotations

import builtins
import io
import keyword
import re
import tokenize
from dataclasses import dataclass

KEEP = frozenset(dir(builtins)) | {"self", "cls"}  # names that mean the same whoever writes them
OPEN, CLOSE = "([{", ")]}"
COMPOUND = frozenset({"if", "elif", "else", "for", "while", "with", "try", "except", "finally", "def", "class",
                      "return", "lambda", "assert", "del", "import", "from", "raise", "global", "nonlocal", "yield",
                      "async", "await", "pass", "break", "continue", "match", "case"})
IMPORT = re.compile(r"^\s*(?:from\s+[\w.]+\s+)?import\s+(.+)$", re.M)


@dataclass(frozen=True)
class Statement:
    key: str  # the normalised tokens: equal keys are the same statement
    lines: tuple[str, ...]  # the physical lines it spans, as written (stripped): the evidence a reviewer reads
    comments: tuple[str, ...] = ()  # the comments on those lines (their text)


def imported_names(sources: list[str]) -> frozenset[str]:
    """Every name an ``import`` line of ``sources`` binds (``import torch.nn as nn`` -> nn, ``from m import a, b``)."""
    found: set[str] = set()
    for source in sources:
        for m in IMPORT.finditer(source):
            for part in m.group(1).replace("(", " ").replace(")", " ").split(","):
                words = part.split()
                if words:
                    found.add(words[-1] if len(words) == 3 and words[1] == "as" else words[0].split(".")[0])
    return frozenset(found)


PLAIN_STRING = re.compile(r"([rRbBuU]{0,2})('\'\'|\"\"\"|'|\")(.*)\2", re.S)


def _text(tok: tokenize.TokenInfo) -> str:
    """A token as compared: a string without escapes in one canonical quoting (single, double or triple quotes
    compare equal), anything else as written. No ``ast`` here: ``ast.literal_eval`` converts a tree outside
    ``policy.parse``'s lock, and two threads converting at once raise SystemError on CPython 3.11.7
    (gh-106905), which once lost a row at --jobs 2."""
    m = PLAIN_STRING.fullmatch(tok.string) if tok.type == tokenize.STRING else None
    if m is None or "\\" in m.group(3) or "f" in m.group(1).lower():
        return tok.string  # escapes, f-strings and the rest: as written
    return ("b" if "b" in m.group(1).lower() else "") + repr(m.group(3))


def _key(tokens: list[tokenize.TokenInfo], known: frozenset[str]) -> str:
    """The normalised text of one statement's tokens (no comments, newlines or indentation among them)."""
    out: list[str] = []
    depth, skipping, skip_depth, lambdas = 0, False, 0, False
    is_def = bool(tokens) and tokens[0].string in ("def", "async")
    simple = bool(tokens) and tokens[0].type == tokenize.NAME and tokens[0].string not in COMPOUND
    for i, tok in enumerate(tokens):
        s = tok.string
        nxt = tokens[i + 1].string if i + 1 < len(tokens) else ""
        if skipping:  # inside a type hint: up to the ',', '=' or ')' that ends it at its own depth
            if s in OPEN:
                depth += 1
            elif s in CLOSE and depth > skip_depth:
                depth -= 1
            elif (depth == skip_depth and s in (",", "=", ")")) or (s == ":" and depth == 0 and skip_depth == 0):
                skipping = False
            else:
                continue
            if skipping:
                continue
        if s == "->" and is_def and depth == 0:
            skipping, skip_depth = True, 0
            continue
        if s == ":" and ((is_def and depth == 1) or (simple and depth == 0 and i > 0 and not lambdas)):
            if not is_def and not any(t.string == "=" for t in tokens[i:]):
                return ""  # a bare annotation (``x: int``) declares nothing that runs
            skipping, skip_depth = True, depth  # a parameter's or an assignment's type hint
            continue
        if s in OPEN:
            depth += 1
        elif s in CLOSE:
            depth -= 1
            if out and out[-1] == ",":
                out.pop()  # a trailing comma is formatting
        builtin = s in KEEP and (nxt == "(" or s in ("self", "cls"))  # ``max(...)``; ``input`` as a name is a name
        if tok.type == tokenize.NAME and not keyword.iskeyword(s) and not builtin and s not in known:
            after_dot = i > 0 and tokens[i - 1].string == "."
            keyword_arg = depth > 0 and nxt == "=" and not is_def
            if not (after_dot or keyword_arg):
                s = "_"
        lambdas = lambdas or s == "lambda"
        out.append(_text(tok) if s == tok.string else s)
    return " ".join(out)


SKIP = (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.NEWLINE,
        tokenize.ENDMARKER)


def _line(text: str, known: frozenset[str]) -> list[Statement]:
    """One line of code that does not tokenize as a whole, as a statement of its own (as written where it does not
    tokenize alone either)."""
    if not text or text.startswith("#"):
        return []
    try:
        key = _key([t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in SKIP], known)
    except (tokenize.TokenError, SyntaxError):
        key = " ".join(text.split())
    return [Statement(key, (text,))] if key else []


def statements(source: str, known: frozenset[str] = frozenset()) -> list[Statement]:
    """The statements of ``source`` normalised (see the module), in order; docstrings and empty ones left out.

    ``known``: names kept as written (the course's imports). Code that does not tokenize (a
    syntax error) is read line by line, each line a statement of its own.
    """
    lines = source.splitlines()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return [s for line in lines for s in _line(line.strip(), known)]
    out: list[Statement] = []
    current: list[tokenize.TokenInfo] = []
    comments: list[str] = []
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            comments.append(tok.string.lstrip("#").strip())
        elif tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER) and current:
            docstring = len(current) == 1 and current[0].type == tokenize.STRING
            key = "" if docstring else _key(current, known)
            if key:
                first, last = current[0].start[0], current[-1].end[0]
                out.append(Statement(key, tuple(x.strip() for x in lines[first - 1:last] if x.strip()),
                                     tuple(c for c in comments if c)))
            current, comments = [], []
        elif tok.type not in SKIP:
            current.append(tok)
    return out
