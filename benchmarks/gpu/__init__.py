"""The GPU run (``run.sh``): the layers' tests (`benchmarks.gpu.layer_tests`) and the speed
tables (``python -m benchmarks.speed --device gpu``) on Keras's JAX backend."""
