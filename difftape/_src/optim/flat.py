"""Flat scalar views of parameter arrays, so one scalar kernel updates any float element type.

A ``vec3`` array of n elements is updated as a float32 array of 3n scalars sharing its memory.
Writes through a view count as writes to the parameter (overwrite detection sees an optimizer
step between a recorded launch and ``backward()``). This module never launches kernels.
"""

from __future__ import annotations

from difftape._src import dtypes
from difftape._src.array import array
from difftape._src.array_ops import zeros
from difftape._src.array_storage import storage_shape


def float_scalar(param: array, optimizer: str) -> type:
    """The scalar type of ``param``'s components; raises for integer, bool and struct arrays."""
    if not isinstance(param, array) or param.is_annotation:
        raise TypeError(f"{optimizer} parameters must be difftape arrays, got "
                        f"{type(param).__name__}")
    scalar = dtypes.scalar_of(param.dtype)
    if not dtypes.is_scalar_type(scalar) or not dtypes.is_float(scalar):
        raise RuntimeError(f"Unsupported dtype for difftape {optimizer} optimizer: "
                           f"{dtypes.type_name(param.dtype)} (use float16, float32, float64 or "
                           "vectors/matrices of them)")
    if not param.is_contiguous:
        raise RuntimeError(f"difftape {optimizer} needs contiguous parameter arrays; call "
                           ".contiguous() on the parameter first")
    return scalar


def components(param: array) -> int:
    """How many scalars ``param`` holds (elements times components per element)."""
    n = param.size
    for k in storage_shape((), param.dtype):
        n *= k
    return n


def state_like(param: array, scalar: type) -> array:
    """A zero buffer for per-scalar optimizer state: ``param``'s shape and dtype, or a flat
    array of ``scalar`` when the state must be wider than the parameter (float16 → float32)."""
    if scalar is dtypes.scalar_of(param.dtype):
        return zeros(param.shape, dtype=param.dtype, device=param.device)
    if dtypes.is_scalar_type(param.dtype):
        return zeros(param.shape, dtype=scalar, device=param.device)
    return zeros(components(param), dtype=scalar, device=param.device)


def scalar_view(a: array) -> array:
    """A 1-D view of all scalars in contiguous ``a``; writes through it count as writes to ``a``."""
    scalar = dtypes.scalar_of(a.dtype)
    view = array._wrap(a.numpy().reshape(-1), scalar, a.device)
    view._ref = a
    return view


def check_grad(optimizer: str, param: array, grad: array) -> None:
    """Raise as Warp does when a gradient does not match its parameter's dtype or shape."""
    if not isinstance(grad, array) or grad.is_annotation:
        raise TypeError(f"{optimizer} gradients must be difftape arrays, got "
                        f"{type(grad).__name__} (pass e.g. [x.grad for x in params])")
    if grad.dtype != param.dtype:
        raise TypeError(f"{optimizer} gradient dtype must match parameter dtype "
                        f"{dtypes.type_name(param.dtype)}, got {dtypes.type_name(grad.dtype)}")
    if grad.shape != param.shape:
        raise ValueError(f"{optimizer} gradient shape must match parameter shape {param.shape}, "
                         f"got {grad.shape}")
    if not grad.is_contiguous:
        raise RuntimeError(f"difftape {optimizer} needs contiguous gradient arrays")
