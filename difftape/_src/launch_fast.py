"""Per-kernel fast paths of the launcher: Python functions generated for the common launch.

``launch.py`` checks and packs each argument through a loop that handles every kind of
parameter; for a tiny launch that loop, the overlap check and the program lookup cost more than
the compiled kernel (~2 µs of a ~4 µs launch). A kernel whose parameters are all plain arrays
and number scalars gets two functions generated from its parameter list, one for the forward,
one for the adjoint, which test the common case argument by argument, unrolled, and run it:

* every array argument a difftape CPU array of its parameter's dtype whose storage is plain
  (C-contiguous, aligned, writeable: ``array._plain_data``), of the parameter's rank, owning its
  memory (``array_storage.owns_memory``: no numpy base, or its ``AlignedBlock``) and passed
  once; adjoints the arrays' own ``.grad`` (or explicit adjoints of the same kind);
* every scalar a Python number of the parameter's kind, and every vector or matrix value one of
  the parameter's exact type, packed exactly as ``pack_arguments`` packs it (so every call has
  the signature of the compiled entry point the general path found);
* a serial launch: ``cpu_parallel="serial"``, deterministic mode, or "auto" below
  ``parallel_threshold`` or where timing chose serial (``thread_choice.stays_serial``).

Anything else returns False before any side effect, and the general path runs the launch with
its checks and error messages. This module must not decide anything the general path does not:
it only skips work whose outcome the tests above already fix.

Compiling a kernel's generated text takes Python ~2 ms, so the code object is kept in the cache
directory (``cache_files.kept_code``), and a later process loads it.
"""

from __future__ import annotations

import linecache

import numpy as np

from . import config, dtypes, thread_choice
from .array import array
from .array_storage import OWNING_BASES
from .cache_files import kept_code
from .device import get_device
from .kernel import _options_epoch

_PAIRWISE_MAX = 5  # up to this many arrays, ``is`` comparisons beat a set of ids

_SCALAR_KINDS = ("float", "int", "uint", "bool")


def eligible(plan) -> bool:
    """Whether a kernel has an array parameter and every parameter is a plain array (not
    float16, not a struct), a number scalar or a vector/matrix value of float32 or float64."""
    for k, (is_array, _, _, np_type, kind) in enumerate(plan.slots):
        if is_array:
            if k in plan.float16 or plan.params[k].flat is not None:
                return False
        elif kind == "composite":
            if np_type not in (np.float32, np.float64):
                return False
        elif kind not in _SCALAR_KINDS:
            return False
    return bool(plan.arrays)


def build(plan, kernel_key: str, reraise) -> tuple[object, object] | tuple[None, None]:
    """``(forward, adjoint)`` fast paths for a kernel's launch plan, or ``(None, None)``.

    ``forward(kernel, args, dims)`` and ``adjoint(kernel, args, adj_args, dims)`` return True
    when they ran the launch, False when the general path must. ``reraise(kernel, direction,
    program, err)`` turns an error from compiled code into the user's error (launch.py).
    The adjoint is None for a kernel with in-place arrays (its adjoint reads snapshots).
    Each function's ``source`` attribute holds the generated source of both.
    """
    if not eligible(plan):
        return None, None
    cache: dict = {}
    namespace = {"array": array, "config": config, "CPU": get_device("cpu"),
                 "epoch": _options_epoch, "reraise": reraise, "cache": cache,
                 "stays_serial": thread_choice.stays_serial,
                 "NUMBERS": (np.floating, np.integer), "OWNING": OWNING_BASES}
    checks, packed, arrays = _argument_checks(plan, namespace)
    adjoint_checks, buffers, adjoint_arrays = _adjoint_checks(plan, namespace)
    namespace["entry_of"] = _entry_finder(plan, cache, len(packed), len(buffers))
    forward = _forward_source(plan, checks, packed, arrays)
    adjoint = _adjoint_source(plan, checks, packed, arrays + adjoint_arrays, adjoint_checks,
                              buffers)
    source = "\n".join(forward + [""] + adjoint) + "\n"
    filename = f"<difftape fast launch of {kernel_key}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(kept_code(source, filename), namespace)
    forward = namespace["fast_forward"]
    adjoint = namespace["fast_adjoint"] if not plan.inplace else None
    for function in (forward, adjoint):
        if function is not None:
            function.source = source
    return forward, adjoint


def _argument_checks(plan, namespace: dict) -> tuple[list[str], list[str], list[str]]:
    """Lines unpacking ``args`` into ``a0``… and testing each, binding the value to pass as
    ``d<k>`` (array storage) or ``s<k>`` (scalar); the names passed; the arrays among them."""
    arity = len(plan.slots)
    lines = [f"    {', '.join(f'a{k}' for k in range(arity))}{',' if arity == 1 else ''} = args"]
    packed, arrays = [], []
    for k, (is_array, dtype, storage_ndim, np_type, kind) in enumerate(plan.slots):
        name = plan.params[k].symbol
        if is_array:
            namespace[f"T{k}"] = dtype
            lines += [
                f"    # {name}: array",
                f"    if a{k}.__class__ is not array or a{k}.dtype is not T{k} or "
                f"a{k}.device is not CPU:",
                "        return False",
                f"    d{k} = a{k}._plain_data",
                f"    if d{k} is None or d{k}.ndim != {storage_ndim} or "
                f"d{k}.base.__class__ not in OWNING:",
                "        return False"]
            packed.append(f"d{k}")
            arrays.append(f"d{k}")
            continue
        if kind == "composite":  # as pack_arguments: its components, as Python floats
            namespace[f"T{k}"] = dtype
            components = [f"s{k}_{c}" for c in range(len(plan.params[k].components))]
            lines += [
                f"    # {name}: {dtypes.type_name(dtype)} value",
                f"    if a{k}.__class__ is not T{k}:",
                "        return False",
                f"    {', '.join(components)}{',' if len(components) == 1 else ''} = "
                f"a{k}._values.tolist()"]
            packed += components
            continue
        if kind == "float":  # as pack_arguments: Python floats pass, numbers become floats
            exact, convert = "float", "float"
            converted = f"a{k}.__class__ is int or isinstance(a{k}, NUMBERS)"
        else:  # as pack_arguments: the parameter's numpy type, or a Python number cast to it
            namespace[f"N{k}"] = np_type
            python_type = "bool" if kind == "bool" else "int"
            exact, convert = f"N{k}", f"N{k}"
            converted = f"a{k}.__class__ is {python_type}"
        lines += [
            f"    # {name}: {kind} scalar",
            f"    if a{k}.__class__ is {exact}:",
            f"        s{k} = a{k}",
            f"    elif {converted}:",
            f"        s{k} = {convert}(a{k})",
            "    else:",
            "        return False"]
        packed.append(f"s{k}")
    return lines, packed, arrays


def _adjoint_checks(plan, namespace: dict) -> tuple[list[str], list[int], list[str]]:
    """Lines binding each array parameter's adjoint buffer ``g<k>``, has-adjoint flag ``h<k>``
    and consume flag ``c<k>`` as ``pack_adjoints`` would (an array's own ``.grad`` unless an
    adjoint is passed), declining any other case; the parameters, in order; the buffers that
    may be arrays of the user's (which must not overlap the arguments or each other)."""
    lines, buffers, arrays = [], [], []
    for j, (k, _, leaf) in enumerate(plan.flat_arrays):
        namespace[f"DUMMY{k}"] = plan.dummies[k]
        buffers.append(k)
        if k not in plan.plain_float:  # no adjoint (an integer array): its stand-in
            lines += [
                f"    # {leaf.symbol} has no adjoint",
                f"    if adj_args[{k}] is not None:",
                "        return False",
                f"    g{k}, h{k}, c{k} = DUMMY{k}, False, False"]
            continue
        lines += [
            f"    # adjoint of {leaf.symbol}",
            f"    j{k} = adj_args[{k}]",
            f"    if j{k} is None:",
            f"        r{k} = a{k}._grad",
            f"    elif j{k}.__class__ is array and j{k}.dtype is T{k} and j{k}.ndim == a{k}.ndim:",
            f"        r{k} = j{k}",
            "    else:",
            "        return False",
            f"    if r{k} is None:",
            f"        g{k}, h{k}, c{k} = DUMMY{k}, False, False",
            "    else:",
            f"        g{k} = r{k}._plain_data",
            f"        if g{k} is None or g{k}.ndim != {plan.flat_storage_ndims[j]} or "
            f"not g{k}.size or g{k}.base.__class__ not in OWNING:",
            "            return False",
            f"        h{k} = True",
            f"        c{k} = r{k} is a{k}._grad and not a{k}._retain_grad"]
        arrays.append(f"g{k}")
    return lines, buffers, arrays


def _forward_source(plan, checks, packed, arrays) -> list[str]:
    rank = plan.tid_rank  # launches of a kernel that unpacks wp.tid() have its rank (checked)
    key = "None" if rank else "len(dims)"
    return [
        "def fast_forward(kernel, args, dims):", *checks, *_distinct(arrays), *_grid(rank),
        f"    found = cache.get({key})",
        "    if found is None or found[0] != config.mode or found[1] != epoch[0]:",
        f"        found = entry_of(kernel, {key})",
        "        if found is None:",
        "            return False",
        "    _, _, entry, extra, program = found",
        "    if timed and not stays_serial(program.thread_choices, False, total):",
        "        return False",
        *_call("forward", rank, ", ".join(packed)),
        *_mark_written([f"a{k}" for k in plan.written], "kernel"),
        "    return True"]


def _adjoint_source(plan, checks, packed, arrays, adjoint_checks, buffers) -> list[str]:
    rank = plan.tid_rank
    flags = ", ".join([f"h{k}" for k in buffers] + [f"c{k}" for k in buffers])
    marks = []  # pack_adjoints marks the adjoints it passes written, before the call
    for k in buffers:
        if k in plan.plain_float:
            marks += [f"    if h{k}:", *("    " + line for line in _mark_written([f"r{k}"]))]
    buffer_names = ", ".join(f"g{k}" for k in buffers)
    return [
        "def fast_adjoint(kernel, args, adj_args, dims):",
        *checks, *adjoint_checks, *_distinct(arrays), *_grid(rank),
        f"    key = ({flags}{'' if rank else ', len(dims)'})",
        "    found = cache.get(key)",
        "    if found is None or found[0] != config.mode or found[1] != epoch[0]:",
        "        found = entry_of(kernel, key, True)",
        "        if found is None:",
        "            return False",
        "    _, _, entry, extra, program = found",
        "    if timed and not stays_serial(program.thread_choices, True, total):",
        "        return False",
        *marks,
        *_call("adjoint", rank, f"{', '.join(packed)}, {buffer_names}, {flags}"),
        "    return True"]


def _grid(rank: int) -> list[str]:
    """Lines naming the launch's sizes ``n0``… (``n0`` and ``total`` whatever the rank),
    returning False for a launch on threads, True for one of no threads, and setting ``timed``
    for an "auto" launch big enough for threads (serial only when timing chose it)."""
    if rank == 1:
        lines = ["    n0 = total = dims[0]"]
    elif rank:
        lines = [f"    {', '.join(f'n{i}' for i in range(rank))} = dims",
                 f"    total = {' * '.join(f'n{i}' for i in range(rank))}"]
    else:
        lines = ["    n0 = total = dims[0]",
                 "    if len(dims) != 1:",
                 "        for d in dims[1:]:",
                 "            total *= d"]
    return lines + [
        "    mode = config.cpu_parallel",
        "    if mode == 'serial' or config.deterministic:",
        "        timed = False",
        "    elif mode == 'auto':  # serial when small, or when timing chose it (thread_choice)",
        "        timed = total >= config.parallel_threshold",
        "    else:",
        "        return False  # threads: the general path",
        "    if not total:",
        "        return True"]


def _call(direction: str, rank: int, arguments: str) -> list[str]:
    """Lines calling the entry point with ``lo, hi, sizes..., arguments`` and after them the
    arguments at the positions ``extra`` (a serial launch's replica views are their own arrays).
    Direct calls where the sizes are known, for speed."""
    sizes = ", ".join(f"n{i}" for i in range(rank)) if rank else "*dims"
    direct = f"entry(0, n0, {'n0' if not rank else sizes}, {arguments})"
    general = [f"            call = [0, n0, {sizes}, {arguments}]",
               "            entry(*call, *[call[i] for i in extra])"]
    if rank:
        test = "if extra:"
    else:
        test = "if extra or len(dims) != 1:"
    return ["    try:",
            f"        {test}", *general,
            "        else:",
            f"            {direct}",
            "    except BaseException as err:",
            f"        reraise(kernel, {direction!r}, program, err)"]


def _distinct(arrays: list[str]) -> list[str]:
    """Lines returning False when two of ``arrays`` (each owning its memory) are one object."""
    if len(arrays) < 2:
        return []
    if len(arrays) <= _PAIRWISE_MAX:
        pairs = [f"{x} is {y}" for i, x in enumerate(arrays) for y in arrays[i + 1:]]
        return ["    if " + " or ".join(pairs) + ":", "        return False"]
    return [f"    if len(set(map(id, ({', '.join(arrays)})))) != {len(arrays)}:",
            "        return False"]


def _mark_written(names: list[str], writer: str = "None") -> list[str]:
    """Inline ``array._mark_written(writer)`` for each of ``names``."""
    lines = []
    for name in names:
        lines += [f"    w = {name}",
                  "    while w is not None:",
                  "        w._write_count += 1",
                  f"        w._last_writer = {writer}",
                  "        w = w._ref"]
    return lines


def _entry_finder(plan, cache: dict, n_packed: int, n_buffers: int):
    """``entry_of(kernel, key, adjoint)``: for the serial program of a launch, ``(config.mode,
    options epoch, compiled entry point, call positions of its replica views, program)``,
    remembered in ``cache`` under ``key``: None, a launch rank, or an adjoint launch's flags
    (has-adjoint, consume) and maybe its rank. None until the general path has found the entry
    point (``cpu_entry.entry_point``, on a launch whose arrays were all plain)."""
    rank = plan.tid_rank

    def entry_of(kernel, key, adjoint: bool = False):
        if adjoint:
            flags = key[:2 * n_buffers]
            launch_rank = rank or key[-1]
        else:
            flags, launch_rank = None, rank or key
        program = kernel.program(launch_rank, False, True, flags)
        entry = program.entries[adjoint]
        if entry is None:
            return None
        start = 2 + launch_rank  # after lo, hi and the sizes
        if adjoint:
            extra = [start + n_packed + plan.adjoint_positions[view.param]
                     for view in program.views[True]]
        else:
            extra = [start + plan.positions[view.param] for view in program.views[False]]
        cache[key] = found = (config.mode, _options_epoch[0], entry, extra, program)
        return found

    return entry_of
