"""Lesson 11's exercise: the laziest answers fail with their diagnosis, unusual correct answers pass."""
import jupytext
import pytest

from answers import mutate
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
        d = d * (keep / n.clamp(min=1))[:, None]
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
            d *= (k / n.clamp(min=1))[:, None]
            gh[s:s + chunk] = d @ weight
            gw += d.T @ h
        ctx.save_for_backward(gh, gw)
        return loss / n
    @staticmethod
    def backward(ctx, g):
        gh, gw = ctx.saved_tensors
        return gh * g, gw * g, None, None
'''

# review1 #5: lesson 11's token chunking with a fixed 8-token chunk, `chunk` ignored; every chunk spans all classes
TOKEN_CHUNK_8 = TOKEN_CHUNKS.replace("for s in range(0, hidden.shape[0], chunk)", "for s in range(0, hidden.shape[0], 8)") \
    .replace("[s:s + chunk]", "[s:s + 8]")

# review1 #6: the whole logits in NumPy, invisible to a dispatch mode
NUMPY_LOGITS = '''
import numpy as np
class VocabChunkedCrossEntropy(Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, chunk):
        h, w, t = hidden.detach().numpy(), weight.detach().numpy(), target.numpy()
        keep = t != -100
        tt = np.where(keep, t, 0)
        z = h @ w.T
        m = z.max(1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(z - m).sum(1))
        n = max(keep.sum(), 1)
        loss = ((lse - z[np.arange(len(t)), tt]) * keep).sum() / keep.sum()
        d = np.exp(z - lse[:, None])
        d[np.arange(len(t)), tt] -= 1
        d *= (keep / n)[:, None]
        ctx.save_for_backward(torch.from_numpy(d @ w), torch.from_numpy(d.T @ h))
        return torch.tensor(loss, dtype=hidden.dtype)
    @staticmethod
    def backward(ctx, g):
        gh, gw = ctx.saved_tensors
        return gh * g, gw * g, None, None
'''

# review1 #6: the whole logits written by out= into an empty tensor, which the op resizes
OUT_RESIZE = '''
class VocabChunkedCrossEntropy(Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, chunk):
        keep = target != -100
        t = torch.where(keep, target, 0)
        z = hidden.new_empty(0)
        torch.mm(hidden, weight.T, out=z)
        n = keep.sum().to(hidden.dtype)
        m = z.amax(1, keepdim=True)
        lse = (m + (z - m).exp().sum(1, keepdim=True).log())[:, 0]
        loss = ((lse - z.gather(1, t[:, None])[:, 0]) * keep).sum() / n
        z.sub_(lse[:, None]).exp_()
        z[torch.arange(len(t)), t] -= 1
        z.mul_((keep / n.clamp(min=1))[:, None])
        ctx.save_for_backward(z @ weight, z.T @ hidden)
        return loss
    @staticmethod
    def backward(ctx, g):
        dh, dw = ctx.saved_tensors
        return g * dh, g * dw, None, None
'''

# issue 40 #1: Liger-Kernel's loop over tokens, one whole row of logits each, `chunk` ignored: values right, memory
# independent of the slice size
LIGER_PER_TOKEN = '''
class VocabChunkedCrossEntropy(Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, chunk):
        keep = target != -100
        n = keep.sum().clamp(min=1).to(hidden.dtype)
        gh, gw = torch.zeros_like(hidden), torch.zeros_like(weight)
        loss = hidden.new_zeros(())
        for i in range(hidden.shape[0]):
            if not keep[i]:
                continue
            z = hidden[i] @ weight.T
            m = z.max()
            e = (z - m).exp()
            s = e.sum()
            loss += m + s.log() - z[target[i]]
            p = e / s
            p[target[i]] -= 1
            p /= n
            gh[i] = p @ weight
            gw += p[:, None] * hidden[i][None, :]
        ctx.save_for_backward(gh, gw)
        return loss / keep.sum()
    @staticmethod
    def backward(ctx, g):
        gh, gw = ctx.saved_tensors
        return gh * g, gw * g, None, None
'''

# issue 40 #2: a 2-D tiling, 8 tokens by `chunk` classes at a time (correct, and holds less than the solution)
TILED_2D = '''
class VocabChunkedCrossEntropy(Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, chunk):
        keep = (target != -100).to(hidden.dtype)
        n = keep.sum().clamp(min=1)
        t = torch.where(target != -100, target, 0)
        lse = torch.zeros_like(keep)
        dh, dw = torch.zeros_like(hidden), torch.zeros_like(weight)
        for a in range(0, hidden.shape[0], 8):
            h = hidden[a:a + 8]
            m = torch.full_like(lse[a:a + 8], float("-inf"))
            s = torch.zeros_like(m)
            for lo in range(0, weight.shape[0], chunk):
                z = h @ weight[lo:lo + chunk].T
                m2 = torch.maximum(m, z.amax(1))
                s = s * torch.exp(m - m2) + torch.exp(z - m2[:, None]).sum(1)
                m = m2
            lse[a:a + 8] = m + s.log()
            for lo in range(0, weight.shape[0], chunk):
                w = weight[lo:lo + chunk]
                p = torch.exp(h @ w.T - lse[a:a + 8, None]) * (keep[a:a + 8] / n)[:, None]
                dh[a:a + 8] += p @ w
                dw[lo:lo + chunk] += p.T @ h
        w_t = weight[t]
        dh -= w_t * (keep / n)[:, None]
        dw.index_add_(0, t, -hidden * (keep / n)[:, None])
        ctx.save_for_backward(dh, dw)
        return ((lse - (hidden * w_t).sum(1)) * keep).sum() / keep.sum()
    @staticmethod
    def backward(ctx, g):
        dh, dw = ctx.saved_tensors
        return g * dh, g * dw, None, None
'''

# issue 40 #2: the guard's wall-clock alarm fires while the answer has used almost no CPU time (a busy machine,
# simulated by re-arming the alarm and sleeping in the memory stage's large vocabulary only)
BUSY_MACHINE = "import signal, time\n" + mutate(SOLUTION, (
    "counted = target != -100", "if weight.shape[0] == 1024:\n            signal.setitimer(signal.ITIMER_REAL, 0.05)\n"
    "            time.sleep(1)\n        counted = target != -100"))

SHARE = "share = counted.to(hidden.dtype) / counted.sum().clamp(min=1).to(hidden.dtype)"
RESCALE = "total = total * torch.exp(best - grown) + "
BUGS = {
    "materializes_logits": (MATERIALISED, ["x 1024 logits", "numbers at their peak", "a few slices of logits"]),
    "autograd_in_backward": (AUTOGRAD_BACKWARD, ["grad mode on", "by hand"]),
    "ce_ignored_counted": (mutate(SOLUTION, (SHARE, "share = counted.to(hidden.dtype) / len(target)")),
                           ["-100 must neither add to the loss", "count in the mean"]),
    # review1 #9: ignored tokens scored against class 0, divided by the right count
    "ce_ignored_as_class": (mutate(SOLUTION, (SHARE, "share = torch.ones_like(hidden[:, 0]) / counted.sum()")),
                            ["divides by the right count", "-100 still add a term"]),
    "ce_not_mean": (mutate(SOLUTION, (SHARE, "share = counted.to(hidden.dtype)")), ["sum over the tokens", "mean"]),
    "forgot_grad_output": (mutate(SOLUTION, ("return grad_output * dh, grad_output * dw", "return dh, dw")), ["grad_output"]),
    # review1 #4: every target ignored gives 0/0 in the gradients
    "nan_gradient": (mutate(SOLUTION, (".clamp(min=1)", "")), ["NaN", "every target -100"]),
    "logits_outside_torch": (NUMPY_LOGITS, ["matrix products returned 0 numbers", "cannot measure"]),
    "whole_vocab_rows": (LIGER_PER_TOKEN, ["in slices of 16", "(1024,)", "whole vocabulary", "whatever `chunk` is"]),
    # issue 40 #8: the online log-sum-exp without its rescale
    "lse_not_rescaled": (mutate(SOLUTION, (RESCALE, "total = total + ")),
                         ["sum of exponentials kept so far", "maximum grows", "multiply the running sum"]),
    "machine_busy": (BUSY_MACHINE, ["machine is busy", "run the check again", "Nothing is wrong"]),
}

@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    source, phrases = BUGS[code]
    assert_diagnosed(code, "vocab_chunked_ce", source, phrases)


def test_the_liger_per_token_loop_holds_whole_rows_at_both_slice_sizes():
    """Its memory is rows of 1024 logits whatever the slice size: more than a few slices of 2 x 16 or 2 x 64."""
    from course_utils.checks import lesson11
    from course_utils.probes import lesson11 as probes
    request = checks.EXERCISES["vocab_chunked_ce"].request(0)
    facts = probes.memory(ns_from(LIGER_PER_TOKEN), dict(request, cls="VocabChunkedCrossEntropy"))["cases"]
    for case, chunk in zip(facts, lesson11.MEMORY_CHUNKS):
        assert case["slice_peak"] > lesson11.slice_allowance(2, chunk)
        assert all(1024 in shape and len(shape) <= 2 and 1 in shape + [1] for shape in case["slice_shapes"])


def test_the_memory_stage_is_sized_for_a_fast_verdict():
    """P9: the memory cases run few slices under the Python dispatch mode (the old ones ran 2 x 342 + 2 x 32)."""
    from course_utils.checks import lesson11
    slices = sum(-(-lesson11.MEMORY_VOCAB // c) for c in lesson11.MEMORY_CHUNKS)
    assert slices <= 96
    # one row of logits is more than a few slices at the small size, so per-token answers fail there
    assert 3 * lesson11.slice_allowance(lesson11.MEMORY_TOKENS, lesson11.MEMORY_CHUNKS[0]) < lesson11.MEMORY_VOCAB


def test_an_endless_loop_is_stopped_by_cpu_time(monkeypatch):
    """The limit counts the answer's CPU time, not the wall clock, and the message says so."""
    from course_utils.probes import lesson11 as probes
    monkeypatch.setattr(probes, "CPU_LIMIT", 0.3)
    spin = mutate(SOLUTION, ("counted = target != -100",
                             "counted = target != -100\n        while weight.shape[0] == 1024:\n            hidden + 1"))
    result = checks.run_check("vocab_chunked_ce", ns_from(spin))
    assert result.mistakes == ["timeout"] and result.points == 3, result.report()
    assert "0.3 s of CPU time" in result.report() and "other work does not count" in result.report()


@pytest.mark.parametrize("source", [MATERIALISED, TOKEN_CHUNKS, TOKEN_CHUNK_8, OUT_RESIZE],
                         ids=["materialised", "token-chunks", "token-chunk-8", "out-resize"])
def test_the_materialising_answers_lose_only_the_memory_point(source):
    result = assert_diagnosed("materializes_logits", "vocab_chunked_ce", source, ["numbers at their peak"])
    assert result.points == 3  # values and gradients are right


def test_hints_diagnose_without_the_fix():
    for source, _ in BUGS.values():
        report = checks.run_check("vocab_chunked_ce", ns_from(source)).report()
        for fix in ("logaddexp", "torch.maximum", "exp(best", "amax", "running", "save_for_backward(", "clamp", "slice.T",
                    "weight by", "weight each"):
            assert fix not in report, report


def test_the_memory_mistakes_offer_a_fix():
    for source in (MATERIALISED, NUMPY_LOGITS, LIGER_PER_TOKEN, BUGS["lse_not_rescaled"][0],
                   BUGS["ce_ignored_as_class"][0], BUGS["ce_ignored_counted"][0]):
        result = checks.run_check("vocab_chunked_ce", ns_from(source))
        assert result.fix and result.fix not in result.report(), result.report()


# --------------------------------------------------------------------------- unusual but correct
# issue 40 #3: Cut Cross-Entropy's design (save the log-sum-exp, recompute the slices in backward): accepted
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
        scale = g * keep.to(hidden.dtype) / keep.sum().clamp(min=1)
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
        n = keep.sum().clamp(min=1)
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


# review1 #7: float32 inputs computed in float64 and cast back: correct, and no more numbers than the solution
UPCAST_FLOAT64 = mutate(SOLUTION, ("counted = target != -100",
                                   "dt = hidden.dtype\n        hidden, weight = hidden.double(), weight.double()\n"
                                   "        counted = target != -100"),
                        ("ctx.save_for_backward(dh, dw)", "ctx.save_for_backward(dh.to(dt), dw.to(dt))"),
                        ("return ((norm - right) * share).sum()", "return ((norm - right) * share).sum().to(dt)"))

# only the kept rows enter the slices; loss NaN when none is kept, as F.cross_entropy's
FILTER_KEPT_ROWS = '''
class VocabChunkedCrossEntropy(Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, chunk):
        keep = (target != -100).nonzero()[:, 0]
        h, t = hidden[keep], target[keep]
        n = max(len(t), 1)
        m = h.new_full((len(t),), float("-inf")); s = h.new_zeros(len(t))
        for lo in range(0, weight.shape[0], chunk):
            z = h @ weight[lo:lo + chunk].T
            m2 = torch.maximum(m, z.amax(1)); s = s * (m - m2).exp() + (z - m2[:, None]).exp().sum(1); m = m2
        lse = m + s.log()
        own = (h * weight[t]).sum(1)
        dh = torch.zeros_like(hidden); dw = torch.zeros_like(weight); dhk = torch.zeros_like(h)
        for lo in range(0, weight.shape[0], chunk):
            w = weight[lo:lo + chunk]
            p = (h @ w.T - lse[:, None]).exp() / n
            dhk += p @ w
            dw[lo:lo + chunk] = p.T @ h
        dhk -= weight[t] / n
        dw.index_add_(0, t, -h / n)
        dh[keep] = dhk
        ctx.save_for_backward(dh, dw)
        return (lse - own).sum() / len(t)
    @staticmethod
    def backward(ctx, g):
        dh, dw = ctx.saved_tensors
        return g * dh, g * dw, None, None
'''


@pytest.mark.parametrize("source", [RECOMPUTE_IN_BACKWARD, SOLUTION, UPCAST_FLOAT64, FILTER_KEPT_ROWS, TILED_2D],
                         ids=["recompute-in-backward", "solution", "upcast-float64", "filter-kept-rows", "tiled-2d"])
def test_unusual_correct_answers_pass(source):
    result = checks.run_check("vocab_chunked_ce", ns_from(source))
    assert result.status == "passed", result.report()


def test_the_one_pass_answer_is_right_but_holds_n_by_v():
    """Keeping every slice's exponentials until the end is the full logits again, spread over a list."""
    assert_diagnosed("materializes_logits", "vocab_chunked_ce", ONE_PASS, ["numbers at their peak"])


def test_the_stub_is_not_attempted():
    stub = SOLUTION.split("### BEGIN SOLUTION")[0] + '        raise NotImplementedError("not yet")\n'
    stub += "    @staticmethod\n    def backward(ctx, grad_output):\n        raise NotImplementedError\n"
    result = checks.run_check("vocab_chunked_ce", ns_from(stub))
    assert result.status == "not attempted", result.report()


def test_the_reference_answer_uses_only_what_the_lessons_show():
    """issue 41 #7: every torch function and tensor method the answer calls appears in a lesson (01 to 11) first."""
    import re
    region = SOLUTION.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
    lessons = "\n".join(p.read_text() for p in sorted((ROOT / "notebooks").glob("[01][0-9]_*.py")))
    used = set(re.findall(r"torch\.\w+", region)) | {m for m in re.findall(r"\.(\w+)\(", region) if m != "apply"}
    missing = sorted(u for u in used if not re.search(re.escape(u if u.startswith("torch.") else f".{u}(")
                                                      .replace(r"\(", r"[(\[]?"), lessons))
    assert not missing, missing
    for api in ("gather", "new_full", "nonzero"):
        assert f".{api}(" not in region


# --------------------------------------------------------------------------- variants (issue 51)
def variant_answer(key: str) -> str:
    import importlib.util

    spec = importlib.util.spec_from_file_location("answers_vocab", ROOT / "solutions" / "variants" / "vocab_chunked_ce.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ANSWERS[key]


VARIANT_BUGS = {  # variant, the edit of its right answer, the first stage that must fail
    "smoothed: the gradient without the smoothing's share": ("smoothed", ("probs = probs - 0.1 / classes", "pass"), 1),
    "zloss: the gradient of lse**2 forgotten": ("zloss", ("probs = probs * (1 + 2e-4 * norm[:, None])", "pass"), 1),
    "softcap: the tanh's derivative forgotten": ("softcap", ("probs = probs * (1 - (scores / 10) ** 2)", "pass"), 1),
}


@pytest.mark.parametrize("name", VARIANT_BUGS)
def test_a_variants_typical_mistake_fails_its_check(name):
    key, edit, stage = VARIANT_BUGS[name]
    result = checks.run_check("vocab_chunked_ce", ns_from(mutate(variant_answer(key), edit)), variant=key)
    assert result.stages[stage].points == 0 and all(s.points == s.max for s in result.stages[:stage]), result.report()
