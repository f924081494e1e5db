"""A generated natural-language-inference corpus, for machines without SNLI.

`generate_recall_corpus` writes premise / hypothesis pairs whose labels need the premise to
be recalled (which colour went with which animal or person); `generated_splits` gives its
train / dev / test splits in three sizes. It is the last source of
`examples.snli.snli.load_nli_splits`, so a model can be trained on a fresh machine with
no download.
"""

import random

from examples.harness.checks import check_choice, check_int
from examples.snli.nli_examples import LABELS, SPLITS, examples_from_rows

_ENTITIES = (
    "cat dog bird horse cow sheep goat pig duck rabbit fox bear lion tiger mouse frog "
    "man woman boy girl child baby chef doctor farmer player"
).split()
_COLOURS = "red blue green yellow black white brown pink orange purple grey gold".split()
_PLACES = "in the park|on the beach|near the river|in the street|at the market|in the garden".split(
    "|"
)
_VERBS = "are playing|are sitting|are resting|are waiting|stand together|are running".split("|")


def _premise(facts, rng):
    verb = rng.choice(_VERBS)
    if len(facts) == 1:
        verb = verb.replace("are ", "is ").replace("stand together", "stands alone")
    things = [f"a {colour} {entity}" for entity, colour in facts]
    listed = things[-1] if len(things) == 1 else ", ".join(things[:-1]) + " and " + things[-1]
    if rng.random() < 0.5:
        return f"{listed} {verb} {rng.choice(_PLACES)} ."
    return f"there is {listed} {rng.choice(_PLACES)} ."


def _hypothesis(entity, colour, rng):
    templates = ("the {e} is {c} .", "a {c} {e} is there .", "one of them is a {c} {e} .")
    return rng.choice(templates).format(e=entity, c=colour)


def generate_recall_corpus(num_examples, seed=0, min_facts=1, max_facts=3):
    """Generated entailment-style pairs whose labels need the premise to be recalled.

    A premise lists 1-3 entities with a colour each ("a red cat , a blue dog and a green bird
    are playing in the park ."). The hypothesis names one entity and a colour:

    * entailment: an entity of the premise with its own colour;
    * contradiction: an entity of the premise with another colour, half of the time the colour
      of another premise entity (so the words alone do not decide: the entity-colour binding
      must be recalled);
    * neutral: an entity that is not in the premise.

    Labels are balanced; the same ``seed`` gives the same corpus.

    Args:
        num_examples: int, number of pairs, at least 1.
        seed: int, seed of the corpus. Defaults to 0.
        min_facts, max_facts: int, range of the number of entities in a premise,
            ``1 <= min_facts <= max_facts <= 25`` (a neutral hypothesis names one of the 26
            entities that is not in the premise). Default to 1 and 3.

    Returns:
        A list of `NLIExample`.

    Raises:
        ValueError: ``num_examples`` is below 1, or the fact counts are out of range.
        TypeError: an argument is not an integer.
    """
    num_examples = check_int("num_examples", num_examples, 1)
    min_facts = check_int("min_facts", min_facts, 1)
    max_facts = check_int("max_facts", max_facts, 1)
    if not min_facts <= max_facts <= len(_ENTITIES) - 1:
        raise ValueError(
            f"`min_facts` and `max_facts` must satisfy 1 <= min_facts <= max_facts <= "
            f"{len(_ENTITIES) - 1} (a neutral hypothesis names an entity that is not in the "
            f"premise); got min_facts={min_facts}, max_facts={max_facts}."
        )
    rng = random.Random(seed)
    rows = []
    for i in range(num_examples):
        count = rng.randint(min_facts, max_facts)
        entities = rng.sample(_ENTITIES, count)
        colours = [rng.choice(_COLOURS) for _ in entities]
        facts = list(zip(entities, colours))
        label = i % 3
        target = rng.randrange(count)
        entity, colour = facts[target]
        if label == 1:
            entity = rng.choice([e for e in _ENTITIES if e not in entities])
            colour = rng.choice(_COLOURS)
        elif label == 2:
            others = [c for j, c in enumerate(colours) if j != target and c != colour]
            if others and rng.random() < 0.5:
                colour = rng.choice(others)
            else:
                colour = rng.choice([c for c in _COLOURS if c != colour])
        rows.append((_premise(facts, rng), _hypothesis(entity, colour, rng), LABELS[label]))
    rng.shuffle(rows)
    return examples_from_rows(rows)


GENERATED_SIZES = {
    "small": (900, 300, 300),
    "medium": (3000, 600, 600),
    "full": (30000, 3000, 3000),
}


def generated_splits(train_size="medium", seed=0):
    """The train / dev / test splits of `generate_recall_corpus`, with disjoint seeds.

    Args:
        train_size: str, a key of `GENERATED_SIZES`: ``"small"`` (900 / 300 / 300 pairs),
            ``"medium"`` (3,000 / 600 / 600) or ``"full"`` (30,000 / 3,000 / 3,000).
            Defaults to ``"medium"``.
        seed: int, seed of the splits (split ``k`` uses ``10 * seed + k``). Defaults to 0.

    Returns:
        dict ``{"train", "dev", "test"}`` -> list of `NLIExample`.

    Raises:
        ValueError: an unknown ``train_size``.
    """
    check_choice("train_size", train_size, tuple(GENERATED_SIZES))
    sizes = GENERATED_SIZES[train_size]
    return {
        split: generate_recall_corpus(size, seed=seed * 10 + k)
        for k, (split, size) in enumerate(zip(SPLITS, sizes))
    }
