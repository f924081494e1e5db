"""`is_chief`: whether this process writes a run's files."""

from tf_memlayers._tensorflow import require_tensorflow
from tf_memlayers._validation import errors_named

tf = require_tensorflow("tf_memlayers.training")


def check_strategy(strategy, owner=None):
    """Returns ``strategy`` if it is `None` or a `tf.distribute.Strategy`."""
    if strategy is not None and not isinstance(strategy, tf.distribute.Strategy):
        prefix = f"{owner}: " if owner else ""
        raise TypeError(
            f"{prefix}`strategy` must be a tf.distribute.Strategy or None (`make_strategy` "
            f"makes one from a name), got {strategy!r}."
        )
    return strategy


def _is_multi_worker(strategy):
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


@errors_named("is_chief")
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

    Raises:
        TypeError: If ``strategy`` is not a `tf.distribute.Strategy`.

    Example:

    >>> from tf_memlayers.training import is_chief
    >>> is_chief()
    True
    """
    strategy = check_strategy(strategy) or tf.distribute.get_strategy()
    if not _is_multi_worker(strategy):
        return True
    return bool(strategy.extended.should_checkpoint)
