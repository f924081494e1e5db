"""Reading corpus files: decompression, text checks and errors that name the file.

Every reader of `tf_memlayers.data` goes through these helpers, so that a corrupt or empty
file gives a ``ValueError`` that names the file and says what is wrong with it, instead of a
bare ``BadGzipFile``, ``UnicodeDecodeError`` or an empty corpus.
"""

import gzip
import re
import zlib

# Characters that do not occur in text: undecodable bytes (read as U+FFFD) and the control
# characters other than tab, line feed, vertical tab, form feed and carriage return.
_NOT_TEXT = re.compile("[\x00-\x08\x0e-\x1f\x7f\ufffd]")
# A file with more of these than this fraction of its characters is not text. Real corpora
# are far below it (the PWKP files: 157 undecodable bytes in 2.8 million characters); bytes
# that are not text (a binary file, random bytes, a compressed file without its suffix) are
# far above it (about half of random bytes).
MAX_NOT_TEXT_FRACTION = 0.1


def read_bytes(path):
    """The bytes of ``path``, decompressed when its name ends in ``.gz``.

    Raises:
        ValueError: a ``.gz`` file that is not gzip data, or is truncated.
        OSError: the file cannot be read (e.g. ``FileNotFoundError``).
    """
    if str(path).endswith(".gz"):
        try:
            with gzip.open(path, "rb") as handle:
                return handle.read()
        except (gzip.BadGzipFile, EOFError, zlib.error) as error:
            raise ValueError(
                f"{path} is not a valid gzip file (its name ends in .gz): {error}."
            ) from error
    with open(path, "rb") as handle:
        return handle.read()


def decode_text(data, path):
    """``data`` decoded as UTF-8 text, undecodable bytes replaced with U+FFFD.

    A few stray bytes in real text are accepted; bytes that are not text are refused.

    Args:
        data: the file's bytes.
        path: the file, named in errors.

    Raises:
        ValueError: the bytes contain NUL bytes, or more than `MAX_NOT_TEXT_FRACTION` of the
            characters are undecodable bytes or control characters.
    """
    if b"\x00" in data:
        raise ValueError(f"{path} is not a text file: it contains NUL bytes.")
    text = data.decode("utf-8", errors="replace")
    bad = len(_NOT_TEXT.findall(text))
    if bad > MAX_NOT_TEXT_FRACTION * len(text):
        raise ValueError(
            f"{path} is not UTF-8 text: {bad:,} of its {len(text):,} characters are "
            "undecodable bytes or control characters."
        )
    return text


def decode_utf8(data, path):
    """``data`` decoded as UTF-8, strictly: an undecodable byte is an error.

    Args:
        data: the file's bytes.
        path: the file, named in errors.

    Raises:
        ValueError: a byte sequence is not UTF-8 (the message names the file and the line),
            or the bytes contain NUL bytes.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(
            f"{path}, line {line}: not UTF-8 text (byte {data[error.start]:#04x}: "
            f"{error.reason})."
        ) from error
    if "\x00" in text:
        raise ValueError(f"{path} is not a text file: it contains NUL bytes.")
    return text


def read_text(path):
    """The text of ``path`` (``.gz`` decompressed), checked by `decode_text`."""
    return decode_text(read_bytes(path), path)


def check_not_blank(text, path, what="text"):
    """Raises a ``ValueError`` naming ``path`` if ``text`` is empty or only whitespace.

    Args:
        text: the file's text.
        path: the file.
        what: what the file should hold, for the message (e.g. ``"sentences"``).
    """
    if not text.strip():
        state = "empty" if not text else "blank (only whitespace)"
        raise ValueError(f"{path} is {state}: it holds no {what}.")
    return text
