"""How a submission's file is named in every output: its path made safe to show."""
from __future__ import annotations

import os
import unicodedata
from pathlib import Path

INVISIBLE = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")  # control, format (bidi, zero-width), unassigned...


def display_name(path: Path | str) -> str:
    """A file's path as text, whatever bytes its name has; two different paths never read the same.

    Invalid UTF-8 shows as ``\\xNN``, control and invisible characters (DEL, bidi overrides,
    zero-width and no-break spaces...) as ``\\xNN`` below 0x80, else ``\\uNNNN`` (combining marks too in a name that
    is not NFC),
    and a backslash as two, so ``alice\\x7f.ipynb`` (with a DEL) is never shown as ``alice.ipynb``
    next to Alice's file, nor as a file whose name really is ``alice\\x7f.ipynb``: a name is one row,
    one feedback file, one grade.
    """
    text = os.fsencode(path).decode("utf-8", "surrogateescape")
    marks = unicodedata.normalize("NFC", text) != text  # é as e + U+0301: shown so, never like the NFC é
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch == "\\":
            out.append("\\\\")
        elif (unicodedata.category(ch) in INVISIBLE or (marks and unicodedata.combining(ch))
              or (ch.isspace() and ch != " ")):  # a no-break or other odd space reads as a plain one
            # \xNN only below 0x80: from 0x80 up it is how a byte that is not UTF-8 is shown (U+00A0 is \u00a0)
            out.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)

