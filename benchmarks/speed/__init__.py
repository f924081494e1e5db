"""The speed tables' harness: ``python -m benchmarks.speed``."""
