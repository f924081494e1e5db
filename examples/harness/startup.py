"""A quiet start: Keras (and TensorFlow under it) imported without TensorFlow's C++ start-up
lines, which it prints to the process's standard error before Python can filter them.

Import this module before anything that imports Keras::

    from examples.harness.startup import keras
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_stderr, _devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
os.dup2(_devnull, 2)
try:
    import keras  # noqa: F401  (the point of this module)
finally:
    os.dup2(_stderr, 2)
    os.close(_stderr)
    os.close(_devnull)
