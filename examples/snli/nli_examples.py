"""The sentence-pair example that every natural-language-inference source yields.

An `NLIExample` holds a premise and a hypothesis as tuples of lower-cased tokens (`tokenize`)
and a label id: 0 entailment, 1 neutral, 2 contradiction (the order of the
tensorflow-datasets ``snli`` builder). Pairs whose gold label is ``-`` (no annotator
majority) are dropped by `make_example`.
"""

import collections

from examples.harness.data.vocabulary import tokenize

LABELS = ("entailment", "neutral", "contradiction")
SPLITS = ("train", "dev", "test")

NLIExample = collections.namedtuple("NLIExample", ["premise", "hypothesis", "label"])


def label_id(label):
    """Maps a label name or id to its id.

    Args:
        label: str (``"entailment"``, ``"neutral"``, ``"contradiction"``, or ``"-"`` / empty
            for no majority) or int (0, 1, 2, or -1 for no majority).

    Returns:
        int 0, 1 or 2, or `None` for the no-majority label.

    Raises:
        ValueError: an unknown label name, or an id outside -1..2.
        TypeError: ``label`` is neither text nor a number.
    """
    if isinstance(label, str):
        label = label.strip()
        if label in ("-", ""):
            return None
        if label not in LABELS:
            raise ValueError(f"Unknown label {label!r}; allowed: {', '.join(LABELS)} or '-'.")
        return LABELS.index(label)
    value = int(label)
    if value == -1:
        return None
    if not 0 <= value < len(LABELS):
        raise ValueError(f"Label id {value} is outside the three classes 0, 1, 2.")
    return value


def make_example(premise, hypothesis, label):
    """An `NLIExample` from raw text.

    Args:
        premise, hypothesis: str, the sentences (tokenized by `tokenize`).
        label: str or int, as for `label_id`.

    Returns:
        An `NLIExample`, or `None` when the label is ``-`` (no majority).

    Raises:
        ValueError: an unknown label.
    """
    label = label_id(label)
    if label is None:
        return None
    return NLIExample(tokenize(premise), tokenize(hypothesis), label)


def examples_from_rows(rows):
    """The `NLIExample` of each ``(premise, hypothesis, label)`` row with a gold label.

    Args:
        rows: iterable of ``(str, str, label)`` as for `make_example`.

    Returns:
        A list of `NLIExample` (rows labelled ``-`` dropped).
    """
    return [e for e in (make_example(*row) for row in rows) if e is not None]
