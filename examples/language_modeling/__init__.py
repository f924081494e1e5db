"""Memory-augmented LSTM language models on PTB / WikiText-2 / CBT (Daniluk et al. 2017).

Trains an LSTM language model with one of the memory layers of *Frustratingly Short Attention
Spans in Neural Language Modeling* on top (``--model lstm | attention | key_value |
key_value_predict | ngram``, `models`) with truncated BPTT over consecutive batches, the states
carried from batch to batch and reset at every epoch and document start, and reports
validation and test perplexity (exp of the mean negative log-likelihood over every target
token). Documents start at a segment boundary (padded to it), or with ``--pack`` follow each
other back to back, the model restarting its rows inside the graph where one starts.

Run it from this folder's parent as ``python -m language_modeling [options]`` (from the
repository: ``python examples/ptb_memory_lm.py [options]``), with ``path/to/ptb`` and
``path/to/wikitext2`` folders of those corpora's files::

    python -m language_modeling                         # attention LM, generated corpus
    python -m language_modeling --model lstm            # the baseline on the same data
    python -m language_modeling --model ngram --data-dir path/to/ptb
    python -m language_modeling --config zaremba-small --data-dir path/to/ptb
    python -m language_modeling --model lstm --pack --data-dir path/to/wikitext2
    tensorboard --logdir runs/language_modeling       # every run side by side

Data (`input_pipeline`): ``--data-dir`` holding Penn Treebank (``ptb.{train,valid,test}.txt``),
WikiText-2 (``wiki.{train,valid,test}.tokens``) or the Children's Book Test (``cbt_*.txt``),
each file optionally gzipped; without it, an embedded generated corpus in which the next word
is often a copy of one a few steps back, so that window attention clearly beats the LSTM.

The defaults are the paper's (§4.1): Adam 1e-3, batch 64, global-norm clipping 5, forget bias
1, U(-0.1, 0.1), BPTT 20. ``--config`` names a recipe of `configs` whose settings become the
defaults (explicit options still win); dropout, variational dropout and tied weights, the
baselines of *Neural Language Models Explained*, are options. `models.units_for_budget` gives
each memory model the LSTM width of an equal parameter budget, as the paper compared them.

The run directory (``--workdir``; by default ``runs/language_modeling/<model>-<options changed
from their defaults>-<digest of the settings>``) keeps the backup of the run (the same command
continues a run interrupted at any point and ends as an uninterrupted run would; other settings
in the same directory are refused), the best and the last model, ``metrics.json`` and the
TensorBoard logs: loss, perplexity and learning rate, the attention models' window attention
for a probe sentence and by window position (Daniluk et al.'s Fig. 3), and the run's settings
and metrics in the HParams dashboard.
"""
