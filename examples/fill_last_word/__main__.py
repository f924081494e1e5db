"""``python -m fill_last_word``: the last-word example's command line (`main.main`)."""

from .main import main

main()
