"""Plain-bytes encoding of check data: JSON for structure, raw bytes for tensors, never pickle.

Both directions of the grader's channel use it: the judge's request (inputs chosen per
run) and the runner's facts (outputs, gradients, errors as text). Decoding trusts
nothing: only exact ``torch.Tensor`` objects are encoded as tensors (anything else,
subclasses included, becomes an ``Opaque`` naming its type), dtypes come from an allow
list, byte counts must match shapes, and sizes, depth and string lengths are capped.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any, cast

import torch

MAX_BYTES = 256 << 20  # one message
MAX_DEPTH = 24
MAX_STRING = 100_000
MAX_ITEMS = 100_000
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}


class WireError(ValueError):
    """A message that does not follow the format."""


@dataclass(frozen=True)
class Opaque:
    """Something that was not plain data (an object, a tensor subclass): only its type name travels."""

    type_name: str

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


def dumps(obj: object) -> bytes:
    """Encode ``obj`` as ``[u32 header length][JSON header][tensor bytes ...]``."""
    blobs: list[bytes] = []
    offset = [0]

    def enc(x: object, depth: int) -> object:
        if depth > MAX_DEPTH:
            return {"$obj": "too deep"}
        if x is None or (isinstance(x, (bool, str)) and type(x) in (bool, str)):
            return x[:MAX_STRING] if isinstance(x, str) else x
        if type(x) is int:
            return x if -(1 << 62) < x < (1 << 62) else float(x)
        if type(x) is float:
            return x if math.isfinite(x) else {"$float": repr(x)}
        if type(x) is torch.Tensor or type(x) is torch.nn.Parameter:
            return enc_tensor(x)
        if type(x) in (list, tuple):
            return [enc(v, depth + 1) for v in list(cast("list | tuple", x))[:MAX_ITEMS]]
        if type(x) is dict:
            return {str(k)[:200]: enc(v, depth + 1) for k, v in list(x.items())[:MAX_ITEMS]
                    if not str(k).startswith("$") or k in ("$error",)}
        if isinstance(x, Opaque):
            return {"$obj": x.type_name}
        return {"$obj": type(x).__name__[:200]}

    def enc_tensor(t: torch.Tensor) -> object:
        name = str(t.dtype).removeprefix("torch.")
        if t.device.type not in ("cpu", "meta") and t.layout == torch.strided:
            t = t.detach().to("cpu")  # a result computed on a GPU travels as its values
        if name not in DTYPES or t.layout != torch.strided or t.device.type != "cpu" or t.is_quantized:
            return {"$obj": f"Tensor({name}, {t.layout}, {t.device})"}
        with torch._C.DisableTorchFunction():
            flat = t.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
            data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
        blobs.append(data)
        spec = {"$t": [name, list(t.shape), offset[0], len(data)]}
        offset[0] += len(data)
        return spec

    header = json.dumps(enc(obj, 0), allow_nan=False).encode()
    return struct.pack("<I", len(header)) + header + b"".join(blobs)


def loads(data: bytes) -> Any:  # plain data: dicts, lists, tensors, numbers, strings
    """Decode what ``dumps`` wrote; raise WireError for anything malformed."""
    if not isinstance(data, (bytes, bytearray)) or len(data) < 4 or len(data) > MAX_BYTES:
        raise WireError("message too short or too long")
    (n,) = struct.unpack_from("<I", data)
    if 4 + n > len(data):
        raise WireError("header runs past the end")
    try:
        header = json.loads(bytes(data[4:4 + n]).decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, integers of 4300+ digits, deep nesting
        raise WireError(f"header is not JSON ({type(exc).__name__})") from None
    body = memoryview(data)[4 + n:]
    count = [0]
    offset = [0]  # tensors must tile the body in order: no overlap, no gap, nothing read twice

    def dec(x: object, depth: int) -> object:
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > 10 * MAX_ITEMS:
            raise WireError("message nested too deeply or too large")
        if x is None or type(x) in (bool, int, float):
            return x
        if type(x) is str:
            if len(x) > MAX_STRING:
                raise WireError("string too long")
            return x
        if type(x) is list:
            return [dec(v, depth + 1) for v in x]
        if type(x) is dict:
            if "$t" in x:
                return dec_tensor(x["$t"])
            if "$obj" in x:
                return Opaque(str(x["$obj"])[:200])
            if "$float" in x:
                if x["$float"] not in ("nan", "inf", "-inf"):
                    raise WireError("bad float")
                return float(x["$float"])
            return {str(k): dec(v, depth + 1) for k, v in x.items()}
        raise WireError(f"unexpected {type(x).__name__}")

    def dec_tensor(spec: object) -> torch.Tensor:
        if not (type(spec) is list and len(spec) == 4 and spec[0] in DTYPES and type(spec[1]) is list
                and all(type(s) is int and 0 <= s < (1 << 40) for s in spec[1]) and len(spec[1]) <= 16
                and type(spec[2]) is int and type(spec[3]) is int and spec[2] >= 0 and spec[3] >= 0):
            raise WireError("bad tensor header")
        dtype, shape, start, size = DTYPES[spec[0]], spec[1], spec[2], spec[3]
        if start != offset[0] or start + size > len(body):
            raise WireError("tensor bytes overlap, skip or run past the payload")
        offset[0] += size
        numel = math.prod(shape)
        if numel * dtype.itemsize != size:
            raise WireError("tensor bytes do not match its shape")
        raw = torch.frombuffer(bytearray(body[start:start + size]), dtype=torch.uint8) if size else \
            torch.empty(0, dtype=torch.uint8, device="cpu")  # CPU whatever the default device
        return raw.view(dtype).reshape(shape).clone()

    decoded = dec(header, 0)
    if offset[0] != len(body):
        raise WireError("bytes after the last tensor")
    return decoded
