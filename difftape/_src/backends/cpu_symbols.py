"""Numba-compiled forward functions and derivative rules of every builtin, for generated CPU code.

Generated modules write ``from difftape._src.backends.cpu_symbols import wp_sin, adj_wp_sin``;
each name is built on first use from the builtin's registry record (never from a second copy).

A name ending in ``_f32`` (``wp_asin_f32``, ``adj_wp_pow_f32``) is the record's function with
every float literal and module-level float constant made a float32, for calls whose floats are
all float32. A Python float makes Numba compute in float64: ``1.0 - x * x`` and
``-1.0 if x < -1.0 else x`` promote a float32 ``x``, and the float64 value then takes libm's
double function (asin's forward called ``asin``, not ``asinf``; pow's adjoint ``pow``), in vectors
of half the lanes. Warp computes a float32 builtin in float32 too.
"""

from __future__ import annotations

import hashlib
import os
import types

import numpy as np
from numba import njit

from ..codegen import naming
from ..ops import registry
from ..version import __version__ as _difftape_version
from . import cpu_exp  # noqa: F401 - compiles the rules' exp/log/pow/... (float32: vectorizable)
from . import cpu_inverse_trig  # noqa: F401 - compiles the rules' trig.atan/asin/... (the same)
from . import cpu_math  # noqa: F401 - compiles the rules' rounding helpers to instructions
from . import cpu_trig  # noqa: F401 - compiles the rules' trig.sin/cos/tan (the same)

_compiled: dict[str, object] = {}
_RUNTIME_STAMP: str | None = None


def runtime_stamp() -> str:
    """A hash of the code compiled kernels contain besides their own module: runtime helpers,
    builtin rules and what the rules inline. Numba's cache checks only a function's own source
    file's date, so this hash names cached generated modules and rules instead."""
    global _RUNTIME_STAMP
    if _RUNTIME_STAMP is None:
        here = os.path.dirname(os.path.abspath(__file__))
        ops = os.path.join(os.path.dirname(here), "ops")
        files = [os.path.join(here, name)
                 for name in ("cpu_bits.py", "cpu_exp.py", "cpu_inverse_trig.py", "cpu_math.py",
                              "cpu_overload.py", "cpu_pipeline.py", "cpu_runtime.py",
                              "cpu_symbols.py", "cpu_trig.py")]
        if os.path.isdir(ops):
            files += sorted(os.path.join(ops, f) for f in os.listdir(ops) if f.endswith(".py"))
        digest = hashlib.sha256()
        try:
            for path in files:
                with open(path, "rb") as f:
                    digest.update(f.read())
        except OSError:  # sources not on disk (a zipped install): the version must do
            digest.update(_difftape_version.encode())
        _RUNTIME_STAMP = digest.hexdigest()
    return _RUNTIME_STAMP


def _stamped(fn):
    """A copy of ``fn`` whose Numba cache entry carries the runtime stamp in its name, so that a
    rule cached before ``cpu_trig.py`` (say) changed is not reused."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__qualname__ = f"{fn.__qualname__}_{runtime_stamp()[:16]}"
    copy.__doc__ = fn.__doc__
    return copy


def _float32(value):
    return np.float32(value) if type(value) is float else value


def _float32_code(code: types.CodeType) -> types.CodeType:
    return code.replace(co_consts=tuple(
        _float32_code(c) if isinstance(c, types.CodeType) else _float32(c)
        for c in code.co_consts))


def _float32_copy(fn):
    """A copy of ``fn`` whose float literals, defaults, closure values and module-level float
    constants are numpy float32 values (Numba types them float32)."""
    closure = None if fn.__closure__ is None else tuple(
        types.CellType(_float32(cell.cell_contents)) for cell in fn.__closure__)
    globals_ = {key: _float32(value) for key, value in fn.__globals__.items()}
    defaults = None if fn.__defaults__ is None else tuple(map(_float32, fn.__defaults__))
    copy = types.FunctionType(_float32_code(fn.__code__), globals_, fn.__name__, defaults,
                              closure)
    copy.__qualname__ = fn.__qualname__ + naming.FLOAT32_SUFFIX
    copy.__doc__ = fn.__doc__
    return copy


def __getattr__(name: str):
    if name in _compiled:
        return _compiled[name]
    is_adjoint = name.startswith("adj_")
    symbol = name[4:] if is_adjoint else name
    record, float32 = registry.by_symbol(symbol), False
    if record is None and symbol.endswith(naming.FLOAT32_SUFFIX):
        record, float32 = registry.by_symbol(symbol[:-len(naming.FLOAT32_SUFFIX)]), True
    fn = None if record is None else (record.adjoint if is_adjoint else record.forward)
    if fn is None:
        raise AttributeError(f"no builtin symbol {name!r}")
    # error_model="numpy": x/0 gives inf/nan as in Warp, instead of raising. forceinline: LLVM
    # would keep a rule that calls a large helper (cpu_exp.pow32) a call, and the kernel loop
    # scalar; forcing every rule inline measured no cold-compile cost on the benchmarks.
    _compiled[name] = njit(cache=True, error_model="numpy", forceinline=True)(
        _stamped(_float32_copy(fn) if float32 else fn))
    return _compiled[name]
