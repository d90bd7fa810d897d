"""Lesson 11's capstone: the course's reference Functions, a tiny language model built from them, its text.

* ``functions``: Embedding, RMSNorm, SwiGLU, Softmax and FusedLinearCrossEntropy, each paired
  with its PyTorch composite in ``OPS``;
* ``model``: ``TinyLM`` (switchable between the two), ``train`` and sampling;
* ``corpus``: the shipped training text (the course's own prose) and a character tokenizer;
* ``plots``: the lesson's line plots.
"""
