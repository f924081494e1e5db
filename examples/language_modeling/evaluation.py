"""Scoring a language model over a whole corpus split."""

import numpy as np

from tf_memlayers.callbacks.state_reset_callback import StateResetCallback


def has_reset_input(model):
    """Whether ``model`` takes the ``reset`` input of `build_language_model(resets=True)`.

    Args:
        model: A `keras.Model`.

    Returns:
        bool.
    """
    inputs = getattr(model, "input", None)
    return isinstance(inputs, dict) and "reset" in inputs


def check_batches_fit_model(model, batches):
    """Checks that ``batches`` are laid out the way ``model`` reads documents.

    Packed batches need a model that restarts its rows inside the graph (one built with
    ``resets=True``); padded batches, a model without the ``reset`` input. Keras would
    otherwise drop the ``reset`` input of packed batches and silently carry the state from
    one document into the next.

    Args:
        model: A `keras.Model` from `build_language_model`.
        batches: `examples.language_modeling.lm_batches.BPTTBatches`.

    Raises:
        ValueError: If packed batches meet a model without resets, or the other way round.
    """
    if batches.packed != has_reset_input(model):
        have = "packed" if batches.packed else "padded"
        need = "resets=True" if batches.packed else "resets=False"
        raise ValueError(
            f"`batches` are {have} (make_bptt_batches(pack={batches.packed})), so the model "
            f"must be built with build_language_model({need}); model {model.name!r} "
            f"{'has no' if batches.packed else 'takes a'} `reset` input."
        )


def evaluate_language_model(model, batches, verbose=0):
    """Perplexity of a compiled language model over a whole split, states reset per document.

    Padded batches reset the rows starting a document from the host between batches
    (`StateResetCallback`); packed batches carry their reset mask into a model built with
    ``resets=True``, which restarts the rows inside the graph. Both score every target token
    once, each document from a fresh state.

    Args:
        model: a model compiled by `compile_language_model` (with the perplexity metric).
        batches: the split as `examples.language_modeling.lm_batches.BPTTBatches` (the batch size of
            a stateful model).
        verbose: Keras verbosity.

    Returns:
        A dict with ``perplexity`` (exp of the mean NLL over all target tokens),
        ``nll`` (that mean) and ``tokens`` (the number of targets).

    Raises:
        ValueError: If the model has no perplexity metric, or reads documents otherwise than
            ``batches`` are laid out (`check_batches_fit_model`).
    """
    check_batches_fit_model(model, batches)
    results = model.evaluate(
        batches.dataset(),
        callbacks=[StateResetCallback(eval_resets=batches.resets)],
        verbose=verbose,
        return_dict=True,
    )
    if "perplexity" not in results:
        raise ValueError("`model` must be compiled with the perplexity metric.")
    perplexity = float(results["perplexity"])
    return {
        "perplexity": perplexity,
        "nll": float(np.log(perplexity)),
        "tokens": batches.num_targets,
    }
