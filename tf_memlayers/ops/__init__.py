"""Primitives the memory layers are built from."""
