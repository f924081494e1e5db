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


def weight_matrices(model):
    """``model``'s weight matrices: its two-dimensional trainable weights outside the
    embedding, biases left out (even two-dimensional ones: ``keras.layers.GRU``'s is
    ``[2, 3n]``)."""
    return [
        w
        for w in model.trainable_weights
        if len(w.shape) == 2 and "embedding" not in w.path and not w.path.endswith("bias")
    ]


def weight_training_flops(model, rows=lambda weight: 1):
    """Training operations of one step's products with ``model``'s weight matrices: 6 x each
    matrix's parameters (forward 2, backward 4 per parameter) x the rows it multiplies in
    the step, ``rows(weight)`` (for a layer over sequences, the batch times the time steps;
    for a layer on one vector per example, the batch).

    Products without weights (an attention's window products, a holographic memory's
    permutations, reads and writes) are left out, so a share of the peak built on it is
    understated for those.

    Args:
        model: A built `keras.Model` or layer.
        rows: Callable, ``weight -> int``. Default: 1 for every matrix (per token).

    Returns:
        Integer, the operations.
    """
    return 6 * sum(int(np.prod(w.shape)) * int(rows(w)) for w in weight_matrices(model))


def weight_training_flops_per_token(model):
    """Training operations per token of the products with ``model``'s weight matrices
    (`weight_training_flops` with every matrix multiplying each token's vector once): nearly
    all of a language model's arithmetic.

    Args:
        model: A built `keras.Model` or layer.

    Returns:
        Integer, the operations per token.
    """
    return weight_training_flops(model)


def floor_columns(flops, milliseconds, peak):
    """``{"gflop_per_step", "share_of_peak"}`` of a step of ``flops`` operations timed at
    ``milliseconds``, against the matrix-product rate ``peak`` (GFLOP/s, `peak_gflops`)."""
    return {"gflop_per_step": flops / 1e9, "share_of_peak": flops / (milliseconds * 1e6) / peak}


def peak_gflops(sizes=(512, 1024, 2048), rounds=7, dtype="float32"):
    """The best GFLOP/s of XLA-compiled square matrix products, on Keras's backend.

    On TensorFlow the products run under ``tf.function(jit_compile=True)``, on JAX under
    `jax.jit` with JAX's default matrix-product precision (on an NVIDIA GPU a float32 product
    then runs on the tensor cores in TF32, as the layers' own products do).

    Args:
        sizes: Tuple of positive integers, the sides of the square matrices tried; the
            fastest rate counts. Default: ``(512, 1024, 2048)``.
        rounds: Positive integer, the timed products of each size (after one compiling
            call); their median time is used. Default: 7.
        dtype: String, the matrices' dtype (``"float32"``, ``"bfloat16"``). Default:
            ``"float32"``.

    Returns:
        Float, the measured rate in GFLOP/s.
    """
    import keras

    rng = np.random.default_rng(0)
    rates = []
    for size in sizes:
        a, b = (rng.normal(size=(size, size)).astype("float32") for _ in range(2))
        if keras.backend.backend() == "jax":
            import jax
            import jax.numpy as jnp

            a, b = jnp.asarray(a, dtype), jnp.asarray(b, dtype)
            product = jax.jit(jnp.matmul)
            call = lambda a=a, b=b, product=product: product(a, b)  # noqa: E731
        else:
            import tensorflow as tf

            a, b = tf.cast(a, dtype), tf.cast(b, dtype)
            call = tf.function(lambda a=a, b=b: tf.matmul(a, b), jit_compile=True)
        timing.wait_for(call())
        rates.append(product_flops(size, size, size) / (timing.median_ms(call, rounds) * 1e6))
    return max(rates)
