"""Contiguous pieces of the last axis (key / value / predict, N-gram pieces)."""


def piece_sizes(width, count, sizes=None, owner=None, what="pieces"):
    """Resolves the sizes of ``count`` contiguous pieces of a last axis of size ``width``.

    Args:
        width: size of the axis being split.
        count: number of pieces.
        sizes: explicit sizes, ``count`` positive integers (checked by
            `tf_memlayers._validation.check_sizes` when the layer that takes them is made)
            that must sum to ``width``; or `None` for equal pieces (``width`` must then be
            divisible by ``count``).
        owner: class name used in error messages.
        what: what the pieces are, for error messages.

    Returns:
        A tuple of ``count`` ints.
    """
    prefix = f"{owner}: " if owner else ""
    if sizes is None:
        if width % count:
            raise ValueError(
                f"{prefix}the input width {width} does not divide into {count} equal {what}; "
                f"pass explicit `sizes=` ({count} positive integers summing to {width})."
            )
        return (width // count,) * count
    if sum(sizes) != width:
        raise ValueError(
            f"{prefix}`sizes` {sizes} sum to {sum(sizes)}, but the input width is {width}; "
            f"they must add up to the width."
        )
    return sizes


def split_pieces(x, sizes):
    """Splits the last axis of ``x`` into contiguous pieces of the given static sizes."""
    pieces, start = [], 0
    for size in sizes:
        pieces.append(x[..., start : start + size])
        start += size
    return pieces
