"""``linear_module``'s family: an ``nn.Module`` around the student's ``LinearFunction``, one layout and init per variant.

Lesson 04 prints ``Linear`` with nn.Linear's (out, in) weight and initialisation; the exercise asks for a relative
(issue 51, item 1): the weight stored (in, out) but drawn exactly like nn.Linear's (the default: kaiming_uniform_
reads its fan-in from the tensor's shape, so the layout matters), Xavier's init (Transformer code), GPT-2's
``Conv1D`` ((in, out), normal with std 0.02) and ViT's truncated normal. The forward goes through the student's own
``LinearFunction`` (whichever variant of it they have: transposes around it are fine), so the check looks for a
``LinearFunction`` node anywhere in the output's graph.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..autograd_function import close, grad_output, tensor_arg, unwrap
from ..engine import Exercise, Mistake, Stage
from ..variants import Variant


def linear_init(seed: int, fan_in: int, fan_out: int) -> tuple[torch.Tensor, torch.Tensor]:
    """What ``torch.manual_seed(seed); nn.Linear(fan_in, fan_out)`` holds, from a private generator.

    The grader's judge runs checks in threads: this must never seed or read the process-wide RNG.
    """
    gen = torch.Generator().manual_seed(seed)
    weight = torch.empty(fan_out, fan_in)
    nn.init.kaiming_uniform_(weight, a=math.sqrt(5), generator=gen)
    bias = torch.empty(fan_out)
    bound = 1 / math.sqrt(fan_in)
    nn.init.uniform_(bias, -bound, bound, generator=gen)
    return weight, bias


def _transposed_linear(seed: int, fan_in: int, fan_out: int) -> tuple[torch.Tensor, torch.Tensor]:
    w, b = linear_init(seed, fan_in, fan_out)
    return w.t(), b


def _drawn(draw: Callable[[torch.Tensor, torch.Generator], object], in_out: bool):
    def init(seed: int, fan_in: int, fan_out: int) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        weight = torch.empty((fan_in, fan_out) if in_out else (fan_out, fan_in))
        draw(weight, gen)
        return weight, torch.zeros(fan_out)
    return init


@dataclass(frozen=True)
class Kind:
    key: str
    in_out: bool  # weight stored (in_features, out_features)
    init: Callable[[int, int, int], tuple[torch.Tensor, torch.Tensor]]  # (seed, in, out) -> weight, bias
    said: str  # the init, for hints
    fix: str  # level 2
    task: str


COMMON = (" `Linear(in_features, out_features, bias=True)` holds `weight` and `bias` as `nn.Parameter`s (with "
          "`bias=False`, `self.bias` is `None`), sets them in `reset_parameters` (called from `__init__`), computes its "
          "output through your `LinearFunction.apply`, and shows `in_features=..., out_features=..., bias=...` in its "
          "repr via `extra_repr`. With the same `torch.manual_seed`, its parameters must hold exactly the numbers the "
          "rule above draws (draw the weight first, then the bias).")
KINDS = (
    Kind("in-out", True, _transposed_linear, "nn.Linear's weight, transposed, and nn.Linear's bias",
         "draw an (out_features, in_features) tensor with nn.init.kaiming_uniform_(w, a=math.sqrt(5)), store its "
         "transpose, then the bias ~ U(-1/sqrt(in_features), 1/sqrt(in_features)).",
         "The weight is stored **transposed**, shape $(\\text{in}, \\text{out})$, and holds exactly nn.Linear's weight "
         "transposed: with the same seed, `layer.weight.T` equals `nn.Linear(in, out).weight` and `layer.bias` its "
         "bias. (nn.Linear draws its weight with `nn.init.kaiming_uniform_(w, a=math.sqrt(5))`, which reads the "
         "fan-in from the shape of the tensor it fills, then its bias from $U(-1/\\sqrt{\\text{in}}, "
         "1/\\sqrt{\\text{in}})$.)" + COMMON),
    Kind("xavier", False, _drawn(lambda w, g: nn.init.xavier_uniform_(w, generator=g), False),
         "Xavier-uniform weight and a zero bias", "nn.init.xavier_uniform_(self.weight); nn.init.zeros_(self.bias).",
         "The weight has shape $(\\text{out}, \\text{in})$ as in `nn.Linear` but is initialised like a Transformer's "
         "layers: `nn.init.xavier_uniform_` (Glorot: $U(-a, a)$ with $a = \\sqrt{6 / (\\text{in} + \\text{out})}$), "
         "and the bias starts at zero (`nn.init.zeros_`)." + COMMON),
    Kind("conv1d", True, _drawn(lambda w, g: nn.init.normal_(w, std=0.02, generator=g), True),
         "a normal weight with std 0.02 and a zero bias, weight stored (in, out)",
         "nn.init.normal_(self.weight, std=0.02) on an (in_features, out_features) weight; zero bias.",
         "This is GPT-2's `Conv1D`: the weight is stored **transposed**, shape $(\\text{in}, \\text{out})$, drawn "
         "from a normal distribution with mean 0 and standard deviation 0.02 (`nn.init.normal_(w, std=0.02)`), and "
         "the bias starts at zero (`nn.init.zeros_`)." + COMMON),
    Kind("trunc", False, _drawn(lambda w, g: nn.init.trunc_normal_(w, std=0.02, a=-0.04, b=0.04, generator=g), False),
         "a normal weight with std 0.02 cut at two standard deviations, and a zero bias",
         "nn.init.trunc_normal_(self.weight, std=0.02, a=-0.04, b=0.04); nn.init.zeros_(self.bias).",
         "The weight has shape $(\\text{out}, \\text{in})$ as in `nn.Linear`, initialised like a Vision Transformer's "
         "layers: a normal distribution with mean 0 and standard deviation 0.02, cut at two standard deviations, "
         "$\\pm 0.04$ (`nn.init.trunc_normal_(w, std=0.02, a=-0.04, b=0.04)`: its bounds `a`, `b` are values, not "
         "multiples of the standard deviation), and the bias starts at zero (`nn.init.zeros_`)." + COMMON),
)


def _shape(kind: Kind, fan_in: int, fan_out: int) -> list[int]:
    return [fan_in, fan_out] if kind.in_out else [fan_out, fan_in]


def _assess_structure(kind: Kind):
    def assess(req, facts):
        for bias in (True, False):
            w, b = facts[str(bias)]["weight"], facts[str(bias)]["bias"]
            if w["kind"] != "parameter" or w.get("shape") != _shape(kind, 5, 3):
                layout = "(in_features, out_features)" if kind.in_out else "(out_features, in_features)"
                raise Mistake("module_structure", f"linear_module: Linear(5, 3).weight should be an nn.Parameter of "
                              f"shape {layout} = {tuple(_shape(kind, 5, 3))}, got {w['kind']} {tuple(w.get('shape', ()))}.")
            if bias and (b["kind"] != "parameter" or b.get("shape") != [3]):
                raise Mistake("module_structure", "linear_module: Linear(5, 3).bias should be an nn.Parameter of shape (3,).")
            if not bias and b["kind"] != "none":
                raise Mistake("module_structure", "linear_module: with bias=False, `self.bias` should exist and be None "
                              "(self.register_parameter('bias', None)).")
        text = facts["repr"]
        if "in_features=5" not in text or "out_features=3" not in text or "bias=True" not in text:
            raise Mistake("module_repr", f"linear_module: repr(Linear(5, 3)) is {text[:120]!r}; extra_repr should return "
                          "'in_features=5, out_features=3, bias=True' like nn.Linear.")
    return assess


def _linear_cause(seed: int, fan_in: int, w: object, b: object, ref_w: torch.Tensor, ref_b: torch.Tensor) -> \
        tuple[str, str]:
    """(mistake code, what differs) for parameters not initialised like nn.Linear: which one, and how."""
    bound = 1 / math.sqrt(fan_in)
    if isinstance(w, torch.Tensor) and w.shape == ref_w.shape and torch.equal(w, ref_w):
        if isinstance(b, torch.Tensor) and b.shape == ref_b.shape and ref_b.abs().max() > 0:
            scale = (b.double() @ ref_b.double() / (ref_b.double() @ ref_b.double())).item()
            if abs(scale - 1) > 1e-6 and torch.allclose(b.double(), scale * ref_b.double(), rtol=1e-5, atol=1e-7):
                return "module_bias_bound", (f"the weight is right and the bias has the right random draws, but their "
                                             f"range is {abs(scale):.3g} times nn.Linear's: check what the bias's "
                                             "bound depends on")
        return "module_init", "the weight is right, the bias is not drawn like nn.Linear's"
    if isinstance(w, torch.Tensor) and w.numel() and w.abs().max().item() > bound + 1e-6:
        return "module_init", "weights exceed the bound nn.Linear draws them within (it depends on in_features)"
    gen = torch.Generator().manual_seed(seed)  # the bias drawn before the weight: the same draws, the other order
    bias_first = torch.empty_like(ref_b)
    nn.init.uniform_(bias_first, -bound, bound, generator=gen)
    weight_after = torch.empty_like(ref_w)
    nn.init.kaiming_uniform_(weight_after, a=math.sqrt(5), generator=gen)
    if isinstance(w, torch.Tensor) and w.shape == ref_w.shape and torch.equal(w, weight_after):
        return "module_init", "same seed, different numbers: initialise the weight first, then the bias"
    return "module_init", "the weight is not drawn like nn.Linear's"


def _cause(kind: Kind, seed: int, fan_in: int, w: object, b: object, ref_w, ref_b) -> tuple[str, str]:
    if kind.key == "in-out":
        tw = w.t() if isinstance(w, torch.Tensor) and w.dim() == 2 else w
        code, cause = _linear_cause(seed, fan_in, tw, b, ref_w.t(), ref_b)
        if cause == "the weight is not drawn like nn.Linear's" and isinstance(tw, torch.Tensor) and tw.numel() and \
                tw.abs().max().item() <= 1 / math.sqrt(fan_in) + 1e-6:
            cause = "the weight has nn.Linear's range but not its numbers, in the stored layout"
        return code, cause
    weight_ok = isinstance(w, torch.Tensor) and w.shape == ref_w.shape and torch.equal(w, ref_w)
    return "module_init", "the weight is right, the bias is not" if weight_ok else "the weight is not drawn by the rule"


def _assess_init(kind: Kind):
    def assess(req, facts):
        for (seed, fan_in, fan_out), got in zip(req["init"], facts):
            ref_w, ref_b = kind.init(seed, fan_in, fan_out)
            w, b = got["weight"], got["bias"]
            if not (isinstance(w, torch.Tensor) and isinstance(b, torch.Tensor) and w.shape == ref_w.shape
                    and b.shape == ref_b.shape and torch.equal(w, ref_w) and torch.equal(b, ref_b)):
                code, cause = _cause(kind, seed, fan_in, w, b, ref_w, ref_b)
                raise Mistake(code, f"linear_module: Linear({fan_in}, {fan_out}) is not initialised as your variant "
                              f"asks ({cause}); compare your reset_parameters with the rule, {kind.said}.",
                              fix=kind.fix)
        if len(facts) != len(req["init"]):
            raise ValueError("missing init cases")
    return assess


def _assess_forward(kind: Kind):
    def assess(req, facts):
        if not any("LinearFunction" in name for name in facts.get("graph", [])):
            raise Mistake("module_not_using_function", "linear_module: Linear.forward does not go through your "
                          f"LinearFunction: its output's graph (grad_fn {facts['grad_fn']}) holds no LinearFunction "
                          "backward node.", fix="call LinearFunction.apply in Linear.forward, passing the weight in the "
                          "layout your LinearFunction takes (a transpose around it is fine).")
        w, b = facts["weight"], facts["bias"]
        w_out_in = (w.detach().t() if kind.in_out else w.detach()).requires_grad_()
        bias = b.detach().requires_grad_()
        want = F.linear(req["x"], w_out_in, bias)
        if not close(facts["out"], want.detach(), torch.float32):
            raise Mistake("forward_wrong", "linear_module: Linear's output differs from nn.Linear with the same "
                          "weights (x @ W.T + b for the (out, in) form W of your weight).")
        want.backward(req["g"])
        grads = unwrap(facts["grads"])
        wanted = {"weight": w_out_in.grad.t() if kind.in_out else w_out_in.grad, "bias": bias.grad}
        for name in ("weight", "bias"):
            if not close(grads[name], wanted[name], torch.float32):
                raise Mistake("gradient_wrong", f"linear_module: the gradient of Linear.{name} differs from "
                              "nn.Linear's (in your weight's layout).")
    return assess


def _request(seed: int) -> dict:
    x = tensor_arg((5, 4), 1000 * seed + 91, torch.float32, grad=False)["t"]
    return {"init": [[1000 * seed + 1, 4, 3], [1000 * seed + 2, 10, 7]], "forward_seed": 1000 * seed + 3, "x": x,
            "g": grad_output((5, 3), torch.float32, 1000 * seed + 3)}


def exercise(kind: Kind) -> Exercise:
    return Exercise(grade_id="linear_module", title="Linear module", names=("Linear", "LinearFunction"), stages=(
        Stage(name="parameters, shapes and extra_repr", points=1, probe="structure", assess=_assess_structure(kind)),
        Stage(name=f"initialised as the variant asks ({kind.said})", points=1, probe="init", assess=_assess_init(kind)),
        Stage(name="forward and gradients match nn.Linear through LinearFunction", points=1, probe="forward",
              assess=_assess_forward(kind)),
    ), request=_request)


LINEAR_MODULE = exercise(KINDS[0])


def family(default: Exercise) -> tuple[Variant, ...]:
    return tuple(Variant(key=k.key, task=k.task, exercise=default if n == 0 else exercise(k))
                 for n, k in enumerate(KINDS))

