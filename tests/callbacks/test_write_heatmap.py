"""Heatmap images for TensorBoard leave the user's plotting set-up alone."""

import numpy as np
import pytest

from tf_memlayers.callbacks.write_heatmap import heatmap_image


def test_heatmap_keeps_the_matplotlib_backend():
    matplotlib = pytest.importorskip("matplotlib")
    before = matplotlib.get_backend()
    matplotlib.use("svg")  # e.g. a notebook's backend
    try:
        image = heatmap_image(np.arange(12.0).reshape(3, 4), list("abc"), list("wxyz"), title="t")
        curve = heatmap_image(np.linspace(1, 0, 40)[None], log_x=True)
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)
    assert (image.shape[2], image.dtype, curve.shape[2]) == (3, np.uint8, 3)


def test_small_heatmaps_are_legible_and_a_long_curve_keeps_a_size_shown_unscaled():
    # A window of 5 positions for a 3-token probe, and one-row cache curves on a log axis.
    rng = np.random.default_rng(0)
    image = heatmap_image(rng.random((3, 5)), list("abc"), [f"t-{i}" for i in range(5, 0, -1)])
    assert image.shape[1] >= 400 and image.shape[0] >= 250
    assert heatmap_image(rng.random((1, 8)), log_x=True).shape[1] >= 400
    # The cache's 255 heap slots: drawn at 640 x 360 pixels, narrower than a documentation
    # page's content column (742 pixels at 1280), so its labels are shown at their own size.
    assert heatmap_image(rng.random((1, 255)), log_x=True).shape[:2] == (360, 640)
