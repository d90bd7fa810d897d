"""Frames and message validation: only what the judge asked for gets through."""
import io
import struct

import pytest

from course_utils.grading.sandbox import protocol


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


def test_container_amplification_is_refused_before_json_builds_anything():
    """The red team's shape (issue 29, item 8), scaled down: a header of empty dicts, 2 bytes each on the wire."""
    header = b"[" + b"{}," * (protocol.MAX_NODES // 2) + b"{}]"
    body = struct.pack("<I", len(header)) + header
    with pytest.raises(protocol.TooLarge, match="items"):
        protocol.read_frame(io.BytesIO(struct.pack(">I", len(body)) + body))
    huge = struct.pack("<I", protocol.MAX_HEADER + 1) + b"x" * 8
    with pytest.raises(protocol.TooLarge, match="header"):
        protocol.read_frame(io.BytesIO(struct.pack(">I", len(huge)) + huge))


def test_a_frame_over_the_callers_limit_is_refused_before_its_body_is_read():
    class Head(io.BytesIO):
        def read(self, n=-1):
            assert n <= 4, "the body was read"
            return super().read(n)

    with pytest.raises(protocol.TooLarge):
        protocol.read_frame(Head(struct.pack(">I", 1000) + b"x" * 1000), limit=999)


def test_honest_large_facts_still_pass():
    """A big tensor and a long list of numbers: far below the bounds."""
    import torch

    facts = {"grad": torch.arange(1 << 20, dtype=torch.float32), "values": list(range(50_000)), "text": "a, b, [c]" * 1000}
    out = protocol.read_frame(io.BytesIO(protocol.frame(facts)))
    assert torch.equal(out["grad"], facts["grad"]) and out["values"] == facts["values"]
