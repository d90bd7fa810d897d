"""Right answers to every variant of `killhead` (``course_utils/checks/families/killhead.py``): KillSlice."""

_TEMPLATE = '''
class KillSlice(Function):
    @staticmethod
    def forward(ctx, SIGNATURE):
        KEEP
        out = input.clone()
        out[PART] = 0
        return out

    @staticmethod
    def backward(ctx, grad_output):
        grad = grad_output.clone()
        grad[CTX_PART] = 0
        return RETURNS
'''


def _answer(signature: str, keep: str, part: str, returns: str) -> str:
    return (_TEMPLATE.replace("SIGNATURE", signature).replace("KEEP", keep).replace("CTX_PART", part)
            .replace("PART", part.replace("ctx.", "")).replace("RETURNS", returns))


ANSWERS = {
    "last-cols": _answer("input, n", "ctx.width = width = input.shape[1] - n", ":, ctx.width:", "grad, None"),
    "first-rows": _answer("input, n", "ctx.n = n", ":ctx.n", "grad, None"),
    "cols-from": _answer("input, n", "ctx.n = n", ":, ctx.n:", "grad, None"),
    "n-first": _answer("n, input", "ctx.first = first = input.shape[0] - n", "ctx.first:", "None, grad"),
    "band": _answer("input, start, stop", "ctx.start, ctx.stop = start, stop", ":, ctx.start:ctx.stop",
                    "grad, None, None"),
}
