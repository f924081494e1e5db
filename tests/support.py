"""What the tests share (``from tests.support import gradients``); ``conftest.py`` holds only
pytest's hooks and fixtures."""

import contextlib
import glob
import os
import pathlib

import keras
import numpy as np
import pytest

REPO_ROOT, BACKEND = pathlib.Path(__file__).resolve().parents[1], keras.backend.backend()
# The reasons shared by many tests.
FUSED_LOOP = "fused_loop=True runs tf_memlayers.ops.associative_gru_loop, a TensorFlow op"
TF_FUNCTION, TF_DISTRIBUTE = "traces the layer with tf.function", "uses a tf.distribute strategy"
KERAS_MASKED_OUTPUT = (
    "Keras's RNN on JAX emits the cell's first state at a masked step, and this cell's first "
    "state is not its output (keras/src/backend/jax/rnn.py); use zero_output_for_mask=True"
)


def tensorflow_only(reason):
    """Marks a test (or, as ``pytestmark``, a module) that needs the TensorFlow backend."""
    return pytest.mark.tensorflow_only(reason=reason)


@keras.saving.register_keras_serializable(package="tf_memlayers_tests")
class PassThroughCell(keras.layers.Layer):
    """A stateless cell whose output is its input (keeps one dummy state)."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = 1
        self.output_size = units

    def call(self, inputs, states):
        return inputs, states

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def keras_lstm(units, **kwargs):
    """``keras.layers.LSTM(units, **kwargs)`` as the package's builders make it: with cuDNN
    only where it computes right in the LSTM's dtype (`tf_memlayers.lstm_use_cudnn`; on a
    GPU, JAX's cuDNN LSTM computes float32 only)."""
    from tf_memlayers import lstm_use_cudnn

    policy = keras.dtype_policies.get(kwargs.get("dtype") or keras.config.dtype_policy())
    use_cudnn = lstm_use_cudnn(policy.compute_dtype, stateful=kwargs.get("stateful", False))
    return keras.layers.LSTM(units, use_cudnn=use_cudnn, **kwargs)


def masked_rnn(rnn, sequences, mask, **kwargs):
    """``rnn(sequences, mask=mask, **kwargs)`` as NumPy, with TensorFlow's masking on every
    backend: on JAX (`KERAS_MASKED_OUTPUT`) the RNN runs with ``zero_output_for_mask=True``,
    which keeps the states right, and the previous outputs are filled in here."""
    if BACKEND == "tensorflow" or mask is None or rnn.zero_output_for_mask:
        results = rnn(sequences, mask=mask, **kwargs)
        return keras.tree.map_structure(as_numpy, results)
    return_sequences = rnn.return_sequences
    rnn.zero_output_for_mask, rnn.return_sequences = True, True
    try:
        results = rnn(sequences, mask=mask, **kwargs)
    finally:
        rnn.zero_output_for_mask, rnn.return_sequences = False, return_sequences
    results = [np.asarray(keras.ops.convert_to_numpy(t)) for t in keras.tree.flatten(results)]
    outputs, keep = results[0].copy(), np.asarray(keras.ops.convert_to_numpy(mask)).astype(bool)
    if rnn.go_backwards:
        keep = keep[:, ::-1]  # the outputs come in the order of processing
    previous = np.zeros_like(outputs[:, 0])
    for step in range(outputs.shape[1]):
        kept = keep[:, step]
        previous[kept] = outputs[kept, step]
        outputs[~kept, step] = previous[~kept]
    results[0] = outputs if return_sequences else outputs[:, -1]
    return results[0] if len(results) == 1 else results


def tflite_runner(model_content):
    """The signature runner of a converted TFLite model (the test skipped without LiteRT)."""
    reason = "the TFLite check needs ai-edge-litert"
    litert = pytest.importorskip("ai_edge_litert.interpreter", reason=reason)
    return litert.Interpreter(model_content=model_content).get_signature_runner()


def as_numpy(x):
    """``x`` (a tensor or variable of any backend, or an array) as a NumPy array."""
    return np.asarray(keras.ops.convert_to_numpy(x))


def assert_close(got, want, atol, rtol=0):
    """``got`` is ``want`` (tensors, variables or arrays of any backend, or lists of as many of
    them, item by item) within the tolerances."""
    got, want = keras.tree.flatten(got), keras.tree.flatten(want)
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        np.testing.assert_allclose(as_numpy(g), as_numpy(w), atol=atol, rtol=rtol)


def gradients(loss_fn, variables=(), inputs=(), has_aux=False):
    """``(loss, variable_gradients, input_gradients)`` as NumPy, on any backend, of the scalar
    ``loss_fn(*inputs)`` (which reads ``variables`` through its layers); with ``has_aux``,
    ``loss_fn`` returns ``(loss, aux)`` and ``(loss, aux)`` comes in the loss's place. A
    variable the loss does not depend on has a gradient of zeros."""
    variables, inputs = list(variables), list(inputs)
    if BACKEND == "tensorflow":
        import tensorflow as tf

        tensors = [tf.convert_to_tensor(x) for x in inputs]
        with tf.GradientTape() as tape:
            tape.watch(tensors + [v.value for v in variables])  # the non-trainable ones too
            loss = loss_fn(*tensors)
        found = tape.gradient(loss[0] if has_aux else loss, variables + tensors)
        sources = variables + tensors
    elif BACKEND == "jax":
        import jax

        def pure(values, arrays):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return loss_fn(*arrays)

        values, arrays = [v.value for v in variables], [jax.numpy.asarray(x) for x in inputs]
        # One compiled program: op-by-op JAX dispatch compiles every primitive on its own.
        value_and_grad = jax.value_and_grad(pure, argnums=(0, 1), has_aux=has_aux)
        loss, (grad_values, grad_arrays) = jax.jit(value_and_grad)(values, arrays)
        found, sources = list(grad_values) + list(grad_arrays), values + arrays
    else:
        import torch

        # Integer inputs (token ids) take no gradient, nor do non-trainable variables.
        tensors = [keras.ops.convert_to_tensor(x).detach() for x in inputs]
        tensors = [t.requires_grad_(t.is_floating_point()) for t in tensors]
        loss, sources = loss_fn(*tensors), [v.value for v in variables] + tensors
        wanted, target = [s for s in sources if s.requires_grad], loss[0] if has_aux else loss
        grads = iter(
            torch.autograd.grad(target, wanted, allow_unused=True)
            if wanted and target.requires_grad
            else [None] * len(wanted)
        )
        found = [next(grads) if s.requires_grad else None for s in sources]

    found = [
        np.zeros(tuple(source.shape), keras.backend.standardize_dtype(source.dtype))
        if grad is None
        else as_numpy(grad)
        for grad, source in zip(found, sources)
    ]
    loss = keras.tree.map_structure(as_numpy, tuple(loss) if has_aux else loss)
    return loss, found[: len(variables)], found[len(variables) :]


def compiled(function):
    """``function`` as one `jax.jit` program on JAX (several times faster than eager calls);
    itself elsewhere. For calls that only read the layer's variables."""
    if BACKEND != "jax":
        return function
    import jax

    return jax.jit(function)


#: The option of `tf.config.optimizer` that turns TensorFlow's graph optimiser (Grappler) off.
NO_GRAPH_OPTIMIZATIONS = "disable_meta_optimizer"


def turn_off_graph_optimizations():
    """Grappler off in this process from now on."""
    import tensorflow as tf

    tf.config.optimizer.set_experimental_options({NO_GRAPH_OPTIMIZATIONS: True})


@contextlib.contextmanager
def graph_optimizations(enabled):
    """Grappler on (``enabled``) or off for the graph functions first run inside the block."""
    import tensorflow as tf

    before = tf.config.optimizer.get_experimental_options().get(NO_GRAPH_OPTIMIZATIONS, False)
    tf.config.optimizer.set_experimental_options({NO_GRAPH_OPTIMIZATIONS: not enabled})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({NO_GRAPH_OPTIMIZATIONS: before})


def count_train_step_traces(model):
    """A list that gains an item each time ``model``'s train step is traced from now on."""
    traces, train_step = [], model.train_step

    def counted(*args, **kwargs):
        traces.append(None)
        return train_step(*args, **kwargs)

    model.train_step = counted
    return traces


# The backends `all_pairs(..., split_by_backend=True)` and `split_rows` share rows between.
# Each row runs on one of them, and on every other backend (torch runs eagerly: every row).
SPLIT_BACKENDS = ("tensorflow", "jax")


def split_rows(rows):
    """This backend's share of ``rows`` (values or ``pytest.param``\\ s of one parametrize): on
    `SPLIT_BACKENDS` the plain rows in turn, in their order; a row with marks (a backend's own
    path: a loop, a kernel) on each backend; on any other backend every row."""
    if BACKEND not in SPLIT_BACKENDS:
        return list(rows)
    plain = [i for i, row in enumerate(rows) if not getattr(row, "marks", ())]
    others = set(plain) - set(plain[SPLIT_BACKENDS.index(BACKEND) :: len(SPLIT_BACKENDS)])
    return [row for i, row in enumerate(rows) if i not in others]


def all_pairs(*factors, split_by_backend=False):
    """``pytest.param`` rows over ``factors`` (lists of values) in which every value of every
    factor meets every value of every other factor (5 x 4 x 2 x 2 values: 20 rows for 80),
    chosen greedily, so the same at every run. With ``split_by_backend`` the backend is one
    more factor (`SPLIT_BACKENDS`) and this backend's rows are returned: every pair meets on
    one backend or the other, every value on each."""
    if split_by_backend and BACKEND in SPLIT_BACKENDS:
        rows = all_pairs(*factors, list(SPLIT_BACKENDS))
        return [
            pytest.param(*row.values[:-1], id=row.id.rsplit("-", 1)[0])
            for row in rows
            if row.values[-1] == BACKEND
        ]
    if split_by_backend:
        return all_pairs(*factors)
    import itertools

    levels = [list(values) for values in factors]
    # What a row covers: each of its values, and each of its pairs of values.
    groups = [(k,) for k in range(len(levels))] + [*itertools.combinations(range(len(levels)), 2)]

    def covered(row):
        return {(group, tuple(row[k] for k in group)) for group in groups}

    candidates = list(itertools.product(*(range(len(values)) for values in levels)))
    uncovered, rows = set().union(*(covered(row) for row in candidates)), []
    while uncovered:
        row = max(candidates, key=lambda candidate: len(covered(candidate) & uncovered))
        uncovered -= covered(row)
        rows.append(row)

    def value_id(value):
        nested = isinstance(value, (tuple, list))
        return "_".join(value_id(item) for item in value) if nested else str(value)

    return [
        pytest.param(*values, id="-".join(value_id(v) for v in values))
        for values in ([levels[k][i] for k, i in enumerate(row)] for row in rows)
    ]


def load_script(folder, name):
    """The script ``<repository>/<folder>/<name>.py`` (an example or a benchmark) as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def json_report_of_script(script, path=None, *args):
    """The last line that the Python source ``script``, run as a file in a process of its
    own with ``args`` (import path ``path``, else the repository), prints, read as JSON."""
    import json
    import subprocess
    import sys
    import tempfile

    env = dict(os.environ, PYTHONPATH=path or str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    # A file, not ``-c``: AutoGraph reads the source of the functions it converts.
    with tempfile.TemporaryDirectory() as folder:
        source = pathlib.Path(folder) / "script.py"
        source.write_text(script, encoding="utf-8")
        run = dict(capture_output=True, text=True, env=env, timeout=300)
        result = subprocess.run([sys.executable, str(source), *args], **run)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def summary_events(folder):
    """``{tag: [(step, value protocol buffer), ...]}`` of the event files under ``folder``."""
    import tensorflow as tf

    events = {}
    for path in sorted(pathlib.Path(folder).rglob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                events.setdefault(value.tag, []).append((event.step, value))
    return events


def summary_text(value):
    """The text of a text summary's ``value``."""
    import tensorflow as tf

    return tf.make_ndarray(value.tensor).item().decode()


def summary_table(value):
    """``(row labels, column labels, values)`` of a table `write_heatmap` wrote."""
    lines = summary_text(value).splitlines()
    cells = [line.strip("| ").split(" | ") for line in lines[2:]]
    values = np.array([[float(v) for v in c[1:]] for c in cells])
    return [c[0] for c in cells], lines[0].strip("| ").split(" | "), values


def logged_hparams(log_dir):
    """The hparams and scalar metrics written in ``log_dir`` (its own event files only)."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import metadata

    hparams, scalars = {}, {}
    for path in glob.glob(os.path.join(log_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                plugin = value.metadata.plugin_data
                if plugin.plugin_name == metadata.PLUGIN_NAME and value.tag == (
                    metadata.SESSION_START_INFO_TAG
                ):
                    info = metadata.parse_session_start_info_plugin_data(plugin.content)
                    for name, v in info.hparams.items():
                        hparams[name] = v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))
                elif plugin.plugin_name == "scalars":
                    scalars[value.tag] = float(tf.make_ndarray(value.tensor))
    return hparams, scalars
