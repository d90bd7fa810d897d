"""Frames between judge and runner: ``[u32 length][wire message]``, and what a valid message is.

The judge sends one job; the runner answers with messages. Nothing in a runner message is
trusted: ``validate`` accepts only the kinds, exercises, fields and types the judge expects,
and never anything that could carry points.
"""
from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable
from typing import Protocol

from ... import wire

MAX_FRAME = 64 << 20  # bytes in one runner message
MAX_TOTAL = 256 << 20  # bytes from one runner start, frame heads included
MAX_HEADER = 16 << 20  # bytes of a message's JSON header (tensor bytes travel after it)
MAX_NODES = 1_000_000  # containers and items in one header: wire.loads refuses more, but only after json.loads
MAX_MESSAGES = 200  # messages from one runner start
MAX_NOTE = 300  # characters per cell error note
MAX_NOTES = 10
# the runner's exit status after an exercise's time ran out in one of its cells or in code its check called: it ends
# the start as the judge's clock would (``runner.run_job``, ``session.ended_by``), so a loop that swallows the alarm
# and one that lets it end the cell or the stage get one grade
TIME_UP = 124


class Readable(Protocol):
    """What frames are read from: a pipe, or the judge's counting wrapper around one."""

    def read(self, n: int, /) -> bytes: ...


class ProtocolError(ValueError):
    """The peer broke the framing (too long, truncated, not our format)."""


class TooLarge(ProtocolError):
    """A message over a size limit, refused before it was read or parsed."""


def frame(message: object) -> bytes:
    data = wire.dumps(message)
    return struct.pack(">I", len(data)) + data


def writer(fd: int) -> Callable[..., None]:
    """``send(**message)``: each message one whole frame on ``fd``, even when several threads send (the runner's audit
    hook reports from a student's thread)."""
    lock = threading.RLock()

    def send(**message) -> None:
        data = frame(message)
        with lock:
            while data:
                data = data[os.write(fd, data):]
    return send


def read_frame(stream: Readable, limit: int = MAX_FRAME, nodes: int | None = MAX_NODES) -> object | None:
    """The next message, or None at a clean end of stream.

    ``limit``: bytes this frame may have (checked before it is read); ``nodes``: containers and
    items its JSON header may hold, bounded by counting ``[ { ,`` in its bytes before
    ``json.loads`` builds anything (an empty dict is 2 bytes on the wire, ~64 in memory);
    None only for the judge's own job, which the runner reads.
    """
    head = _read_exactly(stream, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">I", head)
    if size > limit:
        raise TooLarge(f"a message of {size} bytes is over the limit of {limit}")
    body = _read_exactly(stream, size)
    if body is None:
        raise ProtocolError("the stream ended inside a message")
    if nodes is not None and len(body) >= 4:
        (n,) = struct.unpack_from("<I", body)
        header = memoryview(body)[4:4 + n]
        if n > MAX_HEADER:
            raise TooLarge(f"a message header of {n} bytes is over the limit of {MAX_HEADER}")
        raw = bytes(header)
        if raw.count(b"[") + raw.count(b"{") + raw.count(b",") > nodes:
            raise TooLarge(f"a message header holds more than {nodes} items")
    try:
        return wire.loads(body)
    except wire.WireError as exc:
        raise ProtocolError(str(exc)) from None


def _read_exactly(stream: Readable, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            if got:
                raise ProtocolError("the stream ended inside a message")
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def validate(message: object, expected: set[str]) -> dict | None:
    """The message if it is one the judge asked for, else None. ``expected``: exercise ids."""
    if not isinstance(message, dict) or not isinstance(message.get("kind"), str):
        return None
    kind = message["kind"]
    if kind in ("ready", "done"):
        return {"kind": kind}
    if kind == "audit":  # what the runner's audit hook saw answer code do (grading/sandbox/audit.py)
        where, why = message.get("exercise"), message.get("reason")
        if not (isinstance(where, str) and isinstance(why, str)):
            return None
        return {"kind": kind, "exercise": where[:100], "reason": why[:MAX_NOTE]}
    exercise = message.get("exercise")
    if not isinstance(exercise, str) or exercise not in expected:
        return None
    if kind == "begin":
        return {"kind": kind, "exercise": exercise}
    if kind != "facts":
        return None
    notes = message.get("cell_errors")
    printed = message.get("printed")
    fake = message.get("fake_output")
    if not (isinstance(notes, list) and all(isinstance(n, str) for n in notes) and type(printed) is int
            and printed >= 0 and type(fake) is bool and "facts" in message):
        return None
    return {"kind": kind, "exercise": exercise, "facts": message["facts"],
            "cell_errors": [n[:MAX_NOTE] for n in notes[:MAX_NOTES]], "printed": printed, "fake_output": fake}
