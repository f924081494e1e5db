"""`is_chief`: whether this process writes a run's files."""

from tf_memlayers._tensorflow import require_tensorflow

tf = require_tensorflow("tf_memlayers.training")


def _is_multi_worker(strategy):
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def is_chief(strategy=None):
    """Whether this process writes the run's files (checkpoints, logs, metrics).

    Every process of a `tf.distribute.MultiWorkerMirroredStrategy` runs the same script, and
    one of them, the chief, must write what the run leaves; `tf.distribute` knows which
    (``strategy.extended.should_checkpoint``) but Keras has no public name for it.

    Args:
        strategy: Optional `tf.distribute.Strategy`. Default: `None` (the current one).

    Returns:
        `True`, except on the workers of a multi-worker strategy other than its chief (the
        ``chief`` task, else ``worker`` 0).

    Example:

    >>> from tf_memlayers.training import is_chief
    >>> is_chief()
    True
    """
    strategy = strategy or tf.distribute.get_strategy()
    if not _is_multi_worker(strategy):
        return True
    return bool(strategy.extended.should_checkpoint)
