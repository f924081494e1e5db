"""A quiet start: TensorFlow prints start-up lines to the process's standard error when it is
imported, which ``TF_CPP_MIN_LOG_LEVEL`` does not silence and which would break the one line of a
command-line error. `main` imports this module before anything that imports TensorFlow."""

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
