"""SNLI with associative memories: Weissenborn (2016)'s sentence-pair classifiers, rebuilt on
tf-memlayers.

The model (`tf_memlayers.models.build_snli_model`) embeds a premise and a hypothesis, encodes
the pair with a conditional encoder of two layers, the first reading the hypothesis with what
it kept of the premise, and classifies ``[p, h, |p - h|]`` as entailment, neutral or
contradiction. ``--model`` chooses the first layer, a row of the paper's Table 1: ``gru``,
``am_gru`` (an associative-memory GRU whose hypothesis pass continues the premise's memory) or
``dual_am_gru`` (the paper's model: its hypothesis pass reads the premise's final memory);
``word_by_word`` trains the paper's comparator instead, an LSTM with the word-by-word attention
of Rocktäschel et al. (2016) (`models`).

Run it from the folder that holds ``snli/`` (``examples/`` in the repository), or through the
repository's script::

    python -m snli                                  # embedded corpus, Dual AM-GRU, ~5 minutes
    python -m snli --model gru --epochs 3
    python -m snli --data-dir ~/snli_1.0 --embeddings glove.840B.300d.txt --eval-every 1000 \\
        --epochs 30
    python examples/snli_dual_am_gru.py --help     # the same command line
    tensorboard --logdir runs/snli_dual_am_gru

Data (`input_pipeline`), the first there is: ``--data-dir``, the official SNLI 1.0 files
(``snli_1.0_<split>.jsonl`` or ``.txt``, or ``snli_1.0.zip`` itself) or InferSent's (``s1.*``,
``s2.*``, ``labels.*``); else the tensorflow-datasets ``snli``, if prepared (``--download``
prepares it); else an embedded generated corpus whose labels need the premise to be recalled.
``--embeddings`` reads GloVe vectors (`corpora`).

Each run keeps its directory (``runs/snli_dual_am_gru/<model>-<changed options>-<digest>``, or
``--workdir``; `train`): the same command resumes an interrupted run exactly, and the
directory holds the best and last models, TensorBoard logs (the memory's retrievals or the
attention's weights for a probe pair, each epoch, and the HParams dashboard) and
``metrics.json``. ``--strategy multi_worker`` trains on several machines (each with its own
``TF_CONFIG``).

To make it your own, copy the folder anywhere and ``pip install tf-memlayers``; it imports
nothing else of the repository. The modules: ``main.py`` (the command line), ``train.py``
(`train.train_and_evaluate`: data, model, callbacks, training through
`tf_memlayers.training`), ``input_pipeline.py`` (the sources, the vocabulary, ``tf.data``),
``corpora.py`` (the readers of SNLI's and GloVe's files) and ``models.py`` (the encoders).
"""
