"""`evaluate`: `keras.Model.evaluate` under any `tf.distribute` strategy."""

from tf_memlayers._validation import check_callbacks, errors_named
from tf_memlayers.training._custom_loop import evaluate_locally
from tf_memlayers.training.train import _check_model_and_data, fit_works_under


@errors_named("evaluate")
def evaluate(model, x, callbacks=(), verbose=0, strategy=None):
    """``model.evaluate(x, return_dict=True)``, under any `tf.distribute` strategy.

    Where Keras's ``fit`` fails (`tf.distribute.MultiWorkerMirroredStrategy`, see `train`), so
    does its ``evaluate``; there every worker computes the same numbers on the whole of ``x``
    with the compiled loss and fresh copies of the compiled metrics, on this process alone.

    Args:
        model: A compiled `keras.Model`.
        x: A `tf.data.Dataset` of ``(inputs, targets)`` or ``(inputs, targets,
            sample_weights)`` batches.
        callbacks: Sequence of `keras.callbacks.Callback` (or `None`), called as ``evaluate``
            calls them. Default: `()`.
        verbose: `0`, `1` or `2`, as for `keras.Model.evaluate`. Default: `0`.
        strategy: Optional `tf.distribute.Strategy`. Default: `None` (the model's).

    Returns:
        Dict of the loss and the compiled metrics by name.

    Raises:
        TypeError: If ``model`` is not a `keras.Model`, ``x`` not a `tf.data.Dataset` or
            ``strategy`` not a `tf.distribute.Strategy`.
        ValueError: If ``model`` is not compiled, or ``verbose`` not 0, 1 or 2.
        NotImplementedError: Under the custom loop, as for `train`, and for a model with its
            own ``test_step``.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> import tensorflow as tf
    >>> from tf_memlayers.training import evaluate
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, use_bias=False)])
    >>> model.compile("sgd", "mse")
    >>> model.set_weights([np.zeros((2, 1))])
    >>> data = tf.data.Dataset.from_tensor_slices((np.ones((4, 2)), np.ones((4, 1)))).batch(2)
    >>> evaluate(model, data)
    {'loss': 1.0}
    """
    _check_model_and_data(model, x, strategy, verbose)
    callbacks = check_callbacks(callbacks)
    strategy = strategy or model.distribute_strategy
    if fit_works_under(strategy):
        return model.evaluate(x, callbacks=callbacks, verbose=verbose, return_dict=True)
    return evaluate_locally(model, x, callbacks=callbacks, verbose=verbose)
