"""tf-memlayers: memory layers for recurrent networks in TensorFlow 2 / Keras 3.

Architecture, bottom up:

* `tf_memlayers.ops` — primitives (causal windows over a sequence, holographic complex ops,
  the heap, the fused AM-GRU loop).
* `tf_memlayers.layers` — one folder per mechanism (``window_attention``,
  ``associative_memory``, ``cache_attention``, ``memory_attention``), each with its Keras
  layers and RNN cells.
* `tf_memlayers.metrics`, `tf_memlayers.losses`, `tf_memlayers.initializers` — `Perplexity`,
  `SequenceCrossentropy`, `ForgetGateBias`, `GRUGateBias`.
* `tf_memlayers.models` — builders that assemble each paper's model from the layers, and the
  step model of a language model for generation and serving.
* `tf_memlayers.callbacks` — TensorBoard views of what the memories do, and the state resets
  of stateful language models.
* `tf_memlayers.training` — what Keras lacks for long and multi-machine runs on TensorFlow:
  exact resumption of ``fit`` and training under ``MultiWorkerMirroredStrategy``.

The examples in the repository's ``examples/`` own their experiments: corpus readers,
``tf.data`` pipelines and the papers' recipes.
"""

from tf_memlayers import models  # noqa: E402,F401  (registers the models' classes for loading)
from tf_memlayers.layers import *  # noqa: F401,F403
from tf_memlayers.layers import __all__ as _layer_names
from tf_memlayers.losses import SequenceCrossentropy
from tf_memlayers.metrics import Perplexity
from tf_memlayers.version import __version__

__all__ = ["__version__", *_layer_names, "Perplexity", "SequenceCrossentropy"]
