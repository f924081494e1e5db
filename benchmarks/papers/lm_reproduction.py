"""Reproduces a published PTB language-model result with a preset of the LM example.

Runs ``examples/ptb_memory_lm.py --config <preset>`` on Penn Treebank (default
``zaremba-small``: the 2 x 200 LSTM of Zaremba et al. 2014 with the TensorFlow PTB
tutorial's settings, 13 epochs of plain SGD), saves the example's final metrics as JSON and,
with ``--update-docs``, writes them into docs/results.rst's ``lm-reproduction`` block. The run is
resumable like the example (same ``--workdir``).

Targets: zaremba-small test perplexity <= 117 (TensorFlow's tutorial reports 115.91,
the paper 114.5).

Usage::

    python -m benchmarks.papers.lm_reproduction --update-docs        # about an hour on 2 cores
    python -m benchmarks.papers.lm_reproduction --from-json
    benchmarks/results/lm_zaremba_small.json \\
        --update-docs
"""

import argparse
import importlib.util
import pathlib

from benchmarks import results_file
from benchmarks.docs_tables import add_update_docs_option, update_docs
from benchmarks.papers.lm_real_data import default_data_dir

ROOT = pathlib.Path(__file__).resolve().parents[2]

COLUMNS = [
    ("config", "preset"),
    ("model", "model"),
    ("parameters", "parameters"),
    ("epochs", "epochs"),
    ("last_epoch_train_perplexity", "train ppl (last epoch)"),
    ("valid_perplexity", "valid ppl"),
    ("test_perplexity", "test ppl"),
]


def load_example():
    spec = importlib.util.spec_from_file_location(
        "ptb_memory_lm", ROOT / "examples" / "ptb_memory_lm.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_docs(metrics):
    rows = [
        dict(
            metrics,
            **{
                key: f"{metrics[key]:.2f}"
                for key in ("last_epoch_train_perplexity", "valid_perplexity", "test_perplexity")
                if metrics.get(key) is not None
            },
        )
    ]
    update_docs(
        "lm-reproduction",
        rows,
        COLUMNS,
        f"``examples/ptb_memory_lm.py --config {metrics['config']}`` on Penn Treebank "
        f"({metrics['train_tokens_per_epoch']:,} training targets per epoch), perplexity over "
        f"the complete validation and test splits, trained on a 2-core CPU (wall time of the "
        f"final invocation: {metrics['seconds'] / 60:.0f} minutes). Published: TensorFlow's "
        "PTB tutorial (small) 121.39 valid / 115.91 test; Zaremba et al. 120.7 / 114.5.",
    )


def parse_args(argv=None):
    from examples.harness import options
    from examples.language_modeling.presets import PRESETS

    parser = options.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--config",
        choices=tuple(PRESETS),
        default="zaremba-small",
        help="the examples/ptb_memory_lm.py preset to run",
    )
    parser.add_argument(
        "--data-dir", default=str(default_data_dir()), help="folder with the Penn Treebank files"
    )
    parser.add_argument("--workdir", help="run directory (default: runs/lm_reproduction/<config>)")
    parser.add_argument(
        "--output", default=None, help="metrics JSON (default: benchmarks/results/lm_<config>.json)"
    )
    add_update_docs_option(parser)
    parser.add_argument("--from-json", help="render the results-page block from a saved run")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        metrics = results_file.read_or_exit(args.from_json)
    else:
        output = args.output or str(
            ROOT / "benchmarks" / "results" / f"lm_{args.config.replace('-', '_')}.json"
        )
        workdir = args.workdir or f"runs/lm_reproduction/{args.config}"
        metrics = load_example().main(
            [
                "--config",
                args.config,
                "--data-dir",
                args.data_dir,
                "--workdir",
                workdir,
                "--metrics-file",
                output,
                "--verbose",
                "2",
            ]
        )
    if args.update_docs:
        write_docs(metrics)
    return metrics


if __name__ == "__main__":
    main()
