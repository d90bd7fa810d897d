"""Property test in the spirit of minitorch: the reference Scalar engine against torch.autograd.

Random expression DAGs (with shared sub-expressions and constants on both sides) are
evaluated by the solution's ``Scalar`` and by PyTorch in float64; values and gradients
must agree. This keeps the reference solution, which the checks trust, honest.
"""
import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from check_helpers import solution_namespace

Scalar = solution_namespace("01")["Scalar"]

OPS = st.sampled_from(["add", "mul", "sin", "exp", "add_const", "rmul_const"])
PROGRAM = st.lists(st.tuples(OPS, st.integers(0, 50), st.integers(0, 50), st.floats(-2, 2)), min_size=1, max_size=12)


def run(program, x, y, sin, exp):
    nodes = [x, y]
    for op, i, j, c in program:
        a, b = nodes[i % len(nodes)], nodes[j % len(nodes)]
        if op == "add":
            out = a + b
        elif op == "mul":
            out = a * b
        elif op == "sin":
            out = sin(a)
        elif op == "exp":
            out = exp(a * 0.3)  # keep values small
        elif op == "add_const":
            out = c + a
        else:
            out = c * a
        nodes.append(out)
    total = nodes[-1]
    for n in nodes[2:-1]:  # use every intermediate: many shared nodes
        total = total + n * 0.1
    return total


@settings(max_examples=80, deadline=None)
@given(PROGRAM, st.floats(-1.5, 1.5), st.floats(-1.5, 1.5))
def test_scalar_engine_matches_torch(program, x0, y0):
    xs, ys = Scalar(x0), Scalar(y0)
    ours = run(program, xs, ys, Scalar.sin, Scalar.exp)
    ours.backward()
    xt = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
    yt = torch.tensor(y0, dtype=torch.float64, requires_grad=True)
    theirs = run(program, xt, yt, torch.sin, torch.exp)
    gx, gy = torch.autograd.grad(theirs, (xt, yt), allow_unused=True)
    gx = 0.0 if gx is None else gx.item()
    gy = 0.0 if gy is None else gy.item()
    assert math.isclose(ours.data, theirs.item(), rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(xs.grad, gx, rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(ys.grad, gy, rel_tol=1e-9, abs_tol=1e-9)
