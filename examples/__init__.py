"""The papers' experiments, one folder each (`snli`, `language_modeling`, `fill_last_word`,
`seq2seq`), each importing only tf-memlayers, Keras, TensorFlow, NumPy and itself, so that a
copy of one folder is a project of its own; a script beside each folder keeps its old command
(``python examples/snli_dual_am_gru.py``)."""
