"""A functional model whose training step writes its cache-attention layers' caches."""

import keras

from tf_memlayers._validation import check_number
from tf_memlayers.layers.cache_attention.heap_cache_attention import HeapCacheAttention
from tf_memlayers.regularizers.half_squared_norm import HalfSquaredNorm


def cache_attention_layers(model):
    """The `HeapCacheAttention` layers of ``model``, in the order of its layers.

    Nested models (`keras.Model.layers`) and wrapper layers (`keras.layers.Wrapper.layer`)
    are searched too; each layer is listed once.

    Args:
        model: a Keras model.

    Returns:
        A list of `HeapCacheAttention` layers.
    """
    found, seen = [], set()

    def visit(layer):
        if id(layer) in seen:
            return
        seen.add(id(layer))
        if isinstance(layer, HeapCacheAttention):
            found.append(layer)
        if isinstance(layer, keras.Model):
            for inner in layer.layers:
                visit(inner)
        elif isinstance(layer, keras.layers.Wrapper):
            visit(layer.layer)

    visit(model)
    return found


@keras.saving.register_keras_serializable(package="tf_memlayers")
class HeapCacheModel(keras.Model):
    """Functional model that writes every `HeapCacheAttention` cache after each training step.

    Built like a functional `keras.Model` (``HeapCacheModel(inputs, outputs)``). Its training
    step is Keras's, followed by the cache write of Gaffney's reference implementation: the
    inputs of each `HeapCacheAttention` layer are recomputed for the same batch with the
    weights the optimizer has just updated (in inference mode) and offered to the cache with
    `HeapCacheAttention.insert` (a layer called more than once: its first call's inputs).
    Evaluation and prediction never write.

    It writes on every Keras backend, with ``jit_compile`` on or off. On TensorFlow inside the
    step's `tf.function` (and its XLA program); under a `tf.distribute` strategy from the
    candidates of all replicas, gathered, so that every replica writes the same cache. On JAX
    inside Keras's stateless step, the written cache returned with the other non-trainable
    values (under ``keras.distribution``'s ``DataParallel`` every device writes the same cache
    from the whole global batch). On torch after the step, eagerly (outside ``torch.compile``,
    which would trace the heap's loop step by step). ``jit_compile=True`` under a strategy
    with several replicas is refused: `fit`, `evaluate` and `predict` raise a `ValueError`
    (Keras compiles the step of all replicas into one XLA program, which cannot reach the
    variable copies on the other devices; a plain `keras.Model` fails the same way).

    Args:
        inputs, outputs: as for a functional `keras.Model`.
        weight_decay: coefficient ``c`` of an L2 penalty ``c * sum_w ||w||^2 / 2`` over every
            trainable weight (the reference implementation used ``1e-5``). Weights that
            already carry a regularizer keep it. `keras.models.clone_model` builds a
            functional model's class from its inputs and outputs alone, so a clone has no
            weight decay: ``HeapCacheModel.from_config(model.get_config())`` is a clone
            (new weights) that keeps it.
        **kwargs: other functional `keras.Model` arguments (``name``, ``trainable``).

    Raises:
        ValueError: a `HeapCacheAttention` layer is inside a nested model or a wrapper
            layer, or was first called in another graph, or a stateful layer computes its
            input, which the write recomputes (``candidate_function``); ``weight_decay`` is
            negative or not finite.
        TypeError: ``weight_decay`` is not a number.

    Example:

    >>> import keras, numpy as np
    >>> from tf_memlayers import HeapCacheAttention
    >>> from tf_memlayers.models import HeapCacheModel
    >>> tokens = keras.Input((6,), dtype="int32")
    >>> state = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(20, 8)(tokens))
    >>> state = HeapCacheAttention(cache_size=16, attention_units=4)(state)
    >>> model = HeapCacheModel(tokens, keras.layers.Dense(20)(state))
    >>> model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    >>> x = np.random.default_rng(0).integers(1, 20, (8, 6))
    >>> _ = model.fit(x, x[:, -1], verbose=0)
    >>> int(model.layers[-2].fill_count())
    8
    """

    def __init__(self, *args, weight_decay=0.0, **kwargs):
        super().__init__(*args, **kwargs)
        layers = cache_attention_layers(self)
        self.weight_decay = check_number("weight_decay", weight_decay, 0.0, owner="HeapCacheModel")
        if self.weight_decay:
            for weight in self.trainable_weights:
                if getattr(weight, "regularizer", None) is None:
                    weight.regularizer = HalfSquaredNorm(self.weight_decay)
        # Not a Layer, so not tracked: the candidates' graph shares the model's layers.
        object.__setattr__(self, "_cache_layers_list", layers)
        candidates = candidate_function(self, layers) if layers else None
        object.__setattr__(self, "_candidate_function", candidates)

    @property
    def cache_layers(self):
        """The model's `HeapCacheAttention` layers, in graph order."""
        return list(self._cache_layers_list)

    def write_caches(self, x):
        """Offers the states that ``x`` produces now to every cache; returns what entered."""
        if self._candidate_function is None:
            return []
        candidates = self._candidate_function(like_inputs(self, x))
        if not isinstance(candidates, (list, tuple)):
            candidates = [candidates]
        return [layer.insert(c) for layer, c in zip(self._cache_layers_list, candidates)]

    def make_train_function(self, force=False):
        check_jit_compile_strategy(self)
        return super().make_train_function(force)

    def make_test_function(self, force=False):
        check_jit_compile_strategy(self)
        return super().make_test_function(force)

    def make_predict_function(self, force=False):
        check_jit_compile_strategy(self)
        return super().make_predict_function(force)

    def train_step(self, *args):
        # ``(data)`` on TensorFlow and torch, ``(state, data)`` on JAX (Keras's stateless step).
        step = super().train_step(*args)
        if not self._cache_layers_list:
            return step
        x, _, _ = keras.utils.unpack_x_y_sample_weight(args[-1])
        backend = keras.backend.backend()
        if backend == "jax":
            return step[0], self._write_caches_stateless(step[1], x)
        if backend == "torch":
            import torch

            # Eager even where ``jit_compile`` compiles the step: the heap write is a loop of
            # scalar steps, which `torch.compile` would trace step by step.
            with torch.no_grad():
                torch.compiler.disable(self.write_caches)(x)
        else:
            # Automatic control dependencies order these reads after the optimizer's writes.
            self.write_caches(x)
        return step

    def _write_caches_stateless(self, state, x):
        """JAX's step state with the caches written: `write_caches` under the values the
        optimizer has just given (in a `keras.StatelessScope`), its writes read back into the
        non-trainable values."""
        trainable, non_trainable, *rest = state
        mapping = [*zip(self.trainable_variables, trainable)]
        mapping += zip(self.non_trainable_variables, non_trainable)
        with keras.StatelessScope(state_mapping=mapping) as scope:
            self.write_caches(x)
        written = [scope.get_current_value(v) for v in self.non_trainable_variables]
        return (trainable, written, *rest)

    def get_config(self):
        config = super().get_config()
        config["weight_decay"] = self.weight_decay
        return config


USE = "Build the caches in the HeapCacheModel's own graph, after stateless layers, or write them "
USE += "with HeapCacheAttention.insert."


def like_inputs(model, x):
    """``x`` in the structure of ``model.input``, as a functional model's call takes it: a
    tuple for a list (TensorFlow's data adapter makes one), one tensor in a list, or a list of
    one where the model takes one tensor. A dict, matched to the inputs by name, is kept."""
    if isinstance(x, dict) or isinstance(model.input, dict):
        return x
    return keras.tree.pack_sequence_as(model.input, keras.tree.flatten(x))


def candidate_function(model, layers):
    """A `keras.Function` of ``model``'s inputs giving the input of each of ``layers``: the
    states the write recomputes and offers to their caches. A layer called more than once
    gives its first call's input.

    Raises:
        ValueError: a layer is not one of ``model``'s own (it is inside a nested model or a
            wrapper layer), or its input is not computed from ``model``'s inputs (its first
            call was in another graph), or a stateful layer computes its input (the write
            would step it a second time in each training step).
    """
    why = "HeapCacheModel writes the caches of HeapCacheAttention layers of its own graph"
    why += ", recomputing their inputs from the model's once a step"
    nested = [layer.name for layer in layers if not any(layer is own for own in model.layers)]
    if nested:
        raise ValueError(f"{why}: {nested} are inside a nested model or a wrapper layer. {USE}")
    try:
        function = keras.Function(model.input, [layer.input for layer in layers])
    except ValueError as error:  # "not connected to `inputs`"
        names = [layer.name for layer in layers]
        raise ValueError(
            f"{why}: one of {names} was first called in another graph. {USE}"
        ) from error
    stateful = [op.name for op in function.operations if getattr(op, "stateful", False)]
    if stateful:
        raise ValueError(
            f"{why}: the stateful layers {stateful} compute those inputs, and the write would "
            f"advance their states a second time in each step. {USE}"
        )
    return function


def check_jit_compile_strategy(model):
    """Raises if ``model`` is XLA-compiled under a strategy with several replicas.

    Keras compiles ``strategy.run`` over all replicas as one XLA computation placed on the first
    device, and XLA cannot read or write the variable copies held on the other devices
    ("Trying to access resource ... located in device ..."), so such a step fails at its first
    run, for any Keras model.

    Args:
        model: a compiled Keras model.

    Raises:
        ValueError: ``model.jit_compile`` is true and ``model.distribute_strategy`` has more
            than one replica.
    """
    if keras.backend.backend() != "tensorflow":
        return  # no tf.distribute strategy elsewhere
    strategy = model.distribute_strategy
    replicas = strategy.num_replicas_in_sync
    if model.jit_compile and replicas > 1:
        raise ValueError(
            f"{type(model).__name__}: jit_compile=True is not supported under "
            f"{type(strategy).__name__} with {replicas} replicas: Keras compiles the step of "
            "all replicas into one XLA program, which cannot access the variable copies held "
            "on the other devices. Compile with jit_compile=False to train with this strategy."
        )
