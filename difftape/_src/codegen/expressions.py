"""Spell IR expressions as generated Python, and back-propagate an adjoint through them.

Forward: inactive sub-trees are written inline; active calls and loads get a temporary
(``var_<n>``) so the reverse sweep can pass their values to derivative rules. Reverse: an
expression tree is walked from its root, calling each builtin's ``adj_`` rule and accumulating
into locals (``adj_x += …``) and array adjoints (through ``accumulate``).
"""

from __future__ import annotations

import re
import sys
from typing import NamedTuple

import numpy as np

from .. import dtypes
from ..frontend import ir
from . import naming
from .activity import Analysis
from .emitter import ConstantPool, SourceBuilder, cast, plus
from .inline_rules import FLOAT32_ONLY, INLINE_NEEDS, INLINE_RULES
from .interchange import float32_product
from .offsets import constant, thread_offset
from .signs import (data_locals, gathered_locals, is_nonnegative, nonnegative_locals,
                    reads_arrays)
from .strips import STRIP, Strips

# Lane arrays of privates live on the stack of every call, pool threads' included: past this
# many bytes of them, further privates stay plain locals.
MAX_LANE_BYTES = 64 * 1024

# Operators emitted inline when their Python meaning equals the builtin's (float + - * /).
_INLINE_FLOAT = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
WIDE_PREFIX = "rt_w_"  # a widened local's float64 name (``interchange.widened``)
WIDE_ONE = "rt_one"  # 1.0 wherever a widened iteration runs (``cpu_loops.widening_setup``)
_INLINE_INT = {"add": "+", "sub": "-", "mul": "*", "bit_and": "&", "bit_or": "|",
               "bit_xor": "^", "lshift": "<<", "rshift": ">>"}
# Float32 sine and cosine are components of rt_sincos(x) (see inline_rules.FLOAT32_ONLY).
_SINCOS = {"sin": 0, "cos": 1}
_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


# rt_load_pair splits a 64-bit word into its low (first) and high (second) element.
_LITTLE_ENDIAN = sys.byteorder == "little"

_NEGATED = re.compile(r"\(-(\w+)\)")  # a negated name, as the sub and neg rules spell it


class _PlainAdd(NamedTuple):
    """An add into one component of a replica view's row, as ``out.lines[line]`` holds it."""
    out: SourceBuilder
    level: int
    line: int
    view: str
    array: str
    row: tuple[str, ...]  # the index codes before the component's
    component: int
    sign: str
    value: str
    guard: str


class ExprCoder:
    """Shared by the forward and adjoint writers: naming of temporaries and expression spelling."""

    def __init__(self, kernel: ir.KernelIR, analysis: Analysis, debug: bool = False):
        self.kernel = kernel
        self.analysis = analysis
        self.debug = debug  # bounds-check every array index (mode="debug")
        # Indices computed from these need no wraparound (signs.py).
        self.nonnegative = nonnegative_locals(kernel)
        self.gathered = gathered_locals(kernel)  # integers read from arrays: paired row reads
        self.data = data_locals(kernel)  # any local computed from array elements
        # The values of the body's single-assigned locals (``offsets.definitions``), set while
        # writing a thread body of a launch of ``rank`` dimensions: an index that is a thread
        # index plus a constant is then spelled from the int64 loop counter (``thread_index``).
        self.thread_defs: dict[str, ir.Expr] | None = None
        self.rank = 1
        # (thread index, k) while writing a split's interior copy (``splits.py``), where that
        # index is >= k: ``i - 1`` is then >= 0 for k >= 1.
        self.thread_floor: tuple[str, int] | None = None
        self.site: ir.Stmt | None = None  # statement being emitted, for debug messages
        self.declared: dict[str, type] = {}
        self.symbols: set[str] = set()  # builtin symbols the module must import
        self.runtime: set[str] = set()  # runtime helpers the module must import
        self.rules: set[str] = set()  # builtin symbols whose derivative rule is called
        # Temporaries made while writing the reverse sweep are assigned right before their use
        # in the same block, so only replay temporaries need a zero definition up front.
        self.in_reverse = False
        self.constants = ConstantPool()
        # In straight-line reverse code an adjoint accumulator is a chain of single assignments
        # (acc_7 = acc_3 + g); Numba's SSA pass is quadratic in multiply-assigned variables.
        # Inside blocks (depth > 0) accumulators are updated in place under their own name.
        self.versions: dict[str, str] = {}
        self.depth = 0
        # An accumulator known to hold zero gets its first add as a plain assignment
        # (acc_7 = g, not acc_7 = adj_x + g; the sum's sign of zero aside, the same value):
        # one whose version is a typed zero (``take``), or, with ``fresh`` (the reverse sweep
        # of a thread body whose accumulators were just zeroed), one nothing has touched yet.
        self.fresh = False
        self.touched: set[str] = set()
        self.zeros: set[str] = set()
        # Thread-invariant accumulation sites (a loss at index 0, a shared coefficient's
        # adjoint) add into a local flushed once per chunk with one atomic, instead of every
        # thread contending on one address.
        self.privates: list[tuple[str, str, str, str, type]] = []  # name, array, index, guard, t
        # With ``lanes``, a float private is a strip-long array indexed by the thread's lane
        # (``rt_lane``): consecutive threads add into different lanes, so the adds no longer
        # wait on each other and the strip loop vectorizes (one core, a 4M-element loss sum:
        # 4.3 ms as one chain of adds, 1.5 ms in lanes).
        self.lanes = False
        self.laned: set[str] = set()  # the privates that are lane arrays
        self.private_ops: dict[str, str] = {}  # privates taking "min" or "max" (others add)
        # Without atomics, scatter sites add into a per-chunk view of their array
        # (``rep_view_<array>``, a function argument); the launcher sums the views in.
        self.replicas: dict[str, str] = {}  # array's generated name → its parameter symbol
        self.replica_sites: dict[str, list[tuple[ir.Expr, ...]]] = {}  # array → site indices
        self.strips: Strips | None = None  # set while writing a strip-mined body
        # The last plain add into a component of a replica view (``_paired_with_previous``).
        self.previous_add: _PlainAdd | None = None
        # While writing the widened version of an interchanged loop (``interchange.widened``):
        # these locals live as float64 ``rt_w_<name>``, and the products they are factors of
        # are taken in float64.
        self.wide: frozenset[str] = frozenset()
        self.wide_rules = False  # the same for the products of derivative rules
        self.counter = 0

    def replica_add(self, array: str, ref: ir.ArrayRef, indices: tuple[ir.Expr, ...],
                    sign: str, value: str, guard: str, out: SourceBuilder, temps=None) -> None:
        """``value`` added (``sign`` "+" or "-") into the chunk's view of ``array`` (``ref``'s
        array or its adjoint) at ``indices``, under ``if guard:``; deferred to the end of the
        strip when the body is strip-mined and the site qualifies (``strips.py``)."""
        self.replicas.setdefault(array, ref.param)
        self.replica_sites.setdefault(array, []).append(indices)
        negated = _NEGATED.fullmatch(value)
        if negated:  # x + (-v) is x - v exactly; strips then buffer v once for both signs
            sign, value = ("-" if sign == "+" else "+"), negated[1]
        view = naming.replica_view(array)
        codes = self.index_codes(indices, temps, ref)
        element = dtypes.scalar_of(ref.dtype)
        if self.strips is not None and dtypes.is_float(element) and (
                out.level == 0 or self.strips.runs_once(self.site)):
            element = dtypes.float32 if element is dtypes.float16 else element
            lines = self.strips.defer(view, indices, codes, self.spells_unsigned, sign, value,
                                      guard, element.__name__, self.site, out.level)
            if lines is not None:
                for line in lines:
                    out.line(line)
                return
        if self.strips is not None:
            self.strips.kept = True
        if self._paired_with_previous(out, view, ref, indices, codes, sign, value, guard):
            return
        add = f"{view}[{', '.join(codes)}] {sign}= {value}"
        out.line(f"if {guard}: {add}" if guard else add)
        component = constant(indices[-1]) if len(indices) > ref.ndim else None
        self.previous_add = None if component is None else _PlainAdd(
            out, out.level, len(out.lines) - 1, view, ref.param, tuple(codes[:-1]), component,
            sign, value, guard)

    def _paired_with_previous(self, out: SourceBuilder, view: str, ref: ir.ArrayRef,
                              indices: tuple[ir.Expr, ...], codes: list[str], sign: str,
                              value: str, guard: str) -> bool:
        """Whether the add of ``value`` into component ``c`` of a row at a data-dependent index
        (a grid cell, ``f[si[s]]``) joined the add into component ``c +- 1`` of the same row
        that ``out`` holds last (comments aside): one two-lane load, add and store instead of
        two of each (``rt_add_pair``). Rows indexed by the thread stay apart: LLVM vectorizes
        those as interleaved groups. The later value may be computed before the earlier add:
        a replica's array is one the kernel (or its adjoint) never reads
        (``activity.scatter_sites``)."""
        last, self.previous_add = self.previous_add, None
        component = constant(indices[-1]) if len(indices) > ref.ndim else None
        if (last is None or component is None or last.out is not out or last.level != out.level
                or (last.view, last.array, last.row, last.sign, last.guard)
                != (view, ref.param, tuple(codes[:-1]), sign, guard)
                or abs(component - last.component) != 1
                or not any(reads_arrays(i, self.data) for i in indices[:ref.ndim])
                or not all(text.lstrip().startswith("#") for text in out.lines[last.line + 1:])):
            return False
        low, values = ((last.component, (last.value, value)) if last.component < component
                       else (component, (value, last.value)))
        helper = "rt_add_pair" if sign == "+" else "rt_sub_pair"
        self.runtime.add(helper)
        row = ", ".join((*codes[:-1], self.constants.name(low, dtypes.uint64)))
        pair = f"{helper}({view}, ({row},), {values[0]}, {values[1]})"
        out.lines[last.line] = "    " * out.level + (f"if {guard}: {pair}" if guard else pair)
        return True

    def private(self, array: str, index: str, guard: str, t: type, op: str = "add") -> str:
        """The local that the chunk's adds (or, with ``op`` "min"/"max", extrema) into
        ``array[index]`` (thread-invariant) go to, as the body spells it: its name, or its lane
        of a lane array."""
        for name, a, i, _, _ in self.privates:
            if a == array and i == index and self.private_ops.get(name, "add") == op:
                break
        else:
            self.counter += 1
            name = f"priv_{self.counter}"
            self.privates.append((name, array, index, guard, t))
            if op != "add":
                self.private_ops[name] = op
            lane_bytes = sum(STRIP * np.dtype(u._np).itemsize for n, _, _, _, u in self.privates
                             if n in self.laned)
            if self.lanes and t in (dtypes.float32, dtypes.float64) and (
                    lane_bytes + STRIP * np.dtype(t._np).itemsize <= MAX_LANE_BYTES):
                self.laned.add(name)
        # Unsigned: Numba's wraparound of a signed index kept the lane adds scalar (3.4 ms).
        return f"{name}[uint64(rt_lane)]" if name in self.laned else name

    def declare(self, name: str, t: type) -> str:
        self.declared.setdefault(name, t)
        return name

    def new_temp(self, t: type) -> str:
        self.counter += 1
        name = naming.temp_name(self.counter)
        return name if self.in_reverse else self.declare(name, t)

    # ------------------------------------------------------------ spelling

    def load_code(self, ref: ir.ArrayRef, indices: tuple[ir.Expr, ...], temps=None) -> str:
        # float16 arrays reach kernels as float32 staging copies, so no conversion here.
        text = self.read_code(ref.param, ref, indices, temps)
        if ref.adjoint:  # an adjoint buffer read in a custom gradient: 0 when there is none
            return f"({text} if has_{ref.param} else {self.zero(dtypes.scalar_of(ref.dtype))})"
        return text

    def read_code(self, name: str, ref: ir.ArrayRef, indices: tuple[ir.Expr, ...],
                  temps=None) -> str:
        """A read of element ``indices`` of array ``name``, which is ``ref`` or its adjoint."""
        lane = self.paired_lane(ref, indices)
        if lane is None:
            return f"{name}[{self.index_code(indices, temps, ref)}]"
        self.runtime.add("rt_load_pair")
        codes = self.index_codes(indices[:-1], temps)
        codes.append(self.constants.name(constant(indices[-1]) - lane, dtypes.uint64))
        return f"rt_load_pair({name}, ({', '.join(codes)},))[{lane}]"

    def paired_lane(self, ref: ir.ArrayRef, indices: tuple[ir.Expr, ...]) -> int | None:
        """The lane of ``rt_load_pair`` that reads ``ref[indices]``, or None for a plain read.

        Components 2k and 2k + 1 of a float32 vector or matrix element read through a loaded
        row index (``x[j]`` with ``j = sj[s]``) are spelled as one pair read: in a vectorized
        thread loop, one 64-bit gather instead of two 32-bit ones (a vec3: two gathers instead
        of three). Rows indexed by the thread keep plain reads, which LLVM vectorizes as
        interleaved loads; a component without a partner (a vec3's z) stays alone."""
        shape = getattr(ref.dtype, "_shape", None)
        if (self.debug or ref.adjoint or not _LITTLE_ENDIAN or not shape
                or dtypes.scalar_of(ref.dtype) is not dtypes.float32
                or len(indices) != ref.ndim + len(shape)):
            return None
        component = constant(indices[-1])
        if component is None or component < 0:
            return None
        lane = component % 2
        if component - lane + 1 >= shape[-1]:
            return None
        if not any(reads_arrays(i, self.gathered) for i in indices[:ref.ndim]):
            return None
        return lane

    def index_code(self, indices: tuple[ir.Expr, ...], temps=None,
                   ref: ir.ArrayRef | None = None) -> str:
        return ", ".join(self.index_codes(indices, temps, ref))

    def index_codes(self, indices: tuple[ir.Expr, ...], temps=None,
                    ref: ir.ArrayRef | None = None) -> list[str]:
        codes = [self.code(i, temps) for i in indices]
        if not self.debug:
            codes = [self.unsigned(i, c) for i, c in zip(indices, codes)]
        elif ref is not None:
            site = self.site
            where = (f"{self.kernel.name}|{site.file if site else ''}|{site.line if site else 0}|"
                     f"{site.text if site else ''}|{ref.param}")
            self.runtime.add("rt_check_index")
            codes = [f"rt_check_index({c}, {ref.param}.shape[{k}], {k}, {where!r})"
                     for k, c in enumerate(codes)]
        return codes

    def unsigned(self, index: ir.Expr, code: str) -> str:
        """``code`` as an unsigned index when ``spells_unsigned(index)``."""
        if isinstance(index, ir.Const) and isinstance(index.value, int) and index.value >= 0:
            # A typed module constant, not a cast call: each call costs Numba typing and
            # lowering time, and vector components are read by constant index everywhere.
            return self.constants.name(index.value, dtypes.uint64)
        if self.spells_unsigned(index):
            return f"uint64({self.thread_index(index) or code})"
        return code

    def spells_unsigned(self, index: ir.Expr) -> bool:
        """Whether ``index`` (signed) is written unsigned outside debug mode, so that Numba
        skips its negative-index wraparound (``signs.py``): when it is provably >= 0 (LLVM
        then sees consecutive accesses), or computed from array elements (a gather or scatter
        index)."""
        return getattr(index.type, "kind", None) == "int" and (
            is_nonnegative(index, self.nonnegative) or reads_arrays(index, self.data)
            or self.above_floor(index))

    def above_floor(self, index: ir.Expr) -> bool:
        """Whether ``index`` is the thread index plus a constant that ``thread_floor`` keeps
        >= 0."""
        if self.thread_floor is None or self.thread_defs is None:
            return False
        var, floor = self.thread_floor
        offset = thread_offset(index, self.thread_defs, var)
        return offset is not None and floor + offset >= 0

    def thread_index(self, index: ir.Expr) -> str | None:
        """``index`` spelled from the thread loop's int64 counter (``t0 + 1`` for ``i + 1``)
        when it is a thread index plus a constant, else None. The int32 thread index is the
        counter truncated, and LLVM cannot tell that the truncation never wraps: loads and
        stores through it stay element by element in vectorized loops (one core, 4M float32
        sines: 21 -> 17.5 ms). The two spellings differ only past 2**31 threads."""
        if self.thread_defs is None:
            return None
        names = [(f"tid{k}", f"t{k}") for k in range(self.rank)]
        if self.rank == 1:
            names.append(("tidflat", "t0"))
        for var, counter in names:
            offset = thread_offset(index, self.thread_defs, var)
            if offset is not None:
                return counter + plus(offset)
        return None

    def code(self, e: ir.Expr, temps: dict | None = None) -> str:
        """Inline spelling of ``e``; nodes found in ``temps`` are replaced by their temporary."""
        if temps is not None and id(e) in temps:
            return temps[id(e)]
        if isinstance(e, ir.Const):
            return self.constants.name(e.value, e.type)
        if isinstance(e, ir.Var):
            return self.spelled(e.name)
        if isinstance(e, ir.Load):
            return self.load_code(e.array, e.indices, temps)
        if isinstance(e, ir.Shape):
            return f"int32({e.array.param}.shape[{e.axis}])"
        if isinstance(e, ir.CheckedIndex):
            return self.checked_index_code(e, self.code(e.value, temps))
        if isinstance(e, ir.Cast):
            return self.cast_code(self.code(e.value, temps), e.value.type, e.type)
        if isinstance(e, ir.BoolOp):
            joined = f" {e.op} ".join(self.code(v, temps) for v in e.values)
            return f"({joined})"
        if isinstance(e, ir.Call):
            if self.widens(e):
                return self.wide_product(e, lambda a: self.code(a, temps))
            return self.call_code(e, [self.code(a, temps) for a in e.args])
        raise TypeError(f"cannot spell {type(e).__name__}")

    def widens(self, e: ir.Call) -> bool:
        """Whether ``e`` is a float32 product in a widened iteration (``wide``): all are."""
        return bool(self.wide) and float32_product(e)

    def wide_product(self, e: ir.Call, spell) -> str:
        """``interchange.widened``: the float64 product of float32 values, rounded once. A
        widened local is a float64 already; other factors go through ``WIDE_ONE``: LLVM
        shrinks ``fptrunc(fpext(a) * fpext(b))`` back to a float32 multiply, but not a product
        with a float64 it cannot prove is 1."""
        left, right = (f"{WIDE_PREFIX}{a.name}" if isinstance(a, ir.Var) and a.name in self.wide
                       else spell(a) for a in e.args)
        if not any(isinstance(a, ir.Var) and a.name in self.wide for a in e.args):
            left = f"({left} * {WIDE_ONE})"
        return f"float32({left} * {right})"

    def spelled(self, name: str) -> str:
        """A local's value: a widened one's float64 rounded back (``wide``)."""
        return f"float32({WIDE_PREFIX}{name})" if name in self.wide else name

    def checked_index_code(self, e: ir.CheckedIndex, code: str) -> str:
        """A run-time component index: checked in debug mode, itself otherwise."""
        if not self.debug:
            return code
        self.runtime.add("rt_check_component")
        where = f"{self.kernel.name}|{e.file}|{e.line}|{e.text}|{e.what}"
        return f"rt_check_component({code}, {e.size}, {where!r})"

    def cast_code(self, code: str, source: type, target: type) -> str:
        if target is dtypes.bool_:
            return f"({code} != 0)"
        return cast(code, target)  # float → int truncates toward zero, as in C and Warp

    def call_code(self, call: ir.Call, args: list[str]) -> str:
        record = call.builtin
        key = record.key
        t = call.type
        if key in _COMPARE:
            return f"({args[0]} {_COMPARE[key]} {args[1]})"
        if key == "logical_not":
            return f"(not {args[0]})"
        if dtypes.is_float(t):
            if key in _INLINE_FLOAT:
                return f"({args[0]} {_INLINE_FLOAT[key]} {args[1]})"
            if key == "neg":
                return f"(-{args[0]})"
            if key == "pos":
                return args[0]
        if dtypes.is_int(t) and key in _INLINE_INT:
            return cast(f"{args[0]} {_INLINE_INT[key]} {args[1]}", t)
        if key == "where" and t is not dtypes.bool_:
            return cast(f"{args[1]} if {args[0]} else {args[2]}", t)
        symbol = naming.runtime_symbol(call)
        if key in _SINCOS and symbol.endswith(naming.FLOAT32_SUFFIX):
            self.runtime.add(FLOAT32_ONLY[key])
            return f"{FLOAT32_ONLY[key]}({args[0]})[{_SINCOS[key]}]"
        self.symbols.add(symbol)
        text = f"{symbol}({', '.join(args)})"
        return text if t is dtypes.bool_ else cast(text, t)

    # ------------------------------------------------------------ forward with temporaries

    def materialize(self, e: ir.Expr, out: SourceBuilder, temps: dict) -> str:
        """Emit temporaries for the active calls and loads of ``e``; return the spelling of ``e``."""
        if not self.analysis.expr_active(e):
            return self.code(e, temps)
        if isinstance(e, ir.Var):
            return self.spelled(e.name)
        if isinstance(e, ir.Cast):
            inner = self.materialize(e.value, out, temps)
            return self.cast_code(inner, e.value.type, e.type)
        if isinstance(e, ir.Load):
            text = self.load_code(e.array, e.indices, temps)
        elif isinstance(e, ir.Call) and self.widens(e):
            text = self.wide_product(e, lambda a: self.materialize(a, out, temps))
        elif isinstance(e, ir.Call):
            text = self.call_code(e, [self.materialize(a, out, temps) for a in e.args])
        else:
            return self.code(e, temps)
        name = temps.get(id(e)) or self.new_temp(e.type)
        temps[id(e)] = name
        out.line(f"{name} = {text}")
        return name

    def value_of(self, e: ir.Expr, out: SourceBuilder, temps: dict) -> str:
        """The spelling of ``e``'s value in the reverse sweep, computing it on first need only."""
        if id(e) in temps or isinstance(e, (ir.Var, ir.Const)):
            return self.code(e, temps)
        return self.materialize(e, out, temps)

    # ------------------------------------------------------------ reverse

    def backprop(self, e: ir.Expr, g: str, out: SourceBuilder, temps: dict, accumulate) -> None:
        """Add adjoint ``g`` (a spelled value of ``e``'s type) into everything ``e`` depends on."""
        if not self.analysis.expr_active(e):
            return
        if isinstance(e, ir.Var):
            adj = self.declare(naming.adjoint_name(e.name), e.type)
            self.add_to(adj, g, out)
        elif isinstance(e, ir.Load):
            accumulate(e.array, e.indices, g, out, temps)
        elif isinstance(e, ir.Cast):
            self.backprop(e.value, cast(g, e.value.type), out, temps, accumulate)
        elif isinstance(e, ir.Call):
            self.backprop_call(e, g, out, temps, accumulate)

    def backprop_call(self, call: ir.Call, g: str, out: SourceBuilder, temps: dict,
                      accumulate) -> None:
        record = call.builtin
        names = record.param_names
        wanted = [k for k, (n, a) in enumerate(zip(names, call.args))
                  if record.differentiable.get(n, False) and self.analysis.expr_active(a)]
        if not wanted:
            return
        if record.key in INLINE_RULES and dtypes.is_float(call.type) and (
                record.key not in FLOAT32_ONLY or
                naming.runtime_symbol(call).endswith(naming.FLOAT32_SUFFIX)):
            if record.key in FLOAT32_ONLY:
                self.runtime.add(FLOAT32_ONLY[record.key])
            needs = INLINE_NEEDS[record.key]
            args = [self.value_of(a, out, temps) if k in needs else None
                    for k, a in enumerate(call.args)]
            result = self.value_of(call, out, temps) if "ret" in needs else None
            contributions = INLINE_RULES[record.key](*args, result, g,
                                                     self.constants.name(0, call.type))
            if self.wide_rules and float32_product(call):
                contributions = tuple(None if c is None else f"float32(({g} * {WIDE_ONE}) * {x})"
                                      for c, x in zip(contributions, reversed(args)))
            for k in wanted:
                arg, c = call.args[k], contributions[k]
                # An array element's contribution is added once: it needs no name of its own
                # (and a negated one, ``(-g)``, is subtracted: replica_add).
                if c != g and not isinstance(arg, (ir.Var, ir.Load)):
                    name = self.new_temp(arg.type)
                    out.line(f"{name} = {c}")
                    c = name
                self.backprop(arg, c, out, temps, accumulate)
            return
        args = [self.value_of(a, out, temps) for a in call.args]
        result = self.value_of(call, out, temps)
        symbol = naming.runtime_symbol(call)
        self.symbols.add(symbol)
        self.rules.add(symbol)
        rule = self.new_temp(call.type)
        self.declared[rule] = tuple  # a tuple of contributions; declared on first assignment
        out.line(f"{rule} = adj_{symbol}({', '.join(args)}, {result}, {g})")
        for k in wanted:
            arg = call.args[k]
            if isinstance(arg, ir.Var):
                self.backprop(arg, cast(f"{rule}[{k}]", arg.type), out, temps, accumulate)
                continue
            contribution = self.new_temp(arg.type)
            out.line(f"{contribution} = {cast(f'{rule}[{k}]', arg.type)}")
            self.backprop(arg, contribution, out, temps, accumulate)

    def add_to(self, adj: str, g: str, out: SourceBuilder) -> None:
        if self.depth == 0:
            self.counter += 1
            version = f"acc_{self.counter}"
            current = self.versions.get(adj, adj)
            if current in self.zeros or (self.fresh and current == adj
                                         and adj not in self.touched):
                out.line(f"{version} = {g}")
            else:
                out.line(f"{version} = {current} + {g}")
            self.versions[adj] = version
        else:
            self.touched.add(adj)
            out.line(f"{adj} += {g}")

    def take(self, adj: str, t: type, out: SourceBuilder) -> str:
        """The value accumulated in ``adj``, which is reset to zero."""
        if self.depth == 0:
            value = self.versions.get(adj, adj)
            self.versions[adj] = zero = self.zero(t)
            self.zeros.add(zero)
            return value
        self.touched.add(adj)
        g = self.new_temp(t)
        out.line(f"{g} = {adj}; {adj} = {self.zero(t)}")
        return g

    def flush(self, out: SourceBuilder) -> None:
        """Give every accumulator its own name back (before code enters a block)."""
        for adj, version in self.versions.items():
            if version != adj:
                out.line(f"{adj} = {version}")
                self.touched.add(adj)
        self.versions.clear()

    def declarations(self, out: SourceBuilder, names: dict[str, type]) -> None:
        """Typed zero initialisation of locals, so every path defines every name."""
        for name, t in names.items():
            if t is tuple or t is str:
                continue
            out.line(f"{name} = {self.zero(t)}")

    def zero(self, t: type) -> str:
        return self.constants.name(False if t is dtypes.bool_ else 0, t)
