"""Trains GRU / AM-GRU / Dual AM-GRU sentence-pair classifiers (Weissenborn 2016) on SNLI, and
the paper's comparator, an LSTM with word-by-word attention (Rocktäschel et al. 2016).

The example is the folder ``examples/snli/`` (its ``__init__.py`` says what it does and how to
fork it); this script runs it as ``python -m snli`` does from ``examples/``::

    python examples/snli_dual_am_gru.py                      # embedded corpus, Dual AM-GRU
    python examples/snli_dual_am_gru.py --model gru --epochs 3
    python examples/snli_dual_am_gru.py --data-dir ~/snli_1.0 --embeddings glove.840B.300d.txt \\
        --eval-every 1000 --epochs 30
"""

from snli.main import main  # the script's own folder, examples/, is first on sys.path

if __name__ == "__main__":
    main()
