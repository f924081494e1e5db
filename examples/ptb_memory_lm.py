#!/usr/bin/env python
"""Memory-augmented LSTM language models on PTB / WikiText-2 / CBT (Daniluk et al. 2017): the
command line of ``examples/language_modeling/`` (its docstring says more; ``--help`` lists the
options)."""

from language_modeling.main import main

main()
