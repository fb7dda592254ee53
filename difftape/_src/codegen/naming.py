"""Every rule for names in generated code, in one place.

User names are kept (``x``, adjoint ``adj_x``); temporaries are ``var_<n>`` with adjoints
``adj_<n>``; names that would collide with generated-code globals get a trailing underscore.
"""

from __future__ import annotations

from .. import dtypes

# Names the generated module binds at top level or uses for its own bookkeeping.
RESERVED = frozenset({
    "np", "numba", "njit", "range", "len", "print", "min", "max", "abs", "math",
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
    "uint32", "uint64", "boolean", "bool", "True", "False", "None",
    "dim0", "dim1", "dim2", "dim3", "tid0", "tid1", "tid2", "tid3", "tidflat",
    "t0", "t1", "t2", "t3",  # the thread loops' counters
    "fstack", "istack", "ftop", "itop", "lo", "hi",
})
_GENERATED_PREFIXES = ("var_", "adj_", "wp_", "cond_", "trip_", "start_", "step_", "stop_",
                       "flag_", "tmp_", "acc_", "priv_", "has_", "consume_", "ret_", "atomic_",
                       "snap_", "rt_", "rep_", "saved_")


# Ends the name of a builtin's float32 copy (``wp_asin_f32``; backends/cpu_symbols.py).
FLOAT32_SUFFIX = "_f32"


def runtime_symbol(call) -> str:
    """The name generated code calls builtin ``call`` by (an ``ir.Call``; its derivative rule is
    ``adj_`` + that name): the float32 copy when every float it takes or returns is float32."""
    floats = [t for t in (call.type, *(a.type for a in call.args)) if dtypes.is_float(t)]
    if floats and all(t is dtypes.float32 for t in floats):
        return call.builtin.symbol + FLOAT32_SUFFIX
    return call.builtin.symbol


def local_name(user_name: str, scope_suffix: str = "") -> str:
    """Generated name of a user local; ``scope_suffix`` separates inlined function scopes."""
    name = user_name + scope_suffix
    if name in RESERVED or name.startswith(_GENERATED_PREFIXES) or name.startswith("_"):
        name = "u" + name + "_"
    return name


def temp_name(n: int) -> str:
    """A temporary of an expression tree, made by codegen."""
    return f"var_{n}"


def frontend_temp_name(n: int) -> str:
    """A local the frontend introduces (ternary results, view indices, function results)."""
    return f"tmp_{n}"


def saved_name(n: int) -> str:
    """A local holding a value the adjoint's replay overwrites outside loops, for the reverse
    sweep to restore (``codegen/forward.py``)."""
    return f"saved_{n}"


def adjoint_name(symbol: str) -> str:
    """Adjoint of a local or temporary: ``x`` → ``adj_x``, ``var_3`` → ``adj_3``."""
    if symbol.startswith("var_"):
        return "adj_" + symbol[4:]
    return "adj_" + symbol


def has_adjoint_flag(param_symbol: str) -> str:
    return "has_adj_" + param_symbol


def consume_flag(param_symbol: str) -> str:
    return "consume_" + param_symbol


def adjoint_array(param_symbol: str) -> str:
    return "adj_" + param_symbol


def replica(array: str) -> str:
    """Per-chunk copies of ``array`` that scatter sites add into (replicated parallel code)."""
    return "rep_" + array


def replica_view(array: str) -> str:
    """The copy of ``array`` that the current chunk's scatter sites add into."""
    return "rep_view_" + array


def forward_function(kernel: str) -> str:
    return f"{kernel}_forward"


def adjoint_function(kernel: str) -> str:
    return f"{kernel}_adjoint"


def pseudo_filename(module: str, kernel: str, direction: str, device: str = "cpu") -> str:
    return f"<difftape:{module}.{kernel}:{direction}:{device}>"
