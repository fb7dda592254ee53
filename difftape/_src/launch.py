"""``wp.launch``: check and pack arguments, run the forward or adjoint program, record on the tape.

Argument errors name the kernel, the parameter (name and position), what was expected and what
was given. The Tape calls ``run_adjoint`` directly, so ``backward()`` never records itself.
"""

from __future__ import annotations

import sys

import numba
import numpy as np

from . import config, dtypes
from . import tape as tape_module
from .array import array
from .backends.cpu import staging_dtype
from .device import get_device
from .errors import InternalError, LaunchError, LaunchTypeError, LaunchValueError
from .kernel import Kernel


def normalize_dim(kernel_key: str, dim) -> tuple[int, ...]:
    """``3`` → ``(3,)``; tuples/lists of 1–4 non-negative ints pass through as a tuple."""
    if isinstance(dim, (int, np.integer)):
        dims = (int(dim),)
    elif isinstance(dim, (tuple, list)) and all(isinstance(d, (int, np.integer)) for d in dim):
        dims = tuple(int(d) for d in dim)
    else:
        raise LaunchTypeError(f"launch({kernel_key}): dim must be an int or a tuple of up to 4 "
                              f"ints, got {dim!r}")
    if not 1 <= len(dims) <= 4 or any(d < 0 for d in dims):
        raise LaunchValueError(f"launch({kernel_key}): dim must have 1 to 4 non-negative "
                               f"entries, got {dims}")
    return dims


def _describe(value) -> str:
    if isinstance(value, array):
        return value.type_name()
    if isinstance(value, np.ndarray):
        return f"numpy.ndarray(dtype={value.dtype}, shape={value.shape})"
    return type(value).__name__


def _array_arg(kernel: Kernel, param, position: int, value, what: str = "argument"):
    expected = f"array(dtype={dtypes.type_name(param.dtype)}, ndim={param.ndim})"
    if not isinstance(value, array) or value.is_annotation:
        hint = " Wrap numpy data with wp.array(...)." if isinstance(value, np.ndarray) else ""
        raise LaunchTypeError(f"launch({kernel.key}): {what} '{param.name}' (position "
                              f"{position}) expects {expected}, got {_describe(value)}.{hint}")
    if value.dtype is not param.dtype or value.ndim != param.ndim:
        raise LaunchTypeError(f"launch({kernel.key}): {what} '{param.name}' (position "
                              f"{position}) expects {expected}, got {value.type_name()}.")
    if not value.device.is_cpu:
        raise LaunchValueError(f"launch({kernel.key}): {what} '{param.name}' lives on "
                               f"{value.device}, but the launch runs on cpu.")
    return value._data


def _scalar_arg(kernel: Kernel, param, position: int, value):
    t = staging_dtype(param.dtype)
    ok = (isinstance(value, (bool, np.bool_)) if t is dtypes.bool_ else
          isinstance(value, (int, np.integer)) and not isinstance(value, bool)
          if dtypes.is_int(t) else
          isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool))
    if not ok:
        raise LaunchTypeError(f"launch({kernel.key}): argument '{param.name}' (position "
                              f"{position}) expects {dtypes.type_name(param.dtype)}, got "
                              f"{_describe(value)} {value!r}.")
    return t._np(value)


def pack_arguments(kernel: Kernel, args: list) -> list:
    """Numba-ready arguments: numpy storage for arrays (float16 staged as float32), typed scalars."""
    packed = []
    for position, (param, value) in enumerate(zip(kernel.params, args)):
        if param.is_array:
            data = _array_arg(kernel, param, position, value)
            if param.dtype is dtypes.float16:
                data = data.astype(np.float32)
            packed.append(data)
        else:
            packed.append(_scalar_arg(kernel, param, position, value))
    return packed


def _write_back_staged(kernel: Kernel, args: list, packed: list) -> None:
    for param, value, data in zip(kernel.params, args, packed):
        if param.is_array and param.dtype is dtypes.float16:
            value._data[...] = data
        if param.is_array and param.symbol in kernel.ir.written_arrays:
            value._mark_written()


def pack_adjoints(kernel: Kernel, args: list, adj_args: list) -> tuple[list, list, list, list]:
    """Adjoint buffers per array parameter: explicit entry, else the array's own ``.grad``.

    Returns (buffers, has-adjoint flags, consume flags, float16 write-backs). Only an array's
    own ``.grad`` is consumed by stores (final write wins), and never with ``retain_grad``.
    """
    buffers, has, consume, staged = [], [], [], []
    for position, (param, value, adj) in enumerate(zip(kernel.params, args, adj_args)):
        if not param.is_array:
            continue
        if adj is not None:
            _array_arg(kernel, param, position, adj, what="adjoint argument")
        grad = adj if adj is not None else value.grad
        usable = grad is not None and dtypes.is_float(param.dtype) and grad.size > 0
        if not usable:
            np_type = dtypes.numpy_dtype(staging_dtype(param.dtype))
            buffers.append(np.empty((0,) * param.ndim, np_type))
            has.append(False)
            consume.append(False)
            continue
        data = grad._data
        if param.dtype is dtypes.float16:
            staged.append((grad, data.astype(np.float32)))
            data = staged[-1][1]
        buffers.append(data)
        has.append(True)
        consume.append(grad is value.grad and not value.retain_grad)
        grad._mark_written()
    return buffers, has, consume, staged


def _use_parallel(total: int) -> bool:
    mode = config.cpu_parallel
    return mode == "parallel" or (mode == "auto" and total >= config.parallel_threshold)


def _call(kernel: Kernel, fn, args: list, direction: str, path: str):
    try:
        return fn(*args)
    except numba.core.errors.NumbaError as err:
        raise InternalError(
            f"difftape generated code that Numba could not compile for kernel '{kernel.key}' "
            f"({direction}); this is a difftape bug. Generated file: {path}\n{err}") from err


def run_forward(kernel: Kernel, dims: tuple[int, ...], args: list) -> None:
    total = int(np.prod(dims))
    _check_rank(kernel, dims)
    packed = pack_arguments(kernel, args)
    if total == 0:
        return
    parallel = _use_parallel(total)
    program = kernel.program(len(dims), parallel)
    lead = [min(dims[0], numba.get_num_threads() * 4)] if parallel else []
    _call(kernel, program.forward, lead + list(dims) + packed, "forward", program.path)
    _write_back_staged(kernel, args, packed)


def inplace_snapshots(kernel: Kernel, args: list) -> dict[int, np.ndarray]:
    """Copies of the arrays a kernel both reads and stores, taken before a recorded launch.

    Their adjoint must see the values the forward read, not the ones it wrote (Warp differs:
    SPEC §2.4 ``a[i] *= b[i]`` gives a wrong ``b.grad`` there).
    """
    inplace = kernel.ir.inplace_arrays
    return {k: args[k]._data.copy() for k, p in enumerate(kernel.params)
            if p.symbol in inplace and isinstance(args[k], array)}


def run_adjoint(kernel: Kernel, dims: tuple[int, ...], args: list, adj_args: list,
                snapshots: dict[int, np.ndarray] | None = None) -> None:
    """Run the adjoint of one launch: accumulate into input adjoints, consume output adjoints.

    ``snapshots`` holds pre-launch copies of in-place arrays; without them the current contents
    are used (a manual adjoint launch). Either way the adjoint works on a private copy.
    """
    if not kernel.enable_backward:
        raise LaunchError(f"Failed to find backward kernel '{kernel.key}' from module "
                          f"'{kernel.module}' for device 'cpu'")
    if len(adj_args) != len(args):
        raise LaunchValueError(
            f"launch({kernel.key}, adjoint=True): adj_inputs + adj_outputs must hold one entry "
            f"per kernel parameter ({len(args)}), got {len(adj_args)}; use None to fall back to "
            "an array's own .grad")
    total = int(np.prod(dims))
    _check_rank(kernel, dims)
    packed = pack_arguments(kernel, args)
    for k, p in enumerate(kernel.params):
        if p.symbol in kernel.ir.inplace_arrays:
            source = (snapshots or {}).get(k, packed[k])
            packed[k] = source.astype(packed[k].dtype, copy=True)
    buffers, has, consume, staged = pack_adjoints(kernel, args, adj_args)
    if total == 0:
        return
    parallel = _use_parallel(total)
    program = kernel.program(len(dims), parallel)
    lead = [min(dims[0], numba.get_num_threads() * 4)] if parallel else []
    _call(kernel, program.adjoint, lead + list(dims) + packed + buffers + has + consume,
          "adjoint", program.path)
    for grad, data in staged:
        grad._data[...] = data


def _check_rank(kernel: Kernel, dims: tuple[int, ...]) -> None:
    n = len(kernel.ir.tid_vars)
    if n and n != len(dims):
        raise LaunchValueError(f"launch({kernel.key}): the kernel unpacks wp.tid() into {n} "
                               f"indices, but dim {dims} has {len(dims)} dimension(s)")


class Launch:
    """A prepared launch (``record_cmd=True``): ``launch()`` runs it again, unrecorded (as Warp)."""

    def __init__(self, kernel: Kernel, dim: tuple[int, ...], inputs, outputs, device):
        self.kernel, self.dim, self.inputs, self.outputs, self.device = (
            kernel, dim, inputs, outputs, device)

    def launch(self, stream=None) -> None:
        run_forward(self.kernel, self.dim, list(self.inputs) + list(self.outputs))


def caller_metadata(depth: int = 2) -> dict:
    frame = sys._getframe(depth)
    return {"caller": {"file": frame.f_code.co_filename, "lineno": frame.f_lineno,
                       "func": frame.f_code.co_name}}


def launch(kernel, dim, inputs=(), outputs=(), adj_inputs=(), adj_outputs=(), device=None,
           stream=None, adjoint=False, record_tape=True, record_cmd=False, max_blocks=0,
           block_dim=None):
    """Run ``kernel`` over a grid of ``dim`` threads (Warp's ``wp.launch``).

    Args:
        kernel: a ``@wp.kernel``.
        dim: number of threads, or a tuple of up to 4 sizes.
        inputs, outputs: the kernel's arguments, in parameter order (the split only labels them).
        adj_inputs, adj_outputs: with ``adjoint=True``, one adjoint per parameter (None: ``.grad``).
        device: "cpu" or None (the default device).
        adjoint: run the adjoint kernel instead of the forward.
        record_tape: record on the active Tape (default True).
        record_cmd: return a ``Launch`` object instead of recording.
        max_blocks, block_dim, stream: accepted for compatibility (CPU ignores them).

    Raises:
        LaunchError / LaunchTypeError: wrong argument count, type, dtype, ndim or device.
    """
    if not isinstance(kernel, Kernel):
        raise LaunchTypeError(f"launch(): the first argument must be a @wp.kernel, got "
                              f"{type(kernel).__name__}")
    dims = normalize_dim(kernel.key, dim)
    resolved = get_device(device)
    args = list(inputs) + list(outputs)
    arity = len(kernel.params)
    if len(args) != arity:
        raise LaunchError(f"Error launching kernel '{kernel.key}', passed {len(args)} arguments "
                          f"but kernel requires {arity}.")
    if record_cmd:
        pack_arguments(kernel, args)
        return Launch(kernel, dims, inputs, outputs, resolved)
    active = tape_module.active_tape() if record_tape else None
    metadata = caller_metadata() if active is not None else None
    if adjoint:
        run_adjoint(kernel, dims, args, list(adj_inputs) + list(adj_outputs))
    else:
        if active is not None and kernel.enable_backward:
            snapshots = inplace_snapshots(kernel, args)
            if snapshots:
                metadata["inplace_snapshots"] = snapshots
        run_forward(kernel, dims, args)
    if active is not None:
        active.record_launch(kernel, dims, max_blocks, inputs, outputs, resolved, 1, metadata)
    return None
