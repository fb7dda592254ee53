"""Strip-mined innermost loops whose scattered adds are deferred, so that the thread loop
vectorizes.

A loop that adds into elements other threads may also add into cannot be vectorized: LLVM must
keep those read-modify-writes in order. A stencil's adjoint is the common case (thread ``j`` adds
into ``j - 1``, ``j`` and ``j + 1`` of a row, thread ``j + 1`` into ``j``, ``j + 1`` and
``j + 2``), and so are the random scatters of a mass-spring model (``f[i] += fs``). Here the
innermost thread loop runs in strips of ``STRIP`` threads. A *deferred* site stores its value in
a strip buffer where it used to add it; after each strip, flush loops add the buffers into the
arrays. The thread loop then writes none of those arrays, and vectorizes (with gathers where it
reads through loaded indices). Sites come in two kinds:

- *offset* sites: the thread index ``t`` plus a constant is the site's last index but for
  constant ones (vector components), and its other indices do not depend on ``t``. Each gets a
  flush loop of its own, which recomputes that index from ``t`` and reuses the others as
  captured in the strip's last thread; each such loop touches distinct elements, and vectorizes.
  Sites adding into components of one row at one offset share a loop (the row's components as
  one interleaved group, where a loop per component took a gather and a scatter per element).
- *scattered* sites, any other index: its non-constant indices are stored in buffers of their
  own, and one scalar loop flushes all such sites of a thread in the order the thread ran them
  (two consecutive sites adding into components ``c`` and ``c + 1`` of one row with one
  two-lane add, ``rt_add_pair``).

Values and indices that are single-assigned names share a buffer between the sites that use
them. Every element receives exactly the same values; only the order of the additions changes,
as it does between chunks. Sites are deferred when

- every scattered add of the body qualifies (one that stays keeps the loop from vectorizing);
- each runs at most once per thread: it is at the top level of the body or under branches only,
  in no loop. A site under a branch also sets its flag in a byte buffer, and its flush adds
  only where the flag is set (then clears it): a rope's segments, ``if i < n - 1: d = x[i + 1] -
  x[i]``, add into ``x[i + 1]`` and ``x[i]`` that way. An offset site's other indices, the same
  for every thread, are buffered under a branch and read at the strip's first thread that ran
  it: a cloth's ``if i > 0: acc += x[i - 1, j] - x[i, j]`` adds into row ``i - 1`` along the
  row (1000x1000 vec3, adjoint on one core: 51 -> 16 ms, warp-lang 27; scattered, it took 51);
- its array is touched by nothing but such adds in the whole body (the writer's direct
  replicas), and the launcher guarantees arrays do not overlap (``Variant.noalias``): moving
  the adds then changes no value the body reads;
- its elements are floats (scalars, or components of vectors and matrices);
- the thread loop has floating-point work to vectorize, and all buffers together fit in
  ``MAX_BUFFER_BYTES`` of stack (``Strips.pays``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes
from ..frontend import ir
from .emitter import plus
from .offsets import PURE, constant, definitions, independent, thread_offset
from .signs import assigned
from .splits import innermost_thread_index
from .strides import float_work

STRIP = 512  # threads per strip: every buffer stays in L1 (2-4 KiB)
PREFETCH = 16  # how many threads ahead the flush of scattered sites prefetches their rows
MIN_STRIPPED = 16  # shorter innermost loops run the body that adds in place
ARITHMETIC_WORK = 0.25  # an add or multiply's share of a builtin call's work, for ``pays``
# Buffers live on the stack of every call, chunks on pool threads included: kernels that
# would need more keep their adds in place.
MAX_BUFFER_BYTES = 256 * 1024

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# Writer temporaries and accumulator versions are assigned once in a body written at top level.
_SINGLE_USE_NAME = re.compile(r"(var|acc)_\d+")
_MAX_DEPTH = 32


def plan(kernel: ir.KernelIR, body: list[ir.Stmt], rank: int, single_assigned: set[str],
         views: set[str]) -> Strips | None:
    """The (so far empty) deferral plan of ``body`` in launches of ``rank`` dimensions, whose
    sites may defer their adds into ``views``; None when the body has no innermost thread index."""
    var = innermost_thread_index(kernel, rank)
    if var is None or not views:
        return None
    rebound = assigned(body)
    outer = {f"tid{k}" for k in range(rank - 1)} if rank > 1 else set()
    params = {p.symbol for p in kernel.flat_params() if not p.is_array}
    read_only = {p.symbol for p in kernel.flat_params() if p.is_array} - kernel.written_arrays
    return Strips(var, f"t{rank - 1}", definitions(body, single_assigned), views,
                  outer | (params - rebound), read_only, _outside_loops(body))


def _outside_loops(body: list[ir.Stmt]) -> dict[int, tuple]:
    """The statements of ``body`` at its top level or in branches only (each runs at most once
    per thread), by ``id()``: the branches each is in, outermost first, as (if's id, 0 for its
    body or 1 for its else)."""
    found: dict[int, tuple] = {}
    pending = [(s, ()) for s in body]
    while pending:
        s, path = pending.pop()
        found[id(s)] = path
        if isinstance(s, ir.If):
            pending += [(t, path + ((id(s), 0),)) for t in s.body]
            pending += [(t, path + ((id(s), 1),)) for t in s.orelse]
    return found


@dataclass
class DeferredAdd:
    view: str  # the array (generated-code name) the site adds into
    buffer: str  # the values
    # Index codes in the flush loop: constants as they were; for an offset site, locals holding
    # the indices captured in the body and ``None`` where the thread's own index goes; for a
    # scattered site, reads of the index buffers.
    indices: list[str | None]
    offset: int | None  # the thread index plus this, at the None index (None: scattered site)
    unsigned: bool  # an offset site's thread index was proved >= 0 (signs.py)
    sign: str
    guard: str  # the site ran under ``if guard:`` (empty: always)
    last: int | None = None  # the last index, when it is a constant (a vector component)
    flag: str = ""  # a site under a branch: the buffer of flags set where it ran


@dataclass
class Strips:
    """The deferred sites of one body, whose innermost thread loop variable is ``loop`` and
    thread index local ``var``; ``arrays``: the arrays whose sites may be deferred."""

    var: str
    loop: str
    defs: dict[str, ir.Expr]
    arrays: set[str]
    invariant_names: set[str]  # locals and parameters the body never rebinds, besides ``defs``
    read_only: set[str] = field(default_factory=set)  # array parameters the body never writes
    outside_loops: dict[int, tuple] = field(default_factory=dict)  # see _outside_loops
    adds: list[DeferredAdd] = field(default_factory=list)
    buffers: dict[str, tuple[str, str]] = field(default_factory=dict)  # key → (name, dtype)
    # A site that stayed in the body: its scattered add keeps the thread loop from vectorizing,
    # so deferring the others would gain nothing (the caller then writes the body unchanged).
    kept: bool = False
    counter: int = 0
    flag_names: dict[tuple, str] = field(default_factory=dict)  # see _flag

    @property
    def flags(self) -> list[str]:
        """The flag buffers of sites under branches."""
        return list(self.flag_names.values())

    def defer(self, view: str, indices: tuple[ir.Expr, ...], codes: list[str],
              unsigned: Callable[[ir.Expr], bool], sign: str, value: str, guard: str,
              dtype: str, site: ir.Stmt | None = None, level: int = 0) -> list[str] | None:
        """The lines replacing ``view[codes] sign= value`` in the body, at its top level or in
        branches (``level``: how deep in the generated code; ``site``: the statement), or None
        when the site does not qualify. ``unsigned``: whether the writer spells an index
        unsigned (``ExprCoder.spells_unsigned``); ``dtype``: the element's numpy type name."""
        if view not in self.arrays:
            return None
        lines: list[str] = []
        flag = ""
        if level:  # its buffers hold values only where the flag is set: shared with none
            flag = self._flag(site, level, lines)
        buffer = self._buffer(value, dtype, lines, scope=None if level else "")
        fixed = [constant(e) is not None for e in indices]
        at = max((k for k, is_fixed in enumerate(fixed) if not is_fixed), default=None)
        offset = None if at is None else thread_offset(indices[at], self.defs, self.var)
        # Under a branch, an index that is the same for all threads but not a constant would be
        # captured where the branch ran, a value the thread loop hands out of itself only on
        # some iterations (then it does not vectorize): such an index goes to a buffer, and the
        # flush reads it at the strip's first thread that ran the branch (``first_ran``), the
        # same value for all that did (a cloth's ``if i > 0: f[i - 1, j] += ...``, adjoint).
        if offset is not None and all(fixed[k] or self._independent(indices[k], 0)
                                      for k in range(at)):
            flush_indices: list[str | None] = []
            for k, code in enumerate(codes):
                if k == at or fixed[k]:
                    flush_indices.append(None if k == at else code)
                elif level:
                    index = self._buffer(code, _index_dtype(indices[k], unsigned), lines,
                                         indices[k], flag)
                    flush_indices.append(f"{index}[uint64({first_ran(flag)})]")
                else:
                    flush_indices.append(self._name("rt_fix"))
                    lines.append(f"{flush_indices[-1]} = {code}")
        else:
            offset = None
            # An index spelled unsigned keeps that type in its buffer, so the flush loop reads
            # it back without Numba's wraparound.
            flush_indices = [
                code if fixed[k] else
                self._buffer(code, _index_dtype(indices[k], unsigned), lines, indices[k],
                             None if level else "") + "[uint64(rt_s)]"
                for k, code in enumerate(codes)]
        own_unsigned = offset is not None and unsigned(indices[at])
        self.adds.append(DeferredAdd(view, buffer, flush_indices, offset, own_unsigned, sign,
                                     guard, constant(indices[-1]) if indices else None, flag))
        return lines

    def runs_once(self, site: ir.Stmt | None) -> bool:
        """Whether ``site`` runs at most once per thread (top level, or in branches only)."""
        return site is not None and id(site) in self.outside_loops

    def _flag(self, site: ir.Stmt | None, level: int, lines: list[str]) -> str:
        """The flag buffer of sites that run where ``site`` (``level`` deep) does: one per
        branch of the kernel's ifs; one per statement where the code around its adds branches
        too (an atomic min's adjoint)."""
        path = self.outside_loops[id(site)]
        key = (path, id(site) if level != len(path) else None)
        flag = self.flag_names.get(key)
        if flag is None:
            flag = self.flag_names[key] = self._name("rt_flag")
        lines.append(f"{flag}[uint64({self.loop} - rt_strip)] = 1")
        return flag

    def pays(self, body: list[ir.Stmt]) -> bool:
        """Whether deferring what was deferred should speed ``body`` up. Offset sites always
        do (their flush loops vectorize too). Scattered ones cost a buffer store and load
        per value and index: a histogram's ``f[idx[i]] += x[i]`` ran 30% slower deferred (and
        still 10% with the prefetches), the same with ``sin(x[i]) * 2.0`` 2.5x faster,
        mass-spring's forces 20% (forward) and 2x (adjoint) faster. They need floating-point
        work in the thread loop that vectorizing speeds up: a division, root or other builtin
        counts 8, an add or multiply a quarter (scalar code overlaps those well, and the
        vectorized loop gathers the rows they read: sums of outer products over 6 gathered
        neighbours, backward 27 ms deferred, 17.5 in place), and two per scattered site are
        needed."""
        if self.kept or not self.adds:
            return False
        size = sum(STRIP * np.dtype(dtype).itemsize for _, dtype in self.buffers.values())
        if size > MAX_BUFFER_BYTES:
            return False
        scattered = sum(add.offset is None for add in self.adds)
        return scattered == 0 or float_work(body, arithmetic=ARITHMETIC_WORK) >= 2 * scattered

    def runtime(self) -> set[str]:
        """The runtime helpers (``cpu_runtime.py``) the buffers and flush loops use."""
        scattered = [add for add in self.adds if add.offset is None]
        helpers = {"rt_stack_array"} | ({"rt_prefetch"} if scattered else set()) | (
            {"rt_stack_zeros"} if self.flags else set())
        return helpers | {_pair_helper(group[0]) for group in _component_pairs(scattered)
                          if len(group) == 2}

    def allocations(self) -> list[str]:
        """The strip buffers, on the stack of each call."""
        return [f"{name} = rt_stack_array({STRIP}, np.{dtype})"
                for name, dtype in self.buffers.values()] + [
            f"{flag} = rt_stack_zeros({STRIP}, np.uint8, {STRIP})" for flag in self.flags]

    def flush(self) -> list[str]:
        """After a strip ``rt_strip:rt_strip_end``: a loop per row of offset sites, then one loop
        over the scattered sites in the order each thread ran them, then the flags cleared."""
        loop = "for rt_s in range(rt_strip_end - rt_strip):"
        lines = []
        offset_sites = [add for add in self.adds if add.offset is not None]
        searched = sorted({add.flag for add in offset_sites
                           if any(first_ran(add.flag) in code for code in add.indices if code)})
        for flag in searched:  # the strip's first thread that ran the branch, if any did
            first = first_ran(flag)
            lines += [f"{first} = rt_strip_end - rt_strip", loop,
                      f"    if {flag}[uint64(rt_s)]:", f"        {first} = rt_s", "        break"]
        for group in _row_groups(offset_sites):
            add = group[0]
            own = f"rt_strip + rt_s{plus(add.offset)}"
            own = f"uint64({own})" if add.unsigned else own
            body = [_add_line(a, [own if code is None else code for code in a.indices])
                    for a in group]
            if add.flag:
                body = [f"if {add.flag}[uint64(rt_s)]:"] + [f"    {line}" for line in body]
            block = [loop] + [f"    {line}" for line in body]
            if add.flag in searched:  # no thread ran it: its buffered indices hold nothing
                block = [f"if {first_ran(add.flag)} < rt_strip_end - rt_strip:"] + [
                    f"    {line}" for line in block]
            lines += [f"if {add.guard}:"] + [f"    {line}" for line in block] if add.guard \
                else block
        lines += self._scattered_flush()
        for flag in self.flags:  # ready for the next strip
            lines += [loop, f"    {flag}[uint64(rt_s)] = 0"]
        return _numbered(lines)

    def _scattered_flush(self) -> list[str]:
        """One loop over the scattered sites, in the order each thread ran them."""
        lines: list[str] = []
        scattered = [add for add in self.adds if add.offset is None]
        if not scattered:
            return lines
        guards = {add.guard for add in scattered}
        common = guards.pop() if len(guards) == 1 else ""
        indent = "    " if common else ""
        if common:
            lines.append(f"if {common}:")
        # Random rows miss the cache; their indices are known ahead, so the loop asks for the
        # rows PREFETCH threads ahead (mass-spring forces: 4.8 -> 3.4 ms per step). The last
        # PREFETCH threads run in a loop of their own, rather than behind a test in every
        # thread (with unsigned indices, 10% of the forces' forward).
        rows = {}  # one prefetch per row: sites that differ in constant indices only share it
        for add in scattered:
            if not add.flag:  # a flagged site's index buffers hold stale rows where it did not run
                rows.setdefault((add.view, *(code for code in add.indices if "rt_s" in code)),
                                add)
        adds = []
        for group in _component_pairs(scattered):
            add = group[0]
            if len(group) == 2:
                values = ", ".join(f"{a.buffer}[uint64(rt_s)]" for a in group)
                line = f"{_pair_helper(add)}({add.view}, ({', '.join(add.indices)},), {values})"
            else:
                line = _add_line(add, add.indices)
            own = add.guard and add.guard != common
            conditions = ([add.guard] if own else []) + (
                [f"{add.flag}[uint64(rt_s)]"] if add.flag else [])
            adds.append(f"{indent}    if {' and '.join(conditions)}: {line}" if conditions
                        else f"{indent}    {line}")
        lines.append(f"{indent}rt_ahead = max(rt_strip_end - rt_strip - {PREFETCH}, 0)")
        lines.append(f"{indent}for rt_s in range(rt_ahead):")
        for add in rows.values():
            later = [code.replace("[uint64(rt_s)]", f"[uint64(rt_s + {PREFETCH})]")
                     for code in add.indices]
            lines.append(f"{indent}    rt_prefetch({add.view}, ({', '.join(later)},))")
        lines += adds
        lines.append(f"{indent}for rt_s in range(rt_ahead, rt_strip_end - rt_strip):")
        lines += adds
        return lines

    def _buffer(self, code: str, dtype: str, lines: list[str], index: ir.Expr | None = None,
                scope: str | None = ""):
        """The buffer holding ``code``'s value per thread of the strip (``index``: the IR of an
        index code): shared with other sites of the same ``scope`` (a flag: sites under one
        branch; "": those at the top level; None: shared with none) when the code has one
        value all through a thread (names assigned once, and pure builtins of those)."""
        if scope is None:
            shared = False
        elif index is not None:
            shared = self._stable(index, 0)
        else:
            shared = _IDENTIFIER.fullmatch(code) is not None and (
                _SINGLE_USE_NAME.fullmatch(code) is not None or code in self.defs
                or code in self.invariant_names or code in (self.var, "tidflat"))
        key = f"{scope}:{dtype}:{code}"
        if shared and key in self.buffers:
            return self.buffers[key][0]
        buffer = self._name("rt_buf")
        self.buffers[key if shared else buffer] = (buffer, dtype)
        lines.append(f"{buffer}[uint64({self.loop} - rt_strip)] = {code}")
        return buffer

    def _name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}_{self.counter}"

    def _independent(self, e: ir.Expr, depth: int) -> bool:
        """Whether ``e`` has one value for all threads of the innermost loop."""
        return independent(e, self.defs, self.invariant_names, depth)

    def _stable(self, e: ir.Expr, depth: int) -> bool:
        """Whether ``e`` has one value all through one thread: computed by pure builtins from
        constants, shapes, locals assigned once, parameters never rebound, thread indices and
        elements of arrays the body never writes (``si[s]`` in ``x[si[s]]``)."""
        if depth > _MAX_DEPTH:
            return False
        if isinstance(e, (ir.Const, ir.Shape)):
            return True
        if isinstance(e, ir.Load):
            return (not e.array.adjoint and e.array.param in self.read_only
                    and all(self._stable(i, depth + 1) for i in e.indices))
        if isinstance(e, ir.Var):
            return e.name in self.defs or e.name in self.invariant_names \
                or e.name in (self.var, "tidflat")
        if isinstance(e, ir.Cast):
            return self._stable(e.value, depth + 1)
        if isinstance(e, ir.Call) and e.builtin.key in PURE:
            return all(self._stable(a, depth + 1) for a in e.args)
        return False


_LOOP_VARIABLE = re.compile(r"\brt_s\b")


def first_ran(flag: str) -> str:
    """The name of the strip's first thread (lane) whose ``flag`` is set, found by the flush."""
    return f"{flag}_first"


def _numbered(lines: list[str]) -> list[str]:
    """``lines`` with each flush loop's variable named apart (``rt_s1``, ``rt_s2``, ...): Numba's
    SSA pass makes one pass over the whole function per variable assigned more than once, and
    every loop assigns its variable."""
    out, number, depth = [], 0, None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if depth is not None and indent <= depth:
            depth = None
        if line.lstrip().startswith("for rt_s in "):
            number, depth = number + 1, indent
        out.append(_LOOP_VARIABLE.sub(f"rt_s{number}", line) if depth is not None else line)
    return out


def _component_pairs(scattered: list[DeferredAdd]) -> list[tuple[DeferredAdd, ...]]:
    """The scattered sites in order, sites that add into components ``c`` and ``c + 1`` of one
    row (a vector's x and y) paired: the flush adds both with one two-lane load, add and store
    (mass-spring forces: 5% of the forward). A site moves ahead to its partner past sites that
    add into other components of the same array, which can never be the same element (an
    adjoint adds into ``x[j]`` and ``x[i]`` component by component, ``z`` first): each element
    still gets the same additions in the same order."""
    pending = list(scattered)
    groups: list[tuple[DeferredAdd, ...]] = []
    while pending:
        a = pending.pop(0)
        for k, b in enumerate(pending):
            if _partners(a, b) and all(_distinct(s, b) for s in pending[:k]):
                del pending[k]
                groups.append((a, b) if b.last == a.last + 1 else (b, a))
                break
        else:
            groups.append((a,))
    return groups


def _distinct(a: DeferredAdd, b: DeferredAdd) -> bool:
    """Whether sites ``a`` and ``b`` never add into one element: other components of one array."""
    return (a.view == b.view and a.last is not None and b.last is not None
            and a.last != b.last)


def _partners(a: DeferredAdd, b: DeferredAdd) -> bool:
    return (a.last is not None and b.last is not None and abs(b.last - a.last) == 1
            and a.view == b.view and a.sign == b.sign and a.guard == b.guard
            and a.flag == b.flag and a.indices[:-1] == b.indices[:-1])


def _row_groups(offset_sites: list[DeferredAdd]) -> list[list[DeferredAdd]]:
    """The offset sites in order, each grouped with the later ones that add into the same row at
    the same offset (its other components), to be flushed by one loop. A site moves up to its
    group past sites of other arrays and of other components of its own, which never add into
    its elements: each element gets the same additions in the same order."""
    pending = list(offset_sites)
    groups: list[list[DeferredAdd]] = []
    while pending:
        group, passed = [pending.pop(0)], []
        for b in pending:
            if _same_row(group[0], b) and all(_never_same_element(s, b) for s in passed):
                group.append(b)
            else:
                passed.append(b)
        pending = passed
        groups.append(group)
    return groups


def _same_row(a: DeferredAdd, b: DeferredAdd) -> bool:
    return (a.view == b.view and a.offset == b.offset and a.unsigned == b.unsigned
            and a.guard == b.guard and a.flag == b.flag and a.indices[:-1] == b.indices[:-1])


def _never_same_element(a: DeferredAdd, b: DeferredAdd) -> bool:
    """Whether sites ``a`` and ``b`` never add into one element: other arrays (deferred arrays
    never overlap), or other components of one."""
    return a.view != b.view or _distinct(a, b)


def _pair_helper(add: DeferredAdd) -> str:
    """The runtime helper that flushes a pair of sites led by ``add``."""
    return "rt_add_pair" if add.sign == "+" else "rt_sub_pair"


def _index_dtype(index: ir.Expr, unsigned: Callable[[ir.Expr], bool]) -> str:
    """The type of a scattered site's index buffer."""
    kind = getattr(index.type, "kind", None)
    return "uint64" if kind == "uint" or unsigned(index) else "int64"


def _add_line(add: DeferredAdd, indices: list[str]) -> str:
    return f"{add.view}[{', '.join(indices)}] {add.sign}= {add.buffer}[uint64(rt_s)]"
