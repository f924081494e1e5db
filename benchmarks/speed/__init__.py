"""Speed benchmarks: each layer against its own arithmetic and against its peers, and the
steps of the paper models, timed on this machine (``python -m benchmarks.speed.<name>``)."""
