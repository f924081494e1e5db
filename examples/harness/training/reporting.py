"""The final metrics report of an example run."""

import json
import math
import os

import numpy as np


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.integer):
        return int(value)
    if hasattr(value, "numpy"):
        return _plain(value.numpy().tolist())
    return value


def write_metrics(metrics, path=None):
    """Prints ``metrics`` as one JSON line (prefixed ``METRICS``) and optionally writes a file.

    The file is replaced in one step: a run killed while writing it leaves the previous file
    (or none), never a partial one.

    Returns the JSON text.
    """
    text = json.dumps(_plain(metrics), sort_keys=True)
    print("METRICS " + text, flush=True)
    if path:
        partial = f"{path}.partial"
        with open(partial, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        os.replace(partial, path)
    return text
