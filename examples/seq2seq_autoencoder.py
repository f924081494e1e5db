"""Auto-encodes sentences with a sequence-to-sequence model (Weissenborn 2016, §5.3): an AM-GRU
encoder and a Dual AM-GRU decoder, an attention decoder or a plain GRU encoder-decoder.

The same as ``python -m seq2seq`` run in ``examples/``; the example is the folder
``examples/seq2seq/`` (its ``__init__.py`` describes it, ``--help`` lists the options)::

    python examples/seq2seq_autoencoder.py --model attention
"""

from seq2seq.main import main

if __name__ == "__main__":
    main()
