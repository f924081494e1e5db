"""Loading weights saved from the original TensorFlow code of the associative-memory cells.

The released cells (``dual_assoc_rnn.py``) create their variables with
``tf.contrib.layers.fully_connected`` under the scope ``AssociativeGRUCell``; a premise AM-GRU
and the hypothesis Dual AM-GRU share the scope, hence the non-dual variables. The mapping onto
the Keras weights of `AssociativeGRUCell` / `DualAssociativeGRUCell` is one-to-one, with the
same shapes and row order (``x_t`` rows, then the fed-back output ``o_{t-1}`` rows, then the
retrieved ``h`` rows):

============================================================  ====================================
original variable (suffix)                                    Keras weight
============================================================  ====================================
``AssociativeGRUCell/Keys/fully_connected/weights``           ``key_kernel``
``AssociativeGRUCell/Gates/fully_connected/weights``          ``gate_kernel``
``AssociativeGRUCell/Gates/fully_connected/biases``           ``gate_bias``
``AssociativeGRUCell/Candidate/fully_connected/weights``      ``candidate_kernel``
``AssociativeGRUCell/Candidate/fully_connected/biases``       ``candidate_bias``
``AssociativeGRUCell/Keys/Dual/fully_connected/weights``      ``dual_key_kernel`` (``released``)
``AssociativeGRUCell/DualGates/fully_connected/weights``      ``dual_gate_kernel``
``AssociativeGRUCell/DualCandidate/fully_connected/weights``  ``dual_candidate_kernel``
============================================================  ====================================

Names are matched by suffix, so outer scopes (``rnn/SelfControllerWrapper/...``) may precede
them; a name that matches several entries (two cells under different outer scopes) is an error
unless ``prefix=`` selects one scope. The paper-era TF 0.8 code used ``.../Linear/Matrix`` and
``.../Linear/Bias`` in place of ``fully_connected/weights`` and ``fully_connected/biases``; both
spellings are accepted.
"""

# The loader lives with the associative memory that alone uses it; this is its public path.
from tf_memlayers.layers.associative_memory.load_original_weights import (
    SCOPE,  # noqa: F401  (the scope name, importable from here as before)
    load_original_weights,
    original_variable_names,
)

__all__ = ["load_original_weights", "original_variable_names"]
