"""The benchmarks' one training step (`Step`: an SGD step of a model's ``stateless_call``,
``jax.jit`` on JAX, the weights donated, ``tf.function(jit_compile=True)`` on TensorFlow,
``torch.autograd`` on torch, compiled by ``torch.compile`` with ``jit``), and
its arithmetic against the machine's matrix-product rate (`peak_gflops`, `floor_columns`)."""

import time

import numpy as np

from benchmarks import timing

LEARNING_RATE = 1e-3
#: A `Step`'s ``jit`` where it is not given (``python -m benchmarks.speed --no-jit``: False).
JIT = True


def mean_square(outputs, targets):  # a layer's step: ``targets`` unused
    from keras import ops

    return ops.mean(ops.square(ops.cast(outputs, "float32")))


def token_crossentropy(outputs, labels, from_logits=True):
    from keras import ops

    outputs = ops.cast(outputs, "float32")
    return ops.mean(ops.sparse_categorical_crossentropy(labels, outputs, from_logits=from_logits))


class Step:
    """One compiled SGD step (``w - 1e-3 g``) of a built `keras.Model`; `run` runs one. On JAX
    XLA's buffers (``buffers_mib``) are known before it runs: over ``limit_mib``, not
    ``runnable``. ``jit``: whether TensorFlow uses XLA, torch ``torch.compile`` (default: `JIT`)."""

    def __init__(self, model, inputs, targets=None, loss=mean_square, jit=None, limit_mib=None):
        import keras

        started, self.model, convert = time.perf_counter(), model, keras.ops.convert_to_tensor
        jit = JIT if jit is None else jit
        self.data = keras.tree.map_structure(convert, (inputs, 0 if targets is None else targets))
        # Copies: JAX updates the step's weights in place, the model's stay as they were.
        variables = (model.trainable_variables, model.non_trainable_variables)
        self.state = [[keras.ops.copy(v.value) for v in part] for part in variables]

        def loss_of(trainable, others, inputs, targets):
            outputs, others = model.stateless_call(trainable, others, inputs, training=True)
            return loss(outputs, targets), others

        def update(trainable, grads):
            return [
                w if g is None else w - LEARNING_RATE * convert(g, w.dtype)
                for w, g in zip(trainable, grads)
            ]

        self.buffers_mib = None
        if keras.backend.backend() == "jax":
            import jax

            def step(trainable, *rest):  # rest: the non-trainable weights, inputs, targets
                (value, others), grads = jax.value_and_grad(loss_of, has_aux=True)(trainable, *rest)
                return value, update(trainable, grads), others

            lowered = jax.jit(step, donate_argnums=(0, 1)).lower(*self.state, *self.data)
            self.compiled = lowered.compile()
            analysis = self.compiled.memory_analysis()
            self.buffers_mib = analysis and analysis.temp_size_in_bytes / 2**20
        elif keras.backend.backend() == "torch":
            import torch

            def step(trainable, non_trainable, inputs, targets):
                trainable = [w.detach().requires_grad_() for w in trainable]
                value, non_trainable = loss_of(trainable, non_trainable, inputs, targets)
                grads = torch.autograd.grad(value, trainable, allow_unused=True)
                with torch.no_grad():
                    return value.detach(), update(trainable, grads), non_trainable

            self.compiled = torch.compile(step) if jit else step
        else:
            import tensorflow as tf

            def step(trainable, non_trainable, inputs, targets):
                with tf.GradientTape() as tape:
                    tape.watch(trainable)
                    value, non_trainable = loss_of(trainable, non_trainable, inputs, targets)
                grads = tape.gradient(value, trainable)  # dense: an embedding's are slices
                grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
                return value, update(trainable, grads), non_trainable

            self.compiled = tf.function(step, jit_compile=jit)
        self.runnable = limit_mib is None or (self.buffers_mib or 0) <= limit_mib
        if self.runnable and keras.backend.backend() != "jax":
            timing.wait_for(self.compiled(*self.state, *self.data))  # traces and compiles
        self.compile_s = time.perf_counter() - started

    def run(self):
        loss, *self.state = self.compiled(*self.state, *self.data)
        return loss


def weight_training_flops(model, rows):
    """Operations of one step's products with ``model``'s 2-D weights (not the embedding): 6 ×
    each one's parameters × the rows it multiplies, ``rows(weight)`` or ``rows``."""
    count = rows if callable(rows) else (lambda weight: rows)
    weights = [w for w in model.trainable_weights if len(w.shape) == 2]
    kept = [w for w in weights if "embedding" not in w.path and not w.path.endswith("bias")]
    return 6 * sum(int(np.prod(w.shape)) * int(count(w)) for w in kept)


def training_flops(products):
    """Operations of the forward and backward passes of ``(rows, inner, columns)`` products."""
    return 3 * sum(2 * rows * inner * columns for rows, inner, columns in products)


def floor_columns(flops, milliseconds, peak, prefix=""):
    """``{"gflop_per_step", "share_of_peak"}`` of ``flops`` in ``milliseconds`` at ``peak``."""
    share = flops / (milliseconds * 1e6) / peak
    return {f"{prefix}gflop_per_step": flops / 1e9, f"{prefix}share_of_peak": share}


def peak_gflops(sizes=(512, 1024, 2048), rounds=7, dtype="float32"):
    """The best GFLOP/s of square products of ``dtype`` of the ``sizes``, medians of ``rounds``
    (on JAX at its default precision: TF32 on an NVIDIA GPU, as the layers')."""
    import keras

    rng = np.random.default_rng(0)
    rates = []
    for size in sizes:
        a, b = (rng.normal(size=(size, size)).astype("float32") for _ in range(2))
        if keras.backend.backend() == "jax":
            import jax
            import jax.numpy as jnp

            a, b, product = jnp.asarray(a, dtype), jnp.asarray(b, dtype), jax.jit(jnp.matmul)
        elif keras.backend.backend() == "torch":
            a, b = (keras.ops.convert_to_tensor(x, dtype) for x in (a, b))
            product = keras.ops.matmul
        else:
            import tensorflow as tf

            a, b = tf.cast(a, dtype), tf.cast(b, dtype)
            product = tf.function(tf.matmul, jit_compile=True)
        timing.wait_for(product(a, b))
        milliseconds = timing.median_ms(lambda a=a, b=b, p=product: p(a, b), rounds)
        rates.append(2 * size**3 / (milliseconds * 1e6))
    return max(rates)
