"""Frames and message validation: only what the judge asked for gets through."""
import io
import struct

import pytest

from course_utils.grading import protocol


def test_frames_round_trip_and_end_cleanly():
    stream = io.BytesIO(protocol.frame({"kind": "ready"}) + protocol.frame({"kind": "done"}))
    assert protocol.read_frame(stream) == {"kind": "ready"}
    assert protocol.read_frame(stream) == {"kind": "done"}
    assert protocol.read_frame(stream) is None


@pytest.mark.parametrize("data", [struct.pack(">I", protocol.MAX_FRAME + 1), struct.pack(">I", 10) + b"abc", b"\x00\x00"])
def test_oversized_or_truncated_frames_are_refused(data):
    with pytest.raises(protocol.ProtocolError):
        protocol.read_frame(io.BytesIO(data))


GOOD = {"kind": "facts", "exercise": "mul", "facts": {"stages": []}, "cell_errors": ["x"], "printed": 0,
        "fake_output": False}


@pytest.mark.parametrize("message", [
    None, "garbled", {"kind": 5}, {"kind": "result", "exercise": "mul"}, {"kind": "begin", "exercise": "exp"},
    {**GOOD, "exercise": ["mul"]}, {**GOOD, "printed": "lots"}, {**GOOD, "printed": -1},
    {**GOOD, "cell_errors": "x"}, {**GOOD, "fake_output": 1}, {k: v for k, v in GOOD.items() if k != "facts"},
])
def test_invalid_messages_are_dropped(message):
    assert protocol.validate(message, {"mul"}) is None


def test_valid_messages_keep_only_known_fields():
    out = protocol.validate({**GOOD, "points": 1e6, "status": "passed"}, {"mul"})
    assert out is not None and "points" not in out and "status" not in out
    assert protocol.validate({"kind": "begin", "exercise": "mul", "pad": "x"}, {"mul"}) == {"kind": "begin", "exercise": "mul"}
