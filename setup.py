"""Packaging shim: the metadata lives in pyproject.toml (PEP 621)."""

from setuptools import setup

setup()
