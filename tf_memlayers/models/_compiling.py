"""Compiling the package's models: `keras.Model.compile`, then the optimizer built."""


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
