"""Packaging for tf-memlayers (import name ``tf_memlayers``)."""

import pathlib

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
VERSION = {}
exec((HERE / "tf_memlayers" / "version.py").read_text(), VERSION)

setup(
    name="tf-memlayers",
    version=VERSION["__version__"],
    description=(
        "Memory layers for recurrent networks in TensorFlow 2 / Keras 3: "
        "sliding-window key/value/predict attention, N-gram RNN, heap cache "
        "attention and holographic associative-memory RNNs."
    ),
    long_description=(HERE / "README.rst").read_text(encoding="utf-8"),
    long_description_content_type="text/x-rst",
    license="Apache-2.0",
    python_requires=">=3.11",
    packages=find_packages(include=["tf_memlayers", "tf_memlayers.*"]),
    install_requires=[
        "tensorflow>=2.16",
        "keras>=3.15",
        "tensorboard",
        "numpy",
    ],
    extras_require={
        "datasets": ["tensorflow-datasets", "importlib_resources"],
        "test": ["pytest"],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.11",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Intended Audience :: Science/Research",
    ],
)
