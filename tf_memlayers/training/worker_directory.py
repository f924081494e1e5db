"""`worker_directory`: where each process of a multi-worker run writes."""

import contextlib
import os
import shutil
import tempfile

from tf_memlayers._tensorflow import require_tensorflow
from tf_memlayers._validation import check_path
from tf_memlayers.training.is_chief import _is_multi_worker, check_strategy, is_chief
from tf_memlayers.training.run_backup import _copy_backups

tf = require_tensorflow("tf_memlayers.training")


@contextlib.contextmanager
def worker_directory(workdir, strategy=None):
    """The run directory this process writes to: ``workdir`` on the chief, else a temporary
    copy.

    Under a `tf.distribute.MultiWorkerMirroredStrategy` every worker runs the same callbacks
    (saving a model reads every variable, a collective operation that all must join), but only
    the chief may write the run's files. A worker that is not the chief gets a fresh temporary
    directory holding a copy of the `RunBackup` backups under ``workdir`` (record, settings,
    variables), so that it resumes where the chief does; the directory is removed when the
    block ends. ``workdir`` must then be on storage every worker reads.

    Args:
        workdir: String or path, the run directory.
        strategy: Optional `tf.distribute.Strategy`. Default: `None` (the current one).

    Yields:
        The directory, a string.

    Raises:
        TypeError: If ``workdir`` is not a string or path, or ``strategy`` not a
            `tf.distribute.Strategy`.

    Example:

    >>> import os, tempfile
    >>> from tf_memlayers.training import worker_directory
    >>> run = os.path.join(tempfile.mkdtemp(), "run")
    >>> with worker_directory(run) as directory:  # one process: the chief
    ...     directory == run
    True
    """
    workdir = check_path("workdir", workdir, "worker_directory")
    strategy = check_strategy(strategy, "worker_directory") or tf.distribute.get_strategy()
    if is_chief(strategy):
        yield workdir
        return
    resolver = strategy.cluster_resolver if _is_multi_worker(strategy) else None
    task = f"{resolver.task_type}-{resolver.task_id}" if resolver else "worker"
    target = tempfile.mkdtemp(prefix=f"tf_memlayers-{task}-")
    try:
        if os.path.isdir(workdir):
            _copy_backups(workdir, target)
        yield target
    finally:
        shutil.rmtree(target, ignore_errors=True)
