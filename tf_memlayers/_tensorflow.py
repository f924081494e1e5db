"""TensorFlow, for the parts of the package that need it.

The layers, cells, model builders and the step model run on any Keras backend and import no
TensorFlow. The parts that exist only on TensorFlow (the fused AM-GRU loop, `tf.data`
pipelines, `tf.distribute` training, TensorBoard summaries) get the module from
`require_tensorflow` where they use it, so that on a machine without TensorFlow the package
imports and the error names the part that needed it.
"""


def require_tensorflow(what):
    """The ``tensorflow`` module.

    Args:
        what: The part of the package that needs TensorFlow, as the error names it (for
            example ``"the fused AM-GRU loop"``).

    Raises:
        ModuleNotFoundError: if TensorFlow is not installed; the message names ``what`` and
            how to install TensorFlow or avoid the part.
    """
    try:
        import tensorflow
    except ModuleNotFoundError as error:
        if error.name != "tensorflow":
            raise
        raise ModuleNotFoundError(
            f"{what} needs TensorFlow, which is not installed. Install it "
            "(`pip install tensorflow`), or, on another Keras backend, use the parts of "
            "tf_memlayers that need no TensorFlow: its layers, cells, model builders, step "
            "model and `generate`, and the callbacks StateResetCallback and "
            "CacheEpisodesCallback.",
            name="tensorflow",
        ) from error
    return tensorflow
