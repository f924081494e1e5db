"""``python -m language_modeling``: the command line of `main`."""

from .main import main

main()
