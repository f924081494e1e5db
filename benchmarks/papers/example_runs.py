"""What the paper benchmarks share: running an example script for one row, and the ``mean ±
std`` of a row's seeds."""

import json
import subprocess
import sys

import numpy as np


def run_example(script, arguments, workdir, root):
    """Runs ``script`` (an example's path) with ``arguments`` in its own process, keeping the
    run in ``workdir``; exits with the end of its error output when it fails.

    Returns:
        ``(metrics, settings)``: the run's ``metrics.json`` and ``settings.json``.
    """
    command = [sys.executable, str(script), *arguments, "--workdir", str(workdir), "--verbose", "0"]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return tuple(
        json.loads((workdir / name).read_text()) for name in ("metrics.json", "settings.json")
    )


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
