"""Compiling the package's models: `keras.Model.compile`, then the optimizer built."""

import keras

from tf_memlayers._validation import check_bool_or_auto


def backend_jit_compile(jit_compile, xla_on_tensorflow):
    """``jit_compile`` checked (a bool or ``"auto"``), ``None`` resolved for the backend: True
    on JAX, where Keras otherwise runs the step operation by operation; ``xla_on_tensorflow``
    on TensorFlow (False: a TensorFlow graph without XLA); False on torch, where True is
    `torch.compile`, which takes minutes a model on a CPU (Keras's default there: eager).
    """
    if jit_compile is None:
        backend = keras.backend.backend()
        jit_compile = backend == "jax" or (backend == "tensorflow" and xla_on_tensorflow)
    return check_bool_or_auto("jit_compile", jit_compile)


def compile_and_build_optimizer(model, *args, **kwargs):
    """``model.compile(*args, **kwargs)``, then builds the compiled optimizer on the model's
    trainable variables.

    Outside a `tf.distribute` strategy's scope, Keras on TensorFlow makes the optimizer's
    variables inside the first trace of the train step, and TensorFlow then traces the whole
    step a second time; with them made here, `fit` and `train_on_batch` trace it once. Inside
    a strategy's scope (where such a model is compiled) they are made under that scope, as
    Keras would make them. Keras builds an optimizer once, so a later `fit` keeps these. A model
    that is not built yet (a subclassed model before its first call) has no variables to build
    them for: Keras builds its optimizer at the first step.

    Returns:
        ``model``.
    """
    model.compile(*args, **kwargs)
    if model.built:
        model.optimizer.build(model.trainable_variables)
    return model
