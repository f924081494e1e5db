"""One owner per argument: a builder passes a layer's argument on unchecked, and the layer that
takes it refuses a bad value, naming it; numbers are checked by one function everywhere."""

import ast
import collections
import pathlib
import sys
import traceback

import pytest

import tf_memlayers
from tf_memlayers import _validation
from tf_memlayers.models.fill_last_word import build_fill_last_word_model
from tf_memlayers.models.language_model import build_language_model
from tf_memlayers.models.snli import build_snli_model, paper_encoder

PACKAGE = pathlib.Path(tf_memlayers.__file__).parent
REPOSITORY = pathlib.Path(__file__).resolve().parents[2]

# (the module that passes the argument on, under the repository, the argument, the call with
# a bad value, the package module that owns it)
PASSED_ON = [
    (
        "tf_memlayers/models/snli.py",
        "num_copies",
        lambda: paper_encoder(123, "glorot_uniform", num_copies=0),
        "layers/associative_memory/associative_gru_cell.py",
    ),
]


def _raising_module(error):
    """The package module whose code called the check that raised ``error``: the last frame
    of the traceback outside ``_validation.py``."""
    frames = [f.filename for f in traceback.extract_tb(error.__traceback__)]
    owners = [f for f in frames if not f.endswith("_validation.py")]
    return pathlib.Path(owners[-1]).resolve().relative_to(PACKAGE.resolve()).as_posix()


def _checked_names(path):
    """The argument names that the checks in ``path`` name (``check_*("name", ...)``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = (
            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        )
        first = node.args[0]
        if func.startswith("check_") and isinstance(first, ast.Constant):
            names.add(first.value)
    return names


@pytest.mark.parametrize(
    "builder_module, name, call, owner",
    PASSED_ON,
    ids=[f"{case[0].rsplit('/', 1)[-1]}-{case[1]}" for case in PASSED_ON],
)
def test_a_passed_on_argument_is_checked_by_the_layer_that_takes_it(
    builder_module, name, call, owner
):
    with pytest.raises(ValueError, match=f"`{name}`") as raised:
        call()
    assert _raising_module(raised.value) == owner
    assert name not in _checked_names(REPOSITORY / builder_module)


def _checks_during(call):
    """``Counter`` of the argument names that the checks of `tf_memlayers._validation` name
    while ``call()`` runs (a check's own calls of the other checks left out)."""
    names = collections.Counter()

    def profile(frame, event, arg):
        code = frame.f_code
        if (
            event == "call"
            and code.co_filename == _validation.__file__
            and code.co_name.startswith("check_")
            and frame.f_back.f_code.co_filename != _validation.__file__
        ):
            names[frame.f_locals.get("name")] += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return names


def test_the_snli_builders_memory_arguments_are_checked_once():
    # The Dual AM-GRU cell passes the arguments it shares on to the AM-GRU cell inside it,
    # which checks them; the AM-GRU layers leave their RNN flags to `ResettableRNN`.
    checks = _checks_during(lambda: build_snli_model(30, embedding_dim=4))
    assert {name: checks[name] for name in ("num_copies", "units", "dual_key")} == {
        "num_copies": 1,
        "units": 1,
        "dual_key": 1,
    }
    # One check of each flag per pass: the premise's and the hypothesis's.
    assert checks["return_sequences"] == checks["unroll"] == 2
    # Not vacuous: a check's own calls of another check are not counted.
    assert _checks_during(lambda: _validation.check_optional_int("n", 3, 1)) == {"n": 1}


@pytest.mark.parametrize(
    "call",
    [
        lambda: build_language_model(30, units=8, embedding_dim=4, batch_size=2, dropout="0.1"),
        lambda: build_snli_model(30, embedding_dim=4, dropout="0.1"),
        lambda: build_fill_last_word_model(
            30, sequence_length=6, embedding_dim=4, units=8, weight_decay="0"
        ),
    ],
    ids=["language_model", "snli", "fill_last_word"],
)
def test_a_number_of_the_wrong_type_is_a_type_error_from_the_one_number_check(call):
    with pytest.raises(TypeError, match="must be a number, got '0") as raised:
        call()
    last = traceback.extract_tb(raised.value.__traceback__)[-1]
    assert last.filename.endswith("_validation.py") and last.name == "check_number"


def test_no_module_has_a_number_check_of_its_own():
    own = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and "check_number" in node.name:
                if path.name != "_validation.py":
                    own.append(f"{path.name}: {node.name}")
    assert own == []
