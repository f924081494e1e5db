"""Predicts the last word of a sentence with an LSTM, attention pooling and a heap cache (Gaffney).

Rebuilds the task of Gaffney's *Cache Attention for Recurrent Language Modeling*: an LSTM reads
a sentence minus its last word, attention pooling sums its states, a heap-ordered cache of
earlier examples' states is read with attention, and a softmax predicts the word. The model
(`tf_memlayers.models.build_fill_last_word_model`, a `HeapCacheModel` that writes its cache
after each training step) is the paper's, or the reference code's with --faithful-to-code.

Data: --data-dir with one sentence per line (train.txt and dev.txt, optionally .gz; without a
train.txt but with a test.txt, as in the PWKP split of the reference code, that file is used
for training) and --embeddings with GloVe vectors, else an embedded generated corpus of
episodes: facts about made-up houses ("red kalo ."), then questions about them ("kalo red")
whose answers only those facts state (input_pipeline.generated_last_word_corpus). On the
generated corpus the cache is emptied at the start of every episode, and each evaluation
episode writes its facts to the emptied cache before its questions are asked; the metrics give
the accuracy of always answering the commonest colour (eval_majority_baseline) and the read's
weight on the asked house's fact (eval_attention_on_fact).

Run from the folder's parent (or as python examples/fill_last_word_cache.py):

    python -m fill_last_word                    # generated corpus, dot read
    python -m fill_last_word --cache-size 0     # the same without a cache
    python -m fill_last_word --query none       # the paper's read
    python -m fill_last_word --data-dir data/pwkp_gaffney \\
        --embeddings data/glove_subset/glove-50d-5k.json --epochs 5

The run directory (--workdir; by default one per set of options under
runs/fill_last_word_cache/) keeps checkpoints (the same command resumes after an interruption at
any point, cache and data order included, and ends as an uninterrupted run would; a different
one in the same --workdir is refused), the best and last models, TensorBoard logs (scalars; each
epoch the cache-attention weight by heap index on a log axis, as in the paper's Fig. 5, and the
cache fill, read after the epoch's evaluation; the HParams record) and metrics.json.
tensorboard --logdir runs/fill_last_word_cache compares the runs. --strategy multi_worker trains
on the machines that TF_CONFIG names.
"""
