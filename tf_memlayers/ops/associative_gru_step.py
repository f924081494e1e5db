"""One step of the AM-GRU and the Dual AM-GRU (Weissenborn 2016, eqs. 4-5 and 9-12).

`associative_gru_step` is the only place the step is written. `AssociativeGRUCell`,
`DualAssociativeGRUCell`, the layers' projected path and the forward loop of
`tf_memlayers.ops.associative_gru_loop` all call it; they differ only in how the
pre-activations are formed from ``x_t`` and ``o_{t-1}`` (whole kernels in the cell, input
projections computed before the loop in the layers), which the caller passes in.

With ``m = n/2`` complex entries, ``C`` copies and the memory ``S`` as ``(re, im)`` parts of
shape ``[batch, C, m]``::

    K_c    = perm_c(bound(key))                  # eqs. 4, 9-10
    h      = mean_c conj(K_c) (*) S_c            # eq. 5
    [r|u]  = sigmoid(gate_preactivation(h) [+ h2 W_dg])
    c      = tanh(candidate_preactivation(r * h) [+ h2 W_dc])
    delta  = u * (c - h);  o_t = h + delta
    S_c   += K_c (*) delta                       # eq. 12

``h2`` is the Dual AM-GRU's read of a source memory (`SourceMemory`).
"""

from collections.abc import Callable
from typing import NamedTuple

from keras import ops

from tf_memlayers.ops import holographic


class SourceMemory(NamedTuple):
    """The Dual AM-GRU's source memory and how the step reads it.

    Attributes:
        memory: ``(re, im)`` parts of the source memory, each ``[batch, C, m]``.
        gate_kernel: ``W_dg`` ``[n, 2n]``, adds ``h2 W_dg`` to the gate pre-activations.
        candidate_kernel: ``W_dc`` ``[n, n]``, adds ``h2 W_dc`` to the candidate's.
        key: ``None`` to read with the write key's copies, conjugated (the paper's "same
            key"); else a raw read key ``[batch, n]`` (``[re | im]`` layout), bounded and
            permuted like the write key.
        conjugate: whether a separate ``key`` is conjugated when reading (the released code's
            Dual key is not).
    """

    memory: tuple
    gate_kernel: object
    candidate_kernel: object
    key: object | None = None
    conjugate: bool = True


class StepResult(NamedTuple):
    """What one step produces: ``output`` ``o_t``, the new ``memory`` parts, and the step's
    intermediates (``retrieved`` ``h``, ``source_read`` ``h2`` or None, ``gates`` ``[r|u]``,
    ``candidate`` ``c``, ``delta``, and the write key's ``copies`` ``(re, im)``)."""

    output: object
    memory: tuple
    retrieved: object
    source_read: object
    gates: object
    candidate: object
    delta: object
    copies: tuple


def _read(copies, memory, conjugate=True):
    return holographic.uncomplexify(
        *holographic.read_memory_parts(*copies, *memory, conjugate_key=conjugate)
    )


def associative_gru_step(
    key: object,
    memory: tuple,
    gate_preactivation: Callable,
    candidate_preactivation: Callable,
    permutation_matrix: object,
    num_copies: int,
    source: SourceMemory | None = None,
) -> StepResult:
    """One AM-GRU step.

    Args:
        key: the raw key ``x W_key`` ``[batch, n]`` in ``[re | im]`` layout (before `bound`).
        memory: ``(re, im)`` parts of the memory before the step, each ``[batch, C, m]``
            (`tf_memlayers.ops.holographic.split_memory`).
        gate_preactivation: callable ``h -> [batch, 2n]``: the reset and update gates'
            pre-activations from the retrieved ``h`` (biases included).
        candidate_preactivation: callable ``r * h -> [batch, n]``: the candidate's.
        permutation_matrix: `tf_memlayers.ops.holographic.permutation_constant` of the copies.
        num_copies: number of memory copies ``C``.
        source: optional `SourceMemory` read by the Dual AM-GRU.

    Returns:
        A `StepResult`.
    """
    copies = holographic.bounded_copies(key, permutation_matrix, num_copies)
    retrieved = _read(copies, memory)
    gate_pre = gate_preactivation(retrieved)
    source_read = None
    if source is not None:
        read_copies = copies
        if source.key is not None:
            read_copies = holographic.bounded_copies(source.key, permutation_matrix, num_copies)
        conjugate = source.key is None or source.conjugate
        source_read = _read(read_copies, source.memory, conjugate)
        gate_pre = gate_pre + ops.matmul(source_read, source.gate_kernel)
    gates = ops.sigmoid(gate_pre)
    reset, update = ops.split(gates, 2, axis=-1)
    candidate_pre = candidate_preactivation(reset * retrieved)
    if source is not None:
        candidate_pre = candidate_pre + ops.matmul(source_read, source.candidate_kernel)
    candidate = ops.tanh(candidate_pre)
    delta = update * (candidate - retrieved)
    new_memory = holographic.write_memory_parts(*copies, *memory, *holographic.complexify(delta))
    return StepResult(
        output=retrieved + delta,
        memory=new_memory,
        retrieved=retrieved,
        source_read=source_read,
        gates=gates,
        candidate=candidate,
        delta=delta,
        copies=copies,
    )
