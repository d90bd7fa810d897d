"""Exercise-specific material a lesson module builds from, one module per exercise, named by its grade id.

``families/<grade_id>.py`` holds what only that exercise uses beside its lesson module (``lessonNN[_topic].py``):
a family of per-student variants (``killhead``, ``clip_grad``, ``embedding``, ``linear_function``,
``linear_module``, ``linear_nd``, ``log1mexp``), or what is drawn afresh for each run (``gradient_test``'s hidden
Functions). The lesson module imports it; the registry never reads this package (it collects ``lessonNN*`` only).
"""
