"""Model builders that rebuild each paper's model from the package's layers."""

from tf_memlayers.models.fill_last_word import (
    build_fill_last_word_model,
    compile_fill_last_word_model,
)
from tf_memlayers.models.heap_cache_model import HeapCacheModel
from tf_memlayers.models.language_model import (
    DANILUK_DEFAULTS,
    build_language_model,
    compile_language_model,
)
from tf_memlayers.models.snli import (
    build_fixed_length_snli_model,
    build_snli_model,
    compile_snli_model,
)
from tf_memlayers.models.step_model import build_step_model, generate, initial_step_state

__all__ = [
    "DANILUK_DEFAULTS",
    "HeapCacheModel",
    "build_fill_last_word_model",
    "build_fixed_length_snli_model",
    "build_language_model",
    "build_snli_model",
    "build_step_model",
    "compile_fill_last_word_model",
    "compile_language_model",
    "compile_snli_model",
    "generate",
    "initial_step_state",
]
