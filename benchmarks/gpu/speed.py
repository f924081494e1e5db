"""The speed tables on Keras's JAX backend, on whatever device JAX finds; writes JSON.

The tables of ``benchmarks/speed/`` measured again through JAX alone (no TensorFlow), each in
float32 and in mixed bfloat16 (``keras.config.set_dtype_policy("mixed_bfloat16")``: float32
weights, bfloat16 products):

* ``window_attention``: one SGD training step (forward, backward, weight update; `jax.jit`)
  of `SlidingWindowAttention(window=10, attention_units=32)` followed by ``Dense(300)`` on
  ``[8, T, 300]`` inputs, against its floor (the same layer's four matrix products alone) and
  Keras's `MultiHeadAttention` with ``sliding_window`` and a causal mask at equal weights
  (`benchmarks.speed.window_attention_floor`), for T = 20, 100 and 1000 (others with
  ``--lengths``: ``benchmarks/gpu/run.sh`` measures 4000 and 16000 in a process of their own);
  with each step's working memory, the temporary buffers XLA plans for it
  (`jax.stages.Compiled.memory_analysis`);
  up to T = 100 also ours with parts of the attention replaced by elementwise stand-ins
  (`benchmarks.speed.window_attention_floor.PARTS`: the weighted sum, the scores, both), so
  that what each part costs above the floor is measured, in units of the floor's time;
* ``language_model``: the training step of the LSTM language model of
  `benchmarks.speed.window_attention.lm_model` (batch 64, 20 steps, hidden 300, 10k words)
  with each memory variant, against the bare LSTM;
* ``associative_memory``: the training step of `AssociativeGRU` and of
  ``keras.layers.RNN(AssociativeGRUCell)`` (100 units, 8 copies; batch 50, 30 steps) against
  ``keras.layers.GRU(100)``, and the AM-GRU's floor: `AssociativeGRU` with its holographic
  key copies, read and write replaced by elementwise stand-ins
  (`benchmarks.speed.associative_memory.holographic_stand_ins`), its loop and products kept;
* ``snli``: the SNLI model's training step (`tf_memlayers.models.snli.build_snli_model`,
  batch 50, 100 units, premise 25 / hypothesis 15 tokens) with the Dual AM-GRU and the
  AM-GRU as layer 1, against the same model with a GRU;
* ``heap_write``: `HeapCacheAttention.insert` of a batch of 64 states into a full cache, the
  heap write against the top-k write (policy ``"heap"`` / ``"topk"``), for a batch that
  enters whole and a random one.

Every training step is the same `jax.jit` function of the model's weights
(`training_step`), so the rows differ only in the layers. The variants of a table row are
timed interleaved (`benchmarks.timing`), and each row carries its arithmetic (the products
with weight matrices, `benchmarks.matmul_peak`) and its share of the matrix-product rate of
the same dtype measured at the start of the same run (or by an earlier step of the same GPU
run: ``--peaks-from``). Rows are written to ``--out`` as each table finishes; a table that
would pass the run's time budget (``--budget-s``) records the rows it did not reach, with
that reason.

Usage::

    KERAS_BACKEND=jax python -m benchmarks.gpu.speed --out results.json
    KERAS_BACKEND=jax python -m benchmarks.gpu.speed --sizes rehearsal --out results.json
"""

import contextlib
import json
import os
import pathlib
import sys
import time

import numpy as np

from benchmarks import matmul_peak, timing
from benchmarks.gpu import ArgumentParser, positive

#: The sizes of a run: ``"full"`` for a GPU, ``"rehearsal"`` for a CPU check of the same
#: code paths in seconds.
SIZES = {
    "full": dict(
        lengths=(20, 100, 1000),
        width=300,
        peer_batch=8,
        lm_vocab=10000,
        lm_hidden=300,
        lm_batch=64,
        lm_steps=20,
        am_units=100,
        am_batch=50,
        am_steps=30,
        snli_units=100,
        snli_batch=50,
        heap_sizes=(1000, 10000),
        heap_batch=64,
        rounds=20,
        peak_sizes=(4096, 8192),
        parts_max_length=100,
    ),
    "rehearsal": dict(
        lengths=(20, 40),
        width=16,
        peer_batch=2,
        lm_vocab=50,
        lm_hidden=18,
        lm_batch=4,
        lm_steps=5,
        am_units=8,
        am_batch=4,
        am_steps=5,
        snli_units=8,
        snli_batch=4,
        heap_sizes=(16,),
        heap_batch=8,
        rounds=2,
        peak_sizes=(256,),
        parts_max_length=20,
        # One variant of each memory kind and form: the code paths of all of them.
        lm_variants=("lstm", "window-parallel:5", "window-cell:5", "ngram-cell:4"),
    ),
}
DTYPES = ("float32", "mixed_bfloat16")
TABLES = ("window_attention", "language_model", "associative_memory", "snli", "heap_write")
# The share of the run's budget each table may spend before its next row is skipped.
BUDGET_SHARES = {
    "window_attention": 0.4,
    "language_model": 0.25,
    "associative_memory": 0.1,
    "snli": 0.15,
    "heap_write": 0.1,
}
WINDOW, ATTENTION_UNITS = 10, 32
#: The associative-memory table's floor row: `AssociativeGRU` (C = 8) under
#: `benchmarks.speed.associative_memory.holographic_stand_ins`.
FLOOR_LAYER = "floor: AssociativeGRU C=8, memory by stand-ins"
LEARNING_RATE = 1e-3


def _jax():
    import jax

    return jax


def mean_square(outputs, targets):
    """The window-attention and AM-GRU tables' loss: the mean square of the outputs."""
    import jax.numpy as jnp

    del targets
    return jnp.mean(jnp.square(outputs.astype("float32")))


def token_crossentropy(logits, targets):
    """The language models' loss: cross-entropy of the logits against the next tokens."""
    import jax

    log_probabilities = jax.nn.log_softmax(logits.astype("float32"), axis=-1)
    return -jax.numpy.mean(
        jax.numpy.take_along_axis(log_probabilities, targets[..., None], axis=-1)
    )


def label_crossentropy(probabilities, labels):
    """The SNLI model's loss: cross-entropy of its softmax output against the labels."""
    import jax.numpy as jnp

    picked = jnp.take_along_axis(probabilities.astype("float32"), labels[:, None], axis=-1)
    return -jnp.mean(jnp.log(jnp.maximum(picked, 1e-7)))


class Step:
    """One compiled SGD training step of a built `keras.Model`, on Keras's JAX backend.

    The step is ``jax.jit`` of the loss's gradient with respect to the trainable weights and
    the update ``w - 1e-3 g``, the weights donated so they are updated in place. Compiling
    happens here, so that XLA's plan of the step's buffers is known before it runs
    (``buffers_mib``); `run` then runs one step and returns its loss.

    Args:
        model: A built `keras.Model`.
        inputs: The model's inputs (arrays).
        targets: The loss's second argument (an array; ignored by `mean_square`).
        loss: Callable ``(outputs, targets) -> scalar``.
        limit_mib: Optional float: if XLA plans more temporary memory than this, `run` is
            never called (``runnable`` is False).
    """

    def __init__(self, model, inputs, targets, loss, limit_mib=None):
        jax = _jax()
        self.model = model
        self.trainable = [v.value for v in model.trainable_variables]
        self.non_trainable = [v.value for v in model.non_trainable_variables]
        self.inputs, self.targets = inputs, targets

        def loss_of(trainable, non_trainable, inputs, targets):
            outputs, non_trainable = model.stateless_call(
                trainable, non_trainable, inputs, training=True
            )
            return loss(outputs, targets), non_trainable

        def step(trainable, non_trainable, inputs, targets):
            (value, non_trainable), grads = jax.value_and_grad(loss_of, has_aux=True)(
                trainable, non_trainable, inputs, targets
            )
            trainable = [w - LEARNING_RATE * g.astype(w.dtype) for w, g in zip(trainable, grads)]
            return value, trainable, non_trainable

        lowered = jax.jit(step, donate_argnums=(0, 1)).lower(
            self.trainable, self.non_trainable, inputs, targets
        )
        started = time.perf_counter()
        self.compiled = lowered.compile()
        self.compile_s = time.perf_counter() - started
        analysis = self.compiled.memory_analysis()
        self.buffers_mib = None if analysis is None else analysis.temp_size_in_bytes / 2**20
        self.runnable = (
            limit_mib is None or self.buffers_mib is None or (self.buffers_mib <= limit_mib)
        )

    def run(self):
        loss, self.trainable, self.non_trainable = self.compiled(
            self.trainable, self.non_trainable, self.inputs, self.targets
        )
        return loss


def device_memory_mib():
    """The memory of JAX's first device in MiB, or None where JAX does not say (a CPU)."""
    stats = _jax().devices()[0].memory_stats() or {}
    limit = stats.get("bytes_limit")
    return None if limit is None else limit / 2**20


class Budget:
    """The run's time budget, shared among the tables: a table may start another row while
    the run is within its budget and the table within its share of what was left when it
    began (`BUDGET_SHARES`, among the tables still to come), so that time a table leaves
    unused goes to the later ones."""

    def __init__(self, seconds, tables):
        self.start, self.seconds = time.perf_counter(), seconds
        self.to_come = list(tables)
        self.table_start, self.table_seconds = self.start, seconds

    def begin(self, table):
        self.table_start = time.perf_counter()
        left = self.seconds - (self.table_start - self.start)
        self.table_seconds = (
            left * BUDGET_SHARES[table] / sum(BUDGET_SHARES[t] for t in self.to_come)
        )
        self.to_come.remove(table)

    def allows(self):
        now = time.perf_counter()
        return now - self.start < self.seconds and now - self.table_start < self.table_seconds


SKIPPED = "not run: the run's time budget was spent"


def with_policy(dtype, build):
    """``build()`` under the dtype policy ``dtype`` (restored afterwards)."""
    import keras

    saved = keras.config.dtype_policy()
    keras.config.set_dtype_policy(dtype)
    try:
        return build()
    finally:
        keras.config.set_dtype_policy(saved)


def timed_rows(steps, rounds):
    """Median ms of each runnable `Step` of ``steps`` (a dict), interleaved, the median
    per-round ratios to the first, and the samples (`timing.interleaved`)."""
    runners = {name: step.run for name, step in steps.items() if step.runnable}
    for run in runners.values():  # the first runs after compiling are not timed
        timing.wait_for(run())
    samples = timing.interleaved(runners, rounds)
    return timing.medians(samples), timing.median_ratio(samples, next(iter(runners))), samples


def median_saving_over(samples, minuend, subtrahend, unit):
    """The median over the rounds of ``(minuend - subtrahend) / unit``, each round's times:
    the time ``subtrahend``'s stand-ins save, in units of ``unit``'s time."""
    return float(
        np.median(
            [
                (big - small) / scale
                for big, small, scale in zip(samples[minuend], samples[subtrahend], samples[unit])
            ]
        )
    )


def window_attention_table(sizes, budget, peaks, limit_mib, progress):
    """Rows of ``window_attention``: per dtype and T, ours, its floor and the peer."""
    import keras

    from benchmarks.speed.window_attention_floor import (
        PARTS,
        _layer,
        equal_weight_key_dim,
        stand_ins,
        variant_products,
    )

    width, batch = sizes["width"], sizes["peer_batch"]
    key_dim = equal_weight_key_dim(width, ATTENTION_UNITS)
    rows = []
    for steps in sizes["lengths"]:
        for dtype in DTYPES:
            row = {"dtype": dtype, "T": steps}
            if not budget.allows():
                rows.append({**row, "status": SKIPPED})
                continue
            x = np.random.default_rng(0).normal(size=(batch, steps, width))
            x = x.astype("float32")
            built = {}
            parts = tuple(PARTS) if steps <= sizes["parts_max_length"] else ()
            for variant in ("ours", "floor", "mha", *parts):
                if variant == "mha" and steps > sizes.get("peer_max_length", steps):
                    row["mha_ms"] = (
                        f"not run: the peer is compiled up to T = "
                        f"{sizes['peer_max_length']} (--peer-max-length)"
                    )
                    continue
                # What a run that ends here (its time limit) leaves in the results file.
                progress(rows + [{**row, "status": f"compiling {variant} when the run ended"}])

                def build(variant=variant, steps=steps):
                    forward, _ = _layer(variant, WINDOW, ATTENTION_UNITS, key_dim)
                    inputs = keras.Input((steps, width), batch_size=batch)
                    outputs = keras.layers.Dense(width)(forward(inputs))
                    return keras.Model(inputs, outputs)

                try:
                    # A part's stand-ins are in place while its step is traced and compiled.
                    with stand_ins(PARTS[variant][1] if variant in PARTS else ()):
                        built[variant] = Step(
                            with_policy(dtype, build), x, None, mean_square, limit_mib
                        )
                except Exception as error:  # noqa: BLE001  (recorded in the row)
                    row[f"{variant}_error"] = _error(error)
                    continue
                row[f"{variant}_buffers_mib"] = built[variant].buffers_mib
                row[f"{variant}_compile_s"] = built[variant].compile_s
                if not built[variant].runnable:
                    row[f"{variant}_ms"] = f"not run: needs {built[variant].buffers_mib:.0f} MiB"
            if "ours" not in built or not built["ours"].runnable:
                rows.append(row)
                continue
            medians, ratios, samples = timed_rows(built, sizes["rounds"])
            for variant, ms in medians.items():
                row[f"{variant}_ms"] = ms
                if variant in PARTS:
                    continue
                products = variant_products(
                    variant, batch * steps, width, ATTENTION_UNITS, key_dim, steps, WINDOW
                )
                share = matmul_peak.floor_columns(
                    matmul_peak.training_flops(products), ms, peaks[dtype]
                )
                row[f"{variant}_gflop_per_step"] = share["gflop_per_step"]
                row[f"{variant}_share_of_peak"] = share["share_of_peak"]
            for variant in ("floor", "mha"):
                if variant in ratios:
                    row[f"ours_over_{variant}"] = 1 / ratios[variant]
            if parts and "floor" in samples and all(part in samples for part in parts):
                # What each part costs above the floor, in units of the floor's time: the
                # time its stand-in saves; "rest": what ours without both parts still costs
                # above the floor (the parts overlap, so the three need not add up).
                for variant, (name, _) in PARTS.items():
                    row[f"{name}_over_floor"] = median_saving_over(
                        samples, "ours", variant, "floor"
                    )
                row["rest_over_floor"] = median_saving_over(
                    samples, "ours_without_both", "floor", "floor"
                )
            if isinstance(row.get("mha_buffers_mib"), float) and row.get("ours_buffers_mib"):
                row["ours_memory_over_mha"] = row["ours_buffers_mib"] / row["mha_buffers_mib"]
            rows.append(row)
            progress(rows)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def language_model_table(sizes, budget, peaks, limit_mib, progress):
    """Rows of ``language_model``: per dtype, each LM variant against the bare LSTM."""
    import keras

    from benchmarks.speed.window_attention import LM_VARIANTS, lm_model

    batch, steps, vocab = sizes["lm_batch"], sizes["lm_steps"], sizes["lm_vocab"]
    rng = np.random.default_rng(0)
    x = rng.integers(0, vocab, (batch, steps)).astype("int32")
    y = rng.integers(0, vocab, (batch, steps)).astype("int32")
    rows = []
    for dtype in DTYPES:
        built, row_of = {}, {}
        for variant in sizes.get("lm_variants", LM_VARIANTS):
            row_of[variant] = {"dtype": dtype, "variant": variant}
            if not budget.allows():
                row_of[variant]["status"] = SKIPPED
                continue
            progress(rows + [{**row_of[variant], "status": "compiling when the run ended"}])
            try:
                model = with_policy(
                    dtype, lambda v=variant: lm_model(v, vocab, sizes["lm_hidden"], steps, batch)
                )
                built[variant] = Step(model, x, y, token_crossentropy, limit_mib)
            except Exception as error:  # noqa: BLE001  (recorded in the row)
                row_of[variant]["error"] = _error(error)
                continue
            lstm = [layer for layer in model.layers if isinstance(layer, keras.layers.LSTM)]
            row_of[variant]["cudnn"] = lstm[0].use_cudnn if lstm else None
        if "lstm" in built and len(built) > 1:
            medians, ratios, _ = timed_rows(built, sizes["rounds"])
            for variant, ms in medians.items():
                flops = matmul_peak.weight_training_flops_per_token(built[variant].model)
                row_of[variant].update(
                    median_ms=ms,
                    ratio_to_lstm=ratios[variant],
                    **matmul_peak.floor_columns(flops * batch * steps, ms, peaks[dtype]),
                )
        rows.extend(row_of.values())
        progress(rows)
    return rows


def associative_memory_table(sizes, budget, peaks, limit_mib, progress):
    """Rows of ``associative_memory``: per dtype, the AM-GRU (C = 8, layer and cell form)
    against `keras.layers.GRU`, per time step."""
    import keras

    from benchmarks.speed.associative_memory import holographic_stand_ins
    from tf_memlayers import AssociativeGRU, AssociativeGRUCell

    batch, steps, units, copies = sizes["am_batch"], sizes["am_steps"], sizes["am_units"], 8
    x = np.random.default_rng(0).normal(size=(batch, steps, units)).astype("float32")
    layers = {
        "GRU": lambda: keras.layers.GRU(units),
        f"AssociativeGRU C={copies}": lambda: AssociativeGRU(units, num_copies=copies),
        f"RNN(AssociativeGRUCell) C={copies}": lambda: keras.layers.RNN(
            AssociativeGRUCell(units, num_copies=copies)
        ),
        FLOOR_LAYER: lambda: AssociativeGRU(units, num_copies=copies),
    }
    rows = []
    for dtype in DTYPES:
        if not budget.allows():
            rows.extend({"dtype": dtype, "layer": name, "status": SKIPPED} for name in layers)
            continue
        built = {}
        for name, make in layers.items():

            def build(make=make):
                inputs = keras.Input((steps, units), batch_size=batch)
                return keras.Model(inputs, keras.layers.Dense(1)(make()(inputs)))

            with holographic_stand_ins() if name == FLOOR_LAYER else contextlib.nullcontext():
                built[name] = Step(with_policy(dtype, build), x, None, mean_square, limit_mib)
        medians, ratios, _ = timed_rows(built, sizes["rounds"])
        for name, ms in medians.items():
            flops = matmul_peak.weight_training_flops_per_token(built[name].model)
            rows.append(
                {
                    "dtype": dtype,
                    "layer": name,
                    "ms_per_time_step": ms / steps,
                    "ratio_to_gru": ratios[name],
                    **matmul_peak.floor_columns(flops * batch * steps, ms, peaks[dtype]),
                }
            )
    return rows


def snli_table(sizes, budget, peaks, limit_mib, progress):
    """Rows of ``snli``: per dtype, the SNLI model's step with each layer 1 against GRU."""
    from benchmarks.speed.associative_memory import snli_step_rows
    from examples.snli.encoders import snli_model

    batch, units = sizes["snli_batch"], sizes["snli_units"]
    premise_length, hypothesis_length = 25, 15
    rng = np.random.default_rng(0)
    premise = rng.integers(2, 1000, (batch, premise_length)).astype("int32")
    hypothesis = rng.integers(2, 1000, (batch, hypothesis_length)).astype("int32")
    labels = rng.integers(0, 3, batch).astype("int32")
    count = snli_step_rows(batch, premise_length, hypothesis_length)
    rows = []
    for dtype in DTYPES:
        kinds = ("gru", "am_gru", "dual_am_gru")
        if not budget.allows():
            rows.extend({"dtype": dtype, "kind": kind, "status": SKIPPED} for kind in kinds)
            continue
        built = {}
        for kind in kinds:
            model = with_policy(
                dtype,
                lambda kind=kind: snli_model(1000, kind=kind, units=units, embedding_dim=units),
            )
            built[kind] = Step(model, [premise, hypothesis], labels, label_crossentropy, limit_mib)
        medians, ratios, _ = timed_rows(built, sizes["rounds"])
        for kind, ms in medians.items():
            flops = matmul_peak.weight_training_flops(built[kind].model, count)
            rows.append(
                {
                    "dtype": dtype,
                    "kind": kind,
                    "median_ms": ms,
                    "ratio_to_gru": ratios[kind],
                    **matmul_peak.floor_columns(flops, ms, peaks[dtype]),
                }
            )
    return rows


def heap_write_table(sizes, budget, peaks, limit_mib, progress):
    """Rows of ``heap_write``: `HeapCacheAttention.insert` of 64 states into a full cache of
    K (the weakest K of a scored pool, in ascending order: a valid min-heap), heap against
    top-k; the batch either beats every cached state (worst case) or is random."""
    import keras

    from tf_memlayers import HeapCacheAttention

    batch, width, units = sizes["heap_batch"], 128, 64
    rows = []
    for dtype in ("float32",):  # the write compares scores: no mixed-precision variant
        for cache_size in sizes["heap_sizes"]:
            if not budget.allows():
                rows.append({"dtype": dtype, "cache_size": cache_size, "status": SKIPPED})
                continue
            rng = np.random.default_rng(0)
            runners, layers = {}, {}
            for policy in ("heap", "topk"):
                layer = HeapCacheAttention(cache_size, units, policy=policy)
                layer.build((None, width))
                pool = rng.normal(size=(cache_size + batch, width)).astype("float32")
                scores = np.tanh(pool @ keras.ops.convert_to_numpy(layer.cache_kernel)) @ (
                    keras.ops.convert_to_numpy(layer.cache_score)
                )
                pool = pool[np.argsort(scores[:, 0] if scores.ndim > 1 else scores)]
                full, strongest = pool[:cache_size], pool[cache_size:]
                random_batch = rng.normal(size=(batch, width)).astype("float32")
                layers[policy] = layer
                for case, candidates in (("worst", strongest), ("random", random_batch)):

                    def insert(layer=layer, full=full, candidates=candidates):
                        layer.cache.assign(full)
                        return layer.insert(candidates)

                    runners[f"{policy}_{case}"] = insert
            for run in runners.values():
                timing.wait_for(run())
            medians = timing.medians(timing.interleaved(runners, sizes["rounds"]))
            row = {"dtype": dtype, "cache_size": cache_size}
            for name, ms in medians.items():
                row[f"{name}_ms"] = ms
            row["heap_over_topk_worst"] = medians["heap_worst"] / medians["topk_worst"]
            row["heap_over_topk_random"] = medians["heap_random"] / medians["topk_random"]
            rows.append(row)
    return rows


BUILDERS = {
    "window_attention": window_attention_table,
    "language_model": language_model_table,
    "associative_memory": associative_memory_table,
    "snli": snli_table,
    "heap_write": heap_write_table,
}


def _error(error):
    """An exception as one line of a results file."""
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300]


def device_description():
    """JAX's version and its devices, as the results file records them."""
    jax = _jax()
    import keras

    devices = jax.devices()
    return {
        "jax": jax.__version__,
        "keras": keras.__version__,
        "backend": jax.default_backend(),
        "devices": [f"{d.platform}:{getattr(d, 'device_kind', '')}" for d in devices],
        "device_memory_mib": device_memory_mib(),
        "matmul_precision": str(jax.config.jax_default_matmul_precision),
        "xla_flags": os.environ.get("XLA_FLAGS"),
    }


def write(path, results):
    """Writes ``results`` as JSON, replacing ``path`` whole."""
    path = pathlib.Path(path)
    scratch = path.with_suffix(".tmp")
    scratch.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    scratch.replace(path)


def earlier_peaks(path):
    """The matrix-product peaks of the results file ``path`` (``peak_gflops`` and
    ``peak_gflops_float32_highest``), or None when it has none (an earlier step that
    failed before measuring them)."""
    try:
        earlier = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    peaks = {key: earlier.get(key) for key in ("peak_gflops", "peak_gflops_float32_highest")}
    return peaks if peaks["peak_gflops"] else None


def run(sizes, out, budget_s, tables=TABLES, name=None, peaks_from=None):
    """Measures ``tables`` at ``sizes`` (a value of `SIZES`, called ``name``); writes ``out``
    after each. The shares of peak are of the peaks in the results file ``peaks_from`` when
    it has them (an earlier step of the same run), else of peaks measured here."""
    import keras

    if keras.backend.backend() != "jax":
        raise SystemExit("benchmarks.gpu.speed: run it with KERAS_BACKEND=jax")
    keras.utils.set_random_seed(0)
    results = {
        "sizes": name,
        "tables_asked": list(tables),
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in sizes.items()},
        "device": device_description(),
        "tables": {},
        "errors": {},
    }
    budget = Budget(budget_s, tables)
    # The matrix-product rates the shares are taken against, per dtype policy: float32
    # products at JAX's default precision, bfloat16 products for the mixed policy.
    started = time.perf_counter()
    earlier = earlier_peaks(peaks_from) if peaks_from else None
    if earlier:
        results.update(earlier, peaks_from=str(peaks_from))
    else:
        if peaks_from:
            print(f"no peaks in {peaks_from}: measuring them", file=sys.stderr, flush=True)
        results["peak_gflops"] = {
            "float32": matmul_peak.peak_gflops(sizes["peak_sizes"], dtype="float32"),
            "mixed_bfloat16": matmul_peak.peak_gflops(sizes["peak_sizes"], dtype="bfloat16"),
        }
        # For reference: float32 products at full precision (on a GPU, without TF32).
        with _jax().default_matmul_precision("highest"):
            results["peak_gflops_float32_highest"] = matmul_peak.peak_gflops(
                sizes["peak_sizes"], dtype="float32"
            )
    results["peaks_seconds"] = round(time.perf_counter() - started, 1)
    peaks = results["peak_gflops"]
    write(out, results)
    memory = device_memory_mib()
    limit_mib = None if memory is None else 0.8 * memory
    for table in tables:
        budget.begin(table)
        started = time.perf_counter()

        def progress(rows, table=table):
            results["tables"][table] = rows
            write(out, results)

        try:
            results["tables"][table] = BUILDERS[table](sizes, budget, peaks, limit_mib, progress)
        except Exception as error:  # noqa: BLE001  (one table's failure leaves the others)
            results["errors"][table] = _error(error)
            results["tables"][table] = [
                row
                for row in results["tables"].get(table, [])
                if not str(row.get("status")).startswith("compiling")
            ]
            print(f"{table}: {_error(error)}", file=sys.stderr, flush=True)
        results.setdefault("seconds", {})[table] = round(time.perf_counter() - started, 1)
        write(out, results)
    return results


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes",
        choices=sorted(SIZES),
        default="full",
        help="full sizes (a GPU) or the rehearsal's tiny ones (default: full)",
    )
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument(
        "--budget-s",
        type=positive(float),
        default=200.0,
        help="seconds the tables may take in all (default: 200)",
    )
    parser.add_argument(
        "--tables",
        nargs="+",
        choices=TABLES,
        default=list(TABLES),
        help="the tables to measure (default: all)",
    )
    parser.add_argument(
        "--peer-max-length",
        type=positive(int),
        help="compile MultiHeadAttention only up to this T (default: at every length)",
    )
    parser.add_argument(
        "--peaks-from",
        metavar="FILE",
        help="the results file of an earlier step of the same run, whose "
        "matrix-product peaks the shares of peak use (default: measure them; "
        "also when FILE has none)",
    )
    parser.add_argument(
        "--lengths",
        nargs="+",
        type=positive(int),
        help="the window-attention table's sequence lengths (default: the sizes')",
    )
    return parser.parse_args(argv)


def main(argv=None):
    """Exit status 1 when a table failed (its error is in the results file)."""
    args = parse_args(argv)
    sizes = dict(SIZES[args.sizes])
    if args.lengths:
        sizes["lengths"] = tuple(args.lengths)
    if args.peer_max_length:
        sizes["peer_max_length"] = args.peer_max_length
    results = run(sizes, args.out, args.budget_s, args.tables, args.sizes, args.peaks_from)
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
