"""Input pipelines: tokens and vocabularies, corpus readers, generated corpora, `tf.data` builders.

Shared by every reader:

* `tf_memlayers.data.vocabulary`: special tokens, tokenizers, `Vocabulary` and the ranking of
  tokens by frequency;
* `tf_memlayers.data._files`: reading text files (``.gz`` included) with errors that name
  the file.

Language modelling:

* `tf_memlayers.data.token_streams`: `LMCorpus` / `TokenStream` and the steps the readers share;
* readers, one per corpus: `tf_memlayers.data.ptb`, `tf_memlayers.data.wikitext2`,
  `tf_memlayers.data.cbt`; `tf_memlayers.data.lm_corpora` picks the reader for a folder
  and gathers the language-model names in one module;
* `tf_memlayers.data.generated_lm`: the generated copy corpus;
* `tf_memlayers.data.lm_batches`: truncated-BPTT batches and their `tf.data` pipeline.

Natural-language inference:

* `tf_memlayers.data.nli_examples`: `NLIExample` and the labels;
* `tf_memlayers.data.snli`: SNLI readers (official release, InferSent layout) and the chain
  of sources; `tf_memlayers.data.snli_tfds`: SNLI through tensorflow-datasets (prepared, or
  downloaded on request);
* `tf_memlayers.data.generated_nli`: the generated recall corpus;
* `tf_memlayers.data.nli_batches`: vocabulary, ids and `tf.data` batches of sentence pairs.

Last-word prediction: `tf_memlayers.data.sentences`. Pretrained word vectors:
`tf_memlayers.data.embeddings`.

Importing `tf_memlayers` does not import this package.
"""
