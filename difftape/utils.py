"""``warp.utils`` as Warp programs use it: ``array_cast``."""

from __future__ import annotations

import numpy as np

from . import types as _types
from ._src.errors import ArrayError


def array_cast(in_array, out_array, count: int | None = None) -> None:
    """Convert ``in_array``'s values to ``out_array``'s dtype, into ``out_array`` (Warp's cast:
    C conversions, floats to integers toward zero). Arrays of another shape or element shape
    convert scalar by scalar in order (a ``vec3`` array into a float array three times as
    long); ``count`` elements of ``in_array`` only, for one-dimensional arrays. Not recorded on
    a tape."""
    same_shape = in_array.ndim == out_array.ndim and _types.type_length(in_array.dtype) == \
        _types.type_length(out_array.dtype)
    if not same_shape and not (in_array.is_contiguous and out_array.is_contiguous):
        raise ArrayError("array_cast() between arrays of other shapes needs contiguous arrays")
    if count is not None and in_array.ndim > 1 and count < in_array.size:
        raise ArrayError("Partial cast is not supported for arrays with more than one dimension")
    source = np.asarray(in_array.numpy())
    target = out_array.numpy()
    if same_shape and count is None:
        if source.shape != target.shape:
            raise ArrayError(f"array_cast() from shape {in_array.shape} to {out_array.shape}")
        np.copyto(target, source, casting="unsafe")
    else:
        scalars = (in_array.size if count is None else count) * _types.type_length(in_array.dtype)
        flat = target.reshape(-1)
        if scalars > flat.size:
            raise ArrayError(f"array_cast(): {scalars} values do not fit in {flat.size}")
        np.copyto(flat[:scalars], source.reshape(-1)[:scalars], casting="unsafe")
    out_array._mark_written("array_cast")
