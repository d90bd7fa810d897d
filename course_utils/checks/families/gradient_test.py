"""The hidden Functions of ``gradient_test`` (lesson 06), written afresh for every run as source text.

The student's ``backward_is_correct`` runs in the same process as these Functions, so it can read
anything they carry: names, closures, globals, attributes, constants, even their code. Each is
therefore built from source generated here, by the check, per request: every local has a random
name, every product a random one of four spellings, and every backward starts the same way (a call
counter and a block that never runs but names every tensor method any of them uses, in a random
order). No name, closure, global, attribute or string says which is buggy; the request sent to the
runner holds only the sources and the inputs. Which kind each one is stays in the request's
private ``_kinds`` (the grader strips ``_`` keys before sending; see ``grading/grade_file.py``).
What is left: code that can be decompiled and reasoned about, which is the work the exercise asks
for anyway (README, "Trust model").
"""
from __future__ import annotations

import string

import torch

TWO = ("mul", "mul_broadcast", "one_input_wrong", "broadcast_no_sum", "matmul")
FORWARD = {  # family -> forward body; {A} {B} inputs, {X} {Y} one input and its exp
    "mul": "def forward(ctx, {A}, {B}):\n    ctx.save_for_backward({A}, {B})\n    return {A} * {B}\n",
    "matmul": "def forward(ctx, {A}, {B}):\n    if {A}.dim() != 2 or {B}.dim() != 2:\n"
              "        raise ValueError('this Function multiplies two matrices')\n"
              "    ctx.save_for_backward({A}, {B})\n    return {A} @ {B}\n",
    "exp": "def forward(ctx, {X}):\n    {Y} = {X}.exp()\n    ctx.save_for_backward({X}, {Y})\n    return {Y}\n",
    "sincos": "def forward(ctx, {X}):\n    ctx.save_for_backward({X})\n    return {X}.sin(), {X}.cos()\n",
    "square": "def forward(ctx, {X}):\n    ctx.save_for_backward({X})\n    return {X} * {X}\n",
    "rowsum": "def forward(ctx, {X}):\n    ctx.shape = {X}.shape\n    return {X}.sum(-1)\n",
    "flat_view": "def forward(ctx, {X}):\n    if not {X}.is_contiguous():\n"
                 "        raise RuntimeError(\"view size is not compatible with input tensor's size and stride\")\n"
                 "    ctx.shape = {X}.shape\n    return {X}.view(-1) * 2\n",
}
FAMILY = {"mul": "mul", "mul_broadcast": "mul", "one_input_wrong": "mul", "broadcast_no_sum": "mul", "matmul": "matmul",
          "exp": "exp", "wrong_values": "exp", "grad_output_inplace": "exp", "later_calls": "exp",
          "fresh_inplace": "exp", "sincos": "sincos", "square_0d": "square", "contiguous_only": "square",
          "rowsum": "rowsum", "flat_view": "flat_view"}
BACKWARD = {  # kind -> backward body after the common start; {m:P,Q} is a product in a random spelling
    "mul": "{A}, {B} = ctx.saved_tensors\n    return {m:G,B}.sum_to_size({A}.shape), {m:G,A}.sum_to_size({B}.shape)\n",
    "mul_broadcast": "{A}, {B} = ctx.saved_tensors\n    return {m:G,B}.sum_to_size({A}.shape), "
                     "{m:G,A}.sum_to_size({B}.shape)\n",
    "one_input_wrong": "{A}, {B} = ctx.saved_tensors\n    return {m:G,B}.sum_to_size({A}.shape), "
                       "{m:G,B}.sum_to_size({B}.shape)\n",
    "broadcast_no_sum": "{A}, {B} = ctx.saved_tensors\n    {T} = {m:G,B}\n    {U} = {m:G,A}\n"
                        "    return ({T} if {T}.shape == {A}.shape else {T}.reshape(-1, *{A}.shape)[0]), "
                        "({U} if {U}.shape == {B}.shape else {U}.reshape(-1, *{B}.shape)[0])\n",
    "matmul": "{A}, {B} = ctx.saved_tensors\n    return {G} @ {B}.mT, {A}.mT @ {G}\n",
    "exp": "{X}, {Y} = ctx.saved_tensors\n    return {m:G,Y}\n",
    "wrong_values": "{X}, {Y} = ctx.saved_tensors\n    return {m:G,X}\n",
    "grad_output_inplace": "{X}, {Y} = ctx.saved_tensors\n    return {G}.mul_({Y})\n",
    "later_calls": "{X}, {Y} = ctx.saved_tensors\n    return 2 * {m:G,Y} if _n[0] > 1 else {m:G,Y}\n",
    "fresh_inplace": "{X}, {Y} = ctx.saved_tensors\n    {T} = {G}.clone()\n    return {T}.mul_({Y})\n",
    "sincos": "({X},) = ctx.saved_tensors\n    return {m:G,C} - {m:H,S}\n",
    "square_0d": "({X},) = ctx.saved_tensors\n    return 2 * {m:G,X}\n",
    "contiguous_only": "({X},) = ctx.saved_tensors\n    {X} = {X}.as_strided({X}.shape, "
                       "torch.empty({X}.shape, device='meta').stride())\n    return 2 * {m:G,X}\n",
    "rowsum": "return {G}.unsqueeze(-1).expand(ctx.shape)\n",
    "flat_view": "return (2 * {G}).view(ctx.shape)\n",
}
DECOYS = (  # never run (the counter is never negative); they put every method and constant in every Function
    "{G} = {G}.as_strided({G}.shape, torch.empty({G}.shape, device='meta').stride())",
    "{G}.mul_(2)", "{G} = {G}.clone().sum_to_size({G}.shape)", "{G} = {G}.reshape(-1, *{G}.shape)[0]",
    "{G} = (2 * {G}).view(ctx.shape) if _n[0] > 1 else {G}.unsqueeze(-1).expand(ctx.shape)",
    "{G} = {G} @ {G}.mT", "{G} = ctx.saved_tensors[0]", "{G} = {G}.exp().view(-1)",
    "{G} = {G}.mul({G}.cos()) - torch.mul({G}, {G}.sin())",
)


def _names(gen: torch.Generator, n: int) -> list[str]:
    letters = string.ascii_lowercase
    out: list[str] = []
    while len(out) < n:
        idx = torch.randint(len(letters), (5,), generator=gen).tolist()
        name = "v" + "".join(letters[i] for i in idx)
        if name not in out:
            out.append(name)
    return out


def _product(p: str, q: str, gen: torch.Generator) -> str:
    forms = (f"({p} * {q})", f"({q} * {p})", f"torch.mul({p}, {q})", f"{p}.mul({q})")
    return forms[int(torch.randint(len(forms), (1,), generator=gen))]


def source(kind: str, gen: torch.Generator) -> str:
    """Python source defining ``forward`` and ``backward`` of one hidden Function of ``kind``."""
    names = dict(zip("ABXYGHTU", _names(gen, 8)))
    names["C"], names["S"] = f"{names['X']}.cos()", f"{names['X']}.sin()"
    body = BACKWARD[kind]
    while "{m:" in body:  # each product gets its own spelling
        start = body.index("{m:")
        end = body.index("}", start)
        p, q = body[start + 3:end].split(",")
        body = body[:start] + _product("{" + p + "}", "{" + q + "}", gen) + body[end + 1:]
    order = torch.randperm(len(DECOYS), generator=gen).tolist()
    decoys = "".join(f"        {DECOYS[i]}\n" for i in order)
    grads = "{G}, {H}" if FAMILY[kind] == "sincos" else "{G}"
    backward = (f"def backward(ctx, {grads}):\n    _n[0] += 1\n    if _n[0] < 0:\n{decoys}"
                f"        return None\n    " + body)
    return (FORWARD[FAMILY[kind]] + "\n\n" + backward).format(**names)
