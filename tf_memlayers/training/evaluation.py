"""Scoring a language model over a whole corpus split."""

import numpy as np

from tf_memlayers.callbacks.state_reset import StateResetCallback


def evaluate_language_model(model, batches, verbose=0):
    """Perplexity of a compiled language model over a whole split, states reset per document.

    Args:
        model: a model compiled by `compile_language_model` (with the perplexity metric).
        batches: the split as `tf_memlayers.data.lm_batches.BPTTBatches` (the batch size of
            a stateful model).
        verbose: Keras verbosity.

    Returns:
        A dict with ``perplexity`` (exp of the mean NLL over all target tokens),
        ``nll`` (that mean) and ``tokens`` (the number of targets).
    """
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
