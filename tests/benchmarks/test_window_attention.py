"""The window-attention speed benchmark's language models (`benchmarks/speed/window_attention.py`),
at small shapes."""

import json

import keras
import pytest

from examples.language_modeling.memories import KINDS
from tests.support import load_script
from tf_memlayers import (
    NGramConcat,
    NGramConcatCell,
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
)

SMALL = dict(vocab=20, hidden=6, steps=4, batch=2)


def _benchmark():
    return load_script("benchmarks/speed", "window_attention")


def _memory(model):
    """The model's memory: the layer after the LSTM, or the cell its RNN runs (None: none)."""
    for layer in model.layers:
        if isinstance(layer, keras.layers.RNN) and not isinstance(layer, keras.layers.LSTM):
            return layer.cell
        if isinstance(layer, (SlidingWindowAttention, NGramConcat)):
            return layer
    return None


def test_every_variant_is_a_memory_kind_of_the_builder_in_one_form():
    variants = _benchmark().LM_VARIANTS
    assert list(variants)[0] == "lstm"
    for name, (kind, form, size) in variants.items():
        assert kind in KINDS and form in ("parallel", "cell"), name
        if kind != "lstm":
            assert name.endswith(f":{size}"), name


@pytest.mark.parametrize(
    "variant, memory_type, size",
    [
        ("lstm", None, None),
        ("window-parallel:5", SlidingWindowAttention, 5),
        ("window-cell:10", SlidingWindowAttentionCell, 10),
        ("ngram-parallel:4", NGramConcat, 4),
        ("ngram-cell:4", NGramConcatCell, 4),
    ],
)
def test_variant_builds_its_memory_on_an_lstm_as_wide_as_the_memory_output(
    variant, memory_type, size
):
    model = _benchmark().lm_model(variant, **SMALL)
    assert model.output.shape == (2, 4, 20)
    memory = _memory(model)
    if memory_type is None:
        assert memory is None
        assert [type(layer) for layer in model.layers].count(keras.layers.LSTM) == 1
        return
    assert type(memory) is memory_type
    config = memory.get_config()
    assert config["window" if "Sliding" in memory_type.__name__ else "n"] == size
    # The memory's output is as wide as the LSTM: the softmax reads 6 features.
    assert model.layers[-1].kernel.shape == (6, 20)
    if memory_type in (SlidingWindowAttentionCell, NGramConcatCell):
        assert memory.cell.units == 6


def test_unknown_variant_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown variant 'window-parallel:7'.*'lstm'"):
        _benchmark().lm_model("window-parallel:7", **SMALL)


def test_lm_part_prints_one_row_per_variant_with_its_ratio_to_the_lstm(monkeypatch, capsys):
    benchmark = _benchmark()
    bench_lm = benchmark.bench_lm
    chosen = ["lstm", "window-cell:5", "ngram-parallel:4"]
    monkeypatch.setattr(
        benchmark, "LM_VARIANTS", {name: benchmark.LM_VARIANTS[name] for name in chosen}
    )
    monkeypatch.setattr(
        benchmark, "bench_lm", lambda rounds, variants: bench_lm(rounds, variants, **SMALL)
    )
    monkeypatch.setattr(benchmark.matmul_peak, "peak_gflops", lambda: 50.0)
    benchmark.main(["--skip-peer", "--rounds", "2"])
    results = json.loads(capsys.readouterr().out)
    assert list(results) == ["lm", "lm_rounds"] and results["lm_rounds"] == 2
    *rows, part = results["lm"]
    assert [row["variant"] for row in rows] == chosen
    # Eqs (2)-(4) alone: timed with the models, no weight product.
    assert part["variant"] == "eqs (2)-(4) alone:10" and part["median_ms"] > 0
    assert part["gflop_per_step"] == 0 and part["ratio_to_lstm"] == pytest.approx(
        part["median_ms"] / rows[0]["median_ms"]
    )
    for row in rows:
        assert list(row) == [
            "variant",
            "median_ms",
            "ratio_to_lstm",
            "gflop_per_step",
            "share_of_peak",
            "peak_gflops",
        ]
        assert row["median_ms"] > 0 and row["peak_gflops"] == 50.0
        model = benchmark.lm_model(row["variant"], **SMALL)
        tokens = SMALL["batch"] * SMALL["steps"]
        flops = benchmark.matmul_peak.weight_training_flops_per_token(model) * tokens
        assert row["gflop_per_step"] == pytest.approx(flops / 1e9)
        assert row["share_of_peak"] == pytest.approx(flops / (row["median_ms"] * 1e6) / 50.0)
    assert results["lm"][0]["ratio_to_lstm"] == 1.0
    # The memory adds weight products to the bare LSTM's.
    assert results["lm"][1]["gflop_per_step"] > results["lm"][0]["gflop_per_step"]


def test_peer_part_times_only_what_fits_and_reports_xla_buffers(monkeypatch):
    """An implementation whose XLA buffers exceed the memory limit is not timed, nor tried
    at longer lengths; one whose buffers cannot be read on JAX is timed beside ours in a
    process of its own, until that fails; the others' buffers and ratios are reported
    (children faked)."""
    benchmark = _benchmark()
    impls = ["ours", "mha", "seq_self_attention"]
    monkeypatch.setattr(benchmark, "available_impls", lambda: (impls, {}))
    calls = []

    def fake_child(script, spec, memory_limit_gib, env=None):
        backend = (env or {}).get("KERAS_BACKEND")
        calls.append((spec["part"], spec.get("impl") or tuple(spec["impls"]), spec["T"], backend))
        if spec["part"] == "memory":
            if spec["impl"] == "seq_self_attention":
                return {"error": "failed (memory limit 16 GiB or crash)"}
            per_step = {"ours": 0.5, "mha": spec["T"] / 10}[spec["impl"]]
            return {"xla_buffers_mib": per_step * spec["T"]}
        if "seq_self_attention" in spec["impls"] and spec["T"] >= 400:
            return {"error": "failed (memory limit 1 GiB or crash)"}
        factor = {"ours": 1.0, "mha": 2.0, "seq_self_attention": 4.0}
        return {
            "medians_ms": {
                f"{impl}_{kind}": factor[impl]
                for impl in spec["impls"]
                for kind in ("xla", "no_xla")
            },
            "ratios_to_ours_xla": {
                f"{impl}_{kind}": factor[impl]
                for impl in spec["impls"]
                for kind in ("xla", "no_xla")
            },
        }

    monkeypatch.setattr(benchmark.peak_memory, "run_child", fake_child)
    args = benchmark.parse_args(["--lengths", "20", "400", "800", "--memory-limit-gib", "1"])
    rows, skipped = benchmark.bench_peer(args)
    assert skipped == {}
    short, middle, long = rows
    assert short["ours_xla_buffers_mib"] == 10 and short["mha_xla_buffers_mib"] == 40
    assert short["mha_memory_over_ours"] == 4 and short["ours_over_mha"] == 0.5
    assert short["ours_xla_ms"] == 1.0 and short["mha_xla_ms"] == 2.0
    # The TensorFlow-only peer: no buffers, timed in its own process beside ours.
    assert short["seq_self_attention_xla_buffers_mib"] == "not measured: fails on JAX"
    assert (
        short["seq_self_attention_xla_ms"] == 4.0 and short["ours_over_seq_self_attention"] == 0.25
    )
    assert "seq_self_attention_memory_over_ours" not in short
    # At T = 400 the peer needs 16000 MiB > 1024: not timed, and not tried at T = 800; the
    # TensorFlow-only peer fails there, and is not tried at T = 800 either.
    assert middle["mha_xla_buffers_mib"] == 16000
    assert middle["mha_xla_ms"] == "not run: needs 16000 MiB" and "ours_over_mha" not in middle
    assert middle["seq_self_attention_xla_ms"] == "failed (memory limit 1 GiB or crash)"
    assert long["mha_xla_buffers_mib"] == long["mha_xla_ms"] == "failed at T=400"
    assert long["seq_self_attention_xla_ms"] == "failed at T=400"
    assert long["ours_xla_buffers_mib"] == 400 and long["ours_xla_ms"] == 1.0
    assert all(backend == "jax" for part, _, _, backend in calls if part == "memory")
    assert [(impls, T) for part, impls, T, _ in calls if part == "time"] == [
        (("ours", "mha"), 20),
        (("ours", "seq_self_attention"), 20),
        (("ours",), 400),
        (("ours", "seq_self_attention"), 400),
        (("ours",), 800),
    ]
