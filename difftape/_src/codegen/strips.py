"""Strip-mined innermost loops whose neighbour adds are deferred, so that both halves vectorize.

A stencil's adjoint adds into its neighbours: thread ``j`` adds into elements ``j - 1``, ``j`` and
``j + 1`` of a row, and thread ``j + 1`` adds into ``j``, ``j + 1`` and ``j + 2``. LLVM must keep
those read-modify-writes in order, so it vectorizes nothing of the loop. Here the innermost
thread loop runs in strips of ``STRIP`` threads. A *deferred* site stores its value in a strip
buffer where it used to add it; after each strip, one loop per site adds the buffer into the
array. Each of those loops touches distinct elements, and the thread loop no longer writes the
array at all: both vectorize.

Every element receives exactly the same values; only the order of the additions changes, as it
does between chunks. A site is deferred when

- every scattered add of the body qualifies (one that stays keeps the loop from vectorizing);
- it runs once per thread: it is at the top level of the body, under no branch or loop;
- its array is touched by nothing but such adds in the whole body (the writer's direct
  replicas), and the launcher guarantees arrays do not overlap (``Variant.noalias``): moving
  the adds then changes no value the body reads;
- its element is a float scalar;
- its last index is the innermost thread index ``t`` plus a constant, and its other indices do
  not depend on ``t``: the flush loop recomputes the last index from ``t`` and reuses the others
  as captured in the strip's last thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..frontend import ir
from .emitter import plus
from .offsets import definitions, thread_offset
from .signs import bindings
from .splits import innermost_thread_index

STRIP = 512  # threads per strip: every buffer stays in L1 (2 KiB of float32)

# Builtins that compute their result from their arguments alone.
_PURE = frozenset({"add", "sub", "mul", "div", "floordiv", "mod", "min", "max", "clamp", "abs",
                   "neg", "pos", "sign", "bit_and", "bit_or", "bit_xor", "lshift", "rshift",
                   "where"})
# Values named like this are assigned once in a body written at top level (writer temporaries
# and accumulator versions): two sites adding the same such name can share one buffer.
_SINGLE_USE_NAME = re.compile(r"(var|acc)_\d+")
_MAX_DEPTH = 32


def plan(kernel: ir.KernelIR, body: list[ir.Stmt], rank: int, single_assigned: set[str],
         views: set[str]) -> Strips | None:
    """The (so far empty) deferral plan of ``body`` in launches of ``rank`` dimensions, whose
    sites may defer their adds into ``views``; None when the body has no innermost thread index."""
    var = innermost_thread_index(kernel, rank)
    if var is None or not views:
        return None
    rebound = {name for s in ir.walk_stmts(body) for name, _ in bindings(s)}
    outer = {f"tid{k}" for k in range(rank - 1)} if rank > 1 else set()
    params = {p.symbol for p in kernel.flat_params() if not p.is_array}
    return Strips(var, f"t{rank - 1}", definitions(body, single_assigned), views,
                  outer | (params - rebound))


@dataclass
class DeferredAdd:
    view: str  # the array (generated-code name) the site adds into
    buffer: str
    fixed: list[str]  # locals holding every index but the last, captured in the body
    offset: int  # the last index is the thread index plus this
    unsigned: bool  # the original last index was proved >= 0 (signs.py)
    sign: str
    guard: str  # the site ran under ``if guard:`` (empty: always)


@dataclass
class Strips:
    """The deferred sites of one body, whose innermost thread loop variable is ``loop`` and
    thread index local ``var``; ``arrays``: the arrays whose sites may be deferred."""

    var: str
    loop: str
    defs: dict[str, ir.Expr]
    arrays: set[str]
    invariant_names: set[str]  # locals and parameters the body never rebinds, besides ``defs``
    adds: list[DeferredAdd] = field(default_factory=list)
    # A site that stayed in the body: its scattered add keeps the thread loop from vectorizing,
    # so deferring the others would gain nothing (the caller then writes the body unchanged).
    kept: bool = False
    buffers: dict[str, tuple[str, str]] = field(default_factory=dict)  # value → (name, dtype)
    counter: int = 0

    def defer(self, view: str, indices: tuple[ir.Expr, ...], codes: list[str], unsigned: bool,
              sign: str, value: str, guard: str, dtype: str) -> list[str] | None:
        """The lines replacing ``view[codes] sign= value`` at the top level of the body, or None
        when the site does not qualify. ``unsigned``: the last index's code is unsigned;
        ``dtype``: the element's numpy type name."""
        if view not in self.arrays:
            return None
        offset = thread_offset(indices[-1], self.defs, self.var)
        if offset is None or not all(self._independent(e, 0) for e in indices[:-1]):
            return None
        lines = []
        key = value if _SINGLE_USE_NAME.fullmatch(value) else None
        if key in self.buffers and self.buffers[key][1] == dtype:
            buffer = self.buffers[key][0]
        else:
            buffer = self._name("rt_buf")
            self.buffers[key if key is not None else buffer] = (buffer, dtype)
            lines.append(f"{buffer}[uint64({self.loop} - rt_strip)] = {value}")
        fixed = []
        for code in codes[:-1]:
            fixed.append(self._name("rt_fix"))
            lines.append(f"{fixed[-1]} = {code}")
        self.adds.append(DeferredAdd(view, buffer, fixed, offset, unsigned, sign, guard))
        return lines

    def allocations(self) -> list[str]:
        """The strip buffers, allocated once per call."""
        return [f"{name} = np.empty({STRIP}, np.{dtype})" for name, dtype in self.buffers.values()]

    def flush(self) -> list[str]:
        """After a strip ``rt_strip:rt_strip_end``: every deferred add, one loop each."""
        lines = []
        for add in self.adds:
            last = f"rt_strip + rt_s{plus(add.offset)}"
            last = f"uint64({last})" if add.unsigned else last
            target = f"{add.view}[{', '.join(add.fixed + [last])}]"
            indent = "    " if add.guard else ""
            if add.guard:
                lines.append(f"if {add.guard}:")
            lines.append(f"{indent}for rt_s in range(rt_strip_end - rt_strip):")
            lines.append(f"{indent}    {target} {add.sign}= {add.buffer}[uint64(rt_s)]")
        return lines

    def _name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}_{self.counter}"

    def _independent(self, e: ir.Expr, depth: int) -> bool:
        """Whether ``e`` has one value for all threads of the innermost loop."""
        if depth > _MAX_DEPTH:
            return False
        if isinstance(e, (ir.Const, ir.Shape)):
            return True
        if isinstance(e, ir.Var):
            if e.name == self.var or e.name == "tidflat":
                return False
            if e.name in self.defs:
                return self._independent(self.defs[e.name], depth + 1)
            return e.name in self.invariant_names
        if isinstance(e, ir.Cast):
            return self._independent(e.value, depth + 1)
        if isinstance(e, ir.Call) and e.builtin.key in _PURE:
            return all(self._independent(a, depth + 1) for a in e.args)
        return False
