"""Predicts the last word of a sentence with an LSTM, attention pooling and a heap cache (Gaffney).

Data: ``--data-dir`` with one sentence per line (``train.txt`` and ``dev.txt``; when there is
no ``train.txt`` but a ``test.txt``, as in the PWKP split of the reference code, that file is
used for training), else an embedded generated corpus of episodes: facts about made-up houses
(``"red kalo ."``), then questions about them (``"kalo red"``) whose answers only those facts
state (`examples.fill_last_word.sentences.generated_last_word_corpus`). On the generated corpus the
cache is emptied at the start of every episode, and each evaluation episode writes its facts to
the emptied cache before its questions are asked, so the cache holds exactly the facts that
answer them; the metrics give the accuracy of always answering the commonest colour
(``eval_majority_baseline``) and the read's weight on the asked house's fact
(``eval_attention_on_fact``).

Examples::

    python examples/fill_last_word_cache.py                  # generated corpus, dot read
    python examples/fill_last_word_cache.py --cache-size 0   # the same without a cache
    python examples/fill_last_word_cache.py --query none     # the paper's read
    python examples/fill_last_word_cache.py --data-dir ../shared/data/pwkp_gaffney \\
        --embeddings glove-50d-5k.json --pooling attention --cache-size 1000 --epochs 5

The run directory (``--workdir``; by default ``runs/fill_last_word_cache/<pooling>-cache<size>-
<options changed from their defaults>-<digest of the resolved settings>``, one per set of
options) keeps checkpoints (the same command resumes after an
interruption at any point, cache and shuffling included, and ends as an uninterrupted run
would; a different one in the same ``--workdir`` is refused),
TensorBoard logs (scalars; each epoch the cache-attention weight by heap index on a log axis, as
in the paper's Fig. 5, and the cache fill, both read after the epoch's evaluation: on the
generated corpus, of the cache the last evaluation episode wrote) and ``metrics.json`` (the
whole run).
``tensorboard --logdir runs/fill_last_word_cache`` compares the runs.
"""

import os
import sys
import time

if __package__ in (None, ""):  # run as a file: the harness is in the repository's examples/
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from examples.harness.startup import keras  # noqa: E402  (first: a quiet TensorFlow start)

# isort: split
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from examples.fill_last_word import sentences as data  # noqa: E402
from examples.harness import options  # noqa: E402
from examples.harness.data import embeddings as word_vectors  # noqa: E402
from examples.harness.run_directory import (  # noqa: E402
    recorded_names,
    recorded_spellings,
    resolved_settings,
    run_workdir,
)
from examples.harness.training import (  # noqa: E402
    evaluate,
    make_strategy,
    resumable_callbacks,
    resumed_epoch,
    run_history,
    train,
    worker_directory,
    write_metrics,
)
from examples.harness.training.hparams import log_hparams  # noqa: E402
from tf_memlayers.callbacks.cache_attention_callback import (  # noqa: E402
    CacheAttentionCallback,
    cache_attention_on_entries,
)
from tf_memlayers.callbacks.cache_episodes_callback import CacheEpisodesCallback  # noqa: E402
from tf_memlayers.layers import AttentionPooling, HeapCacheAttention  # noqa: E402
from tf_memlayers.layers.cache_attention.heap_cache_attention import POLICIES, QUERIES  # noqa: E402
from tf_memlayers.models.fill_last_word import (  # noqa: E402
    CODE_LEARNING_RATE,
    PAPER_ATTENTION_UNITS,
    PAPER_LEARNING_RATE,
    build_fill_last_word_model,
    compile_fill_last_word_model,
)

# The sentence state: the LSTM's final state, or a pooling of all its outputs.
POOLINGS = ("last", "attention")
from tf_memlayers.models.heap_cache_model import cache_fill_fractions  # noqa: E402


def parse_args(argv=None):
    parser = options.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_argument_group("data")
    options.add_option(
        source,
        "data_dir",
        help="folder of one-sentence-per-line files (default: none, the embedded generated corpus)",
    )
    options.add_argument(
        source,
        "--train-file",
        metavar="NAME",
        help="training file in --data-dir (default: train.txt, else test.txt)",
    )
    options.add_argument(
        source,
        "--eval-file",
        default="dev.txt",
        metavar="NAME",
        help="evaluation file in --data-dir",
    )
    options.add_option(
        source,
        "max_train",
        help="use at most this many training sentences of --data-dir (default: all)",
    )
    options.add_argument(
        source,
        "--episodes",
        type=options.positive_int,
        default=20,
        metavar="N",
        help="generated corpus: training episodes per epoch",
    )
    options.add_argument(
        source,
        "--houses",
        type=options.int_at_least(2),
        default=8,
        metavar="N",
        help=f"generated corpus: houses per episode, at most {data.GENERATED_HOUSES}",
    )
    options.add_argument(
        source,
        "--max-vocabulary",
        type=options.int_at_least(3),
        metavar="N",
        help="cap the vocabulary, <pad> and <unk> included (so at least one "
        "word beside them); the rarer words become <unk> (default: no cap)",
    )
    options.add_option(
        source,
        "max_length",
        default=40,
        type=options.int_at_least(2),
        help="context steps (the paper: 40); longer sentences are skipped. The "
        f"generated corpus takes {data.GENERATED_STEPS}",
    )
    options.add_option(
        source,
        "embeddings",
        help="pretrained word vectors: a GloVe text file "
        "(optionally .gz) or a JSON {word: vector} file (default: none, vectors "
        "drawn from N(0, 0.9^2))",
    )
    model = parser.add_argument_group("model")
    options.add_option(
        model, "embedding_dim", default=100, help="word vector size without --embeddings"
    )
    options.add_option(model, "units", default=128, help="width of the LSTM")
    options.add_argument(
        model,
        "--attention-units",
        type=options.positive_int,
        default=PAPER_ATTENTION_UNITS,
        metavar="N",
        help="width of the attention pooling and cache reads",
    )
    options.add_argument(
        model,
        "--pooling",
        choices=POOLINGS,
        default="attention",
        help="sentence state: the last LSTM state or attention pooling",
    )
    options.add_argument(
        model,
        "--cache-size",
        type=options.non_negative_int,
        default=1000,
        metavar="N",
        help="cached states (0: no cache)",
    )
    options.add_argument(
        model, "--policy", choices=POLICIES, default="heap", help="which states the cache keeps"
    )
    options.add_argument(
        model,
        "--query",
        choices=QUERIES,
        default="dot",
        help="cache read: none (the paper), additive (the reference code) or "
        "dot (finds one earlier example)",
    )
    options.add_argument(
        model,
        "--cache-gate-init",
        choices=("ones", "glorot_uniform"),
        help="initial value of the cache read's gate (default: ones with "
        "--query dot, else glorot_uniform as in the reference code)",
    )
    options.add_argument(
        model,
        "--faithful-to-code",
        action="store_true",
        help="reproduce the reference code (sum pooling, frozen batch norm, ...)",
    )
    train = parser.add_argument_group("training")
    options.add_option(train, "epochs", default=30)
    options.add_option(
        train,
        "batch_size",
        default=64,
        help="sentences per batch with --data-dir (the generated corpus is batched by episode)",
    )
    options.add_option(
        train,
        "learning_rate",
        help="Adam's learning rate (default: 0.01, the paper, or 1e-3 with --faithful-to-code)",
    )
    options.add_option(
        train,
        "clip_norm",
        help="each gradient's norm is clipped to this (0: "
        "none; default: 5, the paper, or none with --faithful-to-code)",
    )
    options.add_argument(
        train,
        "--weight-decay",
        type=options.non_negative_float,
        default=1e-5,
        metavar="C",
        help="L2 penalty C * sum ||w||^2 / 2 on every weight",
    )
    options.add_run_options(
        train,
        seed=0,
        default_workdir=(
            "runs/fill_last_word_cache/<pooling>-cache<size>-<changed options>-<digest>"
        ),
    )
    args = parser.parse_args(argv)
    if not args.data_dir:
        if args.train_file:
            parser.error("argument --train-file: needs --data-dir")
        if args.max_train:
            parser.error("argument --max-train: needs --data-dir")
        if args.max_length < data.GENERATED_STEPS:
            parser.error(
                f"argument --max-length: the generated sentences need {data.GENERATED_STEPS} "
                f"steps, got {args.max_length}"
            )
        if args.houses > data.GENERATED_HOUSES:
            parser.error(
                f"argument --houses: must be <= {data.GENERATED_HOUSES}, got {args.houses}"
            )
        return args
    names = [args.train_file] if args.train_file else ["train.txt", "test.txt"]
    if not any(os.path.isfile(os.path.join(args.data_dir, name)) for name in names):
        option = "--train-file" if args.train_file else "--data-dir"
        parser.error(f"argument {option}: {args.data_dir!r} has no {' or '.join(names)}")
    if not os.path.isfile(os.path.join(args.data_dir, args.eval_file)):
        parser.error(f"argument --eval-file: {args.data_dir!r} has no {args.eval_file}")
    return args


def load_sentences(args):
    """Returns (train sentences, evaluation sentences, source description) of --data-dir."""
    train_file = args.train_file
    if train_file is None:
        has_train = os.path.exists(os.path.join(args.data_dir, "train.txt"))
        train_file = "train.txt" if has_train else "test.txt"
    with options.reported_as("--data-dir"):
        train = data.read_sentences(os.path.join(args.data_dir, train_file))
        evaluation = data.read_sentences(os.path.join(args.data_dir, args.eval_file))
    return train, evaluation, f"{args.data_dir}:{train_file}/{args.eval_file}"


class FileCorpus:
    """Sentences of --data-dir: a shuffled training set and one evaluation set."""

    def __init__(self, args):
        train, evaluation, self.source = load_sentences(args)
        if args.max_train:
            train = train[: args.max_train]
        self.vocabulary = data.build_vocabulary(train, args.max_vocabulary)
        self.x_train, self.y_train, _ = data.encode_last_word(
            train, self.vocabulary, args.max_length
        )
        self.x_eval, self.y_eval, _ = data.encode_last_word(
            evaluation, self.vocabulary, args.max_length
        )
        self.train_sentences = len(self.x_train)
        self.max_length = args.max_length
        self.args = args

    def datasets(self, batch_size, initial_epoch):
        """(training stream from ``initial_epoch`` on, steps per epoch, evaluation batches)."""
        # Reshuffled every epoch; one endless stream of the epochs' batches, so that a resumed
        # run skips the completed epochs' batches and sees the orders an uninterrupted run sees.
        stream = data.last_word_dataset(
            self.x_train, self.y_train, batch_size, shuffle=True, seed=self.args.seed
        ).repeat()
        steps = -(-len(self.x_train) // batch_size)
        evaluation = data.last_word_dataset(self.x_eval, self.y_eval, batch_size)
        return stream.skip(initial_epoch * steps), steps, evaluation

    def callbacks(self):
        return []

    def probe(self, batch_size):
        return self.x_eval[:batch_size]

    def attention_on_fact(self, model):
        return None


class GeneratedCorpus:
    """Episodes of facts, then questions (`data.generated_last_word_corpus`)."""

    source = "generated"

    def __init__(self, args):
        self.args = args
        # The sentences have at most 2 context words: longer rows would be padding only.
        self.max_length = data.GENERATED_STEPS
        self.vocabulary = data.build_vocabulary(
            [" ".join(data.generated_last_word_vocabulary())], args.max_vocabulary
        )
        train, self.evaluation = self.episodes(0)
        self.train_sentences = sum(len(e.facts) + len(e.questions) for e in train)
        self.facts = [self.encode(e.facts)[0] for e in self.evaluation]
        questions = [self.encode(e.questions) for e in self.evaluation]
        self.x_eval = np.concatenate([x for x, _ in questions])
        self.y_eval = np.concatenate([y for _, y in questions])

    def episodes(self, epoch):
        return data.generated_last_word_corpus(
            epoch, episodes=self.args.episodes, houses=self.args.houses, seed=self.args.seed
        )

    def encode(self, sentences):
        x, y, _ = data.encode_last_word(sentences, self.vocabulary, self.max_length)
        return x, y

    def datasets(self, batch_size, initial_epoch):
        """(training stream from ``initial_epoch`` on, steps per epoch, evaluation batches).

        Each episode is two batches, its facts and then its questions; an evaluation batch is
        the questions of one evaluation episode. ``batch_size`` does not apply.
        """
        del batch_size

        def batches():
            for epoch in range(initial_epoch, self.args.epochs):
                for episode in self.episodes(epoch)[0]:
                    yield self.encode(episode.facts)
                    yield self.encode(episode.questions)

        spec = (
            tf.TensorSpec((None, self.max_length), tf.int32),
            tf.TensorSpec((None,), tf.int32),
        )
        stream = tf.data.Dataset.from_generator(batches, output_signature=spec)
        evaluation = data.last_word_dataset(self.x_eval, self.y_eval, self.args.houses)
        return stream.prefetch(tf.data.AUTOTUNE), 2 * self.args.episodes, evaluation

    def callbacks(self):
        return [CacheEpisodesCallback(2, evaluation_facts=self.facts)]

    def probe(self, batch_size):
        # After an evaluation the caches hold the last evaluation episode's facts.
        return self.x_eval[-self.args.houses :]

    def attention_on_fact(self, model):
        """Mean read weight of the evaluation questions on the asked house's fact."""
        if not model.cache_layers:
            return None
        layer = model.cache_layers[0]
        weights = []
        for episode, facts in zip(self.evaluation, self.facts):
            layer.reset_cache()
            model.write_caches(facts)
            houses = [episode.house(s) for s in episode.facts]
            wanted = [[episode.house(q) == h for h in houses] for q in episode.questions]
            weights.append(
                cache_attention_on_entries(
                    model, layer, self.encode(episode.questions)[0], facts, wanted
                )
            )
        return float(np.mean(np.concatenate(weights)))


def initial_embeddings(args, vocabulary):
    if not args.embeddings:
        return None, 0
    with options.reported_as("--embeddings"):
        vectors = word_vectors.load_word_vectors(args.embeddings, vocabulary=set(vocabulary))
    # Words without a vector keep the reference code's N(0, 0.9^2) initialisation.
    return word_vectors.embedding_matrix(vocabulary, vectors, scale=0.9, seed=args.seed)


# The run settings (digest, directory name, the settings a resumed run is checked against)
# record the LSTM width ``--units`` under the name run directories hold it by.
RECORDED_NAMES = {"units": "hidden_units"}
# Options added after runs were named: they define a run only when given (`run_settings`).
FILL_ADDED_OPTIONS = ("clip_norm",)


def run_settings(args, resolved):
    """The settings the run computes with (`resolved_settings`), under their recorded names."""
    recorded = recorded_names(args, RECORDED_NAMES)
    return resolved_settings(recorded, resolved, added_options=FILL_ADDED_OPTIONS)


def run_directory(args, corpus):
    """``(run directory, resolved values)``: ``--workdir``, or a directory named after the
    pooling, the cache size and the changed options, with a digest of the resolved settings
    (the source and learning rate the run uses where the defaults depend on the data and
    the mode)."""
    default_rate = CODE_LEARNING_RATE if args.faithful_to_code else PAPER_LEARNING_RATE
    resolved = dict(source=corpus.source, learning_rate=args.learning_rate or default_rate)
    label = f"{args.pooling}-cache{args.cache_size}"
    root = os.path.join("runs", "fill_last_word_cache")
    recorded = recorded_names(args, RECORDED_NAMES)
    workdir = run_workdir(
        recorded, root, label, resolved=resolved, added_options=FILL_ADDED_OPTIONS
    )
    return workdir, resolved


def memory_layers(args, sequence_length):
    """The ``pooling`` and ``cache`` layers of `build_fill_last_word_model` the options name."""
    if args.pooling == "last":
        pooling = None
    elif args.faithful_to_code:
        # The reference code's attention pooling: a plain sum over every step.
        pooling = keras.Sequential(
            [keras.layers.GlobalAveragePooling1D(), keras.layers.Rescaling(float(sequence_length))]
        )
    else:
        pooling = AttentionPooling(args.attention_units)
    cache = None
    if args.cache_size:
        # The read enters the state at full strength with the dot read, else as in the code.
        gate = args.cache_gate_init or ("ones" if args.query == "dot" else "glorot_uniform")
        cache = HeapCacheAttention(
            args.cache_size,
            args.attention_units,
            policy=args.policy,
            query=args.query,
            mask_empty=not args.faithful_to_code,
            gate_initializer=gate,
        )
    return pooling, cache


def main(argv=None, extra_callbacks=()):
    """Runs the example; returns the final metrics dict."""
    args = parse_args(argv)
    # First: a multi-worker strategy sets up the collective operations before any other op.
    strategy = make_strategy(args.strategy)
    keras.utils.set_random_seed(args.seed)
    if args.mixed_precision:
        keras.config.set_dtype_policy("mixed_float16")
    started = time.time()
    corpus = GeneratedCorpus(args) if not args.data_dir else FileCorpus(args)
    vocabulary, x_eval, y_eval = corpus.vocabulary, corpus.x_eval, corpus.y_eval
    if not corpus.train_sentences or not len(x_eval):
        # Reported as the option that leaves the sentences out.
        options.refuse(
            "--max-length",
            f"no usable sentences in {corpus.source} (2 to {corpus.max_length} tokens)",
        )
    workdir, resolved = run_directory(args, corpus)
    matrix, found = initial_embeddings(args, vocabulary)
    print(
        f"source={corpus.source} train={corpus.train_sentences} eval={len(x_eval)} "
        f"vocabulary={len(vocabulary)} pretrained={found} workdir={workdir}",
        flush=True,
    )

    batch_size = args.batch_size * strategy.num_replicas_in_sync
    # A resumed run restarts the interrupted epoch with the state (cache included) it began with.
    initial_epoch = resumed_epoch(workdir)
    train_data, steps, eval_data = corpus.datasets(batch_size, initial_epoch)
    with strategy.scope():
        model = build_fill_last_word_model(
            len(vocabulary),
            *memory_layers(args, corpus.max_length),
            sequence_length=corpus.max_length,
            embedding_dim=args.embedding_dim,
            units=args.units,
            embeddings=matrix,
            weight_decay=args.weight_decay,
            faithful_to_code=args.faithful_to_code,
        )
        compile_fill_last_word_model(
            model,
            args.faithful_to_code,
            args.learning_rate,
            clip_norm=args.clip_norm,
            jit_compile=args.jit,
        )

    # The chief writes the run directory; other workers write to a temporary copy of it.
    with worker_directory(workdir, strategy) as rundir:
        log_dir = os.path.join(rundir, "logs")
        episodes = corpus.callbacks()  # first: the other callbacks see the episode's cache
        callbacks = [*episodes, keras.callbacks.TensorBoard(log_dir)]
        if args.cache_size:
            probe = corpus.probe(batch_size)
            callbacks.append(CacheAttentionCallback(log_dir, probe_inputs=probe))
        callbacks = resumable_callbacks(
            rundir,
            monitor="val_accuracy",
            mode="max",
            settings=run_settings(args, resolved),
            spellings=recorded_spellings(RECORDED_NAMES, vars(args)),
            callbacks=[*callbacks, *extra_callbacks],
        )
        # `fit`, or a custom loop where `fit` fails (several workers: keras-team/keras#20585); the
        # tf.data pipeline shuffles (or, for episodes, keeps their order).
        train(
            model,
            train_data,
            epochs=args.epochs,
            initial_epoch=initial_epoch,
            steps_per_epoch=steps,
            validation_data=eval_data,
            callbacks=callbacks,
            verbose=args.verbose,
        )
        history = run_history(rundir)  # every epoch of the run, before and after any restart
        final = evaluate(model, eval_data, callbacks=episodes)
        metrics = {
            "source": corpus.source,
            "workdir": workdir,
            "pooling": args.pooling,
            "cache_size": args.cache_size,
            "policy": args.policy,
            "query": args.query,
            "faithful_to_code": args.faithful_to_code,
            "train_sentences": corpus.train_sentences,
            "eval_sentences": len(x_eval),
            "vocabulary": len(vocabulary),
            "epochs_run": list(range(resumed_epoch(rundir))),
            "val_accuracy": history.get("val_accuracy", []),
            "history": history,
            "eval_accuracy": float(final["accuracy"]),
            "eval_loss": float(final["loss"]),
            # The best constant answer: what the answers' frequencies alone can reach.
            "eval_majority_baseline": float(np.bincount(y_eval).max() / len(y_eval)),
            "cache_fill": cache_fill_fractions(model),
            # Generated corpus: the read's mean weight on the fact about the asked house.
            "eval_attention_on_fact": corpus.attention_on_fact(model),
            "seconds": round(time.time() - started, 1),
        }
        write_metrics(metrics, os.path.join(rundir, "metrics.json"))
        # Under the options' own names (`--units` as ``units``), as every example does.
        log_hparams(
            log_dir,
            resolved_settings(args, resolved),
            {
                "eval_accuracy": metrics["eval_accuracy"],
                "eval_loss": metrics["eval_loss"],
            },
        )
        return metrics


if __name__ == "__main__":
    main(sys.argv[1:])
