"""Sentence auto-encoding (Weissenborn 2016, §5.3): an AM-GRU encoder and a Dual AM-GRU decoder
without shared parameters, beside an attention decoder and a plain GRU encoder-decoder.

The decoder reads ``<s>`` and the sentence and predicts the sentence and ``<eos>`` (teacher
forcing); after training, the test sentences are decoded from their encodings alone, one word
at a time through the decoder's step model (`tf_memlayers.models.generate`: greedy, or a beam
search with ``--beams`` and keras-hub installed). The memory probes (`probes`) measure what the
paper found: how alike the keys are that the encoder writes under, and which source word each
decoder step reads most (its Figure 3, drawn in TensorBoard each epoch).

Run it from this folder's parent (``examples/``, or wherever the folder was copied), with
``path/to/ptb`` a folder of Penn Treebank's files::

    python -m seq2seq                          # Dual AM-GRU decoder, generated corpus
    python -m seq2seq --model attention
    python -m seq2seq --data-dir path/to/ptb --max-length 20 --max-train 20000 \\
        --units 128 --epochs 10

or as ``python examples/seq2seq_autoencoder.py`` with the same options (``--help`` lists them).

Data: ``--data-dir``, a folder of ``train``, ``valid`` and ``test`` files with one sentence per
line, tokens separated by spaces (``train.txt``, or a name ending in ``.train.txt`` as Penn
Treebank's ``ptb.train.txt``; ``.gz`` read too); sentences longer than ``--max-length`` are
left out. Without it, a generated corpus (`input_pipeline.generated_sentences`) that runs
anywhere in a few minutes.

The run directory (``--workdir``; by default ``runs/seq2seq_autoencoder/<model>-<options
changed from their defaults>-<digest>``) keeps the backup (the same command resumes exactly
after an interruption; a different one in the same ``--workdir`` is refused), ``best.keras``
and ``last.keras``, TensorBoard logs (the losses; each epoch the paper's Figure 3 for the Dual
AM-GRU, or the attention weights, with the probe statistics; the settings and final metrics in
the HParams dashboard) and ``metrics.json``. ``--strategy multi_worker`` trains on the machines
that ``TF_CONFIG`` names.

Modules: `main` (the command line), `train` (`train.train_and_evaluate`), `input_pipeline`
(sentences, vocabulary, batches), `models` (the auto-encoders and their decoding), `probes`
(the memory probes).
"""
