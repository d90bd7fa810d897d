"""Benchmarks: ``./course bench`` (or ``python -m benchmarks``) runs them all and writes results.md."""
