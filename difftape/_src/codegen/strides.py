"""Whether LLVM should vectorize a kernel's thread loop with gathers where threads read and write
rows of 2-D (and higher) arrays.

A thread that reads ``q[i, k]`` steps through ``q`` by its row length, known only at run time.
LLVM's loop vectorizer then versions the loop on that stride being 1 ("memory access versioning":
the vectorized loop runs only if ``q.shape[1] == 1``), which a real row never is: the scalar loop
runs. Without the versioning it vectorizes such accesses with gathers and scatters. That pays in a
kernel with much arithmetic per row access (the benchmark's rigid chain: 8 joint angles a thread
read from ``q[i, k]``, then ~700 operations: forward 45 -> 10 ms, backward 72 -> 17.5 at 200k
robots on one core), and costs in a kernel that mostly moves rows (``y[i] = x[i, 0] * 2 +
x[i, 1]`` over 4M rows: 4.2 ms scalar, 16-21 ms with gathers, which keep the loads of a
streamed array from overlapping). ``gathers_pay`` decides per kernel by that ratio;
``backends/cpu_llvm.py`` compiles the kernel's module under the option it implies.

Calibration (one AMD EPYC core, float32 rows of 3 read per thread, then a chain of dependent
multiply-adds; scalar ms / gathered ms): 1.7 operations per access 4.6/10.6 (4M rows, streamed)
and 0.02/0.08 (32k, in cache); 5.7: 8.3/10.8 and 0.09/0.07; 11: 22.5/13.2 and 0.28/0.09; 22:
65/16 and 0.73/0.19.

A view that steps through a 1-D array (``x[::2]``, a column ``a[:, 0]``) has the same run-time
stride, and its forward stays scalar too; compiled without the versioning it vectorizes with
gathers, which pays wherever the forward computes something per element. On one AMD Zen 3 core
(AVX2), 1M threads over a stride-2 view, scalar ms -> gathered: ``sin(x) * x`` 14.6 -> 4.4
(warp-lang 9.1), ``exp(x) + z`` 7.1 -> 2.6, ``sqrt(x * x + 1)`` 1.9 -> 0.8, a cubic 0.90 ->
0.58, ``x * 2`` 0.89 -> 0.69. Contiguous arrays compile to the same code either way (their
stride is a constant), and so do adjoints: they add into the strided gradient, and ``exp``'s ran
8.0 -> 9.2 ms gathered. ``strided_forward_pays`` decides, by ``float_work`` per 1-D access.

Elements of vector and matrix arrays have a stride LLVM knows, so their loops are vectorized
without versioning: elements of up to 36 bytes (a float32 mat33, with ``cpu_llvm``'s
``-max-interleave-group-factor``) as wide loads and shuffles, wider ones with a gather per
component, which at LLVM's chosen width of 16 threads (8 for float64) ran 3-9x slower than the
scalar loop. ``wide_rows`` finds such kernels; they are vectorized 2 threads at a time, with plain
loads. Measured on one AMD EPYC core, forward / backward ms, LLVM's choice -> 2 threads (warp-lang):
1M ``m[i] * v[i]`` over mat44: 18.8 / 39.9 -> 5.0 / 14.4 (5.7 / 14.7); 1M ``determinant`` of a
mat33d: 16.0 / 34.9 -> 4.3 / 9.8 (4.3 / 9.1); 300k ``dot(v[i], m[i] * v[i])`` over spatial
matrices: 21 / 44 -> 2.5 / 6.0 (3.2 / 6.2; scalar 2.4 / 6.5, 4 threads 14 / 31, still gathering);
the same with a sine and an exponential of each component of ``m[i] * v[i]``: 19.7 / 42.5 ->
15.2 / 20.3 (13.9 / 24.1; scalar 25.3 / 33.7).
"""

from __future__ import annotations

from .. import composite, dtypes
from ..frontend import ir

# Arithmetic operations per row access from which the gathered loop is the faster (the two kernels
# above have 1 and 84).
WORK_PER_ROW_ACCESS = 8

# Weighted operations (``float_work``) per access of a 1-D array from which a forward over
# strided views pays for gathers: measured everywhere from 0.5 on (Zen 3); a margin for wider
# gathers (AVX-512 hosts), where kernels that only move data may not gain.
WORK_PER_STRIDED_ACCESS = 2

# Builtins ``float_work`` counts as one operation; any other counts as ``CALL_WORK``.
ARITHMETIC = frozenset({"add", "sub", "mul", "neg", "pos", "abs", "min", "max", "where"})
CALL_WORK = 8

# Bytes of the widest vector or matrix element LLVM still loads as one interleaved group (a float32
# mat33); wider ones (mat44, mat33d, transformd, spatial matrices) it gathers component by
# component.
WIDEST_INTERLEAVED = 36


def _row_access(array: ir.ArrayRef | None, indices: tuple[ir.Expr, ...]) -> bool:
    """An access whose leading indices vary (not constants): its address steps by a row."""
    if array is None or array.ndim < 2:
        return False
    return any(not isinstance(e, ir.Const) for e in indices[:array.ndim - 1])


def counts(body: list[ir.Stmt]) -> tuple[int, int]:
    """(row accesses, arithmetic operations) in the statements of ``body``, each counted once
    however often a loop runs it."""
    rows = work = 0
    for stmt in ir.walk_stmts(body):
        if isinstance(stmt, (ir.Store, ir.Atomic)) and _row_access(stmt.array, stmt.indices):
            rows += 1
        for root in ir.statement_exprs(stmt):
            for e in ir.walk_expr(root):
                if isinstance(e, ir.Load) and _row_access(e.array, e.indices):
                    rows += 1
                elif isinstance(e, ir.Call):
                    work += 1
    return rows, work


def gathers_pay(body: list[ir.Stmt]) -> bool:
    """Whether the kernel has row accesses and enough arithmetic per access that its thread loop
    should be vectorized with gathers and scatters rather than left scalar."""
    rows, work = counts(body)
    return rows > 0 and work >= WORK_PER_ROW_ACCESS * rows


def float_work(body: list[ir.Stmt], arithmetic: float = 1.0) -> float:
    """A rough count of the floating-point work in ``body``: an arithmetic operation counts
    ``arithmetic``, any other builtin (division, roots, transcendentals) ``CALL_WORK``."""
    work = 0.0
    for s in ir.walk_stmts(body):
        for root in ir.statement_exprs(s):
            for e in ir.walk_expr(root):
                if isinstance(e, ir.Call) and dtypes.is_float(e.type):
                    work += arithmetic if e.builtin.key in ARITHMETIC else CALL_WORK
    return work


def strided_forward_pays(body: list[ir.Stmt]) -> bool:
    """Whether the forward should gather where its 1-D arrays of scalars are strided views: it
    reads or writes such arrays at indices that vary, with ``WORK_PER_STRIDED_ACCESS`` per
    access, and has no row accesses (``gathers_pay`` decides for those)."""
    rows, _ = counts(body)
    accesses = 0
    for stmt in ir.walk_stmts(body):
        if isinstance(stmt, (ir.Store, ir.Atomic)) and _element_access(stmt.array, stmt.indices):
            accesses += 1
        for root in ir.statement_exprs(stmt):
            accesses += sum(isinstance(e, ir.Load) and _element_access(e.array, e.indices)
                            for e in ir.walk_expr(root))
    return rows == 0 and accesses > 0 and float_work(body) >= WORK_PER_STRIDED_ACCESS * accesses


def _element_access(array: ir.ArrayRef | None, indices: tuple[ir.Expr, ...]) -> bool:
    """An access of a 1-D array of scalars at an index that varies."""
    return (array is not None and array.ndim == 1 and not composite.is_composite(array.dtype)
            and not isinstance(indices[0], ir.Const))


def wide_rows(body: list[ir.Stmt]) -> bool:
    """Whether threads access vector or matrix elements wider than ``WIDEST_INTERLEAVED`` bytes
    at indices that vary (see the module's docstring)."""
    for stmt in ir.walk_stmts(body):
        if isinstance(stmt, (ir.Store, ir.Atomic)) and _wide(stmt.array, stmt.indices):
            return True
        for root in ir.statement_exprs(stmt):
            if any(isinstance(e, ir.Load) and _wide(e.array, e.indices)
                   for e in ir.walk_expr(root)):
                return True
    return False


def _wide(array: ir.ArrayRef | None, indices: tuple[ir.Expr, ...]) -> bool:
    return (array is not None and composite.is_composite(array.dtype)
            and _bytes(array.dtype) > WIDEST_INTERLEAVED
            and any(not isinstance(e, ir.Const) for e in indices[:array.ndim]))


def stores_interleaved_rows(body: list[ir.Stmt]) -> bool:
    """Whether threads store (plainly) vector or matrix elements of more than 32 bytes that LLVM
    still interleaves (a float32 mat33). 16 threads at a time, the 144 floats of such a group
    take long shuffles before the stores; 4 at a time the forward of 1M ``transpose(m) * m``
    took 3.1-3.9 ms against 4.5-5.2 (warp-lang 2.9-3.6, at the memory's bandwidth). Forward
    programs only: the elastic-energy workload's adjoint (it stores the gradient of each mat33)
    ran slower 4 threads wide, 5.7 -> 6.6 ms."""
    return any(isinstance(s, ir.Store) and s.array is not None
               and composite.is_composite(s.array.dtype)
               and 32 < _bytes(s.array.dtype) <= WIDEST_INTERLEAVED
               for s in ir.walk_stmts(body))


def _bytes(t: type) -> int:
    return t._length * dtypes.scalar_of(t).bits // 8
