"""The machine's matrix-product peak, measured where the speed tables are measured.

A speed table that reports a step's time against peers also reports how far that step is from
the physical limit: its arithmetic (the multiply-adds of its matrix products, counted as two
floating-point operations each) over its time, as a share of the rate at which this machine
multiplies large float32 matrices under XLA. `peak_gflops` measures that rate in the calling
process, so the share is taken under the same load as the step.
"""

import numpy as np

from benchmarks import timing


def product_flops(rows, inner, columns):
    """Floating-point operations of one ``[rows, inner] @ [inner, columns]`` product."""
    return 2 * rows * inner * columns


def training_flops(products):
    """Operations of the forward and backward passes of ``products``, a list of ``(rows,
    inner, columns)``: each product's backward pass is two products of its size (the
    gradients of both factors), so a training step costs three times the forward product."""
    return 3 * sum(product_flops(*shape) for shape in products)


def peak_gflops(size=1024, rounds=9):
    """GFLOP/s of one XLA-compiled float32 ``[size, size] @ [size, size]`` product.

    Args:
        size: Positive integer, the side of the square matrices. Default: 1024.
        rounds: Positive integer, the timed products (after one compiling call); their median
            time is used. Default: 9.

    Returns:
        Float, the measured rate in GFLOP/s.
    """
    import tensorflow as tf

    rng = np.random.default_rng(0)
    a = tf.constant(rng.normal(size=(size, size)).astype("float32"))
    b = tf.constant(rng.normal(size=(size, size)).astype("float32"))
    product = tf.function(lambda: tf.matmul(a, b), jit_compile=True)
    timing.wait_for(product())
    ms = timing.median_ms(product, rounds)
    return product_flops(size, size, size) / (ms * 1e6)
