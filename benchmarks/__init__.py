"""The package's benchmarks, run from the repository root as modules (CONTRIBUTING.rst)."""

import argparse
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: The corpora of the paper benchmarks.
DATA = pathlib.Path(os.environ.get("TF_MEMLAYERS_DATA", ROOT.parent / "shared" / "data"))


class ArgumentParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose errors are one line and exit status 2, importable where
    TensorFlow is not installed (the GPU machine)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())} (see --help)\n")


def positive(kind):
    """An argparse type: ``kind`` (int or float) of the text, which must be above zero."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse
