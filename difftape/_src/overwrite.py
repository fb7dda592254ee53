"""Detects arrays changed between a recorded launch and ``backward()`` (beyond Warp; on by default).

Every array counts its writes (``array._write_count``: launches, copies, ``zero_``, ``fill_``,
``assign`` and item assignment bump it, on the array and on the arrays it is a view of). A
recorded launch keeps the counts of the arrays whose values its adjoint needs
(``access.value_reads``; arrays the launch snapshotted in place are safe); ``backward()`` compares
them with the current counts before running any adjoint and warns, or raises with
``config.overwrite_check = "error"``, naming the array, the reading launch and the overwriting one.

It never copies array data. Writes through ``array.numpy()`` or another array object aliasing the
same memory are not counted, so they are not seen.
"""

from __future__ import annotations

import warnings

from . import config
from .access import access_of
from .caller import user_frame, variable_names
from .errors import ArrayOverwriteError, ArrayOverwriteWarning

MODES = ("warn", "error", "off")


def watched_params(kernel) -> tuple[int, ...]:
    """Parameters whose arrays a recorded launch of ``kernel`` must find unchanged at backward."""
    watched = kernel.__dict__.get("_overwrite_watched")
    if watched is None:
        facts = access_of(kernel)
        watched = tuple(k for k in facts.value_reads if k not in facts.inplace)
        kernel._overwrite_watched = watched
    return watched


def version(a) -> int:
    """Writes seen by ``a`` and by every array it is a view of (a write to a parent counts)."""
    n = a._write_count
    parent = a._ref
    while parent is not None:
        n += parent._write_count
        parent = parent._ref
    return n


def read_versions(kernel, args: list) -> list | None:
    """``(parameter, array, write count)`` to remember for a launch of ``kernel`` with ``args``."""
    watched = kernel.__dict__.get("_overwrite_watched")
    if watched is None:
        watched = watched_params(kernel)
    if not watched or config.overwrite_check == "off":
        return None
    return [(k, args[k], args[k]._write_count if args[k]._ref is None else version(args[k]))
            for k in watched]


def remember(tape, versions: list) -> None:
    """Attach ``versions`` to the record ``tape`` just appended (records stay Warp's 8-item lists)."""
    record = tape.launches[-1]
    tape._read_versions[id(record)] = (record, versions)


# ------------------------------------------------------------ backward-time check


def check_tape(tape) -> None:
    """Warn (or raise) once per array changed since a recorded launch read it.

    Raises:
        ArrayOverwriteError: with ``config.overwrite_check == "error"``.
    """
    mode = config.overwrite_check
    if mode == "off":
        return
    if mode not in MODES:
        raise ValueError(f"wp.config.overwrite_check must be one of {MODES}, got {mode!r}")
    store = getattr(tape, "_read_versions", None)
    if not store:
        return
    findings: dict[int, list] = {}  # id(root array) → [(record index, parameter, array), ...]
    launches = tape.launches
    for r, record in enumerate(launches):
        entry = store.get(id(record))
        if entry is None or entry[0] is not record:
            continue
        for k, a, before in entry[1]:
            now = a._write_count if a._ref is None else version(a)
            if now != before and record[0].enable_backward:
                findings.setdefault(id(_root(a)), []).append((r, k, a))
    if not findings:
        return
    names = variable_names(user_frame(2))
    for reads in findings.values():
        message = _message(launches, reads, names)
        if mode == "error":
            raise ArrayOverwriteError(message)
        if config.log_level <= config.LOG_WARNING:
            warnings.warn(message, ArrayOverwriteWarning, stacklevel=3)


def _root(a):
    while a._ref is not None:
        a = a._ref
    return a


def _caller(record) -> str:
    caller = record[7].get("caller") if isinstance(record[7], dict) else None
    if not caller:
        return "an unknown location"
    return f"{caller['file']}:{caller['lineno']}"


def _param_name(kernel, k: int) -> str:
    return kernel.ir.params[k].name


def _writer(launches: list, after: int, array) -> str:
    """The first recorded launch or copy after record ``after`` that wrote ``array``'s memory."""
    root = _root(array)
    for record in launches[after + 1:]:
        copied = getattr(record, "_difftape_copy", None)
        if copied is not None:
            dest, where = copied
            if _root(dest) is root:
                return f"a copy (wp.copy / clone / assign) at {where}"
            continue
        if callable(record):
            continue
        kernel = record[0]
        args = list(record[3]) + list(record[4])
        facts = access_of(kernel)
        for k, arg in enumerate(args):
            if facts.is_write[k] and hasattr(arg, "_ref") and _root(arg) is root:
                return (f"kernel '{kernel.key}' (argument '{_param_name(kernel, k)}') at "
                        f"{_caller(record)}")
    last = getattr(root, "_last_writer", None) or getattr(array, "_last_writer", None)
    if last is None:
        return "a write this tape did not record"
    what = f"kernel '{last.key}'" if hasattr(last, "key") else str(last)
    return f"{what}, not recorded on this tape"


def _message(launches: list, reads: list, names: dict[int, str]) -> str:
    r, k, array = reads[0]
    kernel = launches[r][0]
    label = names.get(id(array)) or names.get(id(_root(array)))
    what = f"Array '{label}'" if label else "An array"
    more = len(reads) - 1
    also = f" (and {more} later recorded launch{'es' if more > 1 else ''} that read it)" \
        if more else ""
    return (
        f"{what} was changed after a recorded launch read it, so backward() will compute "
        f"gradients from the new values and they will be wrong.\n"
        f"  read by:    kernel '{kernel.key}' (argument '{_param_name(kernel, k)}') at "
        f"{_caller(launches[r])}{also}\n"
        f"  changed by: {_writer(launches, r, array)}\n"
        f"The adjoint of '{kernel.key}' needs the values it read. Write the new values into "
        "another array (wp.empty_like / wp.clone) instead of overwriting this one, or run "
        "backward() before the overwrite. Set wp.config.overwrite_check = \"error\" to raise "
        "instead, or \"off\" to skip this check."
    )
