"""The instructor's CSV files (roster, due dates, times), read line by line with one sentence for a
file that cannot be read: missing, not UTF-8 (Excel's "CSV (Comma delimited)" is Windows-1252), or
a line with more cells than the header (an unquoted comma inside a name would shift every column)."""
from __future__ import annotations

import csv
import io
from pathlib import Path

from ..errors import UsageError


def read(path: str | Path, what: str) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """(the header's names, each line's number and cells keyed by them): names lower-case, cells stripped.

    UsageError when ``what`` (e.g. "the times CSV") cannot be read, is not UTF-8 text, or a line has
    more non-empty cells than the header names.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}.") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise UsageError(f"{what} {path} is not UTF-8 text (line {line}): save it as \"CSV UTF-8\" and run the "
                         "command again.") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [(h or "").strip().lower() for h in reader.fieldnames or []]
    out = []
    for raw in reader:
        number = reader.line_num
        if any(cell.strip() for cell in raw.get(None) or []):
            raise UsageError(f"{what} {path} line {number} has more cells than its header names: quote a value "
                             "that holds a comma (\"O'Connor, Siobhan\").")
        out.append((number, {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items() if k is not None}))
    return header, out
