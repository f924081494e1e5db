"""Holographic associative memory (Weissenborn 2016): the AM-GRU and the Dual AM-GRU as cells
and layers, the generic memory cell around any Keras cell, and the loader of the original
code's weights."""
