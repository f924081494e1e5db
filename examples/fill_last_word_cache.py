"""Predicts the last word of a sentence with an LSTM, attention pooling and a heap cache (Gaffney).

The example is the folder ``fill_last_word/`` beside this script (its docstring, or ``--help``,
says what it does); this script runs it as ``python -m fill_last_word`` does from this folder::

    python examples/fill_last_word_cache.py --help
"""

from fill_last_word.main import main

if __name__ == "__main__":
    main()
