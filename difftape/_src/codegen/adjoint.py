"""IR → the reverse sweep of the adjoint kernel (run after the replay, per thread).

Statements are visited last to first. Before a statement is reversed, every local it overwrote
is restored from the stack, so its inputs are exactly what the forward saw; inside loops its
temporaries are recomputed from those inputs. Loops run their recorded trip counts backwards.
Array adjoints follow Warp (SPEC §2.4): reads accumulate, plain stores consume the output
gradient unless ``retain_grad``, atomics read it without consuming.
"""

from __future__ import annotations

from .. import dtypes
from ..frontend import ir
from . import naming
from .activity import SCATTER, UNIFORM, classify_index
from .emitter import SourceBuilder
from .forward import PHASE_MARK, ForwardWriter


class AdjointWriter(ForwardWriter):
    """Adds the reverse sweep to the forward/replay writer."""

    def reverse(self, stmts: list[ir.Stmt], out: SourceBuilder) -> None:
        self.in_reverse = True
        for s in reversed(stmts):
            self.site = s
            getattr(self, "reverse_" + type(s).__name__)(s, out)

    def comment(self, s: ir.Stmt, out: SourceBuilder) -> None:
        out.comment(s.line, s.text, prefix="adj ")

    def temps_for(self, s: ir.Stmt, value: ir.Expr, out: SourceBuilder) -> dict:
        """Forward temporaries of ``s``: reused outside loops; inside loops they are stale, so
        the reverse sweep recomputes each value when a rule first needs it."""
        if not self.analysis.is_in_loop(s) and id(s) in self.stmt_temps:
            return self.stmt_temps[id(s)]
        return {}

    # ------------------------------------------------------------ array adjoints

    def accumulate(self, ref: ir.ArrayRef, indices, g: str, out: SourceBuilder, temps) -> None:
        if not dtypes.is_float(dtypes.scalar_of(ref.dtype)):
            return
        p = ref.param
        flag, adj = naming.has_adjoint_flag(p), naming.adjoint_array(p)
        if p not in self.kernel.written_arrays and self.loop_lane(
                ref, indices, g, flag, out, lambda total, flush: self.accumulate(
                    ref, indices, total, flush, None)):
            return
        if self.replicated[1].get(p):  # every add into this adjoint goes to the chunk's copy
            self.replica_add(adj, ref, indices, "+", g, flag, out, temps)
            return
        idx = self.index_code(indices, temps, ref)
        mode = classify_index(ref, indices, self.kernel, self.analysis)
        if mode == UNIFORM and p not in self.kernel.written_arrays:  # (else read back: in place)
            out.line(f"{self.private(adj, idx, flag, dtypes.scalar_of(ref.dtype))} += {g}")
        elif mode in (SCATTER, UNIFORM) and self.parallel:
            self.runtime.add("rt_atomic_add")
            out.line(f"if {flag}: rt_atomic_add({adj}, ({idx},), {g})")
        else:
            out.line(f"if {flag}: {adj}[{idx}] += {g}")

    def has_gradient(self, ref: ir.ArrayRef) -> bool:
        return dtypes.is_float(dtypes.scalar_of(ref.dtype))

    # ------------------------------------------------------------ statements

    def reverse_Assign(self, s: ir.Assign, out: SourceBuilder) -> None:
        restored = s.target in self.analysis.restored
        active = s.target in self.analysis.active
        if not restored and not active:
            return
        self.comment(s, out)
        t = self.type_of(s.target)
        if restored:
            self.pop(s.target, t, out)
        if active:
            temps = self.temps_for(s, s.value, out)
            adj = self.declare(naming.adjoint_name(s.target), t)
            g = self.take(adj, t, out)
            self.backprop(s.value, g, out, temps, self.accumulate)

    def reverse_Store(self, s: ir.Store, out: SourceBuilder) -> None:
        p = s.array.param
        replayed = self.replays_write(s)
        if not self.has_gradient(s.array) and not replayed:
            return
        self.comment(s, out)
        if replayed:
            self.restore_element(s, out)
        if not self.has_gradient(s.array):
            return
        adj = naming.adjoint_array(p)
        t = s.value.type
        temps: dict = {}
        idx = self.index_code(s.indices, temps, s.array)
        g = self.new_temp(t)
        out.line(f"{g} = {self.output_adjoint(s, temps)}")
        out.line(f"if {naming.consume_flag(p)}: {adj}[{idx}] = {self.zero(t)}")
        if self.analysis.expr_active(s.value):
            self.backprop(s.value, g, out, temps, self.accumulate)

    def output_adjoint(self, s, temps: dict) -> str:
        """The adjoint of the element ``s`` writes: zero when its array has no gradient (whose
        stand-in is one element). A select on the has-adjoint flag, not an index multiplied by
        it: LLVM then still sees consecutive threads read consecutive elements."""
        p = s.array.param
        read = self.read_code(naming.adjoint_array(p), s.array, s.indices, temps)
        return f"({read} if {naming.has_adjoint_flag(p)} else {self.zero(s.value.type)})"

    def restore_element(self, s: ir.Store | ir.Atomic, out: SourceBuilder) -> None:
        """Put back the element replayed write ``s`` changed in the launch's copy of its
        array (``ForwardWriter.saved_element`` pushed it)."""
        old = self.new_temp(s.value.type)
        self.pop(old, s.value.type, out)
        out.line(f"{s.array.param}[{self.index_code(s.indices, ref=s.array)}] = {old}")

    def reverse_Atomic(self, s: ir.Atomic, out: SourceBuilder) -> None:
        restored = s.result is not None and s.result in self.analysis.restored
        wanted = self.has_gradient(s.array) and self.analysis.expr_active(s.value) and \
            s.op not in ("exch", "cas")  # no gradient, as in Warp
        p = s.array.param
        t = s.value.type
        replayed = self.replays_write(s)
        if not restored and not wanted and not replayed:
            return
        self.comment(s, out)
        if restored:
            self.pop(s.result, t, out)
        if replayed:
            self.restore_element(s, out)
        if not wanted:
            return
        temps: dict = {}
        g = self.new_temp(t)
        sign = "-" if s.op == "sub" else ""
        out.line(f"{g} = {sign}{self.output_adjoint(s, temps)}")
        if s.op in ("min", "max"):
            # Warp: the value gets the gradient iff it equals the final element (ties: all).
            value = self.value_of(s.value, out, temps)
            final = self.load_code(s.array, s.indices, temps)
            self.flush(out)
            self.depth += 1
            with out.block(f"if {value} == {final} or ({value} != {value} and "
                           f"{final} != {final}):"):
                self.backprop(s.value, g, out, temps, self.accumulate)
            self.depth -= 1
        else:
            self.backprop(s.value, g, out, temps, self.accumulate)

    def nested(self, stmts: list[ir.Stmt], level: int, loop: bool = False) -> SourceBuilder:
        """The reverse sweep of ``stmts`` as the body of a block (accumulators by name); ``loop``:
        the body of a loop (its restores pop the stack)."""
        block = SourceBuilder(level)
        self.depth += 1
        self.reverse_loops += loop
        self.reverse(stmts, block)
        self.reverse_loops -= loop
        self.depth -= 1
        if all(line.lstrip().startswith("#") and not line.lstrip().startswith(PHASE_MARK)
               for line in block.lines):
            block.lines.clear()  # nothing to run (e.g. only unsaved values were restored here)
        return block

    def reverse_If(self, s: ir.If, out: SourceBuilder) -> None:
        self.flush(out)
        # The else branch first: its restores take the saves the replay made last.
        orelse = self.nested(s.orelse, out.level + 1)
        body = self.nested(s.body, out.level + 1)
        for arm, pad in zip((body, orelse), self.aux[id(s)].get("pads", ())):
            # the slots the replay's arm skipped (``arm_pads``), before its own pops
            arm.lines[:0] = [f"{'    ' * arm.level}{top} -= {n}" for top, n in pad.items()]
        in_loop = self.analysis.is_in_loop(s)
        if not body.lines and not orelse.lines and not in_loop:
            return
        cond = self.aux[id(s)]["cond"]
        if in_loop:
            self.pop(cond, dtypes.bool_, out)
        if not body.lines and not orelse.lines:
            return
        out.line(f"if {cond}:")
        out.extend(body) if body.lines else out.line("    pass")
        if orelse.lines:
            out.line("else:")
            out.extend(orelse)

    def reverse_For(self, s: ir.For, out: SourceBuilder) -> None:
        names = self.aux[id(s)]
        self.flush(out)
        if s is self.swap_loop:  # one iteration's reverse, run for every thread of a strip
            k = f"k_{self.counter_next()}"
            self.lane_same = frozenset({s.var})
            self.wide_rules = self.wide_reverse
            body = self.nested(s.body, 0, loop=True)
            self.wide_rules = False
            self.lane_same = None
            position = f"int32({names['start']} + {k} * {names['step']})"
            self.swap_parts.update(reverse_counter=k,
                                   reverse=[f"{s.var} = {position}"] + body.lines)
            out.line(PHASE_MARK)
            return
        if "inner" in names:  # a loop inside the interchanged one, run the same way
            k = f"k_{self.counter_next()}"
            saved = self.lane_same, self.lane_scope
            self.lane_same, self.lane_scope = self.lane_same | {s.var}, names["inner"]
            body = self.nested(s.body, 0, loop=True)
            self.lane_same, self.lane_scope = saved
            position = f"int32({names['start']} + {k} * {names['step']})"
            self.swap_parts["inner"][names["inner"]].update(
                reverse_counter=k, reverse=[f"{s.var} = {position}"] + body.lines)
            out.line(f"{PHASE_MARK} {names['inner']}")
            return
        body = self.nested(s.body, out.level + 1, loop=True)
        if self.analysis.is_in_loop(s):
            self.pop(names["trip"], dtypes.int32, out)
            for key in ("count", "step", "start") if s.reverse else ("step", "start"):
                self.pop(names[key], dtypes.int32, out)
        if body.lines:
            self.comment(s, out)
            k = f"k_{self.counter_next()}"
            position = f"({names['count']} - 1 - {k})" if s.reverse else k
            out.line(f"for {k} in range({names['trip']} - 1, -1, -1):")
            out.line(f"    {s.var} = int32({names['start']} + {position} * {names['step']})")
            out.extend(body)
        if s.var in self.analysis.restored:
            self.pop(s.var, dtypes.int32, out)

    def reverse_While(self, s: ir.While, out: SourceBuilder) -> None:
        trip = self.aux[id(s)]["trip"]
        self.flush(out)
        body = self.nested(s.body, out.level + 1, loop=True)
        if self.analysis.is_in_loop(s):
            self.pop(trip, dtypes.int32, out)
        if body.lines:
            self.comment(s, out)
            out.line(f"for k_{self.counter_next()} in range({trip}):")
            out.extend(body)

    def reverse_Print(self, s: ir.Print, out: SourceBuilder) -> None:
        pass

    def reverse_CustomCall(self, s: ir.CustomCall, out: SourceBuilder) -> None:
        self.comment(s, out)
        self.flush(out)  # the custom gradient reads and writes adjoints by name
        self.fresh = False
        saved = self.in_reverse
        self.write(s.grad_body, out, replay=False, effects=True)
        self.in_reverse = saved
        for name in s.results:
            t = self.type_of(name)
            if name in self.analysis.active:
                adj = self.declare(naming.adjoint_name(name), t)
                out.line(f"{adj} = {self.zero(t)}")
        for name in reversed(s.results):
            if name in self.analysis.restored:
                self.pop(name, self.type_of(name), out)

    def reverse_GradOf(self, s: ir.GradOf, out: SourceBuilder) -> None:
        for name in reversed(s.grads):  # a constant here: only restore what it overwrote
            if name in self.analysis.restored:
                self.pop(name, self.type_of(name), out)
