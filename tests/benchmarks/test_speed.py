"""The speed harness (``python -m benchmarks.speed``): its one timer (on a clock that moves when
told to), its step, its tables' models and arithmetic, its command line and its figures."""

import json
import subprocess
import sys
import types

import keras
import numpy as np
import pytest

from benchmarks import step as training
from benchmarks import timing
from benchmarks.speed import page, tables
from benchmarks.speed.__main__ import Budget, parse_args, peaks
from tests.support import REPO_ROOT, as_numpy, tensorflow_only


@pytest.fixture
def clock(monkeypatch):
    clock = types.SimpleNamespace(now=100.0)
    clock.advance = lambda seconds: setattr(clock, "now", clock.now + seconds)
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock.now))
    return clock


def test_a_call_is_timed_with_the_wait_for_every_tensor_in_its_result(clock):
    # Results whose work happens when they are fetched, like asynchronous tensors.
    slow = lambda seconds: types.SimpleNamespace(numpy=lambda: clock.advance(seconds))  # noqa: E731
    nested = [slow(0.001), (slow(0.002), {"a": slow(0.004)})]
    assert timing.elapsed_ms(lambda: (nested, 7, None, "text")) == pytest.approx(7.0)
    costs = iter([0.010, 0.050, 0.020, 0.030, 0.900])
    assert timing.median_ms(lambda: clock.advance(next(costs)), 5) == pytest.approx(30.0)


def test_runners_are_interleaved_and_their_ratio_cancels_load_that_drifts(clock):
    order, loads = [], iter([1.0, 1.0, 3.0, 3.0, 3.0, 3.0, 1.5, 1.5, 5.0, 5.0])

    def runner(name, seconds):
        return lambda: (order.append(name), clock.advance(seconds * next(loads)))

    samples = timing.interleaved({"slow": runner("slow", 0.02), "fast": runner("fast", 0.005)}, 5)
    assert order == ["slow", "fast"] * 5
    assert timing.median_ratio(samples, "fast") == pytest.approx({"slow": 4.0, "fast": 1.0})
    assert timing.medians(samples) == pytest.approx({"slow": 60.0, "fast": 15.0})
    pytest.raises(ValueError, timing.interleaved, {"a": lambda: None}, rounds=0).match("rounds")
    # Ratios and savings are medians over the rounds of each round's times.
    samples = {"base": [1.0, 2.0, 3.0], "x": [3.0, 2.0, 30.0]}  # ratios 3, 1, 10
    assert timing.median_ratio(samples, "base") == {"base": 1.0, "x": 3.0}
    assert timing.medians(samples) == {"base": 2.0, "x": 3.0}  # ratio of medians: 1.5
    samples = {"ours": [3.0, 5.0, 4.0], "part": [1.0, 1.0, 1.0], "floor": [2.0, 2.0, 4.0]}
    # Rounds: 2 / 2, 4 / 2, 3 / 4; the medians' difference over the floor's median is 1.5.
    assert timing.median_saving(samples, "ours", "part", "floor") == 1.0


def test_a_step_is_one_sgd_step_of_the_models_loss_and_its_weights_stay_apart():
    model = keras.Sequential([keras.Input((3,), batch_size=4), keras.layers.Dense(2)])
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in model.weights)
    x = np.random.default_rng(0).normal(size=(4, 3)).astype("float32")
    # (torch.compile takes two minutes for it on this CPU: the eager step on torch.)
    step = training.Step(model, x, jit=keras.backend.backend() != "torch")
    for _ in range(2):
        y = x @ kernel + bias
        np.testing.assert_allclose(float(step.run()), np.mean(y**2), rtol=1e-5)
        gradient = 2 * y / y.size  # of the mean square over the outputs
        kernel, bias = kernel - 1e-3 * x.T @ gradient, bias - 1e-3 * gradient.sum(0)
        for got, want in zip(step.state[0], (kernel, bias)):
            np.testing.assert_allclose(keras.ops.convert_to_numpy(got), want, rtol=1e-5)
    # The model's own weights are where they started: the step carries its copy.
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model.weights[1]), np.zeros(2))


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="XLA's buffers are read on JAX")
def test_the_steps_buffers_grow_with_the_length_and_a_limit_keeps_it_from_running():
    short, long = (tables.layer_step(keras.layers.GRU(8), (2, t, 8)) for t in (8, 256))
    assert 0 < short.buffers_mib < long.buffers_mib and short.runnable
    limit = long.buffers_mib / 2
    assert not tables.layer_step(keras.layers.GRU(8), (2, 256, 8), limit_mib=limit).runnable


def test_flops_count_weights_but_the_embedding_and_the_window_peer_has_our_weights():
    from tf_memlayers.models import build_language_model

    model = build_language_model(50, units=8, embedding_dim=6, num_layers=2, stateful=False)
    lstm = lambda inputs: 4 * 8 * (inputs + 8)  # noqa: E731  kernel + recurrent kernel
    assert training.weight_training_flops(model, 1) == 6 * (lstm(6) + lstm(8) + 8 * 50)
    assert training.training_flops([(2, 3, 4), (1, 1, 1)]) == 3 * (48 + 2)
    # The window peer has our weights and the floor our products.
    assert tables.equal_weight_key_dim(300, 32) == 165  # 198,795 weights against our 199,232
    x = keras.Input((5, 300))
    layers = {v: tables.window_layer(v, 300) for v in ("ours", "floor", "mha")}
    counts = {v: keras.Model(x, layer(x)).count_params() for v, layer in layers.items()}
    assert counts["ours"] == 199232 and abs(counts["mha"] - counts["ours"]) < (4 * 300 + 3) / 2
    assert counts["floor"] == counts["ours"] - 32  # its four kernels, no score vector


@pytest.mark.parametrize(
    "variant, memory",
    [("window-parallel:5", "SlidingWindowAttention"), ("ngram-cell:4", "NGramConcatCell")],
)
def test_an_lm_variant_puts_its_memory_on_the_lstm_or_around_its_cell(variant, memory):
    model = tables.lm_model(variant, vocab=20, hidden=6, steps=4, batch=2)
    assert memory in [type(getattr(layer, "cell", layer)).__name__ for layer in model.layers]
    with pytest.raises(ValueError, match="unknown LM variant 'window-sideways:5'"):
        tables.parse_variant("window-sideways:5")


def test_the_stand_ins_replace_their_parts_only_while_active():
    from tf_memlayers import AssociativeGRU, SlidingWindowAttention

    x = np.random.default_rng(0).normal(size=(2, 7, 8)).astype("float32")
    window = SlidingWindowAttention(window=3, attention_units=4, use_bias=True)
    am_gru = AssociativeGRU(6, num_copies=2, return_sequences=True, fused_loop=False)
    expected = [as_numpy(window(x)), as_numpy(am_gru(x))]
    for parts in [("weighted_sum",), ("scores",), ("weighted_sum", "scores")]:
        with tables.stand_ins(parts):
            replaced = as_numpy(window(x))
        assert replaced.shape == expected[0].shape and not np.allclose(replaced, expected[0])
    with tables.holographic_stand_ins():
        floor = as_numpy(am_gru(x))
    assert floor.shape == expected[1].shape and np.isfinite(floor).all()
    assert not np.allclose(floor, expected[1])
    with pytest.raises(RuntimeError), tables.stand_ins(("scores",)), tables.holographic_stand_ins():
        raise RuntimeError("a failed trace")
    np.testing.assert_array_equal(as_numpy(window(x)), expected[0])
    np.testing.assert_array_equal(as_numpy(am_gru(x)), expected[1])


def test_the_command_line_defaults_budget_and_peaks(monkeypatch, tmp_path):
    """The tables of the backend or a GPU run; a table's share of the time; earlier peaks."""
    jax = [name for name, table in tables.TABLES.items() if "jax" in table.backends]
    assert parse_args(["--backend", "jax"]).tables == [t for t in jax if t != "backend_cases"]
    gpu = parse_args(["--device", "gpu", "--backend", "jax"])
    assert (gpu.tables, gpu.sizes) == (list(tables.GPU_TABLES), "gpu")
    assert gpu.dtypes == ["float32", "mixed_bfloat16"]
    from benchmarks.speed import __main__ as speed

    times = iter([0.0, 0.0, 79.0, 81.0, 81.0, 100.5])
    monkeypatch.setattr(speed.time, "perf_counter", lambda: next(times))
    budget = Budget(100.0, ["window_attention", "heap_write"])
    budget.begin("window_attention")  # 0.4 / (0.4 + 0.1) of 100 s
    assert budget.allows() and not budget.allows()  # at 79 s and 81 s
    budget.begin("heap_write")  # what is left, 19 s, all of it
    assert not budget.allows()  # at 100.5 s
    found = {"peak_gflops": {"float32": 3.0}, "peak_gflops_float32_highest": 1.5}
    (tmp_path / "with.json").write_text(json.dumps({"tables": {}, **found}))
    (tmp_path / "without.json").write_text(json.dumps({"tables": {}}))
    (tmp_path / "cut.json").write_text('{"peak_gflops": {"float')
    args = parse_args(["--buffers-only", "--peaks-from", str(tmp_path / "with.json")])
    assert peaks(args, (8,)) == {**found, "peaks_from": args.peaks_from}
    for name in ("without", "cut", "absent"):  # none: measured (here, buffers only: none)
        args = parse_args(["--buffers-only", "--peaks-from", str(tmp_path / f"{name}.json")])
        assert peaks(args, (8,)) == {}


@tensorflow_only("the heap step's table times its cache write in a tf.function")
def test_tables_run_at_tiny_sizes_and_print_their_rows():
    command = [sys.executable, "-m", "benchmarks.speed", "--sizes", "tiny", "--rounds", "1"]
    command += ["--tables", "heap_step", "associative_memory", "language_model"]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    assert results["errors"] == {} and results["settings"]["step"] == "SGD, ``stateless_call``, XLA"
    names = ("heap_step", "associative_memory", "language_model")
    heap, am, (*lm, part) = (results["tables"][name] for name in names)
    assert part["variant"] == tables.PART and part["median_ms"] > 0  # no weight products
    assert [row["model"] for row in heap] == ["no cache", "cache read", "cache read + heap write"]
    assert {"GRU", "AssociativeGRU C=8 fused_loop", tables.FLOOR_LAYER} <= {r["layer"] for r in am}
    for row in heap + am + lm:
        assert row.get("median_ms", row.get("ms_per_time_step")) > 0 and 0 < row["share_of_peak"]
    assert am[0]["ratio_to_gru"] == 1.0 and heap[0]["ratio_to_no_cache"] == 1.0
    # The cache's kernel [128, 64] multiplies every cached state; the step without has none.
    cache = 6 * 128 * 64 * tables.SIZES["tiny"]["heap_step_cache"] / 1e9
    assert heap[1]["gflop_per_step"] - heap[0]["gflop_per_step"] == pytest.approx(cache)
    assert [row["kind"] for row in lm] == ["lstm", "attention", "attention", "ngram"]
    for row in lm:  # 4 × 5 tokens a step (tiny sizes: a variant of each kind and form)
        assert row["tokens_per_second"] == round(20 / row["median_ms"] * 1000)
        assert row["parameters"] > 0


def test_a_figure_gives_each_line_one_colour_in_both_panels(monkeypatch, tmp_path):
    from matplotlib.figure import Figure

    saved = []
    monkeypatch.setattr(Figure, "savefig", lambda self, *args, **kwargs: saved.append(self))
    rows = [{"T": t, "a_ms": 1.0, "b_ms": 2.0, "b_buffers_mib": 3.0} for t in (20, 100)]
    lines = [(i, n, f"{n}_ms", f"{n}_buffers_mib", "-", rows) for i, n in enumerate("ab")]
    page.draw(tmp_path / "f.png", "T", lines, ("ms", "MiB", "T"), ("time", "memory"))
    time_axes, memory_axes = saved[0].axes
    assert [line.get_color() for line in time_axes.get_lines()] == ["C0", "C1"]
    assert [line.get_color() for line in memory_axes.get_lines()] == ["C1"]  # a has none


def test_the_backends_table_pairs_each_case_with_its_baseline_round_by_round(monkeypatch):
    """Each side's children pooled; ratios of the same rounds; torch.compile once, its time
    limited; a side or group that did not run says why."""
    calls = []

    def child(*argv, python=None, timeout=None):
        backend = argv[argv.index("--backend") + 1]
        calls.append((backend, python, timeout))
        if backend == "jax":
            return "ModuleNotFoundError: No module named 'jax'"
        factor = {"tensorflow": 1.0, "torch": 3.0 if "--no-jit" in argv else 2.0}[backend]
        rows = [dict(case="gru", group="gru", samples_ms=[1.0, 4.0], gflop_per_step=1.0)]
        rows.append(dict(case="am_gru", group="gru", samples_ms=[2.0, 4.0], gflop_per_step=2.0))
        rows.append(dict(group="lm_lstm", status="compiling lm_window_cell when the run ended"))
        rows = [{**r, "samples_ms": [factor * v for v in r.get("samples_ms", ())]} for r in rows]
        return {"tables": {"backend_cases": rows}, "errors": {}, "peak_gflops": {"float32": 10.0}}

    monkeypatch.setattr(tables, "child", child)
    sizes = {**tables.SIZES["tiny"], "name": "tiny", "backend_rounds": 2, "pythons": {"jax": "j"}}
    rows = {row["case"]: row for row in tables.TABLES["backends"].measure(sizes, {}, 0, {}, {})}
    # Two rounds of children, JAX's not again after it failed, torch.compile's once.
    assert [(side, bool(limit)) for side, _, limit in calls] == [
        *[("tensorflow", 0), ("jax", 0), ("torch", 0), ("torch", 1)],
        *[("tensorflow", 0), ("torch", 0)],
    ]
    assert calls[1][1] == "j" and calls[3][2] > sizes["backend_compile_s"]
    am = rows["am_gru"]
    # Round 1: 2 / 1, round 2: 4 / 4, in each of the two children: the median of 2, 1, 2, 1.
    assert am["tensorflow_over_baseline"] == am["torch_over_baseline"] == 1.5
    assert am["torch_ms"] == 3 * am["tensorflow_ms"] == 9.0 and am["jax_ms"] is None
    assert "No module named 'jax'" in am["jax_status"] and "tensorflow_status" not in am
    assert rows["lm_window_cell"]["torch_status"].startswith("compiling lm_window_cell")
    text = page.backends(None, list(rows.values()), None)[1]["goals"]
    met = "(met on TensorFlow, torch, torch.compile)"  # at most 1.5
    assert text.startswith(f"AM-GRU / GRU: TensorFlow 1.50, torch 1.50, torch.compile 1.50 {met};")
