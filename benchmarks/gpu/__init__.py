"""The prepared GPU run: layer suites and speed tables on Keras\x27s JAX backend."""
