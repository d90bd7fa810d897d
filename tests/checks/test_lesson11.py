"""Lesson 11's exercise: the laziest answers fail with their diagnosis, unusual correct answers pass."""
import jupytext
import pytest

from check_helpers import assert_diagnosed, ns_from
from conftest import ROOT
from course_utils import checks


def solution_source() -> str:
    """The solution's answer cell (the class), as a student would have written it."""
    cells = jupytext.read(ROOT / "solutions" / "11_exercises.py").cells
    return next(c.source for c in cells if "class VocabChunkedCrossEntropy" in c.source)


SOLUTION = solution_source()

# the laziest: the whole logits and their softmax, gradients by formula (no autograd anywhere)
MATERIALISED = '''
import torch.nn.functional as F
class VocabChunkedCrossEntropy(Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, chunk):
        keep = target != -100
        t = torch.where(keep, target, 0)
        z = hidden @ weight.T
        n = keep.sum().to(hidden.dtype)
        loss = ((z.logsumexp(1) - z.gather(1, t[:, None])[:, 0]) * keep).sum() / n
        d = torch.softmax(z, 1)
        d[torch.arange(len(t)), t] -= 1
        d = d * (keep / n)[:, None]
        ctx.save_for_backward(d @ weight, d.T @ hidden)
        return loss
    @staticmethod
    def backward(ctx, g):
        dh, dw = ctx.saved_tensors
        return g * dh, g * dw, None, None
'''

# the composite again, differentiated by autograd inside backward
AUTOGRAD_BACKWARD = '''
import torch.nn.functional as F
class VocabChunkedCrossEntropy(Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, chunk):
        ctx.save_for_backward(hidden, weight, target)
        return F.cross_entropy(hidden @ weight.T, target)
    @staticmethod
    def backward(ctx, g):
        hidden, weight, target = ctx.saved_tensors
        with torch.enable_grad():
            h, w = hidden.detach().requires_grad_(), weight.detach().requires_grad_()
            dh, dw = torch.autograd.grad(F.cross_entropy(h @ w.T, target), (h, w))
        return g * dh, g * dw, None, None
'''

# lesson 11's chunking of the tokens: right values, but each chunk's logits span every class
TOKEN_CHUNKS = '''
class VocabChunkedCrossEntropy(Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, chunk):
        keep = target != -100
        n = keep.sum().to(hidden.dtype)
        gh, gw = torch.zeros_like(hidden), torch.zeros_like(weight)
        loss = hidden.new_zeros(())
        for s in range(0, hidden.shape[0], chunk):
            h, k = hidden[s:s + chunk], keep[s:s + chunk]
            t = torch.where(k, target[s:s + chunk], 0)
            r = torch.arange(len(t))
            z = h @ weight.T
            lse = z.logsumexp(-1)
            loss += ((lse - z[r, t]) * k).sum()
            d = (z - lse[:, None]).exp()
            d[r, t] -= 1
            d *= (k / n)[:, None]
            gh[s:s + chunk] = d @ weight
            gw += d.T @ h
        ctx.save_for_backward(gh, gw)
        return loss / n
    @staticmethod
    def backward(ctx, g):
        gh, gw = ctx.saved_tensors
        return gh * g, gw * g, None, None
'''

BUGS = {
    "materializes_logits": (MATERIALISED, ["x 8192 logits", "every class at once"]),
    "autograd_in_backward": (AUTOGRAD_BACKWARD, ["grad mode on", "only scale"]),
    "ce_ignored_counted": (SOLUTION.replace("/ counted.sum().to(hidden.dtype)", "/ len(target)"),
                           ["-100 must neither add to the loss", "count in the mean"]),
    "ce_not_mean": (SOLUTION.replace("/ counted.sum().to(hidden.dtype)", ""), ["sum over the tokens", "mean"]),
    "forgot_grad_output": (SOLUTION.replace("return grad_output * dh, grad_output * dw", "return dh, dw"), ["grad_output"]),
}


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    source, phrases = BUGS[code]
    assert_diagnosed(code, "vocab_chunked_ce", source, phrases)


def test_the_materialising_answers_lose_only_the_memory_point():
    for source in (MATERIALISED, TOKEN_CHUNKS):
        result = assert_diagnosed("materializes_logits", "vocab_chunked_ce", source, ["MiB"])
        assert result.points == 3  # values and gradients are right


def test_hints_diagnose_without_the_fix():
    for source, _ in BUGS.values():
        report = checks.run_check("vocab_chunked_ce", ns_from(source)).report()
        for fix in ("logaddexp", "torch.maximum", "exp(best", "amax", "running", "save_for_backward("):
            assert fix not in report, report


# --------------------------------------------------------------------------- unusual but correct
RECOMPUTE_IN_BACKWARD = '''
class VocabChunkedCrossEntropy(Function):
    """Forward keeps only the log-sum-exp; backward redoes the slices by hand (no autograd)."""
    @staticmethod
    def forward(ctx, hidden, weight, target, chunk):
        lse = None
        for lo in range(0, weight.shape[0], chunk):
            part = (hidden @ weight[lo:lo + chunk].T).logsumexp(1)
            lse = part if lse is None else torch.logaddexp(lse, part)
        keep = target != -100
        t = target.clamp(min=0)
        own = (hidden * weight[t]).sum(1)
        ctx.save_for_backward(hidden, weight, target, lse)
        ctx.chunk = chunk
        return ((lse - own) * keep).sum() / keep.sum()
    @staticmethod
    def backward(ctx, g):
        hidden, weight, target, lse = ctx.saved_tensors
        keep = target != -100
        scale = g * keep.to(hidden.dtype) / keep.sum()
        dh = torch.zeros_like(hidden)
        dw = []
        for lo in range(0, weight.shape[0], ctx.chunk):
            w = weight[lo:lo + ctx.chunk]
            p = torch.exp(hidden @ w.T - lse[:, None])
            onehot = (target[:, None] == torch.arange(lo, lo + w.shape[0])[None, :]).to(p.dtype)
            p = (p - onehot) * scale[:, None]
            dh = dh + p @ w
            dw.append(p.T @ hidden)
        return dh, torch.cat(dw), None, None
'''

# one pass: running max and sum, plus gradients accumulated unnormalised and rescaled as the max grows
ONE_PASS = '''
class VocabChunkedCrossEntropy(Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, chunk):
        keep = (target != -100).to(hidden.dtype)
        t = target.clamp(min=0)
        m = torch.full_like(keep, -float("inf"))
        s = torch.zeros_like(keep)
        eh = torch.zeros_like(hidden)  # sum_j exp(z_j - m) w_j, rescaled with m
        ew = []
        for lo in range(0, weight.shape[0], chunk):
            w = weight[lo:lo + chunk]
            z = hidden @ w.T
            m2 = torch.maximum(m, z.max(1).values)
            r = torch.exp(m - m2)
            e = torch.exp(z - m2[:, None])
            s = s * r + e.sum(1)
            eh = eh * r[:, None] + e @ w
            ew = [x * r[None, :] for x in ew] + [e.T]  # columns: tokens
            m = m2
        lse = m + s.log()
        n = keep.sum()
        a = keep / (n * s)
        dw = torch.cat([x * a[None, :] for x in ew]) @ hidden
        dw.index_add_(0, t, -hidden * (keep / n)[:, None])
        dh = eh * a[:, None] - weight[t] * (keep / n)[:, None]
        ctx.save_for_backward(dh, dw)
        return ((lse - (hidden * weight[t]).sum(1)) * keep).sum() / n
    @staticmethod
    def backward(ctx, g):
        dh, dw = ctx.saved_tensors
        return g * dh, g * dw, None, None
'''


@pytest.mark.parametrize("source", [RECOMPUTE_IN_BACKWARD, SOLUTION], ids=["recompute-in-backward", "solution"])
def test_unusual_correct_answers_pass(source):
    result = checks.run_check("vocab_chunked_ce", ns_from(source))
    assert result.status == "passed", result.report()


def test_the_one_pass_answer_is_right_but_holds_n_by_v():
    """Keeping every slice's exponentials until the end is the full logits again, spread over a list."""
    assert_diagnosed("materializes_logits", "vocab_chunked_ce", ONE_PASS, ["MiB"])


def test_the_stub_is_not_attempted():
    stub = SOLUTION.split("### BEGIN SOLUTION")[0] + '        raise NotImplementedError("not yet")\n'
    stub += "    @staticmethod\n    def backward(ctx, grad_output):\n        raise NotImplementedError\n"
    result = checks.run_check("vocab_chunked_ce", ns_from(stub))
    assert result.status == "not attempted", result.report()
