"""The window-attention floor benchmark (`benchmarks/speed/window_attention_floor.py`) and the
matrix-product arithmetic it reports (`benchmarks/matmul_peak.py`), at small shapes."""

import json

import pytest

from benchmarks import matmul_peak
from tests.support import load_script, tensorflow_only

pytestmark = tensorflow_only("times tf.function training steps")


def _benchmark():
    return load_script("benchmarks/speed", "window_attention_floor")


def test_the_peer_has_as_many_weights_as_ours_and_the_floor_the_same_products():
    floor = _benchmark()
    key_dim = floor.equal_weight_key_dim(300, 32)
    assert key_dim == 165  # 198,795 weights against our 199,232
    counts = {}
    for variant in floor.VARIANTS:
        _, counts[variant] = floor.training_step(variant, 3, 2, 300, 10, 32, key_dim)
    assert counts["ours"] == floor.ours_weights(300, 32) == 199232
    # One key_dim more or less changes the peer's weights by 4 * width + 3.
    assert abs(counts["mha"] - counts["ours"]) < (4 * 300 + 3) / 2
    # The floor holds exactly the layer's four kernels (no score vector).
    assert counts["floor"] == counts["ours"] - 32


def test_training_flops_count_each_product_three_times():
    assert matmul_peak.product_flops(2, 3, 4) == 48
    assert matmul_peak.training_flops([(2, 3, 4), (1, 1, 1)]) == 3 * (48 + 2)


def test_a_run_reports_every_variant_and_its_share_of_the_peak(capsys, tmp_path):
    output = tmp_path / "floor.json"
    _benchmark().main(
        [
            "--lengths",
            "12",
            "--rounds",
            "1",
            "--batch",
            "2",
            "--width",
            "16",
            "--window",
            "3",
            "--attention-units",
            "4",
            "--output",
            str(output),
            "--skip-memory",
        ]
    )
    results = json.loads(capsys.readouterr().out)
    assert json.loads(output.read_text()) == results
    (row,) = results["rows"]
    assert row["T"] == 12 and row["peak_gflops"] > 0
    for variant in ("ours", "floor", "mha"):
        assert row[f"{variant}_ms"] > 0
        assert 0 < row[f"{variant}_peak_share"]
    assert row["ours_gflop"] == row["floor_gflop"]
    assert row["ours_over_floor"] > 0 and row["ours_over_mha"] > 0
    for variant, (part, _) in _benchmark().PARTS.items():
        assert row[f"{variant}_ms"] > 0
        assert f"{part}_over_floor" in row
    assert "rest_over_floor" in row


def test_the_parts_are_medians_over_the_rounds_of_each_rounds_times():
    floor = _benchmark()
    samples = {"ours": [3.0, 5.0, 4.0], "part": [1.0, 1.0, 1.0], "floor": [2.0, 2.0, 4.0]}
    # Rounds: 2 / 2, 4 / 2, 3 / 4; the medians' ratio would be (4 - 1) / 2.
    assert floor._median_over_rounds(samples, "ours", "part") == 1.0


def test_the_stand_ins_replace_their_parts_only_while_active():
    import numpy as np

    from tf_memlayers import SlidingWindowAttention
    from tf_memlayers.layers.window_attention import window_attention_mechanism
    from tf_memlayers.ops import windows

    floor = _benchmark()
    layer = SlidingWindowAttention(window=3, attention_units=4, use_bias=True)
    inputs = np.random.default_rng(0).normal(size=(2, 7, 8)).astype("float32")
    expected = np.asarray(layer(inputs))
    originals = (
        windows.window_weighted_sum,
        window_attention_mechanism.WindowAttentionMechanism._window_alpha,
    )
    for _, parts in floor.PARTS.values():
        for replaced_alone in parts:
            # Each part of a variant is replaced: putting the other one back changes nothing.
            with floor.stand_ins(parts):
                both = np.asarray(layer(inputs))
            with floor.stand_ins([part for part in parts if part != replaced_alone]):
                fewer = np.asarray(layer(inputs))
            assert both.shape == expected.shape
            assert not np.allclose(both, fewer), (parts, replaced_alone)
        np.testing.assert_array_equal(np.asarray(layer(inputs)), expected)
    with pytest.raises(RuntimeError), floor.stand_ins(("weighted_sum", "scores")):
        raise RuntimeError("a failed trace")
    assert (
        windows.window_weighted_sum,
        window_attention_mechanism.WindowAttentionMechanism._window_alpha,
    ) == (originals)


def test_a_step_traced_with_stand_ins_keeps_them_after_the_context():
    import keras

    floor = _benchmark()
    losses = {}
    for name, variant in (("ours", "ours"), ("again", "ours"), ("part", "ours_without_both")):
        keras.utils.set_random_seed(1)
        run, _ = floor.compiled_step(variant, 5, 2, 16, 3, 4, key_dim=5)
        losses[name] = float(run())
    assert losses["again"] == losses["ours"]
    assert losses["part"] != losses["ours"]


def test_xla_buffers_come_from_a_jax_child_and_grow_with_the_length():
    pytest.importorskip("jax", reason="the XLA buffer sizes are read on Keras's JAX backend")
    floor = _benchmark()
    args = floor.parse_args(
        ["--batch", "2", "--width", "16", "--window", "3", "--attention-units", "4"]
    )
    short, long = (floor.xla_buffers("ours", steps, args, key_dim=5) for steps in (16, 256))
    assert short is not None and long is not None, "the JAX child failed"
    assert 0 < short < long
