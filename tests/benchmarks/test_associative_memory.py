"""The associative-memory speed benchmark (`benchmarks/speed/associative_memory.py`) at small
shapes: its rows and the arithmetic it reports."""

import pytest

from conftest import load_script, tensorflow_only

pytestmark = tensorflow_only("times tf.function training steps and the fused loop")


def test_speed_rows_report_each_layers_weight_products_and_share_of_the_peak(monkeypatch):
    benchmark = load_script("benchmarks/speed", "associative_memory")
    monkeypatch.setattr(benchmark.matmul_peak, "peak_gflops", lambda: 40.0)
    batch, steps, units = 2, 3, 4
    rows = {row["layer"]: row for row in benchmark.speed_vs_gru(
        batch=batch, steps=steps, units=units, copies=2, rounds=1)}  # fmt: skip
    assert rows["GRU"]["ratio_to_gru"] == 1.0
    # keras.layers.GRU: kernel [d, 3n] and recurrent kernel [n, 3n] (the bias is not a matrix).
    gru = 6 * (units * 3 * units + units * 3 * units) * batch * steps
    assert rows["GRU"]["gflop_per_step"] == pytest.approx(gru / 1e9)
    # The AM-GRU: W_x [d, 4n], R [n, 4n], G_h [n, 2n], C_h [n, n], whatever the copies.
    am = 6 * units * (4 * units + 4 * units + 2 * units + units) * batch * steps
    for name, row in rows.items():
        if name != "GRU":
            assert row["gflop_per_step"] == pytest.approx(am / 1e9), name
        per_step = row["ms_per_time_step"] * steps
        assert row["share_of_peak"] == pytest.approx(
            row["gflop_per_step"] * 1e9 / (per_step * 1e6) / 40.0)
