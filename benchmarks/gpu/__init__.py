"""The GPU run: ``benchmarks/gpu/run.sh``."""
