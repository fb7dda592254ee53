"""``wp.launch``: check and pack arguments, run the forward or adjoint program, record on the tape.

Argument errors name the kernel, the parameter (name and position), what was expected and what
was given. The Tape calls ``run_adjoint`` directly, so ``backward()`` never records itself.
"""

from __future__ import annotations

import operator
import sys
import time
from dataclasses import dataclass
from itertools import compress

import numba
import numpy as np

from . import (chunks, compile_ahead, config, dtypes, launch_fast, overwrite, read_flags,
               thread_choice)
from . import tape as tape_module
from .array import array
from .array_storage import inner_ndim, is_plain, owns_memory
from .backends import cpu, cpu_entry, cpu_half, cpu_runtime
from .backends.cpu import staging_dtype
from .device import get_device

_CPU = get_device("cpu")
from .errors import (
    ArrayIndexError,
    InternalError,
    LaunchError,
    LaunchTypeError,
    LaunchValueError,
)
from .kernel import Kernel
from .structs import field_view, resolve_path


def normalize_dim(kernel_key: str, dim) -> tuple[int, ...]:
    """``3`` → ``(3,)``; tuples/lists of 1–4 non-negative ints pass through as a tuple."""
    if dim.__class__ is int and dim >= 0:
        return (dim,)
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
    data = value._data
    if data.ndim != _storage_ndim(param):
        raise LaunchValueError(f"launch({kernel.key}): {what} '{param.name}' (position "
                               f"{position}): the numpy storage of this {value.type_name()} "
                               f"has shape {data.shape}: it was reshaped in place (e.g. "
                               f"a.numpy().shape = ...); use a.reshape() instead.")
    return data


def _read_only_error(kernel: Kernel, param, position: int, what: str = "argument",
                     writer: str = "the kernel writes") -> LaunchValueError:
    return LaunchValueError(f"launch({kernel.key}): the {what} '{param.name}' (position "
                            f"{position}) wraps read-only numpy memory (flags.writeable is "
                            f"False), but {writer} it; pass a writeable array (wp.array(data) "
                            f"copies the data)")


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


class LaunchPlan:
    """Per-kernel argument facts computed once, so each launch only compares and unwraps."""

    def __init__(self, kernel: Kernel):
        ir_ = kernel.ir
        self.params = ir_.params
        self.slots = [(p.is_array and p.flat is None, p.dtype, _storage_ndim(p),
                       staging_dtype(dtypes.scalar_of(p.dtype))._np if p.flat is None else None,
                       _slot_kind(p)) for p in ir_.params]
        # Every generated array parameter, in order: (param index, field path or None, leaf).
        self.flat_arrays = [(k, None, p) if p.flat is None else (k, _leaf_path(leaf), leaf)
                            for k, p in enumerate(ir_.params)
                            for leaf in (p.flat if p.flat is not None else [p]) if leaf.is_array]
        self.arrays = [k for k, p in enumerate(ir_.params) if p.is_array]
        # Position of each parameter's first entry among the generated function's arguments.
        self.offsets, position = [], 0
        for p in ir_.params:
            self.offsets.append(position)
            position += len(p.components) or (len(p.flat) if p.flat is not None else 1)
        self.written = [k for k in self.arrays if ir_.params[k].symbol in ir_.written_arrays or
                        any(leaf.symbol in ir_.written_arrays for leaf in ir_.params[k].flat or ())]
        self.inplace = [k for k in self.arrays if ir_.params[k].symbol in ir_.inplace_arrays]
        self.float16 = [k for k in self.arrays if ir_.params[k].dtype is dtypes.float16]
        self.float16_written = [k for k in self.float16 if k in self.written]  # copied back
        self.differentiable = {k for k in self.arrays
                               if dtypes.is_float(dtypes.scalar_of(ir_.params[k].dtype))}
        self.dummies = {k: _empty_like_param(ir_.params[k]) for k in self.arrays}
        # Array parameters (not struct fields) of a float dtype other than float16: adjoint
        # buffers take pack_adjoints' fast path.
        self.plain_float = {k for k in self.differentiable
                            if ir_.params[k].flat is None and k not in self.float16}
        self.tid_rank = len(ir_.tid_vars)
        # Generated-code array symbol → its index among the packed arguments / adjoint buffers.
        self.positions = {p.symbol: k for k, p in enumerate(ir_.flat_params())}
        self.array_positions = [k for k, p in enumerate(ir_.flat_params()) if p.is_array]
        # The packed array arguments as a list, for the overlap check (a C-level getter).
        getter = operator.itemgetter(*self.array_positions) if self.array_positions else None
        if len(self.array_positions) == 1:
            self.packed_arrays = lambda packed: [getter(packed)]
        elif getter is not None:
            self.packed_arrays = lambda packed: list(getter(packed))
        else:
            self.packed_arrays = lambda packed: []
        self.adjoint_positions = {leaf.symbol: k for k, (_, _, leaf) in
                                  enumerate(self.flat_arrays)}
        self.flat_storage_ndims = [_storage_ndim(leaf) for _, _, leaf in self.flat_arrays]
        # The common launch, tested and run by code generated for this kernel (launch_fast.py).
        self.fast_forward, self.fast_adjoint = launch_fast.build(self, kernel.key, _reraise)


def _storage_ndim(p) -> int:
    """The numpy dimensions of an array parameter's storage (its element's shape included)."""
    return p.ndim + inner_ndim(p.dtype) if p.is_array else 0


def _slot_kind(p) -> str:
    if p.flat is not None:
        return "struct_array" if p.is_array else "struct"
    if p.components:
        return "composite"
    return staging_dtype(dtypes.scalar_of(p.dtype)).kind


def _leaf_path(leaf) -> tuple[str, ...]:
    """``s.inner.v[2]`` → ("inner", "v") (the component index is not part of the path)."""
    return tuple(leaf.name.split("[")[0].split(".")[1:])


def _struct_arg(kernel: Kernel, param, position: int, value) -> tuple[list, bool]:
    """The generated arguments of a struct parameter, one per leaf, in order; and whether its
    arrays are all plain storage (as in ``pack_arguments``)."""
    if value.__class__ is not param.dtype:
        raise LaunchTypeError(f"launch({kernel.key}): argument '{param.name}' (position "
                              f"{position}) expects {param.dtype.__qualname__}, got "
                              f"{_describe(value)}.")
    packed = []
    plain = True
    for leaf in param.flat:
        field = resolve_path(value, _leaf_path(leaf))
        if leaf.is_array:
            if field is None:
                packed.append(_empty_like_param(leaf))
            else:
                data = _array_arg(kernel, leaf, position, field)
                if data is not field._plain_data:
                    plain = False
                    if leaf.symbol in kernel.ir.written_arrays and not data.flags.writeable:
                        raise _read_only_error(kernel, leaf, position)
                packed.append(data)
        else:
            if "[" in leaf.name:
                k = int(leaf.name.rsplit("[", 1)[1][:-1])
                field = np.asarray(field).reshape(-1)[k]
            scalar = staging_dtype(leaf.dtype)._np(field)  # the checked conversion
            packed.append(float(scalar) if dtypes.is_float(leaf.dtype) else scalar)
    return packed, plain


def _struct_array_arg(kernel: Kernel, param, position: int, value) -> list:
    _array_arg(kernel, param, position, value)
    return [field_view(value._data, _leaf_path(leaf)) for leaf in param.flat]


def _empty_like_param(param) -> np.ndarray:
    """A one-element zero array of the parameter's numba type (stands in for a missing adjoint:
    adjoint code reads element 0 of it, which is 0, and never writes it), with its element's
    shape (generated code checks it, ``cpu._component_shape_guard``)."""
    inner = tuple(getattr(param.dtype, "_shape", ()))
    return np.zeros((1,) * param.ndim + inner, dtypes.numpy_dtype(staging_dtype(param.dtype)))


def plan_of(kernel: Kernel) -> LaunchPlan:
    plan = kernel.__dict__.get("_launch_plan")
    if plan is None:
        plan = kernel._launch_plan = LaunchPlan(kernel)
    return plan


_SCALAR_OK = {"float": (float, int), "int": (int,), "uint": (int,), "bool": (bool,),
              "composite": (), "struct": (), "struct_array": ()}


def _composite_arg(kernel: Kernel, param, position: int, value, np_type) -> list:
    t = param.dtype
    if value.__class__ is t:
        return value._values.tolist() if np_type is not np.float16 and \
            np.issubdtype(np_type, np.floating) else [np_type(c) for c in value._values]
    try:
        flat = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        flat = None
    if flat is None or flat.size != t._length or hasattr(value, "_wp_scalar_type_"):
        raise LaunchTypeError(f"launch({kernel.key}): argument '{param.name}' (position "
                              f"{position}) expects {dtypes.type_name(t)}, got {_describe(value)}.")
    if np.issubdtype(np_type, np.floating):
        return [float(c) for c in flat]
    return [np_type(c) for c in flat]


def pack_arguments(kernel: Kernel, args: list, plan: LaunchPlan | None = None
                   ) -> tuple[list, bool]:
    """Numba-ready arguments: numpy storage for arrays (float16 staged as float32), typed
    scalars; and whether every array among them is plain storage (``array._plain_data``), which
    ``_execute`` may pass to the compiled entry point without Numba's typing (cpu_entry.py)."""
    plan = plan or plan_of(kernel)
    packed = []
    append = packed.append
    plain = True
    for k, value in enumerate(args):
        is_array, dtype, storage_ndim, np_type, kind = plan.slots[k]
        cls = value.__class__
        if is_array:
            if cls is array and value.dtype is dtype and value.device is _CPU:
                data = value._plain_data  # its ndim checked too: numpy can reshape in place
                if data is not None and data.ndim == storage_ndim:
                    append(data)
                    continue
            data = _array_arg(kernel, plan.params[k], k, value)  # or raises the error
            if k in plan.written and not data.flags.writeable:
                raise _read_only_error(kernel, plan.params[k], k)
            append(data)
            plain = False
        elif kind == "float":  # Python floats: fast to dispatch; kernels cast float32 ones
            if cls is float:
                append(value)
            elif cls is int or isinstance(value, (np.floating, np.integer)) and cls is not bool:
                append(float(value))
            else:
                append(float(_scalar_arg(kernel, plan.params[k], k, value)))  # or raises
        elif cls is np_type:
            append(value)
        elif cls in _SCALAR_OK[kind]:
            append(np_type(value))
        elif kind == "composite":
            packed.extend(_composite_arg(kernel, plan.params[k], k, value, np_type))
        elif kind == "struct":
            leaves, plain_leaves = _struct_arg(kernel, plan.params[k], k, value)
            packed.extend(leaves)
            plain = plain and plain_leaves
        elif kind == "struct_array":  # field views of a structured array: never plain
            packed.extend(_struct_array_arg(kernel, plan.params[k], k, value))
            plain = False
        elif isinstance(value, np.generic):
            _scalar_arg(kernel, plan.params[k], k, value)  # raises for a wrong kind
            append(np_type(value))
        else:
            append(_scalar_arg(kernel, plan.params[k], k, value))
    for k in plan.float16:
        packed[plan.offsets[k]] = cpu_half.to_float32(packed[plan.offsets[k]])
    return packed, plain


def _write_back(plan: LaunchPlan, args: list, packed: list, writer: object = None) -> None:
    for k in plan.float16_written:
        cpu_half.store_float32(args[k]._data, packed[plan.offsets[k]])
    for k in plan.written:
        args[k]._mark_written(writer)


def pack_adjoints(kernel: Kernel, args: list, adj_args: list,
                  plan: LaunchPlan | None = None) -> tuple[list, list, list, list, bool]:
    """Adjoint buffers per array parameter: explicit entry, else the array's own ``.grad``.

    Returns (buffers, has-adjoint flags, consume flags, float16 write-backs, whether every
    buffer is plain storage as in ``pack_arguments``). Only an array's own ``.grad`` is consumed
    by stores (final write wins), and never with ``retain_grad``.
    """
    plan = plan or plan_of(kernel)
    buffers, has, consume, staged = [], [], [], []
    plain_float = plan.plain_float
    plain = True
    for j, (k, path, leaf) in enumerate(plan.flat_arrays):
        value, adj = args[k], adj_args[k]
        if k in plain_float:  # the common case: a float array parameter and its .grad (or adj)
            grad = value._grad if adj is None else adj
            if grad is not None and (adj is None or adj.__class__ is array and adj.dtype is
                                     value.dtype and adj.ndim == value.ndim):
                data = grad._plain_data
                if data is not None and data.size and data.ndim == plan.flat_storage_ndims[j]:
                    buffers.append(data)
                    has.append(True)
                    consume.append(grad is value._grad and not value._retain_grad)
                    grad._mark_written()
                    continue
        buffer, flag, consumed = _adjoint_slot(kernel, plan, k, path, leaf, value, adj, staged)
        if flag and not buffer.flags.writeable and (
                consumed or leaf.symbol in kernel.ir.read_arrays):  # the adjoint writes it
            raise _read_only_error(kernel, leaf, k, "adjoint of argument",
                                   "the kernel's adjoint adds into")
        if flag and plain:  # a stand-in for a missing adjoint is plain (_empty_like_param)
            plain = buffer.ndim == plan.flat_storage_ndims[j] and is_plain(buffer)
        buffers.append(buffer)
        has.append(flag)
        consume.append(consumed)
    return buffers, has, consume, staged, plain


def _adjoint_slot(kernel: Kernel, plan: LaunchPlan, k: int, path, leaf, value, adj,
                  staged: list) -> tuple[np.ndarray, bool, bool]:
    """(buffer, has adjoint, consume) of one generated array parameter: every case, checked."""
    if adj is not None and adj.__class__ is not array and path is None:
        _array_arg(kernel, plan.params[k], k, adj, what="adjoint argument")
    if path is not None and plan.slots[k][4] == "struct":  # an array field of a struct
        value = resolve_path(value, path)
        adj = resolve_path(adj, path) if adj is not None else None
        path = None
    grad = adj if adj is not None else (value._grad if value is not None else None)
    if grad is None or not dtypes.is_float(dtypes.scalar_of(leaf.dtype)) or grad.size == 0:
        dummy = plan.dummies.get(k) if leaf is plan.params[k] else _empty_like_param(leaf)
        return dummy, False, False
    if adj is not None and leaf is plan.params[k] and (
            adj.dtype is not value.dtype or adj.ndim != value.ndim):
        _array_arg(kernel, plan.params[k], k, adj, what="adjoint argument")
    data = grad._data if path is None else field_view(grad._data, path)
    if k in plan.float16:
        staged.append((grad, cpu_half.to_float32(data)))
        data = staged[-1][1]
    grad._mark_written()
    return data, True, grad is value._grad and not value._retain_grad


# "auto" gives scatter sites per-chunk replicas when all replicas together hold at most this
# many elements per launched thread, or as many as the launch adds at its scatter sites where
# that is more (zeroing and summing a replica's element costs less than a scattered add), but
# then at most REPLICA_ELEMENTS_MAX: their cost must stay small next to the work. Particle to
# grid (100k particles, 27 cells each, 4 adds per cell, into a 66^3 grid: 2 x 4.6 MB of
# replicas on 2 threads) ran 6.1 ms serially, 3.6 ms replicated.
REPLICA_ELEMENTS_PER_THREAD = 8
REPLICA_ELEMENTS_MAX = 1 << 24

# Where replicas do not fit, "auto" runs a launch on this many threads or more with atomics at
# its scatter sites (timing then keeps it serial if that is faster). On the 2-core test VM a
# scattered float atomic costs 2.4-3.5 plain adds (200k particles adding into a 2M-cell grid:
# 12.2 ms serially, 21.4 ms on two threads with atomics; the adjoint of their gather from it:
# 19.8 and 24.1 ms), so below ~3 threads atomics cannot pay.
ATOMICS_FROM_THREADS = 4


@dataclass(frozen=True)
class Threading:
    """How one launch runs: ``chunks`` row ranges (1: serially); ``atomic``: the variant with
    atomics at scatter sites; ``banded``: scatter arrays every chunk adds into directly, their
    sites staying within ``margin`` rows of the thread's row (chunks.run keeps rows that close
    to a neighbouring chunk for a second, serial pass)."""

    atomic: bool = False
    chunks: int = 1
    banded: frozenset[str] = frozenset()
    margin: int = 0


_SERIAL = Threading()


def _threading(kernel: Kernel, dims: tuple[int, ...], total: int, adjoint: bool, receiver,
               args: list, positions: dict[str, int],
               flags: tuple[bool, ...] | None = None) -> Threading:
    """How to run one launch that ``config.cpu_parallel`` does not keep serial (``_execute``
    keeps "serial", ``config.deterministic`` and small "auto" launches serial): "parallel"
    (atomics at scatter sites); "replicate" (per-chunk copies of the arrays scatter sites add
    into, or row bands where every site stays near its row; atomics where a site is not a plain
    add); or "auto": on every thread when no thread may update an element another updates or
    when row bands separate the updates; with per-chunk copies of the arrays updated, in as
    many chunks (up to one per thread) as keep the copies small next to the launch
    (``_replica_budget``); when not even two chunks do, or a site is not a plain
    add, with atomics on ``ATOMICS_FROM_THREADS`` threads or more, else serially (on few cores,
    scattered float atomics cost more than a second core gives back, PERF-NOTES §3).
    ``receiver(symbol)`` is the array a scatter site adds into in this launch and whether it
    receives anything (False: an absent adjoint's stand-in); ``args[positions[symbol]]`` the
    argument of a parameter; ``flags`` an adjoint launch's (its program holds the adjoint's
    views)."""
    mode = config.cpu_parallel
    rows = dims[0]
    threads = chunks = min(rows, numba.get_num_threads())
    if chunks <= 1:
        return _SERIAL
    if mode == "parallel":
        return Threading(True, chunks)
    sites = kernel.scatter_sites()[adjoint]
    received = {symbol: receiver(symbol) for symbol in sites}
    live = {symbol: array for symbol, (array, receives) in received.items() if receives}
    if all(sites[symbol] for symbol in live):
        banded, margin = _bands(kernel.program(len(dims), flags=flags), adjoint, live, rows,
                                lambda symbol, axis: args[positions[symbol]].shape[axis])
        if mode == "auto":  # as many chunks as copies of this size fit the budget
            copy = sum(a.size for symbol, a in live.items() if symbol not in banded)
            if copy:
                chunks = min(chunks, _replica_budget(kernel, adjoint, total) // copy)
        if chunks > 1:
            return Threading(False, chunks, banded, margin)
    if mode == "replicate" or (mode == "auto" and threads >= ATOMICS_FROM_THREADS):
        return Threading(True, threads)
    return _SERIAL


def _replica_budget(kernel: Kernel, adjoint: bool, total: int) -> int:
    """Elements all per-chunk replicas of an "auto" launch of ``total`` threads may hold."""
    adds = kernel.scatter_adds()[adjoint] * total
    return max(REPLICA_ELEMENTS_PER_THREAD * total, min(adds, REPLICA_ELEMENTS_MAX))


def _bands(program: cpu.CpuProgram, adjoint: bool, live, rows: int,
           shape_of) -> tuple[frozenset[str], int]:
    """Scatter arrays of this launch that chunks may add into directly, and the margin: those
    whose sites all keep a row window (``codegen/offsets.py``) and that nothing else in the
    kernel touches."""
    banded, margin = set(), 0
    for view in program.views[adjoint]:
        w = view.window
        if view.param in live and view.direct and w is not None and w.holds(rows, shape_of):
            banded.add(view.param)
            margin = max(margin, w.hi - w.lo)
    return frozenset(banded), margin


def _reraise(kernel: Kernel, direction: str, program: cpu.CpuProgram, err: BaseException):
    """Re-raise an error from running compiled code as the error a user should see."""
    if program.variant.flush_denormals:  # raised before the kernel restored the FP state
        cpu_runtime.set_fp_control(cpu_runtime.fp_control() & ~cpu_runtime.FLUSH_DENORMALS)
    if isinstance(err, IndexError) and len(err.args) in (2, 4) and isinstance(
            err.args[0], str) and err.args[0].count("|") >= 4:
        raise _index_error(err.args, direction) from None
    if isinstance(err, numba.core.errors.NumbaError):
        raise InternalError(
            f"difftape generated code that Numba could not compile for kernel "
            f"'{kernel.key}' ({direction}); this is a difftape bug. Generated file: "
            f"{program.path}\n{err}") from err
    raise err


def _index_error(args: tuple, direction: str) -> ArrayIndexError:
    """The error for a debug-mode index check's IndexError: (where, index, axis, size) from an
    array index, (where, index) from a vector or matrix component index (``cpu_runtime``);
    ``where`` is "kernel|file|line|source text|array or what the index picks"."""
    kernel, filename, line, rest = args[0].split("|", 3)
    text, name = rest.rsplit("|", 1)
    if len(args) == 2:
        problem = f"component index {args[1]} is out of range for {name}"
    else:
        problem = (f"index {args[1]} is out of bounds for axis {args[2]} of array '{name}' "
                   f"with size {args[3]}")
    return ArrayIndexError(f"in kernel '{kernel}' ({direction}): {problem}\n"
                           f"  File \"{filename}\", line {line}\n    {text}")


def _total(dims: tuple[int, ...]) -> int:
    total = 1
    for d in dims:
        total *= d
    return total


def _rank_error(kernel: Kernel, plan: LaunchPlan, dims: tuple[int, ...]) -> LaunchValueError:
    """The error for a launch whose rank differs from the kernel's ``wp.tid()`` unpacking (the
    callers test ``plan.tid_rank and plan.tid_rank != len(dims)`` inline: a hot path)."""
    return LaunchValueError(f"launch({kernel.key}): the kernel unpacks wp.tid() into "
                            f"{plan.tid_rank} indices, but dim {dims} has {len(dims)} "
                            f"dimension(s); launch it with a dim of {plan.tid_rank} sizes")


def _execute(kernel: Kernel, plan: LaunchPlan, dims: tuple[int, ...], total: int, adjoint: bool,
             args: list, arrays: list, receiving: tuple[list, list, list] | None,
             plain: bool = False, compile_only: bool = False):
    """Pick the program and chunking for one launch and run it.

    Compiled code assumes its array arguments never overlap (so LLVM can vectorize); a launch
    passing overlapping arrays (``inputs=[x, x]``) runs serially on a variant without that
    assumption, whatever ``cpu_parallel`` asks: with it, adds into one adjoint through two
    parameters could be lost. ``receiving``: the adjoint buffers, has-adjoint and consume flags
    of an adjoint launch (None in a forward one), from which ``_receiver`` makes ``_threading``'s
    ``receiver`` when it is needed. ``plain``: every array argument is plain storage, so the
    compiled entry point is called without Numba's dispatcher (``cpu_entry.py``).
    ``compile_only``: run nothing, return the dispatcher and the signature this launch calls it
    with."""
    receiver = None
    # An adjoint is compiled for its launch's has-adjoint and consume flags (cpu._specialised).
    flags = (*receiving[1], *receiving[2]) if adjoint else None
    timed = None  # the tally this launch reports to, while "auto" times it both ways
    program = None
    if _overlapping(arrays):
        how, noalias = _SERIAL, False
    else:
        mode = config.cpu_parallel
        noalias = True
        if mode == "serial" or config.deterministic or (  # parallel sums vary in order
                mode == "auto" and total < config.parallel_threshold):
            how = _SERIAL
        else:
            threaded = True
            if mode == "auto":  # timed on the variant without atomics, which runs it serially
                program = kernel.program(len(dims), False, True, flags)
                timed, threaded = thread_choice.choose(program.thread_choices, adjoint, total)
            how = _SERIAL
            if threaded:
                receiver = _receiver(plan, args, receiving)
                how = _threading(kernel, dims, total, adjoint, receiver, args, plan.positions,
                                 flags)
            if timed is not None and (not timed.timing() or compile_ahead.pending or (
                    threaded and how.chunks == 1)):
                timed.skip()  # decided; a child compiles on a core; or no threads after all
                timed = None
    if program is None or how.atomic:  # (an "auto" launch has its variant without atomics)
        program = kernel.program(len(dims), how.atomic, noalias, flags)
    fn = program.adjoint if adjoint else program.forward
    views = program.views[adjoint]
    if views and receiver is None:
        receiver = _receiver(plan, args, receiving)
    if compile_only:  # chunks get views of the same types as the whole arrays (C-contiguous)
        call = [0, dims[0], *dims, *args, *[receiver(view.param)[0] for view in views]]
        signature = cpu_entry.signature(call) if plain else (None,)
        if None in signature:  # the dispatcher types the call itself
            signature = tuple(fn.typeof_pyval(value) for value in call)
        return fn, signature
    try:
        if plain:
            fn = program.entries[adjoint] or cpu_entry.entry_point(
                program, adjoint, [0, 0, *dims, *args, *[receiver(view.param)[0]
                                                        for view in views]])
        if timed is not None:
            start = time.perf_counter()
        if how.chunks == 1:  # serial: each view argument is its array itself
            if views:
                args = args + [receiver(view.param)[0] for view in views]
            fn(0, dims[0], *dims, *args)
        else:
            chunks.run(fn, list(dims), args,
                       [(*receiver(view.param), view.direct, view.param in how.banded)
                        for view in views], how.chunks, how.margin)
        if timed is not None:
            timed.record(how.chunks > 1, time.perf_counter() - start)
    except BaseException as err:
        _reraise(kernel, "adjoint" if adjoint else "forward", program, err)


def _receiver(plan: LaunchPlan, packed: list, receiving: tuple[list, list, list] | None):
    """``receiver(symbol)``: the array a parameter's scatter sites add into, and whether it
    receives anything: in a forward launch the packed argument (always); in an adjoint launch
    its adjoint buffer and has-adjoint flag."""
    if receiving is None:
        return lambda symbol: (packed[plan.positions[symbol]], True)
    buffers, has, _ = receiving
    return lambda symbol: (buffers[plan.adjoint_positions[symbol]],
                           has[plan.adjoint_positions[symbol]])


def _overlapping(arrays: list) -> bool:
    """Whether two of these numpy arrays share memory (one array passed twice, views of one
    base array, wrappers of one external buffer). Distinct fields of one struct array do not."""
    if len(arrays) == 2:  # the usual case: two arrays, each owning its memory
        first, second = arrays
        if owns_memory(first) and owns_memory(second):
            return first is second
    for a in arrays:
        if not owns_memory(a):
            break
    else:  # every array owns its memory
        return len(set(map(id, arrays))) < len(arrays)
    by_root: dict[int, list] = {}
    for a in arrays:
        root = a
        while not owns_memory(root) and root.base.__class__ is np.ndarray:
            root = root.base
        key = id(root) if root.base is None else root.__array_interface__["data"][0]
        by_root.setdefault(key, []).append(a)
    return any(np.shares_memory(x, y) for group in by_root.values()
               for k, x in enumerate(group) for y in group[k + 1:])


def run_forward(kernel: Kernel, dims: tuple[int, ...], args: list) -> None:
    kernel = kernel.specialize(args)
    _run_forward(kernel, plan_of(kernel), dims, args)


def _run_forward(kernel: Kernel, plan: LaunchPlan, dims: tuple[int, ...], args: list) -> None:
    if plan.tid_rank and plan.tid_rank != len(dims):
        raise _rank_error(kernel, plan, dims)
    fast = plan.fast_forward
    if fast is not None and fast(kernel, args, dims):
        return
    packed, plain = pack_arguments(kernel, args, plan)
    total = dims[0] if len(dims) == 1 else _total(dims)
    if total == 0:
        return
    _execute(kernel, plan, dims, total, False, packed, plan.packed_arrays(packed), None, plain)
    _write_back(plan, args, packed, kernel)


def inplace_snapshots(kernel: Kernel, args: list) -> dict[int, np.ndarray]:
    """Copies of the arrays a kernel both reads and stores, taken before a recorded launch.

    Their adjoint must see the values the forward read, not the ones it wrote (Warp differs:
    SPEC §2.4 ``a[i] *= b[i]`` gives a wrong ``b.grad`` there).
    """
    return {k: args[k]._data.copy() for k in plan_of(kernel).inplace}


def run_adjoint(kernel: Kernel, dims: tuple[int, ...], args: list, adj_args: list,
                snapshots: dict[int, np.ndarray] | None = None, checked: bool = False,
                compile_only: bool = False):
    """Run the adjoint of one launch: accumulate into input adjoints, consume output adjoints.

    ``snapshots`` holds pre-launch copies of in-place arrays; without them the current contents
    are used (a manual adjoint launch). Either way the adjoint works on a private copy.
    ``checked``: the caller (the Tape) already saw that the kernel has an adjoint, and passes
    one adjoint per argument and the dims the forward launch was checked with.
    ``compile_only``: run nothing; return what ``_execute`` returns for it (compile_ahead.py).
    """
    if kernel.generic_params:
        kernel = kernel.specialize(args)
    if compile_ahead.pending or compile_ahead.queued:
        compile_ahead.wait(kernel)
    plan = kernel.__dict__.get("_launch_plan") or plan_of(kernel)
    if not checked:
        if not kernel.enable_backward:
            raise LaunchError(f"Failed to find backward kernel '{kernel.key}' from module "
                              f"'{kernel.module}' for device 'cpu'")
        if len(adj_args) != len(args):
            raise LaunchValueError(
                f"launch({kernel.key}, adjoint=True): adj_inputs + adj_outputs must hold one "
                f"entry per kernel parameter ({len(args)}), got {len(adj_args)}; use None to "
                "fall back to an array's own .grad")
        if plan.tid_rank and plan.tid_rank != len(dims):
            raise _rank_error(kernel, plan, dims)
    fast = plan.fast_adjoint
    if fast is not None and not compile_only and fast(kernel, args, adj_args, dims):
        return None
    packed, plain = pack_arguments(kernel, args, plan)
    for k in plan.inplace:  # C-contiguous copies (the snapshots are, too)
        at = plan.offsets[k]
        source = (snapshots or {}).get(k, packed[at])
        packed[at] = (cpu_half.to_float32(source) if source.dtype == np.float16 else
                      source.astype(packed[at].dtype, copy=True))
    buffers, has, consume, staged, plain_buffers = pack_adjoints(kernel, args, adj_args, plan)
    total = dims[0] if len(dims) == 1 else _total(dims)
    if total == 0:
        return None

    arrays = plan.packed_arrays(packed)
    arrays.extend(compress(buffers, has))
    if compile_only:
        return _execute(kernel, plan, dims, total, True, packed + buffers + has + consume,
                        arrays, (buffers, has, consume), plain and plain_buffers, True)
    _execute(kernel, plan, dims, total, True, packed + buffers + has + consume, arrays,
             (buffers, has, consume), plain and plain_buffers)
    for grad, data in staged:
        cpu_half.store_float32(grad._data, data)


class Launch:
    """A prepared launch (``record_cmd=True``): ``launch()`` runs it again, unrecorded (as Warp)."""

    def __init__(self, kernel: Kernel, dim: tuple[int, ...], inputs, outputs, device):
        self.kernel, self.dim, self.inputs, self.outputs, self.device = (
            kernel, dim, inputs, outputs, device)

    def launch(self, stream=None) -> None:
        run_forward(self.kernel, self.dim, list(self.inputs) + list(self.outputs))


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
    if kernel.generic_params:
        kernel = kernel.specialize(list(inputs) + list(outputs))
    resolved = _CPU if device is None or device == "cpu" else get_device(device)
    args = [*inputs, *outputs]
    plan = kernel.__dict__.get("_launch_plan") or plan_of(kernel)
    arity = len(plan.params)
    if len(args) != arity:
        raise LaunchError(f"Error launching kernel '{kernel.key}', passed {len(args)} arguments "
                          f"but kernel requires {arity}.")
    if config.verify_autograd_array_access:
        read_flags.check_build(kernel)
    if record_cmd:
        pack_arguments(kernel, args)  # checks them
        return Launch(kernel, dims, inputs, outputs, resolved)
    active = tape_module._active if record_tape else None
    if active is not None:
        frame = sys._getframe(1)  # where the user launched it (tape visualization, warnings)
        code = frame.f_code
        metadata = {"caller": {"file": code.co_filename, "lineno": frame.f_lineno,
                               "func": code.co_name}}
    if adjoint:
        run_adjoint(kernel, dims, args, list(adj_inputs) + list(adj_outputs))
    else:
        if active is not None:
            if compile_ahead.queued or compile_ahead.SEEN not in kernel.__dict__:
                compile_ahead.start(kernel, dims, args, active)
            if plan.inplace and kernel.enable_backward:
                snapshots = inplace_snapshots(kernel, args)
                if snapshots:
                    metadata["inplace_snapshots"] = snapshots
        _run_forward(kernel, plan, dims, args)
    if active is not None:
        versions = overwrite.read_versions(kernel, args)
        active.record_launch(kernel, dims, max_blocks, inputs, outputs, resolved, 1, metadata)
        if versions is not None:
            overwrite.remember(active, versions)
        if config.verify_autograd_array_access:
            active._check_kernel_array_access(kernel, args)
    return None
