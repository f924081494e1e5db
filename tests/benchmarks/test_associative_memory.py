"""The associative-memory speed benchmark (`benchmarks/speed/associative_memory.py`) at small
shapes: its rows and the arithmetic it reports."""

import pytest

from tests.support import load_script, tensorflow_only

pytestmark = tensorflow_only("times tf.function training steps and the fused loop")


def test_speed_rows_report_each_layers_weight_products_and_share_of_the_peak(monkeypatch):
    benchmark = load_script("benchmarks/speed", "associative_memory")
    monkeypatch.setattr(benchmark.matmul_peak, "peak_gflops", lambda: 40.0)
    batch, steps, units = 2, 3, 4
    rows = {
        row["layer"]: row
        for row in benchmark.speed_vs_gru(batch=batch, steps=steps, units=units, copies=2, rounds=1)
    }
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
            row["gflop_per_step"] * 1e9 / (per_step * 1e6) / 40.0
        )


def test_dual_and_word_by_word_rows_count_the_premise_products_per_step(monkeypatch):
    benchmark = load_script("benchmarks/speed", "associative_memory")
    monkeypatch.setattr(benchmark.peak_memory, "run_child", lambda *a, **k: {"peak_mib": 1.0})
    batch, steps, units, copies, length = 2, 3, 4, 2, 5
    (row,) = benchmark.dual_vs_attention(batch, steps, units, copies, [length], rounds=1, peak=40.0)
    # The dual cell: the AM-GRU's W_x [d, 4n], R [n, 4n], G_h [n, 2n], C_h [n, n] and its own
    # [n, 2n] and [n, n], once per hypothesis step.
    dual = 6 * units * (4 * units + 4 * units + 2 * units + units + 2 * units + units)
    assert row["dual_gflop_per_step"] == pytest.approx(dual * batch * steps / 1e9)
    # Word by word (an LSTM cell): W^y [n, n] on each premise output once per call; at every
    # hypothesis step the LSTM's kernel [d, 4n] and recurrent kernel [n, 4n], [W^h; W^r]
    # [2n, n], W^t [n, n] and [W^p; W^x] [2n, n].
    per_step = units * 4 * units * 2 + 2 * units * units + units * units + 2 * units * units
    attention = 6 * (batch * length * units * units + batch * steps * per_step)
    assert row["attention_gflop_per_step"] == pytest.approx(attention / 1e9)
    for model in ("dual", "attention"):
        step_ms = row[f"{model}_ms_per_step"] * steps
        assert row[f"{model}_share_of_peak"] == pytest.approx(
            row[f"{model}_gflop_per_step"] * 1e9 / (step_ms * 1e6) / 40.0
        )


def test_snli_rows_count_both_sentences_in_the_encoder_and_one_pair_in_the_classifier():
    benchmark = load_script("benchmarks/speed", "associative_memory")
    from examples.snli.encoders import snli_model

    model = snli_model(50, kind="dual_am_gru", units=4, embedding_dim=4)
    rows = benchmark.snli_step_rows(batch=2, premise_length=3, hypothesis_length=5)
    counted = {weight.path: rows(weight) for weight in model.trainable_weights}

    def count(suffix):  # layer names carry a process-wide number (gru, gru_1, ...)
        (found,) = [n for path, n in counted.items() if path.endswith(suffix)]
        return found

    assert count("/premise_cell/key_kernel") == 2 * (3 + 5)  # layer 1, both sentences
    assert count("/gru_cell/kernel") == 2 * (3 + 5)  # layer 2 over both
    assert count("/dual_associative_gru_cell/dual_gate_kernel") == 2 * 5  # the hypothesis
    assert count("relu_0/kernel") == count("softmax/kernel") == 2
