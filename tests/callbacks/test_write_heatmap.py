"""Heatmap images for TensorBoard leave the user's plotting set-up alone."""

import re
import sys

import numpy as np
import pytest

from tf_memlayers.callbacks import write_heatmap
from tf_memlayers.callbacks.write_heatmap import colour_map, heatmap_image, matrix_markdown


def test_heatmaps_keep_the_matplotlib_backend_are_legible_and_long_curves_keep_their_size():
    matplotlib = pytest.importorskip("matplotlib")
    before = matplotlib.get_backend()
    matplotlib.use("svg")  # e.g. a notebook's backend
    rng = np.random.default_rng(0)
    try:
        # A window of 5 positions for a 3-token probe, and one-row cache curves on a log axis.
        labels = [f"t-{i}" for i in range(5, 0, -1)]
        image = heatmap_image(rng.random((3, 5)), list("abc"), labels, title="t")
        curve = heatmap_image(rng.random((1, 8)), log_x=True)
        slots = heatmap_image(rng.random((1, 255)), log_x=True)
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)
    assert (image.shape[2], image.dtype, curve.shape[2]) == (3, np.uint8, 3)
    assert image.shape[1] >= 400 and image.shape[0] >= 250 and curve.shape[1] >= 400
    # The cache's 255 heap slots: drawn at 640 x 360 pixels, narrower than a documentation
    # page's content column (742 pixels at 1280), so its labels are shown at their own size.
    assert slots.shape[:2] == (360, 640)


@pytest.mark.parametrize("draw", [matrix_markdown, heatmap_image])
def test_labels_are_one_per_row_and_column(draw):
    for labels, name in (((["a", "b"], None), "row"), ((None, ["x"]), "col")):
        with pytest.raises(ValueError, match=rf"`{name}_labels` must have one label per {name}"):
            draw([[1.0, 2.0]], *labels)
        pytest.raises(ValueError, draw, [1.0, 2.0]).match(f"{draw.__name__}: `matrix` must be 2-D")
    with pytest.raises(ValueError, match=f"^{draw.__name__}: `(log_x` draws the|digits` must be)"):
        draw([[1.0], [2.0]], **({"log_x": True} if draw is heatmap_image else {"digits": -1}))
    # What write_heatmap hands on is refused in its name.
    pytest.raises(ValueError, write_heatmap, "t", [1.0], 0).match("^write_heatmap: `matrix`")


def test_labels_show_as_written_in_tensorboard_the_rows_labelled_on_the_scale_given():
    html = pytest.importorskip("tensorboard.plugin_util").markdown_to_safe_html
    words = ["``", "''", "_a_", "__init__", "&amp;", "<b>", "a|b", "*", "[x](y)", "\\", "t-3"]
    shown = html(matrix_markdown([[0] * 11], ["# 1."], words)).replace("&lt;", "<")
    cells = re.findall(r"<t[hd]>(.*?)</t[hd]>", shown.replace("&gt;", ">").replace("&amp;", "&"))
    assert cells[:13] == ["", *words, "# 1."]
    # The colours span the scale given and the rows are labelled.
    middle = colour_map([[0.0, 1.0, 2.0]])[0, 1]  # 1 on a scale from 0 to 2
    np.testing.assert_array_equal(colour_map([[1.0]], vmin=0.0, vmax=2.0)[0, 0], middle)
    pytest.importorskip("matplotlib")
    close = [[0.49, 0.51]]  # near-equal values take near-equal colours on a fixed scale
    assert not np.array_equal(heatmap_image(close, vmin=0.0, vmax=1.0), heatmap_image(close))
    assert not np.array_equal(heatmap_image(close, ["row"]), heatmap_image(close))


def test_without_matplotlib_each_cell_is_a_block_of_its_colour(monkeypatch):
    for module in ("matplotlib.backends.backend_agg", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, module, None)  # an import of it fails
    matrix = np.arange(6.0).reshape(2, 3)
    blocks = np.repeat(np.repeat(colour_map(matrix), 4, axis=0), 4, axis=1)
    np.testing.assert_array_equal(heatmap_image(matrix, list("ab"), cell_pixels=4), blocks)
    curve = heatmap_image(np.arange(255.0)[None], log_x=True, cell_pixels=1)  # log-spaced columns
    assert curve.shape[0] == 1 and 32 < curve.shape[1] < 64
    np.testing.assert_array_equal(curve[0, [0, -1]], colour_map([[0.0, 254.0]])[0])
