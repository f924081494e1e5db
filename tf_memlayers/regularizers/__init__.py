"""Weight regularizers: `HalfSquaredNorm`, the weight decay of
`tf_memlayers.models.HeapCacheModel`."""

from tf_memlayers.regularizers.half_squared_norm import HalfSquaredNorm

__all__ = ["HalfSquaredNorm"]
