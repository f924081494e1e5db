"""What every example's input pipeline shares: special tokens, tokenizers and `Vocabulary`
(`examples.harness.data.vocabulary`), reading text files, ``.gz`` included, with errors that
name the file (`examples.harness.data.files`), and pretrained word vectors
(`examples.harness.data.embeddings`).

Each example's own readers and ``tf.data`` pipelines are in its folder:
`examples.language_modeling` (PTB, WikiText-2, CBT, the generated copy corpus, truncated-BPTT
batches), `examples.snli` (SNLI and the generated recall corpus, batches of sentence pairs),
`examples.fill_last_word` (sentences and their last words).
"""
