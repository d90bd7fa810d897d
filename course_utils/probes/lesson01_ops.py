"""Lesson 01 probes of ``scalar_ops``: ``/``, ``number / a``, ``** p``, ``exp`` and ``tanh`` of the student's ``Scalar``.

Built like the engine's probes (``lesson01``): each expression is built with the student's ``Scalar``
and reports ``.data`` and the inputs' ``.grad``; the expected values live with the check.
"""
from __future__ import annotations

from collections.abc import Callable

from .lesson01 import probe_grads, probe_values


def _shared(v):
    s = v[0] / v[1]
    return s ** 2 + s.tanh() * s.exp() / s


def _deep(v):
    q = 1 / (v[0] ** 2 + 1)
    t = (q * v[1]).tanh()
    return t / q + t ** 3 + (-2) / (t.exp() + q)


OPS_API: list[tuple[str, Callable]] = [
    ("Scalar(6) / Scalar(3)", lambda S: S(6.0) / S(3.0)),
    ("Scalar(6) / 4", lambda S: S(6.0) / 4),
    ("3 / Scalar(2)", lambda S: 3 / S(2.0)),
    ("Scalar(2) ** 3", lambda S: S(2.0) ** 3),
    ("Scalar(4) ** 0.5", lambda S: S(4.0) ** 0.5),
    ("Scalar(0.5).exp()", lambda S: S(0.5).exp()),
    ("Scalar(0.5).tanh()", lambda S: S(0.5).tanh()),
    ("Scalar(800).tanh()", lambda S: S(800.0).tanh()),
    ("Scalar(-800).tanh()", lambda S: S(-800.0).tanh()),
]
OPS_EXPRESSIONS: list[tuple[str, Callable]] = [  # (label, build(values)): with Scalars or tensors
    ("x / y", lambda v: v[0] / v[1]),
    ("x / 4", lambda v: v[0] / 4),
    ("2 / x", lambda v: 2 / v[0]),
    ("x ** 3", lambda v: v[0] ** 3),
    ("x ** 0.5", lambda v: v[0] ** 0.5),
    ("x ** 3", lambda v: v[0] ** 3),
    ("x ** 2", lambda v: v[0] ** 2),
    ("x.exp()", lambda v: v[0].exp()),
    ("x.tanh()", lambda v: v[0].tanh()),
    ("x / x (x used twice)", lambda v: v[0] / v[0]),
    ("s = x / y; s ** 2 + s.tanh() * s.exp() / s (shared sub-expression)", _shared),
    ("a deep chain of /, **, exp and tanh with shared nodes", _deep),
]


def ops_api(ns, req):
    return probe_values(ns, OPS_API, "scalar_ops")


def ops_backward(ns, req):
    return {"probes": probe_grads(ns, OPS_EXPRESSIONS, req["inputs"], "scalar_ops")}


PROBES = {"scalar_ops": {"api": ops_api, "backward": ops_backward}}
