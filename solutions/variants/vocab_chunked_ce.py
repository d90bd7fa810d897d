"""Right answers to every variant of ``vocab_chunked_ce`` (never shipped to students)."""

TEMPLATE = '''import torch
from torch.autograd import Function


class VocabChunkedCrossEntropy(Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, chunk):
        counted = target != -100
        safe = torch.where(counted, target, 0)
        share = counted.to(hidden.dtype) / counted.sum().clamp(min=1).to(hidden.dtype)
        rows = torch.arange(len(target), device=target.device)
        classes = weight.shape[0]
        best = torch.full_like(share, float("-inf"))
        total = torch.zeros_like(share)
        right = torch.zeros_like(share)
        summed = torch.zeros_like(share)
        for lo in range(0, classes, chunk):
            scores = {logits}
            grown = torch.maximum(best, scores.amax(dim=1))
            total = total * torch.exp(best - grown) + torch.exp(scores - grown[:, None]).sum(dim=1)
            best = grown
            summed = summed + scores.sum(dim=1)
            mine = (safe >= lo) & (safe < lo + scores.shape[1])
            right = torch.where(mine, scores[rows, torch.where(mine, safe - lo, 0)], right)
        norm = best + torch.log(total)
        dh, dw = torch.zeros_like(hidden), torch.zeros_like(weight)
        for lo in range(0, classes, chunk):
            w = weight[lo:lo + chunk]
            scores = {slice_logits}
            probs = torch.exp(scores - norm[:, None])
            mine = (safe >= lo) & (safe < lo + w.shape[0])
{grad}
            probs = probs * share[:, None]
            dh += probs @ w
            dw[lo:lo + w.shape[0]] = probs.T @ hidden
        ctx.save_for_backward(dh, dw)
        return (({loss}) * share).sum()

    @staticmethod
    def backward(ctx, grad_output):
        dh, dw = ctx.saved_tensors
        return grad_output * dh, grad_output * dw, None, None
'''
PLAIN = dict(logits="hidden @ weight[lo:lo + chunk].T", slice_logits="hidden @ w.T")
ONE_HOT = "            probs[rows, torch.where(mine, safe - lo, 0)] -= mine.to(probs.dtype)"
ANSWERS = {
    "ce": TEMPLATE.format(**PLAIN, grad=ONE_HOT, loss="norm - right"),
    "smoothed": TEMPLATE.format(**PLAIN, grad='''            probs = probs - 0.1 / classes
            probs[rows, torch.where(mine, safe - lo, 0)] -= 0.9 * mine.to(probs.dtype)''',
                                loss="norm - 0.9 * right - 0.1 * summed / classes"),
    "zloss": TEMPLATE.format(**PLAIN, grad='''            probs = probs * (1 + 2e-4 * norm[:, None])
''' + ONE_HOT, loss="norm - right + 1e-4 * norm ** 2"),
    "softcap": TEMPLATE.format(logits="10 * torch.tanh(hidden @ weight[lo:lo + chunk].T / 10)",
                               slice_logits="10 * torch.tanh(hidden @ w.T / 10)",
                               grad=ONE_HOT + '''
            probs = probs * (1 - (scores / 10) ** 2)''', loss="norm - right"),
}
