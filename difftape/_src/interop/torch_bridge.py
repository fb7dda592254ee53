"""Zero-copy conversion between difftape arrays and PyTorch tensors (Warp's ``warp.torch``).

Arrays and tensors share memory (``torch.from_numpy`` / ``tensor.numpy()``), and so do their
gradient buffers. PyTorch is imported only when a converter is called, so ``import difftape``
never needs it. The autograd adapter lives in ``torch_function.py``.
"""

from __future__ import annotations

import numpy as np

from difftape._src import dtypes
from difftape._src.array import array
from difftape._src.array_storage import allocate, check_shape, contiguous_strides, inner_ndim
from difftape._src.device import Device, get_device
from difftape._src.errors import ArrayError


def import_torch():
    """The ``torch`` module, or an ImportError that says how to install it."""
    try:
        import torch
    except ImportError as err:
        raise ImportError(
            "difftape's PyTorch interop needs PyTorch; install it with "
            "`pip install torch` (or `pip install difftape[torch]`)") from err
    return torch


def _torch_dtypes(torch) -> dict:
    return {torch.float64: dtypes.float64, torch.float32: dtypes.float32,
            torch.float16: dtypes.float16, torch.int64: dtypes.int64, torch.int32: dtypes.int32,
            torch.int16: dtypes.int16, torch.int8: dtypes.int8, torch.uint8: dtypes.uint8,
            torch.uint16: dtypes.uint16, torch.uint32: dtypes.uint32,
            torch.uint64: dtypes.uint64, torch.bool: dtypes.bool_}


def dtype_from_torch(torch_dtype) -> type:
    """The difftape scalar type of a torch dtype (``torch.float32`` → ``wp.float32``).

    Raises:
        TypeError: for dtypes difftape has no type for (bfloat16, complex).
    """
    found = _torch_dtypes(import_torch()).get(torch_dtype)
    if found is None:
        raise TypeError(f"Invalid or unsupported data type: {torch_dtype}")
    return found


def dtype_to_torch(wp_dtype) -> object:
    """The torch dtype storing ``wp_dtype``'s components (``wp.vec3`` → ``torch.float32``)."""
    scalar = dtypes.scalar_of(dtypes.normalize_dtype(wp_dtype) or wp_dtype)
    for torch_dtype, ours in _torch_dtypes(import_torch()).items():
        if ours is scalar:
            return torch_dtype
    raise TypeError(f"Cannot convert {dtypes.type_name(wp_dtype)} to a torch dtype")


def device_from_torch(torch_device) -> Device:
    """The difftape device of a torch device (only ``"cpu"`` exists in difftape)."""
    return get_device(str(torch_device))


def device_to_torch(wp_device) -> str:
    """The torch device string of a difftape device (``"cpu"``)."""
    return str(get_device(wp_device))


def _storage_dtype(t, dtype) -> tuple[type, np.dtype]:
    """``dtype`` checked against tensor ``t`` (None: inferred), and the numpy dtype to view."""
    natural = dtype_from_torch(t.dtype)
    if dtype is None:
        return natural, dtypes.numpy_dtype(natural)
    resolved = dtypes.normalize_dtype(dtype)
    if resolved is None or hasattr(resolved, "_difftape_struct"):
        raise ArrayError(
            f"from_torch: dtype must be a scalar, vector or matrix type; got {dtype!r}")
    wanted = dtypes.numpy_dtype(resolved)
    have = dtypes.numpy_dtype(natural)
    # Integer tensors may be viewed as the other signedness of the same width (as Warp allows).
    integral = wanted.kind in "iub" and have.kind in "iub" and wanted.itemsize == have.itemsize
    if wanted != have and not integral:
        raise RuntimeError(
            f"Incompatible data types: {t.dtype} and {dtypes.type_name(resolved)}")
    return resolved, wanted


def _wrap_tensor(t, dtype) -> array:
    """An array aliasing CPU tensor ``t`` (no gradient); vector dtypes take trailing dims."""
    torch = import_torch()
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"from_torch expects a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ArrayError(
            f"from_torch: difftape arrays live on the CPU, but the tensor is on {t.device}; "
            "move it with tensor.cpu() first")
    resolved, np_dtype = _storage_dtype(t, dtype)
    data = t.detach().numpy()
    if data.dtype != np_dtype:
        data = data.view(np_dtype)
    inner = tuple(getattr(resolved, "_shape", ()))
    if inner:
        if data.shape[-len(inner):] != inner:
            raise RuntimeError(
                f"Could not convert Torch tensor with shape {tuple(t.shape)} to a difftape array "
                f"with dtype={dtypes.type_name(resolved)}, ensure that source inner shape is "
                f"{inner}")
        if data.strides[-len(inner):] != contiguous_strides(inner, np_dtype.itemsize):
            raise RuntimeError(
                f"Could not convert Torch tensor with shape {tuple(t.shape)} to a difftape array "
                f"with dtype={dtypes.type_name(resolved)}, because the source inner strides are "
                "not contiguous")
    check_shape(data.shape[: data.ndim - inner_ndim(resolved)])
    return array._wrap(data, resolved, device_from_torch(t.device))


def from_torch(t, dtype=None, requires_grad: bool | None = None, grad=None,
               return_ctype: bool = False) -> array:
    """A difftape array sharing ``t``'s memory, and ``t.grad``'s as its ``.grad``.

    Args:
        t: A CPU tensor. A trailing dimension of 3 becomes one ``wp.vec3`` per element when
            ``dtype=wp.vec3`` (matrices take two trailing dimensions).
        dtype: The element type; inferred from ``t.dtype`` when None.
        requires_grad: Give the array a gradient; defaults to ``t.requires_grad``. The gradient
            is ``t.grad`` (shared), allocated as zeros and stored in ``t.grad`` when missing.
        grad: A tensor or difftape array to use as the gradient instead of ``t.grad``.
        return_ctype: Warp's low-level descriptor option; not supported.

    Returns:
        The array. Writes through either object are visible in the other.

    Example:
        >>> t = torch.zeros(4, 3, requires_grad=True)
        >>> a = wp.from_torch(t, dtype=wp.vec3)   # a.shape == (4,), a.grad shares t.grad
    """
    if return_ctype:
        raise NotImplementedError("from_torch(return_ctype=True) has no meaning in difftape; "
                                  "pass the array itself to wp.launch")
    a = _wrap_tensor(t, dtype)
    if requires_grad is None:
        requires_grad = bool(t.requires_grad)
    if grad is not None:
        a.grad = grad if isinstance(grad, array) else _wrap_tensor(grad, a.dtype)
    elif requires_grad:
        existing = t.grad if (t.is_leaf or t.retains_grad) else None
        if existing is None:
            # Same strides as the data (Warp's rule), so the .grad setter accepts it.
            buffer = allocate(a.shape, a.dtype, None if a.is_contiguous else a.strides)
            existing = import_torch().from_numpy(buffer)
            if buffer.dtype != dtypes.numpy_dtype(dtype_from_torch(t.dtype)):
                existing = existing.view(t.dtype)
            t.grad = existing
        a.grad = _wrap_tensor(existing, a.dtype)
    return a


def to_torch(a: array, requires_grad: bool | None = None):
    """A CPU tensor sharing ``a``'s memory; with a gradient, ``tensor.grad`` shares ``a.grad``.

    Vector and matrix elements become trailing dimensions (an array of 4 ``vec3`` → shape (4, 3)).

    Args:
        a: The array.
        requires_grad: Set ``requires_grad`` on the tensor; defaults to ``a.requires_grad``.

    Returns:
        The tensor. PyTorch accumulates into ``tensor.grad`` in place, so ``a.grad`` sees it.

    Example:
        >>> t = wp.to_torch(x)            # t.grad is x.grad's memory
    """
    torch = import_torch()
    if not isinstance(a, array) or a.is_annotation:
        raise TypeError(f"to_torch expects a difftape array with memory, got {a!r}")
    if hasattr(a.dtype, "_difftape_struct"):
        raise RuntimeError("Cannot convert structured Warp arrays to Torch.")
    if requires_grad is None:
        requires_grad = a.requires_grad
    t = torch.from_numpy(a._data)
    if requires_grad:
        t.requires_grad_(True)
        if a.grad is not None:
            t.grad = torch.from_numpy(a.grad._data)
    return t
