"""Lesson 11's capstone: the course's reference Functions, a tiny language model built from them, its text.

* ``functions``: Embedding, RMSNorm, SwiGLU, Softmax and FusedLinearCrossEntropy, each paired
  with its PyTorch composite in ``OPS``;
* ``fused_ce``: the fused linear + cross-entropy as a drop-in, in Liger-Kernel's design
  (gradients in forward) and Cut Cross-Entropy's (logits made again in backward);
* ``fused_chunks``: its chunk loop's parts (the chunk size, the inputs' checks, one chunk's loss
  and gradients);
* ``model``: ``TinyLM`` (switchable between the two), ``train`` and sampling;
* ``corpus``: the shipped training text (the course's own prose) and a character tokenizer;
* ``plots``: the lesson's line plots.
"""
