"""Lesson 01 checks: the engine's cost (scalar_engine) and the transfer exercise scalar_ops."""
import time

import pytest

from answers import mutate
from check_helpers import assert_diagnosed, ns_from, solution_namespace
from course_utils import checks

SCALAR_BASE = """
class Scalar:
    def __init__(self, data, parents=()):
        self.data, self.grad, self._parents = float(data), 0.0, parents
    def __add__(self, other):
        other = other if isinstance(other, Scalar) else Scalar(other)
        return Scalar(self.data + other.data, ((self, 1.0), (other, 1.0)))
    __radd__ = __add__
    def __mul__(self, other):
        other = other if isinstance(other, Scalar) else Scalar(other)
        return Scalar(self.data * other.data, ((self, other.data), (other, self.data)))
    __rmul__ = __mul__
    def sin(self):
        return Scalar(math.sin(self.data), ((self, SIN_LOCAL),))
    def exp(self):
        return Scalar(math.exp(self.data), ((self, EXP_LOCAL),))
    def topo(self):
        order, seen = [], set()
        def visit(n):
            if id(n) not in seen:
                seen.add(id(n))
                for p, _ in n._parents:
                    visit(p)
                order.append(n)
        visit(self)
        return order
"""

TOPO_BACKWARD = """
    def backward(self):
        order = self.topo()
        for n in order:
            n.grad = 0.0
        self.grad = 1.0
        for n in reversed(order):
            for p, local in n._parents:
                p.grad OP n.grad * local
"""


def scalar_source(sin_local="math.cos(self.data)", exp_local="math.exp(self.data)", backward=TOPO_BACKWARD, op="+="):
    return (SCALAR_BASE.replace("SIN_LOCAL", sin_local).replace("EXP_LOCAL", exp_local)
            + backward.replace("OP", op))


BFS_BACKWARD = """
    def backward(self):
        for n in self.topo():
            n.grad = 0.0
        self.grad = 1.0
        queue, seen = [self], {id(self)}
        while queue:
            n = queue.pop(0)
            for p, local in n._parents:
                p.grad OP n.grad * local
                if id(p) not in seen:
                    seen.add(id(p))
                    queue.append(p)
"""

NAIVE_BACKWARD = """
    def backward(self, adjoint=1.0):  # correct (+=), but walks every path
        self.grad += adjoint
        for p, local in self._parents:
            p.backward(adjoint * local)
"""

DICT_BACKWARD = """
    def backward(self):  # every path again, adjoints in a dict: .grad is written only at the end
        grads = {}
        def walk(n, a):
            grads[id(n)] = grads.get(id(n), 0.0) + a
            for p, local in n._parents:
                walk(p, a * local)
        walk(self, 1.0)
        for n in self.topo():
            n.grad = grads[id(n)]
"""

OPS = """
class Scalar(Scalar):
    def __truediv__(self, other):
        other = other if isinstance(other, Scalar) else Scalar(other)
        return Scalar(self.data / other.data, ((self, 1.0 / other.data), (other, DIV_B_LOCAL)))
    def __rtruediv__(self, other):
        return Scalar(other) / self
    def __pow__(self, p):
        return Scalar(self.data ** p, ((self, POW_LOCAL),))
    def tanh(self):
        t = math.tanh(self.data)
        return Scalar(t, ((self, TANH_LOCAL),))
"""


def ops_source(div_b="-self.data / other.data ** 2", pow_local="p * self.data ** (p - 1)", tanh="1.0 - t * t",
               extra=""):
    return scalar_source() + OPS.replace("DIV_B_LOCAL", div_b).replace("POW_LOCAL", pow_local).replace(
        "TANH_LOCAL", tanh) + extra


TANH_VIA_EXP = """
    def tanh(self):
        e = math.exp(2 * self.data)
        t = (e - 1) / (e + 1)
        return Scalar(t, ((self, 1.0 - t * t),))
"""

BUGS = {
    "scalar_exponential": ("scalar_engine", scalar_source(backward=NAIVE_BACKWARD),
                           ["25 doubling layers", "more than 1000 times", "every path", "reverse topological order"]),
    "scalar_reflected_order": ("scalar_ops", ops_source(extra="    __rtruediv__ = __truediv__\n"),
                               ["3 / Scalar(2) gives 0.666667", "__rtruediv__", "not commutative"]),
    "scalar_div_denominator": ("scalar_ops", ops_source(div_b="self.data / other.data ** 2"),
                               ["x / y at (1.3, -0.7)", "denominator b is wrong", "d(a / b)/db = -a / b ** 2"]),
    # issue 41, item 4: exact for small x, OverflowError above x = 354
    "scalar_tanh_overflow": ("scalar_ops", ops_source(extra=TANH_VIA_EXP),
                             ["Scalar(800).tanh() failed", "OverflowError", "overflows", "exp(-2 * abs(x))"]),
    "scalar_tanh_input": ("scalar_ops", ops_source(tanh="1.0 - self.data ** 2"),
                          ["x.tanh() at 0.4", "written with its output", "math.tanh(x), the output"]),
}

BUGS["scalar_pow_at_zero"] = ("scalar_ops", ops_source(pow_local="p * self.data ** p / self.data"),
                              ["x ** 3 at x = 0", "p * x ** (p - 1)"])
BUGS.update({
    "scalar_no_accumulation": ("scalar_engine", scalar_source(op="="), ["x * x (x used twice) at 3", "+="]),
    "scalar_wrong_order": ("scalar_engine", scalar_source(backward=BFS_BACKWARD),
                           ["shared sub-expression", "reverse topological order"]),
    "scalar_local_derivative": ("scalar_engine", scalar_source(exp_local="1.0"),
                                ["exp(x) at 0.7", "local derivative"]),
    "scalar_forward_wrong": ("scalar_engine", mutate(scalar_source(), ("math.sin(self.data)", "math.cos(self.data)")),
                             ["Scalar(0.5).sin() should be a Scalar with data 0.479426"]),
})


# ---- scalar_engine's variants (issue 51): each a rule of its own for backward
ITERATIVE_TOPO = """
    def topo(self):
        order, seen, stack = [], set(), [(self, False)]
        while stack:
            n, done = stack.pop()
            if done:
                order.append(n)
            elif id(n) not in seen:
                seen.add(id(n))
                stack.append((n, True))
                stack.extend((p, False) for p, _ in n._parents)
        return order
"""
BUGS.update({
    # the lesson's recursive depth-first search, on the default variant (deep)
    "scalar_recursion_depth": ("scalar_engine", scalar_source(), ["5000 nested additions", "RecursionError",
                                                                  "explicit stack"]),
    # the lesson's backward (every node reset to 0) where leaves accumulate across calls
    "scalar_not_accumulated": ("scalar_engine", scalar_source(), ["a second out.backward()", "expected [8, 4]",
                                                                  "reset only the nodes that have parents"]),
    # the lesson's backward, which leaves every interior node's adjoint in .grad
    "scalar_interior_grad": ("scalar_engine", scalar_source(), ["[s.grad, out.grad]", "expected [0, 0]",
                                                                "only leaves"]),
    # .grad starting at 0.0 where it starts as None
    "scalar_grad_not_none": ("scalar_engine", scalar_source(), ["Scalar(2.0).grad is 0.0", "starts as None"]),
})
VARIANT_OF = {"scalar_not_accumulated": "accumulate", "scalar_interior_grad": "leaves", "scalar_grad_not_none": "none"}


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    assert_diagnosed(code, *BUGS[code], variant=VARIANT_OF.get(code))


@pytest.mark.parametrize("key", ["deep", "accumulate", "leaves", "none"])
def test_the_lessons_engine_falls_short_on_every_variant(key):
    """The lesson's engine (recursive order, every node reset and written) is no variant's answer."""
    result = checks.run_check("scalar_engine", ns_from(scalar_source()), variant=key)
    assert result.points == (3 if key == "deep" else 1), result.report()  # deep: the last stage; others: backward


def test_an_iterative_engine_passes_the_deep_variant_and_only_it():
    source = scalar_source().replace(SCALAR_BASE[SCALAR_BASE.index("    def topo"):], ITERATIVE_TOPO.lstrip("\n"))
    assert "stack.pop()" in source
    assert checks.run_check("scalar_engine", ns_from(source), variant="deep").status == "passed"
    for key in ("accumulate", "leaves", "none"):
        assert checks.run_check("scalar_engine", ns_from(source), variant=key).points < 4, key


def test_an_accumulating_engine_that_also_accumulates_interior_nodes_fails():
    """Leaves keep their gradient across calls, but interior nodes must start afresh: a second call must not
    push the first call's interior adjoints on again."""
    no_reset = TOPO_BACKWARD.replace("        for n in order:\n            n.grad = 0.0\n", "")
    result = checks.run_check("scalar_engine", ns_from(scalar_source(backward=no_reset)), variant="accumulate")
    assert result.mistakes == ["scalar_not_accumulated"], result.report()


def test_naive_engine_keeps_the_points_for_correct_gradients():
    result = checks.run_check("scalar_engine", ns_from(BUGS["scalar_exponential"][1]))
    assert result.points == 3 and len(result.passed_stages) == 2


def test_naive_engine_without_grad_writes_is_stopped_by_the_time_limit():
    start = time.perf_counter()
    result = checks.run_check("scalar_engine", ns_from(scalar_source(backward=DICT_BACKWARD)))
    assert time.perf_counter() - start < 10
    assert result.mistakes == ["scalar_exponential"], result.report()
    assert "did not finish within 2 s" in result.report()


def test_topological_engine_is_fast_on_the_doubling_chain():
    start = time.perf_counter()
    assert checks.run_check("scalar_engine", solution_namespace("01")).status == "passed"
    assert time.perf_counter() - start < 2


def test_wrong_power_rule_names_the_rule():
    result = checks.run_check("scalar_ops", ns_from(ops_source(pow_local="self.data ** (p - 1)")))
    assert result.mistakes == ["scalar_local_derivative"], result.report()
    assert "x ** 3 at 1.2" in result.report() and "p * a ** (p - 1)" not in result.report()
    assert "p * a ** (p - 1)" in result.report(fix=True)  # the rule is level 2: on request


def test_missing_rtruediv_is_an_api_mistake():
    source = ops_source().replace("    def __rtruediv__(self, other):\n        return Scalar(other) / self\n", "")
    result = checks.run_check("scalar_ops", ns_from(source))
    assert result.mistakes == ["scalar_api"] and "3 / Scalar(2) failed" in result.report()
    assert "__rtruediv__" in result.report()


def test_division_through_multiplication_is_accepted():
    source = ops_source(extra="""
    def __truediv__(self, other):
        return self * (other ** -1 if isinstance(other, Scalar) else 1.0 / other)
""")
    assert checks.run_check("scalar_ops", ns_from(source)).status == "passed"


def test_ops_stub_after_a_solved_engine_is_not_attempted():
    source = scalar_source() + """
class Scalar(Scalar):
    def __truediv__(self, other):
        raise NotImplementedError("Exercise 'scalar_ops' is not attempted yet")
"""
    result = checks.run_check("scalar_ops", ns_from(source))
    assert result.status == "not attempted", result.report()




def test_power_rule_through_exp_and_log_fails_at_zero_and_negative_x():
    source = ops_source(pow_local="p * math.exp((p - 1) * math.log(abs(self.data))) if self.data else 0.0")
    result = checks.run_check("scalar_ops", ns_from(source))  # wrong sign at negative x for odd p - 1
    assert result.status == "failed", result.report()


def test_power_rule_with_an_explicit_zero_case_passes():
    source = ops_source(pow_local="(p * self.data ** p / self.data if self.data != 0 else p * 0.0 ** (p - 1))")
    assert checks.run_check("scalar_ops", ns_from(source)).status == "passed"


@pytest.mark.parametrize("tanh", [
    "(math.exp(self.data) - math.exp(-self.data)) / (math.exp(self.data) + math.exp(-self.data))",
    "(1 - math.exp(-2 * self.data)) / (1 + math.exp(-2 * self.data))",
])
def test_other_overflowing_tanh_formulas_lose_the_values_point(tanh):
    source = ops_source(extra=f"""
    def tanh(self):
        t = {tanh}
        return Scalar(t, ((self, 1.0 - t * t),))
""")
    result = checks.run_check("scalar_ops", ns_from(source))
    assert result.mistakes == ["scalar_tanh_overflow"] and result.points == 0, result.report()


def test_a_tanh_through_exp_of_minus_two_abs_x_passes():
    """Correct but unusual: the overflow-free formula by hand instead of math.tanh."""
    source = ops_source(extra="""
    def tanh(self):
        e = math.exp(-2 * abs(self.data))
        t = math.copysign((1 - e) / (1 + e), self.data)
        return Scalar(t, ((self, 1.0 - t * t),))
""")
    assert checks.run_check("scalar_ops", ns_from(source)).status == "passed"


def test_a_missing_sin_is_told_about_sin_alone():
    """Issue 41, item 4: no __radd__ / __rmul__ advice for a Scalar that lacks only sin."""
    source = scalar_source().replace("    def sin(self):\n"
                                     "        return Scalar(math.sin(self.data), ((self, math.cos(self.data)),))\n", "")
    assert "def sin" not in source
    result = checks.run_check("scalar_engine", ns_from(source))
    assert result.mistakes == ["scalar_api"] and "Scalar(0.5).sin() failed" in result.diagnosis, result.report()
    assert "sin() method" in result.diagnosis and "__radd__" not in result.diagnosis and "__rmul__" not in result.diagnosis


def test_a_missing_radd_is_still_told_about_radd():
    source = mutate(scalar_source(), ("    __radd__ = __add__\n", ""))
    result = checks.run_check("scalar_engine", ns_from(source))
    assert result.mistakes == ["scalar_api"] and "__radd__" in result.diagnosis and "sin" not in result.diagnosis
