"""The speed tables (``python -m benchmarks.speed``): per case (a dtype, a length, ...) the
variants of one training step (each a function building its `Step`, or a callable)."""

import contextlib
import functools
import os
import subprocess
import sys
import tempfile
from unittest import mock

import numpy as np

from benchmarks import results_file, timing
from benchmarks import step as training

#: LM variants ``kind-form:size`` (an attention's window, the N-gram RNN's N).
GPU_LM_VARIANTS = ("lstm", "window-parallel:5", "window-parallel:10", "window-cell:5")
GPU_LM_VARIANTS += ("window-cell:10", "ngram-parallel:4", "ngram-cell:4")
LM_VARIANTS = GPU_LM_VARIANTS + ("key_value-parallel:5", "key_value_predict-parallel:5")
LM_KINDS = ("lstm", "attention-parallel:5", "key_value-parallel:5")
LM_KINDS += ("key_value_predict-parallel:5", "ngram-parallel:4")
#: The settings of the CPU tables (``full``), of a GPU run (``gpu``) and of a check of every
#: code path in seconds (``tiny``); options of ``python -m benchmarks.speed`` replace some.
SIZES = {"full": dict(rounds=15, width=300, batch=8, memory_limit_gib=12.0)}
SIZES["full"].update(lengths=(20, 100, 400, 1000, 2000, 4000), parts_max_length=100000)
SIZES["full"]["peak_sizes"] = (512, 1024, 2048)
SIZES["full"].update(lm_vocab=10000, lm_hidden=300, lm_equal_hidden=200, lm_batch=64, lm_steps=20)
SIZES["full"].update(am_units=100, am_batch=50, am_steps=30, am_copies=(8, 1), snli_units=100)
SIZES["full"].update(dual_lengths=(10, 25, 50, 100, 200, 500, 1000, 2000), snli_batch=50)
SIZES["full"].update(heap_sizes=(100, 1000, 10000, 100000), heap_batch=64, heap_step_cache=10000)
SIZES["full"].update(wrapper_lengths=(10, 50, 200), backend_rounds=2, backend_window_length=400)
SIZES["full"]["backend_compile_s"] = 3600
SIZES["full"].update(packing_hidden=128, packing_batch=32, packing_vocab=33278)
SIZES["gpu"] = dict(SIZES["full"], rounds=20, lengths=(20, 100, 1000), parts_max_length=100)
SIZES["gpu"].update(am_copies=(8,), heap_sizes=(1000, 10000), peak_sizes=(4096, 8192))
# A GPU run's share of the variants: those its goals need.
SIZES["gpu"].update(window_variants=("ours", "floor", "mha"), lm_variants=GPU_LM_VARIANTS)
SIZES["tiny"] = dict(SIZES["full"], rounds=2, width=16, batch=2, peak_sizes=(256,), snli_batch=4)
SIZES["tiny"].update(lengths=(20,), parts_max_length=20, backend_rounds=1)
SIZES["tiny"].update(backend_window_length=20, backend_compile_s=900)
SIZES["tiny"].update(lm_vocab=50, lm_hidden=18, lm_equal_hidden=12, lm_batch=4, lm_steps=5)
SIZES["tiny"].update(am_units=8, am_batch=4, am_steps=5, am_copies=(8,), snli_units=8)
SIZES["tiny"].update(dual_lengths=(10,), heap_sizes=(16,), heap_batch=8, packing_vocab=50)
SIZES["tiny"].update(heap_step_cache=16, wrapper_lengths=(10,), packing_hidden=8, packing_batch=4)
# One variant of each memory kind and form: the code paths of all of them.
SIZES["tiny"]["lm_variants"] = ("lstm", "window-parallel:5", "window-cell:5", "ngram-cell:4")
SKIPPED = "not run: the run's time budget was spent"


class _Keras:  # Keras on first use: ``python -m benchmarks.speed`` picks the backend after import
    def __getattr__(self, name):
        return getattr(__import__("keras"), name)


keras = _Keras()
WINDOW, ATTENTION_UNITS = 10, 32


def one_line(error):
    lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [""]
    return f"{type(error).__name__}: {lines[-1] if 'in user code' in lines[0] else lines[0]}"[:300]


def child(*argv, python=None, timeout=None):
    """``python -m benchmarks.speed *argv`` in a child ``python``: its results, or its stderr."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "out.json")
        command = [python or sys.executable, "-m", "benchmarks.speed", *argv, "--out", out]
        try:
            stderr = subprocess.run(command, capture_output=True, text=True, timeout=timeout).stderr
        except subprocess.TimeoutExpired as stopped:
            stderr = f"stopped after {timeout:.0f} s: {stopped.stderr or ''}"
        return results_file.read(out) or stderr[-300:]


def normal(*shape):
    return np.random.default_rng(0).normal(size=shape).astype("float32")


def tokens(vocab, *shape):
    return np.random.default_rng(0).integers(0, vocab, shape).astype("int32")


def layer_step(layer, shape, head=1, memory=None, data=None, state=None, **options):
    """The `Step` of ``Dense(head)`` on ``layer`` of an input of ``shape`` (and a ``memory`` of
    that shape: its ``call``'s ``memory``, or ``state(input, memory)``), ``data`` or random."""
    shapes = [shape, *([memory] if memory else [])]
    inputs = [keras.Input(shape[1:], batch_size=shape[0]) for shape in shapes]
    call = {"memory": inputs[1]} if memory else {}
    call = {"initial_state": state(*inputs)} if state else call
    model = keras.Model(inputs, keras.layers.Dense(head)(layer(inputs[0], **call)))
    data = data or [normal(*shape) for shape in shapes]
    return training.Step(model, data if memory else data[0], **options)


def lm_step(model, vocab, batch, steps, packed=False, **options):
    """The `Step` of a language model on random tokens (``packed``: with in-graph resets)."""
    x, y = tokens(vocab, batch, steps), tokens(vocab, batch, steps + 1)[:, 1:]
    x = {"tokens": x, "reset": np.eye(batch, steps, dtype=bool)} if packed else x
    return training.Step(model, x, y, training.token_crossentropy, **options)


def replaced(*attributes):
    """A context in which each ``(owner, name, value)`` replaces ``owner.name``."""
    stack = contextlib.ExitStack()
    for owner, name, value in attributes:
        stack.enter_context(mock.patch.object(owner, name, value))
    return stack


class Table:
    """A table of `variants` (results ``file`` in ``benchmarks/results/``); by default a row per
    variant under ``key``: its median, ``ratio`` to the first variant, arithmetic, or error."""

    buffers = False  # whether its rows give XLA's buffers (on TensorFlow from a JAX child)
    per_second = False  # whether its rows give the tokens (`vectors`) per second
    backends = ("tensorflow", "jax", "torch")
    median = "median_ms"

    def __init__(self, file, key=None, ratio="ratio", **options):
        self.file, self.key, self.ratio, self.options = file, key, ratio, options

    def cases(self, sizes):
        return [{"dtype": dtype} for dtype in sizes["dtypes"]]

    def measure(self, sizes, case, peak, buffers, gave_up):
        """The rows of one case (``buffers``: XLA's, measured apart; ``gave_up``: failed before)."""
        built, errors = {}, {}
        for name, make in self.variants(sizes, case).items():
            if name in gave_up:
                errors[name] = gave_up[name]
                continue
            sizes["progress"]([{**case, "status": f"compiling {name} when the run ended"}])
            try:
                built[name] = make()
            except Exception as error:  # noqa: BLE001  (recorded in the rows)
                errors[name] = gave_up[name] = one_line(error)
                continue
            if isinstance(buffers.get(name), float):
                built[name].buffers_mib = buffers[name]
                built[name].runnable = buffers[name] <= sizes["limit_mib"]
            if not getattr(built[name], "runnable", True):
                gave_up[name] = f"not run: needed {built[name].buffers_mib:.0f} MiB at {case}"
        if sizes.get("buffers_only"):
            found = {f"{n}_buffers_mib": b.buffers_mib for n, b in built.items()}
            found.update({f"{n}_buffers_mib": f"not measured: {e}" for n, e in errors.items()})
            return [{**case, **found}]
        runners = {n: getattr(b, "run", b) for n, b in built.items() if getattr(b, "runnable", 1)}
        for run in runners.values():
            timing.wait_for(run())
        samples = timing.interleaved(runners, sizes["rounds"]) if runners else {}
        rows = self.rows(sizes, case, built, samples, errors, peak)
        for row in rows if sizes.get("samples") else ():
            row["samples_ms"] = samples.get(row.get(self.key))
        return rows

    def rows(self, sizes, case, built, samples, errors, peak):
        rows, medians = [], timing.medians(samples)
        ratios = timing.median_ratio(samples, next(iter(samples))) if samples else {}
        for name in [*built, *errors]:
            row = {**case, self.key: name, **getattr(built.get(name), "info", {})}
            if name in samples:
                vectors = self.vectors(sizes, name)
                flops = training.weight_training_flops(built[name].model, vectors)
                row.update({self.median: medians[name], self.ratio: ratios[name]})
                row.update(training.floor_columns(flops, medians[name], peak))
                if self.per_second and vectors:
                    row["tokens_per_second"] = round(vectors / medians[name] * 1000)
            elif name in errors:
                row["status"] = row["error"] = f"failed: {errors[name]}"
            else:
                row["status"] = f"not run: needs {built[name].buffers_mib:.0f} MiB"
            if name in built:
                self.more(sizes, row, built[name], samples)
            rows.append(row)
        return rows

    def vectors(self, sizes, name):  # `training.weight_training_flops`' rows; 0: not counted
        return 0

    @staticmethod
    def wide_row(row, built, samples, errors, peak, flops=None, per=1, ms="ms"):
        """``row`` with each variant's ``{name}_{ms}`` (its median / ``per``, or its error), its
        XLA buffers (a `Step`'s), and the GFLOP and share of peak of ``flops(name, step)``."""
        medians = timing.medians(samples)
        for name, step in built.items():
            if hasattr(step, "buffers_mib"):
                row[f"{name}_buffers_mib"] = step.buffers_mib
            if name in medians:
                row[f"{name}_{ms}"] = medians[name] / per
                if flops and (count := flops(name, step)):
                    row.update(training.floor_columns(count, medians[name], peak, f"{name}_"))
        return row | {f"{name}_{ms}": error for name, error in errors.items()}

    def more(self, sizes, row, step, samples):  # a built variant's own columns
        pass


PART = "eqs (2)-(4) alone:10"


def parse_variant(variant):
    """``(kind, form, options)`` of LM variant ``kind-form:size``: the language-model example's
    kind (``window``: ``attention``) and form, and its ``window`` or ``ngram`` of the size."""
    from examples.language_modeling.models import FORMS, KINDS

    kind, _, rest = variant.partition("-")
    (form, _, size), kind = rest.partition(":"), "attention" if kind == "window" else kind
    if kind not in KINDS or form not in ("", *FORMS):
        raise ValueError(f"unknown LM variant {variant!r}; e.g. {', '.join(LM_VARIANTS)}")
    options = {"ngram" if kind == "ngram" else "window": int(size)} if size else {}
    return kind, form or "parallel", options


def lm_model(variant, vocab, hidden, steps, batch, dropout=0.0, embedding_dim=None):
    """The language-model example's model (examples/language_modeling) of ``variant``."""
    from examples.language_modeling.models import language_model

    kind, form, options = parse_variant(variant)
    options.update(units=hidden, embedding_dim=embedding_dim or hidden, stateful=False)
    options.update(dropout=dropout, batch_size=batch, sequence_length=steps)
    return language_model(vocab, kind, form, **options)


def attention_part_model(hidden, steps, batch, window=10):
    """Eqs (2)-(4) of the parallel form on streams already projected (weights: get gradients)."""
    from tf_memlayers import SlidingWindowAttention

    class AttentionPart(keras.layers.Layer):
        def build(self, _):
            self.attention = SlidingWindowAttention(window)
            self.attention.build((batch, steps, hidden))
            shapes = ((window + steps,), (steps,), (window,), (steps,))
            self.streams = [self.add_weight((batch, *s, hidden), "random_normal") for s in shapes]
            self.projection = self.add_weight((batch, steps, hidden), trainable=False)
            ones = keras.ops.ones((batch, steps))
            self.valid = keras.ops.concatenate([keras.ops.zeros((batch, window)), ones], 1)

        def call(self, inputs):
            context, _ = self.attention._attend_stream(*self.streams, self.valid)
            return context * self.projection + 0 * inputs[:, :1, None]

    inputs = keras.Input((steps,), batch_size=batch)
    return keras.Model(inputs, AttentionPart()(inputs))


class LanguageModel(Table):
    """The LM step per memory variant against the bare LSTM (``equal_parameters``: its weights)."""

    per_second = True

    def variants(self, sizes, case):
        vocab, batch, length = sizes["lm_vocab"], sizes["lm_batch"], sizes["lm_steps"]
        equal, limit = self.options.get("equal_parameters"), sizes["limit_mib"]
        width = sizes["lm_equal_hidden" if equal else "lm_hidden"]
        shape = dict(vocab=vocab, steps=length, batch=batch, embedding_dim=width)
        shape["dropout"] = 0.4 if equal else 0.0
        budget = equal and lm_model("lstm", hidden=width, **shape).count_params()

        def make(variant):
            from examples.language_modeling.models import units_for_budget

            (kind, _, options), hidden = parse_variant(variant), width
            if budget and kind != "lstm":  # the width closest to the LSTM's parameters
                hidden = units_for_budget(vocab, kind, budget, embedding_dim=width, **options)[0]
            model = lm_model(variant, hidden=hidden, **shape)
            lstm = [layer for layer in model.layers if isinstance(layer, keras.layers.LSTM)]
            step = lm_step(model, vocab, batch, length, limit_mib=limit)
            step.info = dict(kind=kind, hidden=hidden, cudnn=lstm[0].use_cudnn if lstm else None)
            return step

        made = {v: lambda v=v: make(v) for v in sizes.get("lm_variants", self.options["variants"])}
        if self.options.get("part"):
            model = lambda: attention_part_model(width, length, batch)  # noqa: E731
            made[PART] = lambda: training.Step(model(), tokens(vocab, batch, length))
        return made

    def vectors(self, sizes, name):
        return 0 if name == PART else sizes["lm_batch"] * sizes["lm_steps"]

    def more(self, sizes, row, step, samples):
        row["parameters"] = step.model.count_params()


class Packing(Table):
    """The plain LSTM LM's step, documents packed (in-graph resets) against padded."""

    median, per_second = "step_ms", True

    def variants(self, sizes, case):
        from tf_memlayers.models import build_language_model

        vocab, batch, hidden = (sizes[f"packing_{key}"] for key in ("vocab", "batch", "hidden"))

        def make(packed):
            options = dict(units=hidden, embedding_dim=hidden, batch_size=batch, stateful=False)
            model = build_language_model(vocab, resets=packed, **options)
            return lm_step(model, vocab, batch, 20, packed)

        return {"padded": lambda: make(False), "packed": lambda: make(True)}

    def vectors(self, sizes, name):
        return sizes["packing_batch"] * 20


#: Ours with parts replaced by stand-ins: ``variant: (its saving's name, the parts)``.
PARTS = dict(ours_without_weighted_sum=("weighted_sum", ("weighted_sum",)))
PARTS |= dict(ours_without_scores=("scores", ("scores",)))
PARTS["ours_without_both"] = ("attention", ("weighted_sum", "scores"))


def equal_weight_key_dim(width, attention_units):
    """One-head `MultiHeadAttention`'s ``key_dim`` at our weights (``4 width k + 3 k + width``)."""
    ours = 2 * width * attention_units + attention_units + 2 * width * width
    return round((ours - width) / (4 * width + 3))


def window_products(variant, rows, width, steps):
    """``(rows, inner, columns)`` of a variant's products and the ``Dense(width)``'s."""
    base, dense = variant.removesuffix("_no_xla"), [(rows, width, width)]
    if base in ("ours", "floor"):
        return dense + [(rows, width, ATTENTION_UNITS)] * 2 + [(rows, width, width)] * 2
    k = equal_weight_key_dim(width, ATTENTION_UNITS) if base == "mha" else ATTENTION_UNITS
    # Q, K, V and the output projection; the T × T scores and their weighted sum.
    return dense + [(rows, width, k)] * 3 + [(rows, k, width), (rows, k, steps), (rows, steps, k)]


def stand_ins(parts):
    """A context in which `SlidingWindowAttention`'s ``parts`` (``weighted_sum``: eq. (4),
    ``scores``: eqs (2)-(3)) are elementwise stand-ins reading the same inputs."""
    from keras import ops

    from tf_memlayers.layers.window_attention import window_attention_mechanism as mechanism
    from tf_memlayers.ops import windows

    def weighted_sum(weights, carried, steps):
        return steps * ops.sum(weights, -1, keepdims=True) + ops.sum(carried, 1, keepdims=True)

    def window_alpha(layer, window_keys, query, window_valid):
        alpha = ops.sum(window_keys, axis=-1) + ops.sum(query, axis=-1, keepdims=True)
        alpha = alpha + ops.sum(layer.score_vector)
        if layer.use_bias:
            alpha = alpha + ops.sum(layer.memory_bias)
        if window_valid is not None:
            alpha = alpha * ops.cast(window_valid, alpha.dtype)
        return alpha

    found = dict(weighted_sum=(windows, "window_weighted_sum", weighted_sum))
    found["scores"] = (mechanism.WindowAttentionMechanism, "_window_alpha", window_alpha)
    return replaced(*(found[part] for part in parts))


def window_layer(variant, width):
    """``ours``; ``floor``: its four products alone; ``mha``: `MultiHeadAttention`, sliding
    causal mask, at our weights; ``mha_width``: at our attention width."""
    from tf_memlayers import SlidingWindowAttention

    base, ops = variant.removesuffix("_no_xla"), keras.ops
    if base in ("mha", "mha_width"):
        size = equal_weight_key_dim(width, ATTENTION_UNITS) if base == "mha" else ATTENTION_UNITS
        mha = keras.layers.MultiHeadAttention(1, size, sliding_window=WINDOW + 1)
        return lambda h: mha(h, h, use_causal_mask=True)
    if base != "floor":
        return SlidingWindowAttention(WINDOW, attention_units=ATTENTION_UNITS)

    class Products(keras.layers.Layer):
        def build(self, shape):
            self.memory_kernel = self.add_weight((shape[-1], ATTENTION_UNITS))
            self.query_kernel = self.add_weight((shape[-1], ATTENTION_UNITS))
            self.context_kernel = self.add_weight((shape[-1], shape[-1]))
            self.predict_kernel = self.add_weight((shape[-1], shape[-1]))

        def call(self, h):
            out = ops.matmul(h, self.context_kernel) + ops.matmul(h, self.predict_kernel)
            scores = ops.matmul(h, self.memory_kernel) * ops.matmul(h, self.query_kernel)
            return ops.tanh(out + ops.sum(scores, axis=-1, keepdims=True))

    return Products()


class WindowAttention(Table):
    """Each window-attention variant's step per length (on TensorFlow ``no_xla``'s also without
    XLA), its XLA buffers and `PARTS`' savings."""

    buffers = True

    def cases(self, sizes):
        lengths = sizes["lengths"]
        return [{"dtype": dtype, "T": length} for length in lengths for dtype in sizes["dtypes"]]

    def variants(self, sizes, case):
        width, batch, length = sizes["width"], sizes["batch"], case["T"]
        names = list(sizes.get("window_variants", self.options["variants"]))
        if keras.backend.backend() == "tensorflow":
            names += [f"{name}_no_xla" for name in self.options["no_xla"] if name in names]
        if length <= sizes["parts_max_length"]:
            names += PARTS

        def make(name):
            jit = None if "no_xla" not in name else False  # None: the run's (`training.JIT`)
            layer, limit = window_layer(name, width), sizes["limit_mib"]
            with stand_ins(PARTS[name][1] if name in PARTS else ()):
                step = layer_step(layer, (batch, length, width), width, jit=jit, limit_mib=limit)
            step.info = {"weights": step.model.count_params() - width * (width + 1)}
            return step

        return {name: lambda name=name: make(name) for name in names}

    def rows(self, sizes, case, built, samples, errors, peak):
        vectors, width, row = sizes["batch"] * case["T"], sizes["width"], dict(case)
        products = lambda name, _: window_products(name, vectors, width, case["T"])  # noqa: E731
        flops = lambda *a: a[0] not in PARTS and training.training_flops(products(*a))  # noqa: E731
        row = self.wide_row(row | {"rounds": sizes["rounds"]}, built, samples, errors, peak, flops)
        ratios = timing.median_ratio(samples, "ours") if "ours" in samples else {}
        for name, step in built.items():
            row[f"{name}_compile_s"], row[f"{name}_weights"] = step.compile_s, step.info["weights"]
            row.setdefault(f"{name}_ms", f"not run: needs {step.buffers_mib or 0:.0f} MiB")
        ours = row.get("ours_buffers_mib")
        for name in built:
            if name in ratios and name != "ours" and name not in PARTS:
                row[f"ours_over_{name}"] = 1 / ratios[name]
            if name not in ("ours", *PARTS) and ours and built[name].buffers_mib:
                row[f"ours_memory_over_{name}"] = ours / built[name].buffers_mib
        if "floor" in samples and all(part in samples for part in PARTS):
            # A part's cost: the time its stand-in saves, in floor times (they overlap).
            saving = lambda a, b: timing.median_saving(samples, a, b, "floor")  # noqa: E731
            row.update({f"{part}_over_floor": saving("ours", v) for v, (part, _) in PARTS.items()})
            row["rest_over_floor"] = saving("ours_without_both", "floor")
        return [row]


#: The associative-memory table's floor row: `AssociativeGRU` under `holographic_stand_ins`.
FLOOR_LAYER = "floor: AssociativeGRU C=8, memory by stand-ins"


def holographic_stand_ins():
    """A context in which the AM-GRU's key copies (eqs. 4, 9-10), read (eq. 5) and write (eq. 12)
    are elementwise stand-ins reading the same inputs."""
    from keras import ops

    from tf_memlayers.ops import associative_gru_step as step_module
    from tf_memlayers.ops import holographic

    def bounded_copies(key, matrix, num_copies):
        copies = ops.zeros((1, num_copies, 1), key.dtype)  # broadcast: a shape XLA knows
        return tuple(half[:, None, :] + copies for half in holographic.complexify(key))

    def read(copies, memory, _=True):
        parts = (ops.mean(key * part, axis=1) for key, part in zip(copies, memory))
        return holographic.uncomplexify(*parts)

    def write_memory_parts(key_re, key_im, memory_re, memory_im, value_re, value_im):
        return memory_re + key_re * value_re[:, None], memory_im + key_im * value_im[:, None]

    found = (holographic, "bounded_copies", bounded_copies), (step_module, "_read", read)
    return replaced(*found, (holographic, "write_memory_parts", write_memory_parts))


#: The floor of the AM-GRU's Pallas kernels (JAX): `pallas_loop_floor`.
PALLAS_FLOOR = "floor: Pallas loops of T empty steps"
KERNELS = "beside the Pallas kernels"


def pallas_running_sum():
    """``x [T, Bp, k] -> running sums over T``: forward and backward one Pallas kernel each,
    looping the T steps over blocks of 16 rows as the AM-GRU's kernels do."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as pltriton

    from tf_memlayers.ops import associative_gru_pallas as kernels

    def loop(x, reverse):
        steps, batch, width = x.shape

        def kernel(x_ref, y_ref):
            def body(s, carry):
                t = steps - 1 - s if reverse else s
                carry = carry + x_ref[t]
                y_ref[t] = carry
                return carry

            jax.lax.fori_loop(0, steps, body, jnp.zeros((16, width), x.dtype))

        spec = pl.BlockSpec((steps, 16, width), lambda b: (0, b, 0))
        warps = kernels.default_num_warps(16, width)  # as the AM-GRU's kernels have
        params = pltriton.CompilerParams(num_warps=warps, num_stages=1)
        options = dict(grid=(batch // 16,), in_specs=[spec], out_specs=spec, compiler_params=params)
        shape, interpret = jax.ShapeDtypeStruct(x.shape, x.dtype), kernels.default_interpret()
        return pl.pallas_call(kernel, out_shape=shape, interpret=interpret, **options)(x)

    running = jax.custom_vjp(lambda x: loop(x, False))
    running.defvjp(lambda x: (loop(x, False), None), lambda _, grad: (loop(grad, True),))
    return running


def pallas_loop_floor(units):
    """A layer: the inputs projected to the kernels' padded half width (as the AM-GRU's are
    to theirs), `pallas_running_sum` over time, its last step; the floor of its kernels."""
    ops = keras.ops
    width = max(16, 1 << (units // 2 - 1).bit_length())

    class PallasLoopFloor(keras.layers.Layer):
        def build(self, shape):
            self.kernel = self.add_weight((shape[-1], width))

        def call(self, x):
            batch = x.shape[0]
            rows = ops.pad(ops.matmul(x, self.kernel), [(0, -batch % 16), (0, 0), (0, 0)])
            return pallas_running_sum()(ops.transpose(rows, (1, 0, 2)))[-1, :batch]

    return PallasLoopFloor()


class AssociativeMemory(Table):
    """The AM-GRU's step (layer, cell, fused loop: on JAX the Pallas kernels, beside the floor
    of their loops) and its floor's against ``keras.layers.GRU``."""

    @staticmethod
    def kernels(sizes):
        """Whether the Pallas kernels are measured: on a GPU, and run in a rehearsal (off a
        GPU they run interpreted)."""
        jax = keras.backend.backend() == "jax"
        return jax and (sizes["name"] == "tiny" or __import__("jax").default_backend() == "gpu")

    def cases(self, sizes):
        """A case per dtype, then the kernels' (they compile for minutes: measured last, so
        that a run ended while they compile keeps the other rows)."""
        cases = super().cases(sizes)
        return cases + [{**case, "loop": KERNELS} for case in cases if self.kernels(sizes)]

    def variants(self, sizes, case):
        from tf_memlayers import AssociativeGRU, AssociativeGRUCell

        units, shape = sizes["am_units"], (sizes["am_batch"], sizes["am_steps"], sizes["am_units"])
        loop = lambda c, fused: lambda: AssociativeGRU(units, c, fused_loop=fused)  # noqa: E731
        if case.get("loop") == KERNELS:
            layers = {f"GRU ({KERNELS})": lambda: keras.layers.GRU(units)}
            layers[PALLAS_FLOOR] = lambda: pallas_loop_floor(units)
            layers |= {
                f"AssociativeGRU C={c} fused_loop": loop(c, True) for c in sizes["am_copies"]
            }
        else:
            layers = {"GRU": lambda: keras.layers.GRU(units)}
            for c in sizes["am_copies"]:
                layers[f"AssociativeGRU C={c}"] = loop(c, False)
                cell = lambda c=c: keras.layers.RNN(AssociativeGRUCell(units, c))  # noqa: E731
                layers[f"RNN(AssociativeGRUCell) C={c}"] = cell
                if keras.backend.backend() == "tensorflow":  # its fused op compiles in seconds
                    layers[f"AssociativeGRU C={c} fused_loop"] = loop(c, True)
            layers[FLOOR_LAYER] = layers["AssociativeGRU C=8"]

        def make(name):
            with holographic_stand_ins() if name == FLOOR_LAYER else contextlib.nullcontext():
                return layer_step(layers[name](), shape, limit_mib=sizes["limit_mib"])

        return {name: lambda name=name: make(name) for name in layers}

    def vectors(self, sizes, name):
        return sizes["am_batch"] * sizes["am_steps"]

    def more(self, sizes, row, step, samples):
        row["compile_s"] = step.compile_s  # the kernels' takes minutes
        if "median_ms" in row:
            row["ms_per_time_step"] = row.pop("median_ms") / sizes["am_steps"]


class DualVsWordByWord(Table):
    """The hypothesis side's step by premise length: Dual AM-GRU against `WordByWordAttention`."""

    buffers = True

    def cases(self, sizes):
        return [{"premise_length": length} for length in sizes["dual_lengths"]]

    def variants(self, sizes, case):
        from tf_memlayers import AttentionRNN, DualAssociativeGRUCell, WordByWordAttention

        batch, units, length = sizes["am_batch"], sizes["am_units"], case["premise_length"]
        shape, limit = (batch, 10, units), sizes["limit_mib"]

        def dual():
            state = lambda x, m: [keras.ops.zeros_like(m), keras.ops.zeros_like(x[:, 0]), m]  # noqa: E731
            layer = keras.layers.RNN(DualAssociativeGRUCell(units, num_copies=8))
            data = [normal(*shape), 0.1 * normal(batch, units * 8)]
            return layer_step(layer, shape, 1, (batch, units * 8), data, state, limit_mib=limit)

        def attention():
            layer = AttentionRNN(WordByWordAttention(keras.layers.LSTMCell(units)))
            return layer_step(layer, shape, 1, (batch, length, units), limit_mib=limit)

        return {"dual": dual, "attention": attention}

    def rows(self, sizes, case, built, samples, errors, peak):
        batch, units, length = sizes["am_batch"], sizes["am_units"], case["premise_length"]
        row = dict(case, dual_floats_read=units * 8, attention_floats_read=units * length)
        # W^y (the memory kernel) acts on each premise output once per call.
        per_row = lambda w: batch * (length if "memory_kernel" in w.path else 10)  # noqa: E731
        flops = lambda _, step: training.weight_training_flops(step.model, per_row)  # noqa: E731
        return [self.wide_row(row, built, samples, errors, peak, flops, 10, "ms_per_step")]


class Snli(Table):
    """The SNLI model's step, layer 1 a GRU, the AM-GRU or the Dual AM-GRU (fused: speed-up)."""

    def variants(self, sizes, case):
        from tf_memlayers import AssociativeGRU, ConditionalEncoder, DualAssociativeEncoder
        from tf_memlayers.models import build_snli_model

        batch, units, limit = sizes["snli_batch"], sizes["snli_units"], sizes["limit_mib"]
        data, labels = [tokens(1000, batch, 25) + 2, tokens(1000, batch, 15) + 2], tokens(3, batch)
        seq, both = dict(return_sequences=True), dict(return_sequences=True, return_state=True)
        firsts = {
            "gru": lambda _: keras.layers.GRU(units, **both),
            "am_gru": lambda fused: AssociativeGRU(units, fused_loop=fused, **both),
            "dual_am_gru": lambda fused: DualAssociativeEncoder(units, fused_loop=fused, **seq),
        }

        def make(kind, fused=False):
            layers = [firsts[kind](fused), keras.layers.GRU(units, return_state=True)]
            model = build_snli_model(1002, encoder=ConditionalEncoder(layers), embedding_dim=units)
            loss = functools.partial(training.token_crossentropy, from_logits=False)
            return training.Step(model, data, labels, loss, limit_mib=limit)

        made = {kind: lambda kind=kind: make(kind) for kind in firsts}
        tensorflow = keras.backend.backend() == "tensorflow"
        for kind in ("am_gru", "dual_am_gru") if tensorflow else ():
            made[f"{kind} fused_loop"] = lambda kind=kind: make(kind, True)
        return made

    def vectors(self, sizes, name):
        # The encoder's every position (25 + 15), the Dual AM-GRU's the hypothesis's (15).
        dual, encoder = "/dual_associative_gru_cell/", "encoder/"
        count = lambda w: 15 if dual in w.path else 40 if w.path.startswith(encoder) else 1  # noqa: E731
        return lambda w: sizes["snli_batch"] * count(w)

    def more(self, sizes, row, step, samples):
        kind, cell = row["kind"], row["kind"].removesuffix(" fused_loop")
        if kind != cell and kind in samples and cell in samples:
            row["speedup"] = timing.median_ratio(samples, kind)[cell]


def compiled_call(layer):
    if keras.backend.backend() == "torch":
        return __import__("torch").compile(layer) if training.JIT else layer
    if keras.backend.backend() != "jax":
        return __import__("tensorflow").function(layer)
    import jax

    trainable = [v.value for v in layer.trainable_variables]
    others = [v.value for v in layer.non_trainable_variables]
    forward = jax.jit(lambda t, n, x: layer.stateless_call(t, n, x)[0])
    return lambda x: forward(trainable, others, x)


class HeapWrite(Table):
    """`HeapCacheAttention.insert` into a full cache of K (a min-heap), heap against top-k, of a
    batch that enters whole (``worst``) and a random one; and a read."""

    def cases(self, sizes):
        return [{"dtype": "float32", "cache_size": size} for size in sizes["heap_sizes"]]

    def variants(self, sizes, case):
        from tf_memlayers import HeapCacheAttention

        batch, size, made = sizes["heap_batch"], case["cache_size"], {}
        rng = np.random.default_rng(0)
        for policy in ("heap", "topk"):
            layer = HeapCacheAttention(size, 64, policy=policy)
            layer.build((None, 128))
            pool = rng.normal(size=(size + batch, 128)).astype("float32")
            kernel, score = map(keras.ops.convert_to_numpy, (layer.cache_kernel, layer.cache_score))
            pool = pool[np.argsort((np.tanh(pool @ kernel) @ score).ravel())]
            for name, candidates in (("worst", pool[size:]), ("random", normal(batch, 128))):

                def insert(layer=layer, full=pool[:size], candidates=candidates):
                    layer.cache.assign(full)
                    return layer.insert(candidates)

                made[f"{policy}_{name}"] = lambda insert=insert: insert
            read, states = compiled_call(layer), keras.ops.convert_to_tensor(normal(batch, 128))
            made[f"{policy}_read"] = lambda read=read, states=states: lambda: read(states)
        return made

    def rows(self, sizes, case, built, samples, errors, peak):
        row = self.wide_row(dict(case), built, samples, errors, peak)
        medians = timing.medians(samples)
        for name in ("worst", "random"):
            if f"heap_{name}" in medians and f"topk_{name}" in medians:
                row[f"heap_over_topk_{name}"] = medians[f"heap_{name}"] / medians[f"topk_{name}"]
        return [row]


class HeapStep(Table):
    """The last-word model's step without a cache, reading one, and reading and writing it."""

    backends = ("tensorflow",)  # its cache write is timed in a `tf.function`

    def cases(self, sizes):
        return [{"dtype": "float32"}]

    def variants(self, sizes, case):
        import tensorflow as tf

        from tf_memlayers import AttentionPooling, HeapCacheAttention
        from tf_memlayers.models import build_fill_last_word_model
        from tf_memlayers.models.fill_last_word import PAPER_ATTENTION_UNITS as UNITS

        batch, cache = sizes["heap_batch"], sizes["heap_step_cache"]
        x, y = tokens(10000, batch, 40) + 1, tokens(9999, batch) + 1
        x[:, :10] = 0

        def make(name):
            pooling = AttentionPooling(UNITS)
            memory = None if name == "no cache" else HeapCacheAttention(cache, UNITS)
            model = build_fill_last_word_model(10000, pooling, memory, embedding_dim=50)
            if memory is not None:
                model.get_layer("cache_attention").cache.assign(normal(cache, 128))
            plain = keras.Model(model.inputs, model.outputs)
            step = training.Step(plain, x, y, training.token_crossentropy)
            if "write" not in name:
                return step
            write = tf.function(lambda: model.write_caches(tf.constant(x)))
            runner = lambda: (step.run(), write())[0]  # noqa: E731
            runner.model = step.model
            return runner

        names = ("no cache", "cache read", "cache read + heap write")
        return {name: lambda name=name: make(name) for name in names}

    def vectors(self, sizes, name):
        batch, cache = sizes["heap_batch"], sizes["heap_step_cache"]
        per_layer = dict(encoder=batch * 40, pooling=batch * 40, cache_attention=cache)
        return lambda w: per_layer.get(w.path.split("/")[0], batch)


class AttentionWrapperTable(Table):
    """An LSTM cell's step, wrapped to attend over a memory of L vectors, against the bare."""

    def cases(self, sizes):
        return [{"memory_length": length} for length in sizes["wrapper_lengths"]]

    def variants(self, sizes, case):
        from tf_memlayers import AttentionRNN, AttentionWrapper, WordByWordAttention

        wrappers = {
            "LSTMCell": None,
            "Luong dot, no input feeding": dict(score="dot", input_feeding=False),
            "Luong general, input feeding": dict(score="general"),
            "RNNsearch (additive, before)": dict(score="additive", position="before"),
            "WordByWordAttention": WordByWordAttention,
        }

        def make(wrap):
            cell, memory = keras.layers.LSTMCell(100), (32, case["memory_length"], 100)
            if wrap is None:
                step = layer_step(keras.layers.RNN(cell), (32, 20, 100), 3)
            else:
                cell = wrap(cell) if callable(wrap) else AttentionWrapper(cell, **wrap)
                step = layer_step(AttentionRNN(cell), (32, 20, 100), 3, memory)
            step.info = {"weights": step.model.count_params()}
            return step

        return {name: lambda w=wrap: make(w) for name, wrap in wrappers.items()}


#: The training steps the backends table compares: ``case: (description, its baseline)``, the
#: descriptions formatted with the sizes ``s``; each case timed in the rounds of its baseline.
AM, LM_SHAPE = "[{s[am_batch]}, {s[am_steps]}, {s[am_units]}]", "its LSTM"
LM_TEXT = "LSTM language model (hidden {s[lm_hidden]}, batch {s[lm_batch]}, {s[lm_steps]} steps, "
RNN_TEXT = "AttentionRNN(AttentionWrapper(LSTMCell({s[am_units]}), score='general')), memory "
BACKEND_CASES = {
    "window": ("SlidingWindowAttention(window=10, key_value_predict), {window}", None),
    "am_gru": (f"AssociativeGRU({{s[am_units]}}, copies=8), Keras's loop, {AM}", "gru"),
    "am_gru_fused": (f"AssociativeGRU({{s[am_units]}}, copies=8, fused_loop=True), {AM}", "gru"),
    "gru": (f"keras.layers.GRU({{s[am_units]}}), {AM}", None),
    "gru_cell_rnn": (f"keras.layers.RNN(GRUCell({{s[am_units]}})), {AM}", "gru"),
    "lm_lstm": (LM_TEXT + "{s[lm_vocab]} words)", None),
    "lm_window_parallel": (f"{LM_SHAPE} + SlidingWindowAttention(window=5)", "lm_lstm"),
    "lm_window_cell": (f"{LM_SHAPE} cell in SlidingWindowAttentionCell(window=5)", "lm_lstm"),
    "lm_ngram_parallel": (f"{LM_SHAPE} + NGramConcat(4)", "lm_lstm"),
    "lm_ngram_cell": (f"{LM_SHAPE} cell in NGramConcatCell(4)", "lm_lstm"),
    "lstm_cell_rnn": (f"keras.layers.RNN(LSTMCell({{s[am_units]}})), {AM}", None),
    "attention_rnn": (RNN_TEXT + "{s[am_steps]} vectors", "lstm_cell_rnn"),
}
#: The LM cases' variants (`lm_model`).
LM_CASES = dict(lm_lstm="lstm", lm_window_parallel="window-parallel:5")
LM_CASES |= dict(lm_window_cell="window-cell:5", lm_ngram_parallel="ngram-parallel:4")
LM_CASES |= dict(lm_ngram_cell="ngram-cell:4")
#: The backends table's columns: ``side: (backend, options of its children)``; torch with and
#: without ``torch.compile`` (what ``jit_compile`` selects there); the others compiled.
SIDES = dict(tensorflow=("tensorflow", ()), jax=("jax", ()), torch=("torch", ("--no-jit",)))
SIDES["torch_compile"] = ("torch", ())


def backend_group(case):  # the baseline timed in the same rounds
    return BACKEND_CASES[case][1] or case


def window_shape(sizes):
    return sizes["batch"], sizes["backend_window_length"], sizes["width"] // 3 * 3  # 3 pieces


class BackendCases(Table):
    """The training steps the backends table compares, on the current backend: a case per
    baseline, with the cases it is the baseline of."""

    def cases(self, sizes):
        return [{"group": group} for group in dict.fromkeys(map(backend_group, BACKEND_CASES))]

    def variants(self, sizes, case):
        import tf_memlayers as ml

        seq, units = dict(return_sequences=True), sizes["am_units"]
        am = (sizes["am_batch"], sizes["am_steps"], units)
        layers = {
            "window": lambda: ml.SlidingWindowAttention(
                10, "key_value_predict", attention_units=32
            ),
            "am_gru": lambda: ml.AssociativeGRU(units, 8, fused_loop=False, **seq),
            "am_gru_fused": lambda: ml.AssociativeGRU(units, 8, fused_loop=True, **seq),
            "gru": lambda: keras.layers.GRU(units, **seq),
            "gru_cell_rnn": lambda: keras.layers.RNN(keras.layers.GRUCell(units), **seq),
            "lstm_cell_rnn": lambda: keras.layers.RNN(keras.layers.LSTMCell(units)),
        }
        cell = lambda: ml.AttentionWrapper(keras.layers.LSTMCell(units), score="general")  # noqa: E731
        layers["attention_rnn"] = lambda: ml.AttentionRNN(cell())
        vocab, batch, steps = sizes["lm_vocab"], sizes["lm_batch"], sizes["lm_steps"]

        def make(name):
            if name in LM_CASES:
                model = lm_model(LM_CASES[name], vocab, sizes["lm_hidden"], steps, batch)
                return lm_step(model, vocab, batch, steps)
            shape = window_shape(sizes) if name == "window" else am
            return layer_step(layers[name](), shape, memory=am if name == "attention_rnn" else None)

        fused = keras.backend.backend() == "tensorflow"  # the fused loop is a TensorFlow op
        names = [name for name in BACKEND_CASES if backend_group(name) == case["group"]]
        names = [name for name in names if fused or "fused" not in name]
        return {name: lambda name=name: make(name) for name in names}

    def vectors(self, sizes, name):  # the batch × time vectors
        if name == "window":
            return sizes["batch"] * sizes["backend_window_length"]
        key = "lm" if name.startswith("lm_") else "am"
        return sizes[f"{key}_batch"] * sizes[f"{key}_steps"]


class Backends(Table):
    """`BackendCases` in child processes on each backend (`SIDES`; ``sizes["pythons"]``: the
    Python of a backend's children where it is not this one), alternately; the medians of all
    their steps, and each case's median ratio to its baseline in the same child's rounds."""

    def cases(self, sizes):
        return [{}]

    def measure(self, sizes, case, peak, buffers, gave_up):
        samples, peaks, flops, failed = {}, [], {}, {}
        for round_ in range(sizes["backend_rounds"]):
            for side, (name, options) in SIDES.items():
                # torch.compile takes minutes a model on a CPU: one child, its time limited.
                compiling = side == "torch_compile"
                if side in failed or (compiling and round_):
                    continue
                limit = sizes["backend_compile_s"] if compiling else None
                argv = ["--samples", "--tables", "backend_cases", "--backend", name, *options]
                argv += ["--sizes", sizes["name"], "--rounds", str(sizes["rounds"])]
                argv += ["--budget-s", str(limit)] if limit else []
                python = sizes.get("pythons", {}).get(name)
                report = child(*argv, python=python, timeout=limit and limit + 600)
                found = {} if isinstance(report, str) else report["tables"].get("backend_cases")
                if not found:
                    errors = report if isinstance(report, str) else report["errors"]
                    failed[side] = one_line(RuntimeError(errors))
                    continue
                peaks.append(report["peak_gflops"]["float32"])
                for row in found:
                    if row.get("samples_ms"):
                        samples.setdefault((row["case"], side), []).extend(row["samples_ms"])
                        flops[row["case"]] = row.get("gflop_per_step", 0) * 1e9
                    elif row.get("status"):
                        failed.setdefault((row.get("case", row["group"]), side), row["status"])
        peak, rows = float(np.median(peaks)) if peaks else None, []
        for name, (description, baseline) in BACKEND_CASES.items():
            description = description.format(s=sizes, window=list(window_shape(sizes)))
            row = {"case": name, "description": description, "baseline": baseline}
            row["gflop_per_step"] = flops.get(name, 0) / 1e9 or None
            for side in SIDES:
                values, base = samples.get((name, side)), samples.get((baseline, side))
                ms = row[f"{side}_ms"] = float(np.median(values)) if values else None
                share = values and peak and training.floor_columns(flops[name], ms, peak)
                row[f"{side}_share_of_peak"] = share["share_of_peak"] if share else None
                if values and base:
                    ratios = timing.median_ratio({"case": values, "base": base}, "base")
                    row[f"{side}_over_baseline"] = ratios["case"]
                why = failed.get((name, side)) or failed.get((backend_group(name), side))
                why = why or failed.get(side)
                if why and not values:
                    row[f"{side}_status"] = why
            both = row["tensorflow_ms"] and row["jax_ms"]
            row["jax_over_tensorflow"] = row["jax_ms"] / row["tensorflow_ms"] if both else None
            rows.append({**row, "peak_gflops": peak and round(peak, 1)})
        return rows


LM = dict(key="variant", ratio="ratio_to_lstm")
EQUAL = dict(LM, variants=LM_KINDS, equal_parameters=True)
WINDOW_VARIANTS = dict(variants=("ours", "floor", "mha", "mha_width"), no_xla=("ours", "mha_width"))
#: The tables, by their name on the command line and in a results file's ``tables``.
TABLES = dict(
    window_attention=WindowAttention("window_attention_floor.json", **WINDOW_VARIANTS),
    language_model=LanguageModel("window_attention_lm.json", **LM, variants=LM_VARIANTS, part=True),
    lm_equal_parameters=LanguageModel("lm_throughput_equal_parameters.json", **EQUAL),
    packing=Packing("lm_packing.json", "layout", "step_ratio"),
    associative_memory=AssociativeMemory("associative_memory.json", "layer", "ratio_to_gru"),
    dual_vs_word_by_word=DualVsWordByWord("dual_vs_word_by_word.json"),
    snli=Snli("snli_step.json", "kind", "ratio_to_gru"),
    heap_write=HeapWrite("heap_cache.json"),
    heap_step=HeapStep("heap_cache_step.json", "model", "ratio_to_no_cache"),
    attention_wrapper=AttentionWrapperTable("attention_wrapper.json", "variant", "ratio_to_cell"),
    backends=Backends("backends.json"),
    backend_cases=BackendCases(None, "case"),
)
#: The tables of a GPU run.
GPU_TABLES = ("window_attention", "language_model", "snli", "heap_write", "associative_memory")
