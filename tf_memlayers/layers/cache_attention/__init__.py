"""Attention over the steps of one example and over a heap-ordered cache of past examples
(Gaffney)."""
