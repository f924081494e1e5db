"""``python -m snli``: the SNLI example's command line (`main.main`)."""

from .main import main

main()
