"""IR → the per-thread body of the forward kernel, and of the adjoint kernel's replay sweep.

The *primal* body is the user's computation with every side effect. The *replay* body runs in
the adjoint kernel: it performs no array stores or atomics, and it saves every value that later
code overwrites (locals assigned more than once or inside loops, branch conditions and trip
counts inside loops), so the reverse sweep can restore them exactly. Inside loops they go on a
per-thread stack; outside loops, where each save runs at most once per thread, into a local of
its own (``saved_<n>``). A push and a pop are four Numba operations where a copy is one, and
the stack pointer is one more local assigned many times, which Numba's SSA pass walks the whole
function for: a kernel of transform statements compiled 5-10% faster, and ran as fast.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import dtypes
from ..frontend import ir
from . import naming
from .activity import (SCATTER, UNIFORM, Analysis, classify_index, plain_add, plain_extremum,
                       thread_invariant)
from .emitter import SourceBuilder, cast
from .expressions import MAX_LANE_BYTES, WIDE_PREFIX, ExprCoder
from .interchange import ADJOINT_STRIP, parse_phase, stack_moves
from .strips import STRIP

# Values the integer stack holds exactly as int32 (half the memory traffic of int64, and twice
# the lanes where an interchanged adjoint's loop vectorizes).
_INT32_HOLDS = (dtypes.bool_, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.uint8,
                dtypes.uint16)

# Where an interchanged adjoint's loop was written: the per-thread code around it is split here.
PHASE_MARK = "# rt_phase"


class ForwardWriter(ExprCoder):
    """Writes primal and replay bodies; ``AdjointWriter`` extends it with the reverse sweep."""

    def __init__(self, kernel: ir.KernelIR, analysis: Analysis, parallel: bool,
                 debug: bool = False, replicate: tuple[dict, dict] | None = None):
        super().__init__(kernel, analysis, debug)
        self.parallel = parallel
        # Code without atomics: arrays with scatter sites (forward: symbol → all its sites
        # replicable; adjoint: primal symbols) take all their adds in per-chunk views.
        self.replicate = replicate is not None
        self.replicated: tuple[dict[str, bool], dict[str, bool]] = replicate or ({}, {})
        self.replay = False
        self.effects = True  # perform array stores and atomics (the primal forward only)
        self.push_sites = {"f": 0, "i": 0}  # every push emitted (the stacks' slack)
        self.pushed: set[str] = set()  # names of the values pushed
        # Per name, the locals its saves outside loops went to, the latest last: the reverse
        # sweep restores in the opposite order of the replay's saves (``reverse_If`` writes the
        # else branch's reverse before the body's), so each restore takes the latest.
        self.saves: dict[str, list[str]] = {}
        self.reverse_loops = 0  # loops around the reverse sweep code being written
        self.level_pushes = [{"f": 0, "i": 0}]  # pushes per loop nesting level
        self.stack_float = dtypes.float32  # float64 as soon as a float64 value is pushed
        self.stack_int = dtypes.int32  # int64 as soon as a value int32 cannot hold is pushed
        self.uses_fstack = False
        self.uses_istack = False
        self.stmt_temps: dict[int, dict] = {}  # statement id → its forward temporaries
        self.aux: dict[int, dict[str, str]] = {}  # statement id → names of cond/trip/start/step
        # An interchanged adjoint (``codegen/interchange.py``): ``swap_loop`` is written as a
        # ``PHASE_MARK`` in the per-thread code, its replay and reverse bodies go to
        # ``swap_parts``, and the stacks are laid out per strip (element ``top * ADJOINT_STRIP +
        # rt_lane``).
        self.swap_loop: ir.For | None = None
        self.swap_parts: dict = {}
        # The loops inside ``swap_loop`` that the strip's threads run inside too
        # (``interchange.pieces``): each is written as ``PHASE_MARK <key>`` in the loop's parts,
        # its own parts going to ``swap_parts["inner"][key]``.
        self.swap_inner: tuple[ir.For, ...] = ()
        # Locals the loop's replay keeps widened (``interchange.widened``): set on a second
        # writer, whose replay lines then stand in for the first's once the check finds one tiny.
        self.wide_replay: frozenset[str] = frozenset()
        # The same for the loop's reverse: its float32 products' rules take them in float64.
        self.wide_reverse = False
        # Locals with one value in all the threads that run side by side, lane by lane: the
        # loop's variable while one iteration of an interchanged loop is written (run by every
        # thread of a strip: the forward's loop body, the adjoint's loop reverse), the outer
        # thread indices of a multi-dimensional launch (a row's threads run in the innermost
        # loop). Adds at an index only these vary (``atomic_add(s, k, v)``, the gradient of
        # ``c[k]``, ``atomic_add(f, i, v)`` in row i) go to a lane array per site
        # (``loop_lane``), summed into the array after each iteration's or row's threads
        # (``cpu_loops``): (lane array, element type, the flush's lines).
        self.lane_same: frozenset[str] | None = None
        self.lane_index = "uint64(t0 - rt_strip)"
        self.lane_count = "rt_strip_end - rt_strip"  # lanes in use when a flush runs
        # (array, guard, index, scope) → lane
        self.loop_lanes: dict[tuple[str, str, str, int | None], str] = {}
        self.loop_lane_flushes: list[tuple[str, type, list[str]]] = []
        # The reverse of a loop inside an interchanged one (``swap_inner``) adds at an index its
        # variable picks through lanes of its own, summed after each of its iterations: its
        # key while it is written, and each lane's (None: the interchanged loop's).
        self.lane_scope: int | None = None
        self.lane_scopes: dict[str, int | None] = {}

    # ------------------------------------------------------------ stack

    # The stacks never grow at a push: each loop reserves room for all of its iterations before
    # it starts (a growth check per push keeps LLVM from optimising the loop: 5x slower), and
    # straight-line pushes fit in the slack every reservation adds (the number of push sites).

    def push(self, name: str, t: type, out: SourceBuilder) -> None:
        if name in self.analysis.unsaved:
            return
        if name.isidentifier():  # not an array element (restored into a temporary)
            self.pushed.add(name)
            if len(self.level_pushes) == 1 and self.swap_loop is None:
                # Outside loops (and not split into an interchanged adjoint's phases, which
                # run a strip of threads one phase after the other): a local of its own.
                saved = self.declare(naming.saved_name(self.counter_next()), t)
                self.saves.setdefault(name, []).append(saved)
                out.line(f"{saved} = {name}")
                return
        kind = "f" if dtypes.is_float(t) else "i"
        self.push_sites[kind] += 1
        self.level_pushes[-1][kind] += 1
        if kind == "f":
            self.uses_fstack = True
            if t is dtypes.float64:
                self.stack_float = dtypes.float64
        else:
            self.uses_istack = True
            if t not in _INT32_HOLDS:
                self.stack_int = dtypes.int64
        out.line(f"{kind}stack[{self.stack_slot(kind)}] = {self.spelled(name)}; {kind}top += 1")

    def stack_slot(self, kind: str) -> str:
        """The stack element at ``kind``'s top: per thread, or per strip lane when the adjoint
        is interchanged (the strip's threads then push side by side, which vectorizes)."""
        if self.swap_loop is None:
            return f"{kind}top"
        return f"uint64({kind}top * {ADJOINT_STRIP} + rt_lane)"

    def reserve(self, out: SourceBuilder, counts: dict, iterations: str | None) -> None:
        """Before a loop: room on the stacks for ``iterations`` times ``counts`` pushes."""
        for kind, n in counts.items():
            if n:
                self.runtime.add("rt_reserve")
                room = f"{iterations} * {n}" if iterations else str(n)
                out.line(f"if {kind}top + {room} + {kind}slack > {kind}stack.shape[0]: "
                         f"{kind}stack = rt_reserve({kind}stack, {kind}top + {room} + {kind}slack)")

    def loop_body(self, write) -> tuple[SourceBuilder, dict]:
        """Write a loop body into its own builder, counting the pushes made at its level."""
        self.level_pushes.append({"f": 0, "i": 0})
        body = write()
        return body, self.level_pushes.pop()

    def pop(self, name: str, t: type, out: SourceBuilder) -> None:
        if name in self.analysis.unsaved:
            return
        if self.reverse_loops == 0 and self.swap_loop is None and self.saves.get(name):
            out.line(f"{name} = {self.saves[name].pop()}")
            return
        kind = "f" if dtypes.is_float(t) else "i"
        slot = f"{kind}stack[{self.stack_slot(kind)}]"
        if kind == "f":
            out.line(f"ftop -= 1; {name} = {cast(slot, t)}")
        elif t is dtypes.bool_:
            out.line(f"itop -= 1; {name} = {slot} != 0")
        else:
            out.line(f"itop -= 1; {name} = {cast(slot, t)}")

    def type_of(self, name: str) -> type:
        if name in self.kernel.locals:
            return self.kernel.locals[name]
        param = self.analysis.params.get(name)
        if param is not None:
            return dtypes.float32 if param.dtype is dtypes.float16 else param.dtype
        return self.declared[name]

    # ------------------------------------------------------------ statements

    def write(self, stmts: list[ir.Stmt], out: SourceBuilder, replay: bool,
              effects: bool | None = None) -> None:
        """``replay``: save overwritten values for the reverse sweep; ``effects``: do array stores
        and atomics (default: only when not replaying)."""
        saved = self.replay, self.effects
        self.replay, self.effects = replay, (not replay) if effects is None else effects
        for s in stmts:
            self.statement(s, out)
        self.replay, self.effects = saved

    def statement(self, s: ir.Stmt, out: SourceBuilder) -> None:
        self.site = s
        out.comment(s.line, s.text)
        getattr(self, "forward_" + type(s).__name__)(s, out)

    def forward_Assign(self, s: ir.Assign, out: SourceBuilder) -> None:
        if self.replay:
            temps: dict = {}
            self.stmt_temps[id(s)] = temps
            if (isinstance(s.value, (ir.Load, ir.Call)) and self.analysis.expr_active(s.value)
                    and s.target in self.analysis.single_assigned
                    and s.target not in self.analysis.restored):
                # The value's own temporary is the local, which keeps it through the reverse
                # sweep: no copy (a fifth of a big adjoint's statements, each compiled by Numba).
                temps[id(s.value)] = s.target
            value = self.materialize(s.value, out, temps)
            if value == s.target:
                return
            if s.target in self.analysis.restored:
                self.push(s.target, self.type_of(s.target), out)
        else:
            value = self.code(s.value)
        target = f"{WIDE_PREFIX}{s.target}" if s.target in self.wide else s.target
        out.line(f"{target} = {value}")

    def forward_Store(self, s: ir.Store, out: SourceBuilder) -> None:
        if s.array.adjoint:  # custom gradients write adjoint buffers, when there is one
            value = self.code(s.value)
            out.line(f"if has_{s.array.param}: {s.array.param}[{self.index_code(s.indices)}] "
                     f"= {value}")
            return
        if not self.effects and not self.replay:
            return
        if self.replay:
            if self.replays_write(s):
                out.line(f"{self.saved_element(s, out)} = {self.code(s.value)}")
            return
        value = self.code(s.value)
        out.line(f"{s.array.param}[{self.index_code(s.indices, ref=s.array)}] = {value}")

    def replays_write(self, s: ir.Store | ir.Atomic) -> bool:
        """Whether the adjoint's replay performs write ``s``: a store or an add into an array
        the kernel also reads. The adjoint runs on a private copy of such an array taken
        before the launch, so later reads in the replay see the write, as they did."""
        return s.array.param in self.kernel.inplace_arrays and (
            isinstance(s, ir.Store) or s.op in ("add", "sub"))

    def saved_element(self, s: ir.Store | ir.Atomic, out: SourceBuilder) -> str:
        """The element replayed write ``s`` changes, its old value pushed for the reverse sweep
        to put back (``AdjointWriter.restore_element``)."""
        target = f"{s.array.param}[{self.index_code(s.indices, ref=s.array)}]"
        self.push(target, s.value.type, out)
        return target

    def forward_Atomic(self, s: ir.Atomic, out: SourceBuilder) -> None:
        t = s.value.type
        if s.array.adjoint:
            sign = "-" if s.op == "sub" else "+"
            out.line(f"if has_{s.array.param}: {s.array.param}[{self.index_code(s.indices)}] "
                     f"{sign}= {self.code(s.value)}")
            return
        if not self.effects and self.replay and self.replays_write(s):
            target = self.saved_element(s, out)
            if s.result:
                if s.result in self.analysis.restored:
                    self.push(s.result, t, out)
                out.line(f"{s.result} = {target}")
            out.line(f"{target} {'+' if s.op == 'add' else '-'}= {self.code(s.value)}")
            return
        if not self.effects:
            # Atomics are not replayed, so their return value is unknown here (Warp: garbage).
            if s.result:
                if s.result in self.analysis.restored:
                    self.push(s.result, t, out)
                out.line(f"{s.result} = {self.zero(t)}")
            return
        self.atomic(s, self.code(s.value), out)

    def atomic(self, s: ir.Atomic, value: str, out: SourceBuilder) -> None:
        """The primal forward's update of ``s``'s array by ``value`` (code)."""
        ref, t = s.array.param, s.value.type
        mode = classify_index(s.array, s.indices, self.kernel, self.analysis)
        target = f"{s.result} = " if s.result else ""
        plain = plain_add(s, self.kernel, self.analysis)
        sign = "+" if s.op == "add" else "-"
        if plain and self.loop_lane(s.array, s.indices, value if sign == "+" else f"(-{value})",
                                    "", out, lambda total, flush: self.atomic(
                                        _as_add(s), total, flush)):
            return
        idx = self.index_code(s.indices, ref=s.array)
        if self.replicated[0].get(ref) and plain:  # the array's adds go to the chunk's copy
            self.replica_add(ref, s.array, s.indices, sign, value, "", out)
            return
        if mode == UNIFORM and plain:
            out.line(f"{self.private(ref, idx, '', t)} {sign}= {value}")
            return
        if mode == UNIFORM and plain_extremum(s, self.kernel, self.analysis):
            slot = self.private(ref, idx, "", t, s.op)
            out.line(f"{slot} = {s.op}({slot}, {value})")
            return
        if self.parallel and mode in (SCATTER, UNIFORM):
            helper = f"rt_atomic_{s.op}"
            self.runtime.add(helper)
            compare = f"{self.code(s.compare)}, " if s.op == "cas" else ""
            out.line(f"{target}{helper}({ref}, ({idx},), {compare}{value})")
            return
        if s.op == "cas":
            old = s.result or self.new_temp(t)
            out.line(f"{old} = {ref}[{idx}]")
            out.line(f"if {old} == {self.code(s.compare)}: {ref}[{idx}] = {value}")
            return
        if s.op == "exch":
            if s.result:
                out.line(f"{s.result} = {ref}[{idx}]")
            out.line(f"{ref}[{idx}] = {value}")
            return
        if s.result:
            out.line(f"{s.result} = {ref}[{idx}]")
        if s.op in ("add", "sub"):
            out.line(f"{ref}[{idx}] {'+' if s.op == 'add' else '-'}= {value}")
        else:
            out.line(f"{ref}[{idx}] = {s.op}({ref}[{idx}], {value})")

    def loop_lane(self, ref: ir.ArrayRef, indices, value: str, guard: str, out: SourceBuilder,
                  add_total) -> bool:
        """Whether the add of ``value`` into ``ref``'s array (or its adjoint, in an adjoint) at
        ``indices`` went to the thread's lane of a lane array: an index the same in all the
        threads that run side by side (built from ``lane_same`` and thread-invariant values:
        ``c[k]`` in an interchanged loop, ``f[i]`` in row i). Added in place, every thread's
        add waited on the one before and kept the loop over them scalar: 1M threads of a
        64-term polynomial's coefficient adjoints took 112 ms against 33 without them.
        ``add_total(total, flush)`` writes the add of the iteration's sum into ``flush`` (the
        site's own way: a chunk's copy, an atomic, in place)."""
        if self.lane_same is None or classify_index(
                ref, indices, self.kernel, self.analysis) != SCATTER or not all(
                thread_invariant(e, self.analysis, self.lane_same) for e in indices):
            return False
        element = dtypes.scalar_of(ref.dtype)
        element = dtypes.float32 if element is dtypes.float16 else element
        key = (ref.param, guard, ", ".join(self.index_codes(indices, None, ref)),
               self.lane_scope)
        lane = self.loop_lanes.get(key)
        if lane is None and sum(STRIP * np.dtype(t._np).itemsize for _, t, _ in
                                [*self.loop_lane_flushes, (None, element, None)]) > MAX_LANE_BYTES:
            return False  # lane arrays live on the stack: past the budget, adds in place
        if lane is None:
            self.counter += 1
            lane = self.loop_lanes[key] = f"rt_loop_lane_{self.counter}"
            # The flush's add goes this site's own way, written now, outside any strip.
            flush, saved = SourceBuilder(), (self.lane_same, self.strips, self.previous_add)
            self.lane_same = self.strips = None
            add_total(f"rt_lane_flush({lane}, {self.lane_count})", flush)
            self.lane_same, self.strips, self.previous_add = saved
            self.loop_lane_flushes.append((lane, element, flush.lines))
            self.lane_scopes[lane] = self.lane_scope
            self.runtime.update(("rt_lane_flush", "rt_stack_zeros"))
        add = f"{lane}[{self.lane_index}] += {value}"
        out.line(f"if {guard}: {add}" if guard else add)
        return True

    def lane_flush_lines(self, scope: int | None = None) -> list[str]:
        """The sums of the lane arrays of ``scope`` (``lane_scope``) into their arrays."""
        return [line for lane, _, lines in self.loop_lane_flushes
                if self.lane_scopes[lane] == scope for line in lines]

    def forward_If(self, s: ir.If, out: SourceBuilder) -> None:
        if not self.replay:
            with out.block(f"if {self.code(s.cond)}:"):
                self.write(s.body, out, False)
            if s.orelse:
                with out.block("else:"):
                    self.write(s.orelse, out, False)
            return
        cond = self.declare(f"cond_{self.counter_next()}", dtypes.bool_)
        self.aux[id(s)] = {"cond": cond}
        out.line(f"{cond} = {self.code(s.cond)}")
        arms = []
        for stmts in (s.body, s.orelse):
            arm = SourceBuilder(out.level + 1)
            self.write(stmts, arm, True)
            arms.append(arm)
        moves = [stack_moves(parse_phase(arm.lines)) for arm in arms]
        if self.swap_loop is not None and None not in moves:
            self.aux[id(s)]["pads"] = pads = self.arm_pads(moves)
            for arm, pad in zip(arms, pads):
                for top, n in pad.items():
                    arm.line(f"{top} += {n}")
        for header, arm in zip((f"if {cond}:", "else:"), arms):
            if header == "else:" and not arm.lines:
                break
            with out.block(header):
                out.extend(arm)
        if self.analysis.is_in_loop(s):
            self.push(cond, dtypes.bool_, out)

    @staticmethod
    def arm_pads(moves: list[dict[str, int]]) -> list[dict[str, int]]:
        """The slots each arm of a branch skips on each stack so that both arms move its top
        alike, from how far they move it (``interchange.stack_moves``: branches inside are
        padded already): an interchanged adjoint's threads share the tops, and a thread whose
        arm pushes less leaves slots unused. Arms that run loops that push are not padded
        (and the adjoint is then not interchanged)."""
        most = {top: max(arm[top] for arm in moves) for top in moves[0]}
        return [{top: most[top] - arm[top] for top in arm if most[top] > arm[top]}
                for arm in moves]

    def counter_next(self) -> int:
        self.counter += 1
        return self.counter

    def exit_check(self, flags: tuple[str, ...], out: SourceBuilder) -> None:
        if flags:
            out.line(f"if {' or '.join(flags)}: break")

    def forward_For(self, s: ir.For, out: SourceBuilder) -> None:
        n = self.counter_next()
        counter = f"it_{n}"
        names = {k: self.declare(f"{k}_{n}", dtypes.int32) for k in ("start", "stop", "step")}
        bounds = {key: self.code(e) for key, e in (("start", s.start), ("stop", s.stop),
                                                    ("step", s.step))}
        inner = self.replay and any(s is t for t in self.swap_inner)
        # its bounds are set around the strip
        swapped = self.replay and s is self.swap_loop or inner
        for key, code in bounds.items() if not swapped else ():
            out.line(f"{names[key]} = {code}")
        start, stop, step = names["start"], names["stop"], names["step"]
        if s.reverse:
            # reversed(range(...)): iteration e takes the value start + (count - 1 - e) * step.
            names["count"] = self.declare(f"count_{n}", dtypes.int32)
            out.line(f"{names['count']} = int32(len(range({start}, {stop}, {step})))")
            header = f"for {counter} in range({names['count']} - 1, -1, -1):"
            value = f"int32({start} + {counter} * {step})"
        else:
            header = f"for {counter} in range({start}, {stop}, {step}):"
            value = f"int32({counter})"
        if not self.replay:
            with out.block(header):
                out.line(f"{s.var} = {value}")
                self.write(s.body, out, False)
                self.exit_check(s.exit_flags, out)
            return
        if inner:
            self.swapped_replay(s, counter, value, names, bounds, out, n)
            return
        if swapped:
            self.swapped_replay(s, counter, value, names, bounds, out)
            return
        trip = self.declare(f"trip_{n}", dtypes.int32)
        self.aux[id(s)] = {**names, "trip": trip}
        if s.var in self.analysis.restored:
            self.push(s.var, dtypes.int32, out)
        out.line(f"{trip} = int32(0)")

        def write_body() -> SourceBuilder:
            body = SourceBuilder(out.level + 1)
            body.line(f"{s.var} = {value}; {trip} += int32(1)")
            self.write(s.body, body, True)
            self.exit_check(s.exit_flags, body)
            return body

        body, counts = self.loop_body(write_body)
        self.reserve(out, counts, f"len(range({start}, {stop}, {step}))")
        if any(isinstance(t, (ir.For, ir.While)) for t in ir.walk_stmts(s.body)):
            # The loops inside reserve room for their own pushes, from where the stacks' tops
            # stand, taking the room reserved for this loop's later iterations: each iteration
            # reserves its own (as a while loop's do) or a branch that skips an inner loop in a
            # later iteration pushed past the stack's end.
            room = SourceBuilder(out.level + 1)
            self.reserve(room, counts, None)
            body.lines[1:1] = room.lines
        out.line(header)
        out.extend(body)
        if self.analysis.is_in_loop(s):
            for key in ("start", "step", "count") if s.reverse else ("start", "step"):
                self.push(names[key], dtypes.int32, out)
            self.push(trip, dtypes.int32, out)

    def swapped_replay(self, s: ir.For, counter: str, value: str, names: dict, bounds: dict,
                       out: SourceBuilder, inner: int | None = None) -> None:
        """The replay of an interchanged adjoint's loop: one iteration's body, kept apart for
        ``backends/cpu.py`` to run for every thread of a strip; the bounds (the same in every
        thread) are kept for the code around the strip's threads. The same for a loop inside
        it (``swap_inner``), under key ``inner``."""
        def write_body() -> SourceBuilder:
            body = SourceBuilder(0)
            body.line(f"{s.var} = {value}")
            self.wide = self.wide_replay
            self.write(s.body, body, True)
            self.wide = frozenset()
            return body

        body, _ = self.loop_body(write_body)
        parts = dict(names=names, bounds=bounds, counter=counter, replay=body.lines)
        if inner is None:
            self.aux[id(s)] = names
            self.swap_parts.update(parts)
            out.line(PHASE_MARK)
        else:
            self.aux[id(s)] = {**names, "inner": inner}
            self.swap_parts.setdefault("inner", {})[inner] = {**parts, "key": inner}
            out.line(f"{PHASE_MARK} {inner}")

    def forward_While(self, s: ir.While, out: SourceBuilder) -> None:
        if not self.replay:
            with out.block(f"while {self.code(s.cond)}:"):
                self.write(s.body, out, False)
                self.exit_check(s.exit_flags, out)
            return
        trip = self.declare(f"trip_{self.counter_next()}", dtypes.int32)
        self.aux[id(s)] = {"trip": trip}
        out.line(f"{trip} = int32(0)")

        def write_body() -> SourceBuilder:
            body = SourceBuilder(out.level + 1)
            body.line(f"{trip} += int32(1)")
            self.write(s.body, body, True)
            self.exit_check(s.exit_flags, body)
            return body

        body, counts = self.loop_body(write_body)
        out.line(f"while {self.code(s.cond)}:")
        room = SourceBuilder(out.level + 1)
        self.reserve(room, counts, None)  # the trip count is unknown: reserve every iteration
        out.extend(room)
        out.extend(body)
        if self.analysis.is_in_loop(s):
            self.push(trip, dtypes.int32, out)

    def forward_Print(self, s: ir.Print, out: SourceBuilder) -> None:
        if self.replay:
            return
        if s.c_format is not None:
            self.runtime.add("rt_printf")
            values = "".join(f"{self.code(v)}, " for v in s.values)
            out.line(f"rt_printf({s.c_format!r}, ({values}))")
            return
        out.line(f"print({', '.join(self.code(v) for v in s.values)})")

    def forward_CustomCall(self, s: ir.CustomCall, out: SourceBuilder) -> None:
        if self.replay:
            for name in s.results:
                if name in self.analysis.restored:
                    self.push(name, self.type_of(name), out)
            body = s.replay_body if s.replay_body is not None else s.forward_body
            # Its own adjoint is the custom gradient: nothing inside needs saving.
            self.write(body, out, replay=False, effects=False)
            return
        self.write(s.forward_body, out, replay=False, effects=self.effects)

    def forward_GradOf(self, s: ir.GradOf, out: SourceBuilder) -> None:
        """Differentiate ``s.body`` right here: its replay, a unit seed, its reverse sweep."""
        from .activity import analyze
        from .adjoint import AdjointWriter

        if self.replay:
            for name in s.grads:
                if name in self.analysis.restored:
                    self.push(name, self.type_of(name), out)
        sub = AdjointWriter(self.kernel, analyze(s.body, self.kernel, tuple(s.inputs)),
                            self.parallel, self.debug,
                            self.replicated if self.replicate else None)
        sub.counter, sub.constants = self.counter, self.constants
        # flushed and summed by this function
        sub.privates, sub.replicas = self.privates, self.replicas
        sub.lanes, sub.laned, sub.private_ops = self.lanes, self.laned, self.private_ops
        sub.replica_sites = self.replica_sites
        forward, reverse = SourceBuilder(out.level), SourceBuilder(out.level)
        sub.write(s.body, forward, replay=True)
        t = self.type_of(s.result)
        seed = sub.declare(naming.adjoint_name(s.result), t)
        reverse.line(f"{seed} = {self.constants.name(1, t)}")
        sub.reverse(s.body, reverse)
        for name, grad in zip(s.inputs, s.grads):
            adj = sub.declare(naming.adjoint_name(name), self.type_of(name))
            reverse.line(f"{grad} = {sub.versions.get(adj, adj)}")
        zeroed = {name: self.type_of(name) for name in sub.analysis.restored}
        zeroed.update((n, typ) for n, typ in sub.declared.items() if n.startswith("adj_"))
        for name, typ in zeroed.items():
            out.line(f"{name} = {self.zero(typ)}")
        out.extend(forward)
        out.extend(reverse)
        self.touched.update(n for n in sub.declared if n.startswith("adj_"))  # set by name here
        self.counter = sub.counter
        self.symbols |= sub.symbols
        self.rules |= sub.rules
        self.runtime |= sub.runtime
        self.uses_fstack |= sub.uses_fstack
        self.uses_istack |= sub.uses_istack
        for kind in ("f", "i"):  # its pushes run at this level of this function
            self.push_sites[kind] += sub.push_sites[kind]
            self.level_pushes[-1][kind] += sub.level_pushes[0][kind]
        if sub.stack_float is dtypes.float64:
            self.stack_float = dtypes.float64
        if sub.stack_int is dtypes.int64:
            self.stack_int = dtypes.int64


def _as_add(s: ir.Atomic) -> ir.Atomic:
    """``s`` as an add (of a value whose sign its lane already took)."""
    return dataclasses.replace(s, op="add")
