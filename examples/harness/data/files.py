"""Reading corpus files: decompression, text checks and errors that name the file.

Every reader of the examples goes through these helpers, so that a corrupt or empty
file gives a ``ValueError`` that names the file and says what is wrong with it, instead of a
bare ``BadGzipFile``, ``UnicodeDecodeError`` or an empty corpus. A file whose name ends in
``.gz`` is decompressed on the fly.
"""

import contextlib
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


@contextlib.contextmanager
def gzip_errors(path):
    """Turns the errors of reading a corrupt gzip file into a ``ValueError`` naming it.

    Args:
        path: the file, named in the error.

    Raises:
        ValueError: the block read data that is not gzip, or is truncated.
    """
    try:
        yield
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise ValueError(
            f"{path} is not a valid gzip file (its name ends in .gz): {error}."
        ) from error


def open_text(path):
    """Opens a UTF-8 text file for reading, decompressing it when its name ends in ``.gz``.

    Bytes that are not UTF-8 become U+FFFD instead of stopping the read. Wrap the reading in
    `gzip_errors` to name the file when its gzip data is corrupt.

    Args:
        path: str or path-like, the file.

    Returns:
        A text file object, to be closed by the caller (e.g. in a ``with`` block).

    Raises:
        OSError: the file cannot be opened (e.g. ``FileNotFoundError``).
    """
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def read_bytes(path):
    """The bytes of a file, decompressed when its name ends in ``.gz``.

    Args:
        path: str or path-like, the file.

    Returns:
        bytes.

    Raises:
        ValueError: a ``.gz`` file that is not gzip data, or is truncated.
        OSError: the file cannot be read (e.g. ``FileNotFoundError``).
    """
    if str(path).endswith(".gz"):
        with gzip_errors(path), gzip.open(path, "rb") as handle:
            return handle.read()
    with open(path, "rb") as handle:
        return handle.read()


def decode_text(data, path):
    """``data`` decoded as UTF-8 text, undecodable bytes replaced with U+FFFD.

    A few stray bytes in real text are accepted; bytes that are not text are refused.

    Args:
        data: bytes, the file's content.
        path: the file, named in errors.

    Returns:
        str, the text, with U+FFFD for each undecodable byte.

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
        data: bytes, the file's content.
        path: the file, named in errors.

    Returns:
        str, the text.

    Raises:
        ValueError: a byte sequence is not UTF-8 (the message names the file and the line),
            or the bytes contain NUL bytes.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise _not_utf8(path, line, data, error) from error
    if "\x00" in text:
        raise ValueError(f"{path} is not a text file: it contains NUL bytes.")
    return text


def decode_utf8_lines(raw_lines, path):
    """Decodes binary lines strictly as UTF-8, one at a time (for files too large to hold).

    Unlike `decode_utf8`, NUL bytes are let through (to the parser of the lines).

    Args:
        raw_lines: iterable of bytes, the lines (e.g. a file opened in binary mode).
        path: the file, named in errors.

    Yields:
        ``(line number, text)``, numbered from 1, the line end removed.

    Raises:
        ValueError: a line is not UTF-8 (the message names the file and the line).
    """
    for number, raw in enumerate(raw_lines, 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise _not_utf8(path, number, raw, error) from error
        yield number, text.rstrip("\r\n")


def _not_utf8(path, line, data, error):
    return ValueError(
        f"{path}, line {line}: not UTF-8 text (byte {data[error.start]:#04x}: {error.reason})."
    )


def read_text(path):
    """The text of a file (``.gz`` decompressed), checked by `decode_text`.

    Args:
        path: str or path-like, the file.

    Returns:
        str, the whole text.

    Raises:
        ValueError: the file is not text, or a ``.gz`` that is not gzip data.
        OSError: the file cannot be read.
    """
    return decode_text(read_bytes(path), path)


def check_not_blank(text, path, what="text"):
    """Raises a ``ValueError`` naming ``path`` if ``text`` is empty or only whitespace.

    Args:
        text: str, the file's text.
        path: the file, named in the error.
        what: str, what the file should hold, for the message (e.g. ``"sentences"``).
            Defaults to ``"text"``.

    Returns:
        ``text``, unchanged.

    Raises:
        ValueError: ``text`` is empty or blank.
    """
    if not text.strip():
        state = "empty" if not text else "blank (only whitespace)"
        raise ValueError(f"{path} is {state}: it holds no {what}.")
    return text
