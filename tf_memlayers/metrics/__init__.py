"""Metrics."""

from tf_memlayers.metrics.perplexity import Perplexity

__all__ = ["Perplexity"]
