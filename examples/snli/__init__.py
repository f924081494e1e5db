"""What `examples/snli_dual_am_gru.py` (and the SNLI benchmarks) need beyond the package:
sentence pairs and their labels (`nli_examples`), the SNLI readers and their chain of sources
(`snli`, `snli_tfds`), the generated recall corpus (`generated_nli`), and vocabulary, ids and
``tf.data`` batches of sentence pairs (`nli_batches`), and the ``--model`` choices as encoders
(`encoders`)."""
