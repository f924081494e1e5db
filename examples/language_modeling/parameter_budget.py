"""Language models at an equal parameter budget (Daniluk et al. 2017, §4).

The paper compares its memory models with an LSTM at a roughly equal number of parameters,
reached by adjusting the LSTM width; `units_for_parameter_budget` finds that width for any
memory kind of `examples.language_modeling.memories`.
"""

import numpy as np

from examples.harness.checks import check_int
from examples.language_modeling import memories
from tf_memlayers.models.language_model import DANILUK_DEFAULTS


def count_language_model_parameters(vocabulary_size, **build_kwargs):
    """Trainable parameters of `memories.language_model(vocabulary_size, **build_kwargs)`.

    The model is built stateless, without a fixed batch size (the count does not depend on
    either).

    Args:
        vocabulary_size: Integer >= 2, the number of word ids.
        **build_kwargs: The other arguments of `memories.language_model` (``kind`` and the
            arguments of `build_language_model`).

    Returns:
        Integer, the number of trainable parameters.

    Example:

    >>> count_language_model_parameters(10, units=4, embedding_dim=4)
    234
    """
    build_kwargs = dict(build_kwargs, stateful=False, batch_size=None)
    model = memories.language_model(vocabulary_size, **build_kwargs)
    return int(sum(np.prod(w.shape) for w in model.trainable_weights))


def units_for_parameter_budget(vocabulary_size, kind, budget, **build_kwargs):
    """The LSTM width at which a model of ``kind`` has about ``budget`` parameters.

    Daniluk et al. (2017) compared the memory models with an LSTM at a roughly equal number
    of parameters by adjusting the LSTM width; this finds that width (a multiple
    of the kind's number of pieces) whose trainable-parameter count is closest to ``budget``.

    Args:
        vocabulary_size: Integer >= 2, the number of word ids.
        kind: String, one of `memories.KINDS`.
        budget: Positive integer, the target number of trainable parameters, e.g. the LSTM
            baseline's (`count_language_model_parameters`).
        **build_kwargs: The other arguments of `memories.language_model` (``units``
            excluded).

    Returns:
        Tuple ``(units, parameters)`` of integers: the width found and the model's number
        of trainable parameters at that width.

    Example:

    >>> budget = count_language_model_parameters(100, kind="lstm", units=30, embedding_dim=30)
    >>> units, count = units_for_parameter_budget(100, "key_value", budget, embedding_dim=30)
    >>> units % 2, abs(count - budget) < 0.05 * budget
    (0, True)
    """
    budget = check_int("budget", budget, 1)
    if "units" in build_kwargs:
        raise ValueError("`units` is what `units_for_parameter_budget` finds; do not pass it.")
    # The widths the kind accepts with equal pieces are multiples of its pieces (1 for
    # a name that is not a kind, which `make_memory` then refuses with its own message).
    multiple = memories.pieces(kind, build_kwargs.get("ngram", DANILUK_DEFAULTS["ngram"]))

    def count(steps):
        return count_language_model_parameters(
            vocabulary_size, kind=kind, units=steps * multiple, **build_kwargs
        )

    low, high = 1, 1
    while count(high) < budget:
        low, high = high, high * 2
    while high - low > 1:  # count(low) < budget <= count(high), unless high == 1
        middle = (low + high) // 2
        low, high = (middle, high) if count(middle) < budget else (low, middle)
    best = min((low, high), key=lambda steps: abs(count(steps) - budget))
    return best * multiple, count(best)
