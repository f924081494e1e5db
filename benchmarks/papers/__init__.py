"""The paper experiments: each paper's comparison rebuilt with the package's models, trained
and scored on the real corpora (``python -m benchmarks.papers.<name>``)."""
