"""JSON records of training runs, written so that a process killed at any moment leaves
either the old file or the new one."""

import json
import os


def plain_json(value):
    """``value`` with JSON types only (paths and other objects as strings)."""
    return json.loads(json.dumps(value, default=str))


def read_json(path, default=None):
    """The JSON value stored at ``path``, or ``default`` if there is no such file."""
    if not os.path.exists(path):
        return default
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def replace_file(path, write, mode="w"):
    """Writes ``path`` through ``write(handle)`` all at once: a process killed at any moment
    leaves either the old file or the new one, never a partial one."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    temporary = f"{path}.partial"
    with open(temporary, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def write_json(path, value):
    replace_file(path, lambda handle: json.dump(value, handle, indent=1, sort_keys=True))
