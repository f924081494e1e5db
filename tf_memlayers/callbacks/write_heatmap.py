"""Colour-mapped, token-labelled heatmaps for TensorBoard.

With matplotlib installed the image has the tokens on its axes and a colour bar; without it the
image is the bare colour-mapped matrix (each cell a block of pixels) and the labels go into the
text summary that is always written alongside.
"""

import io
import re

import numpy as np

from tf_memlayers._tensorflow import require_tensorflow
from tf_memlayers._validation import called_as, check_int, owner_of

tf = require_tensorflow("tf_memlayers.callbacks (TensorBoard summaries)")

# Anchor colours of the viridis colour map, interpolated linearly.
_VIRIDIS = np.array(
    [
        [68, 1, 84],
        [72, 40, 120],
        [62, 73, 137],
        [49, 104, 142],
        [38, 130, 142],
        [31, 158, 137],
        [53, 183, 121],
        [110, 206, 88],
        [181, 222, 43],
        [253, 231, 37],
    ],
    dtype=np.float64,
)


# What Markdown reads as formatting, escaped with a backslash: emphasis, code, links and table
# cells anywhere, and at the start of a line a heading, a list's bullet or number.
_MARKDOWN_SIGNS = re.compile(r"[\\`*_\[\]|]|^\s*(?:[#+-]|\d+\.)", re.MULTILINE)


def _checked_matrix(matrix, row_labels, col_labels, owner, dtype=None):
    """``matrix`` as a 2-D NumPy array; refuses another rank, and labels whose count is not
    its rows' (``row_labels``) or columns'."""
    matrix, owner = np.asarray(matrix, dtype=dtype), owner_of(owner)
    if matrix.ndim != 2:
        raise ValueError(f"{owner}: `matrix` must be 2-D [rows, cols], got shape {matrix.shape}.")
    for name, labels, count in (
        ("row_labels", row_labels, matrix.shape[0]),
        ("col_labels", col_labels, matrix.shape[1]),
    ):
        if labels is not None and len(labels) != count:
            raise ValueError(
                f"{owner}: `{name}` must have one label per {name[:3]} of `matrix` ({count}, "
                f"its shape being {matrix.shape}); got {len(labels)}."
            )
    return matrix


def colour_map(values, vmin=None, vmax=None):
    """Maps a 2-D array to uint8 RGB with the viridis colour map.

    Args:
        values: Array ``[rows, cols]`` of numbers (NaN maps to the lowest colour).
        vmin: Optional float, the value mapped to the lowest colour. Default: `None` (the
            smallest value of ``values``, NaN ignored).
        vmax: Optional float, the value mapped to the highest colour. Default: `None` (the
            largest value of ``values``, NaN ignored).

    Returns:
        uint8 array ``[rows, cols, 3]``.

    Example:

    >>> colour_map([[0.0, 1.0]]).tolist()
    [[[68, 1, 84], [253, 231, 37]]]
    """
    values = np.asarray(values, dtype=np.float64)
    vmin = np.nanmin(values) if vmin is None else vmin
    vmax = np.nanmax(values) if vmax is None else vmax
    scaled = np.zeros_like(values) if vmax <= vmin else (values - vmin) / (vmax - vmin)
    position = np.clip(np.nan_to_num(scaled), 0.0, 1.0) * (len(_VIRIDIS) - 1)
    low = np.floor(position).astype(int)
    high = np.minimum(low + 1, len(_VIRIDIS) - 1)
    frac = (position - low)[..., None]
    rgb = _VIRIDIS[low] * (1.0 - frac) + _VIRIDIS[high] * frac
    return rgb.round().astype(np.uint8)


def _matplotlib_image(matrix, row_labels, col_labels, title, xlabel, ylabel, vmin, vmax, log_x):
    # A bare Figure with its own Agg canvas: pyplot and the process's backend stay untouched.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows, cols = matrix.shape
    if log_x:
        # A curve: 640 x 360 pixels whatever its length, so that a page or TensorBoard shows it
        # at its own size, labels legible.
        width, height = 8.0, 4.5
    else:
        # At least 6 x 3.5 inches at 80 dpi: 480 x 280 pixels, room for the labels and colour
        # bar; a cell grows with the rows and columns.
        width = min(max(6.0, 2.0 + 0.35 * cols), 16.0)
        height = min(max(3.5, 1.5 + 0.35 * rows), 12.0)
    figure = Figure(figsize=(width, height), dpi=80)
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    if log_x:
        axes.semilogx(np.arange(1, cols + 1), matrix[0], marker=".")
        axes.set_xlabel(xlabel or "")
        axes.set_ylabel(ylabel or "")
    else:
        image = axes.imshow(matrix, aspect="auto", cmap="viridis", vmin=vmin, vmax=vmax)
        if col_labels is not None:
            axes.set_xticks(range(cols), col_labels, rotation=90, fontsize=8)
        if row_labels is not None:
            axes.set_yticks(range(rows), row_labels, fontsize=8)
        axes.set_xlabel(xlabel or "")
        axes.set_ylabel(ylabel or "")
        figure.colorbar(image, ax=axes)
    if title:
        axes.set_title(title, fontsize=9)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return tf.io.decode_png(buffer.getvalue(), channels=3).numpy()


def heatmap_image(
    matrix,
    row_labels=None,
    col_labels=None,
    title=None,
    xlabel=None,
    ylabel=None,
    vmin=None,
    vmax=None,
    log_x=False,
    cell_pixels=12,
):
    """Renders ``matrix`` ([rows, cols]) as a uint8 RGB image ``[height, width, 3]``.

    With matplotlib installed the image has the labels on its axes and a colour bar; without
    it the image is the bare colour-mapped matrix, each cell a block of pixels.

    Args:
        matrix: 2-D array ``[rows, cols]``.
        row_labels: Optional list of ``rows`` strings, the y-axis tick labels. Default:
            `None` (no labels).
        col_labels: Optional list of ``cols`` strings, the x-axis tick labels. Default:
            `None` (no labels).
        title: Optional string, the image title. Default: `None`.
        xlabel: Optional string, the x-axis label. Default: `None`.
        ylabel: Optional string, the y-axis label. Default: `None`.
        vmin: Optional float, the value of the lowest colour. Default: `None` (the
            matrix's minimum).
        vmax: Optional float, the value of the highest colour. Default: `None` (the
            matrix's maximum).
        log_x: Boolean, (default `False`), whether to draw the single row of ``matrix`` as
            a curve on a logarithmic x axis instead (used for attention by heap index).
        cell_pixels: Positive integer, the side in pixels of each matrix cell in the image
            made without matplotlib. Default: `12`.

    Returns:
        uint8 array ``[height, width, 3]``.

    Raises:
        ValueError: If ``matrix`` is not 2-D, a list of labels is not as long as its side, or
            ``log_x`` is given a matrix of several rows.

    Example:

    >>> from tf_memlayers.callbacks import heatmap_image
    >>> image = heatmap_image([[0.1, 0.9], [0.7, 0.3]], ["a", "b"], ["x", "y"],
    ...                       title="attention")
    >>> image.dtype, image.ndim, image.shape[-1]
    (dtype('uint8'), 3, 3)
    """
    matrix = _checked_matrix(matrix, row_labels, col_labels, "heatmap_image", np.float64)
    if log_x and len(matrix) != 1:
        raise ValueError(
            f"{owner_of('heatmap_image')}: `log_x` draws the single row of `matrix` as a "
            f"curve; got {len(matrix)} rows (shape {matrix.shape})."
        )
    try:
        return _matplotlib_image(
            matrix, row_labels, col_labels, title, xlabel, ylabel, vmin, vmax, log_x
        )
    except ImportError:
        if log_x:
            # Resample the curve onto a log-spaced axis so the plot keeps the log scale.
            cols = matrix.shape[1]
            grid = np.unique(np.round(np.logspace(0, np.log10(cols), 64)).astype(int)) - 1
            matrix = matrix[:, grid]
        rgb = colour_map(matrix, vmin, vmax)
        return np.repeat(np.repeat(rgb, cell_pixels, axis=0), cell_pixels, axis=1)


def _markdown_text(text):
    """``text`` written in Markdown as it reads: TensorBoard's text tab then shows tokens such
    as ``__init__``, ``*``, ``<b>`` or ``&amp;`` as written, not as formatting."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_SIGNS.sub(lambda sign: sign.group()[:-1] + "\\" + sign.group()[-1], text)


def matrix_markdown(matrix, row_labels=None, col_labels=None, digits=3):
    """A Markdown table of ``matrix`` with its labels (for `tf.summary.text`).

    Args:
        matrix: 2-D array ``[rows, cols]`` of numbers.
        row_labels: Optional list of ``rows`` labels (the first column). Default: `None`
            (the row indices).
        col_labels: Optional list of ``cols`` labels (the header). Default: `None` (the
            column indices).
        digits: Non-negative integer, the number of decimals of each value. Default: `3`.

    Returns:
        String, the table (its labels escaped: TensorBoard shows them as written).

    Raises:
        ValueError: If ``matrix`` is not 2-D, a list of labels is not as long as its side, or
            ``digits`` is negative.
        TypeError: If ``digits`` is not an integer.

    Example:

    >>> from tf_memlayers.callbacks import matrix_markdown
    >>> print(matrix_markdown([[0.5, 0.25]], ["a"], ["x", "y"], digits=2))
    | | x | y |
    |---|---|---|
    | a | 0.50 | 0.25 |
    """
    matrix = _checked_matrix(matrix, row_labels, col_labels, "matrix_markdown")
    check_int("digits", digits, minimum=0, owner="matrix_markdown")
    rows, cols = matrix.shape
    col_labels = list(col_labels) if col_labels is not None else [str(j) for j in range(cols)]
    row_labels = list(row_labels) if row_labels is not None else [str(i) for i in range(rows)]
    lines = ["| | " + " | ".join(_markdown_text(c) for c in col_labels) + " |"]
    lines.append("|---" * (cols + 1) + "|")
    for label, row in zip(row_labels, matrix):
        lines.append(
            f"| {_markdown_text(label)} | " + " | ".join(f"{v:.{digits}f}" for v in row) + " |"
        )
    return "\n".join(lines)


def write_heatmap(tag, matrix, step, row_labels=None, col_labels=None, **image_kwargs):
    """Writes the heatmap image and its labelled table to the default summary writer.

    Args:
        tag: String, the summary tag of the image (the table goes to ``tag + "/table"``).
        matrix: 2-D array ``[rows, cols]``.
        step: Integer, the summary step (e.g. the epoch).
        row_labels: Optional list of ``rows`` strings. Default: `None`.
        col_labels: Optional list of ``cols`` strings. Default: `None`.
        **image_kwargs: Other `heatmap_image` arguments (``title``, ``xlabel``, ``ylabel``,
            ``vmin``, ``vmax``, ``log_x``, ``cell_pixels``).

    Returns:
        The uint8 image ``[height, width, 3]`` that was written.

    Example:

    >>> import pathlib, tempfile
    >>> import tensorflow as tf
    >>> from tf_memlayers.callbacks import write_heatmap
    >>> log_dir = tempfile.mkdtemp()
    >>> with tf.summary.create_file_writer(log_dir).as_default():
    ...     image = write_heatmap("memory/retrieval", [[0.2, 0.8]], step=0,
    ...                           row_labels=["dog"], col_labels=["a", "dog"])
    >>> image.shape[-1], len(list(pathlib.Path(log_dir).iterdir()))
    (3, 1)
    """
    with called_as("write_heatmap"):  # the checks of what it hands on name it
        image = heatmap_image(matrix, row_labels, col_labels, **image_kwargs)
    tf.summary.image(tag, image[None], step=step)
    tf.summary.text(tag + "/table", matrix_markdown(matrix, row_labels, col_labels), step=step)
    return image
