"""Named training recipes for the language-model example: the papers' settings in one place.

Each preset is a `LanguageModelPreset`: the keyword arguments of
`examples.language_modeling.memories.language_model` (``model``: the memory ``kind`` and the
arguments of `build_language_model`) and of training (``training``: optimizer, learning-rate
schedule, batch size,
truncated-BPTT length, clipping, epochs, loss reduction).

* ``zaremba-small`` / ``zaremba-medium`` / ``zaremba-large``: Zaremba et al. (2014) as
  configured in TensorFlow's PTB tutorial (``ptb_word_lm.py``, whose small model reaches test
  perplexity 115.9): 2-layer LSTMs of 200 / 650 / 1500 units (embedding = LSTM width), plain SGD
  at learning rate 1 decayed by 0.5 / 0.8 / 1/1.15 per epoch after 4 / 6 / 14 epochs,
  13 / 39 / 55 epochs, batch 20, BPTT 20 / 35 / 35, global-norm clipping 5 / 5 / 10, dropout
  0 / 0.5 / 0.65 on the non-recurrent connections, init U(-s, s) with s = 0.1 / 0.05 / 0.04,
  forget-gate bias 0, and the cost summed over the time steps (mean over the batch).
* ``short-attention-spans``: Daniluk et al. (2017, §4.1): Adam 1e-3, batch 64, BPTT 20,
  clipping 5, forget-gate bias 1, init U(-0.1, 0.1), window 5, N = 4, one LSTM layer. The
  paper's models are 300 wide; the preset's 200-unit size keeps a PTB epoch short on a CPU
  (see the throughput table on the documentation's results page). ``kind`` comes from the caller
  (``--model``), default attention.
"""

import dataclasses
import types

from examples.harness.checks import check_choice
from tf_memlayers.models.language_model import DANILUK_DEFAULTS

# The settings of Daniluk et al. (2017, §4.1) that the short-attention-spans preset keeps.
_DANILUK_MODEL = ("window", "ngram", "init_scale", "forget_bias")
_DANILUK_TRAINING = ("learning_rate", "batch_size", "sequence_length", "clip_norm")


@dataclasses.dataclass(frozen=True)
class LanguageModelPreset:
    """A named recipe: model arguments and training arguments (read-only mappings).

    Args:
        name: String, the preset's name (a key of `PRESETS`).
        description: String, one line saying where the settings come from.
        model: Read-only mapping, keyword arguments of `memories.language_model`.
        training: Read-only mapping of the training settings: ``optimizer``,
            ``learning_rate``, ``lr_decay``, ``full_rate_epochs``, ``epochs``,
            ``batch_size``, ``sequence_length``, ``clip_norm``, ``loss_reduction``.
    """

    name: str
    description: str
    model: types.MappingProxyType
    training: types.MappingProxyType


def _zaremba(
    size, units, dropout, init_scale, full_rate_epochs, lr_decay, epochs, sequence_length, clip_norm
):
    return LanguageModelPreset(
        name=f"zaremba-{size}",
        description=f"Zaremba et al. (2014) {size} model, TensorFlow PTB tutorial settings",
        model=types.MappingProxyType(
            dict(
                kind="lstm",
                layers=2,
                units=units,
                embedding_dim=units,
                dropout=dropout,
                init_scale=init_scale,
                forget_bias=0.0,
            )
        ),
        training=types.MappingProxyType(
            dict(
                optimizer="sgd",
                learning_rate=1.0,
                lr_decay=lr_decay,
                full_rate_epochs=full_rate_epochs,
                epochs=epochs,
                batch_size=20,
                sequence_length=sequence_length,
                clip_norm=clip_norm,
                loss_reduction="sum_over_time",
            )
        ),
    )


PRESETS = {
    preset.name: preset
    for preset in (
        _zaremba("small", 200, 0.0, 0.1, 4, 0.5, 13, 20, 5.0),
        _zaremba("medium", 650, 0.5, 0.05, 6, 0.8, 39, 35, 5.0),
        _zaremba("large", 1500, 0.65, 0.04, 14, 1 / 1.15, 55, 35, 10.0),
        LanguageModelPreset(
            name="short-attention-spans",
            description="Daniluk et al. (2017) §4.1 training settings, 200-unit models",
            model=types.MappingProxyType(
                dict(
                    kind="attention",
                    layers=1,
                    units=200,
                    embedding_dim=200,
                    dropout=0.0,
                    **{name: DANILUK_DEFAULTS[name] for name in _DANILUK_MODEL},
                )
            ),
            training=types.MappingProxyType(
                dict(
                    optimizer="adam",
                    lr_decay=1.0,
                    full_rate_epochs=None,
                    epochs=4,
                    loss_reduction="token_mean",
                    **{name: DANILUK_DEFAULTS[name] for name in _DANILUK_TRAINING},
                )
            ),
        ),
    )
}


def get_preset(name):
    """The `LanguageModelPreset` called ``name`` (one of `PRESETS`).

    Args:
        name: String, one of `"zaremba-small"`, `"zaremba-medium"`, `"zaremba-large"`,
            `"short-attention-spans"`.

    Returns:
        The `LanguageModelPreset`.

    Example:

    >>> preset = get_preset("zaremba-small")
    >>> preset.model["units"], preset.training["optimizer"], preset.training["epochs"]
    (200, 'sgd', 13)
    """
    check_choice("preset", name, tuple(PRESETS))
    return PRESETS[name]
