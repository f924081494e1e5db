"""``python -m seq2seq``: trains and evaluates a sentence auto-encoder (``--help``)."""

from .main import main

if __name__ == "__main__":
    main()
