"""Documents packed back to back against documents padded to segment starts, on WikiText-2.

The truncated-BPTT layout (`examples.language_modeling.lm_batches.make_bptt_batches`) either
pads each document out to the next segment start, the model's states being cleared from the host
between batches, or packs the documents back to back (``pack=True``), the model restarting a row
inside the graph where a document starts (`build_language_model(resets=True)`). Both score every
target token once, each document from a fresh state; packing leaves out the padding.

For each split the script reports the share of padding positions in both layouts. Then, for
the plain LSTM language model at a small size, it times ``model.fit`` on the first ``--steps``
training batches of each layout (stateful, XLA, the state resets of each layout in the
loop): one untimed pass that traces and compiles, then ``--repeats`` passes, the layouts
interleaved so that load on a shared machine hits both alike. It reports the median seconds per
batch, the packed step over the padded one (the median over passes of the ratio within a pass,
which cancels load that changes between passes), the real target tokens per second over the
timed batches, and what a whole training epoch takes (the split's batches at the median step
time) with its target tokens per second. The machine's load average is saved with the results.
The packed model runs Keras's own RNN loop over the LSTM cell (`ResettableRNN`), the padded
model `keras.layers.LSTM`; the step times show what that costs.

Without the WikiText-2 files (``--data-dir``, default ``$TF_MEMLAYERS_DATA/wikitext2`` or
``../shared/data/wikitext2`` beside the repository) nothing is measured and the script says
so; ``--generated-tokens N`` measures on the generated corpus instead (for tests).

Usage::

    python -m benchmarks.speed.lm_packing                # writes benchmarks/results/lm_packing.json
    python -m benchmarks.speed.lm_packing --update-docs  # also the table of docs/results.rst
"""

import argparse
import json
import os
import pathlib
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = pathlib.Path(__file__).resolve().parents[2]

from benchmarks import matmul_peak, timing  # noqa: E402
from benchmarks.docs_tables import add_update_docs_option, update_docs  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "lm_packing.json"
LAYOUTS = ("padded", "packed")
SPLITS = ("train", "valid", "test")
DOCS_BLOCK = "lm-packing"
COLUMNS = [
    ("layout", "layout"),
    ("train_padding", "padding, train"),
    ("valid_padding", "padding, valid"),
    ("train_batches", "train batches"),
    ("step_ms", "median step (ms)"),
    ("step_ratio", "step × padded"),
    ("tokens_per_second", "target tokens/s (timed batches)"),
    ("epoch_minutes", "minutes per epoch"),
    ("epoch_tokens_per_second", "target tokens/s (epoch)"),
    ("gflop_per_step", "GFLOP/step"),
    ("share_of_peak", "share of matmul peak"),
]


def default_data_dir():
    """``$TF_MEMLAYERS_DATA/wikitext2``, else ``../shared/data/wikitext2`` beside the
    repository."""
    shared = os.environ.get("TF_MEMLAYERS_DATA")
    root = pathlib.Path(shared) if shared else ROOT.parent / "shared" / "data"
    return root / "wikitext2"


def load_corpus(args):
    """The corpus to measure: the generated one with ``--generated-tokens``, else the files of
    ``--data-dir`` (`None` when the folder is absent)."""
    from examples.language_modeling import generated_lm, lm_corpora

    if args.generated_tokens:
        size = args.generated_tokens
        return generated_lm.generate_copy_corpus(
            size, max(size // 10, 2), max(size // 10, 2), sentences_per_document=3
        )
    if not pathlib.Path(args.data_dir).is_dir():
        return None
    return lm_corpora.load_corpus(args.data_dir)


def layouts(corpus, args):
    """``{layout: {split: BPTTBatches}}`` of both layouts."""
    from examples.language_modeling.lm_batches import make_bptt_batches

    def split_batches(split, layout):
        stream = corpus.split(split)
        return make_bptt_batches(stream, args.batch_size, args.seq_len, pack=layout == "packed")

    return {layout: {split: split_batches(split, layout) for split in SPLITS} for layout in LAYOUTS}


def build(vocabulary_size, packed, args):
    """The plain LSTM language model, compiled with XLA; ``packed``: with in-graph resets."""
    from tf_memlayers.models.language_model import build_language_model, compile_language_model

    model = build_language_model(
        vocabulary_size,
        units=args.hidden,
        embedding_dim=args.hidden,
        batch_size=args.batch_size,
        sequence_length=args.seq_len,
        stateful=True,
        resets=packed,
    )
    return compile_language_model(model, jit_compile=True)


def fit_runner(model, batches):
    """``() -> None``: one ``fit`` pass over ``batches`` with the layout's state resets."""
    from tf_memlayers.callbacks.state_reset_callback import StateResetCallback

    dataset = batches.dataset()
    resets = StateResetCallback(batches.resets)

    def run():
        model.fit(dataset, epochs=1, callbacks=[resets], verbose=0, shuffle=False)

    return run


def measure(corpus, args):
    """The results dict (see the module docstring)."""
    import keras

    keras.utils.set_random_seed(args.seed)
    batches = layouts(corpus, args)
    vocabulary_size = len(corpus.vocabulary)
    timed = {layout: batches[layout]["train"].take(args.steps) for layout in LAYOUTS}
    models = {layout: build(vocabulary_size, layout == "packed", args) for layout in LAYOUTS}
    runners = {layout: fit_runner(models[layout], timed[layout]) for layout in LAYOUTS}
    for run in runners.values():  # trace and compile
        run()
    load_before = os.getloadavg()[0]
    samples = timing.interleaved(runners, args.repeats)
    load_after = os.getloadavg()[0]
    peak = matmul_peak.peak_gflops()
    ratios = timing.median_ratio(samples, "padded")  # both layouts time `steps` batches
    rows = []
    for layout in LAYOUTS:
        step = statistics.median(samples[layout]) / 1000 / timed[layout].num_batches
        train = batches[layout]["train"]
        epoch_seconds = step * train.num_batches
        rows.append(
            {
                "layout": layout,
                "train_padding": batches[layout]["train"].padding_fraction,
                "valid_padding": batches[layout]["valid"].padding_fraction,
                "test_padding": batches[layout]["test"].padding_fraction,
                "train_batches": train.num_batches,
                "timed_targets": timed[layout].num_targets,
                "step_ms": 1000 * step,
                "step_ratio": ratios[layout],
                "step_ms_range": [
                    min(samples[layout]) / timed[layout].num_batches,
                    max(samples[layout]) / timed[layout].num_batches,
                ],
                "tokens_per_second": round(
                    timed[layout].num_targets / step / timed[layout].num_batches
                ),
                "epoch_minutes": epoch_seconds / 60,
                "epoch_tokens_per_second": round(train.num_targets / epoch_seconds),
                # Every weight matrix multiplies each of the batch's positions, padded or not.
                **matmul_peak.floor_columns(
                    matmul_peak.weight_training_flops_per_token(models[layout])
                    * args.batch_size
                    * args.seq_len,
                    1000 * step,
                    peak,
                ),
                "peak_gflops": round(peak, 1),
            }
        )
    settings = {
        name: getattr(args, name)
        for name in ("hidden", "batch_size", "seq_len", "steps", "repeats", "seed")
    }
    return {
        "corpus": corpus.name,
        "documents": {split: corpus.split(split).num_documents for split in SPLITS},
        "vocabulary": vocabulary_size,
        "model": "lstm",
        "settings": settings,
        "cpus": os.cpu_count(),
        "load_average": [round(load_before, 2), round(load_after, 2)],
        "rows": rows,
    }


def write_docs(results):
    s = results["settings"]
    update_docs(
        DOCS_BLOCK,
        results["rows"],
        COLUMNS,
        f"Documents padded to segment starts (host-side state resets) and packed back to back "
        f"(in-graph resets, ``pack=True``) on {results['corpus']} "
        f"({results['documents']['train']} training articles): the share of padding "
        f"positions, and training speed of the plain LSTM language model (hidden "
        f"{s['hidden']}, batch {s['batch_size']}, {s['seq_len']} steps, "
        f"{results['vocabulary']}-word softmax, stateful, XLA): ``model.fit`` on the first "
        f"{s['steps']} training batches, median of {s['repeats']} interleaved passes after a "
        f"compiling pass, on {results['cpus']} CPU cores (load average "
        f"{results['load_average'][0]:g} before the timed passes, "
        f"{results['load_average'][1]:g} after: a shared machine); an epoch is the split's "
        f"batches at that median step. GFLOP/step: the products with the weight matrices (6 × "
        f"their parameters per position of the batch, the embedding left out); share of peak: "
        f"that over the median step, against this machine's float32 matrix-product rate "
        f"measured in the same run ({results['rows'][0].get('peak_gflops', 'not measured')} "
        f"GFLOP/s).",
        insert_after="lm-throughput",
    )


def parse_args(argv=None):
    from examples.harness import options

    parser = options.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--data-dir", default=str(default_data_dir()), help="folder of the WikiText-2 files"
    )
    parser.add_argument(
        "--generated-tokens",
        type=options.positive_int,
        metavar="N",
        help="measure on the generated corpus of N training tokens instead",
    )
    parser.add_argument(
        "--hidden", type=options.positive_int, default=128, help="LSTM size (and embedding size)"
    )
    parser.add_argument(
        "--batch-size", type=options.positive_int, default=32, help="rows per batch"
    )
    parser.add_argument(
        "--seq-len", type=options.positive_int, default=20, help="truncated-BPTT length"
    )
    parser.add_argument(
        "--steps", type=options.positive_int, default=20, help="training batches per timed pass"
    )
    parser.add_argument(
        "--repeats", type=options.positive_int, default=7, help="timed passes per layout"
    )
    parser.add_argument(
        "--seed", type=options.non_negative_int, default=0, help="random seed of the weights"
    )
    parser.add_argument("--output", default=str(RESULTS), help="where to write the JSON")
    add_update_docs_option(parser)
    parser.add_argument("--from-json", help="render the results table from a saved run")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        results = json.loads(pathlib.Path(args.from_json).read_text(encoding="utf-8"))
    else:
        corpus = load_corpus(args)
        if corpus is None:
            print(
                f"lm_packing: no WikiText-2 folder at {args.data_dir}; nothing measured "
                "(give --data-dir)",
                file=sys.stderr,
            )
            return None
        results = measure(corpus, args)
        text = json.dumps(results, indent=1)
        print(text)
        pathlib.Path(args.output).write_text(text + "\n", encoding="utf-8")
    if args.update_docs:
        write_docs(results)
    return results


if __name__ == "__main__":
    main()
