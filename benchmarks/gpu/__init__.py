"""The GPU run: layer suites and speed tables on Keras's JAX backend (``run.sh``)."""

import argparse


class ArgumentParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` with one-line errors and exit status 2, as the examples'
    parser, but importable where TensorFlow is not installed (the GPU machine)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())} (see --help)\n")


def positive(kind):
    """An argparse type: ``kind`` (int or float) of the text, which must be above zero."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse
