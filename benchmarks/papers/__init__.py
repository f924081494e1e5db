"""The paper experiments, each trained by its example: ``python -m benchmarks.papers.<name>``."""

import numpy as np


def mean_and_spread(values, digits=3):
    """``"mean ± std"`` of ``values`` over the seeds, ``digits`` after the point (the value
    alone for one seed; `None` values left out; empty without any).

    >>> mean_and_spread([0.5, 0.7]), mean_and_spread([0.25], 2), mean_and_spread([None])
    ('0.600 ± 0.100', '0.25', '')
    """
    values = np.asarray([v for v in values if v is not None], dtype=np.float64)
    if not len(values):
        return ""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}"
