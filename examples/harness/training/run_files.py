"""JSON records of training runs, written so that a process killed at any moment leaves
either the old file or the new one."""

import json
import os


def plain_json(value):
    """``value`` with JSON types only (paths and other objects as strings).

    Args:
        value: Any value made of dicts, lists, strings, numbers, booleans and `None`, and
            other objects (written as their ``str``).

    Returns:
        The value as read back from its JSON text.
    """
    return json.loads(json.dumps(value, default=str))


def read_json(path, default=None):
    """The JSON value stored at ``path``, or ``default`` if there is no such file.

    Args:
        path: String or path, the JSON file.
        default: The value returned when there is no file at ``path``. Default: `None`.

    Returns:
        The parsed JSON value, or ``default``.
    """
    if not os.path.exists(path):
        return default
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def replace_file(path, write, mode="w"):
    """Writes ``path`` through ``write(handle)`` all at once.

    The content goes to ``path + ".partial"``, is flushed to disk and then renamed over
    ``path``: a process killed at any moment leaves either the old file or the new one,
    never a partial one. Missing parent directories are created.

    Args:
        path: String or path, the file to write.
        write: Callable taking the open file handle and writing the content.
        mode: String, the `open` mode: `"w"` (text, UTF-8) or `"wb"` (binary).
            Default: `"w"`.
    """
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    temporary = f"{path}.partial"
    with open(temporary, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def write_json(path, value):
    """Writes ``value`` as JSON to ``path`` all at once (see `replace_file`).

    Args:
        path: String or path, the JSON file.
        value: A JSON-serialisable value (keys are sorted in the file).
    """
    replace_file(path, lambda handle: json.dump(value, handle, indent=1, sort_keys=True))
