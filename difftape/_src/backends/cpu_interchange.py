"""The phases of interchanged kernels (``codegen/interchange.py``): the forward's code before,
in and after the loop, and the adjoint's five phases with the locals they carry, each written
for one thread; ``cpu_loops.py`` runs them for a strip of threads at a time."""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes
from ..codegen import naming, strides
from ..codegen.activity import analyze
from ..codegen.emitter import SourceBuilder
from ..codegen.forward import PHASE_MARK
from ..codegen.inline_rules import FLOAT32_ONLY
from ..codegen.interchange import (ADJOINT_STRIP, Interchange, inlined, left_zero,
                                   live_names, parse_phase, phase_flow, stack_moves)
from ..codegen.interchange import pieces as interchange_pieces
from ..codegen.signs import assigned
from ..codegen.offsets import definitions
from ..codegen.strips import MAX_BUFFER_BYTES
from ..errors import InternalError
from ..frontend import ir
from ..ops import registry
from . import cpu_target
from .cpu_loops import RAN, Piece, SwappedAdjoint, guarded, inner_loop_header
from .cpu_writing import reverse_reads, writer_for

if TYPE_CHECKING:
    from .cpu import Variant


def write_interchanged(kernel: ir.KernelIR, body: list[ir.Stmt], swap: Interchange, analysis,
                        variant: Variant):
    """The forward's phases (``codegen/interchange.py``): builders of the code before the loop,
    of one iteration's body and of the code after it, then, where the loop has widened locals,
    of the iteration's widened version; the loop's bounds; and where loops run inside it, the
    ``Piece``s of its body the strip's threads run in turn (the iteration's body as written
    is then what a thread left on its own runs)."""
    writer = writer_for(kernel, body, analysis, variant, adjoint=False)
    writer.lane_index = f"uint64(t{variant.rank - 1} - rt_strip)"  # the row's strip's lane
    phases = [SourceBuilder(), SourceBuilder(), SourceBuilder()]
    writer.write(swap.pre, phases[0], replay=False)
    bounds = tuple(writer.code(e) for e in (swap.loop.start, swap.loop.stop, swap.loop.step))
    writer.lane_same = frozenset({swap.loop.var})
    writer.write(swap.loop.body, phases[1], replay=False)
    if swap.widened:
        phases.append(SourceBuilder())
        writer.wide = frozenset(swap.widened)
        writer.write(swap.loop.body, phases[3], replay=False)
        writer.wide = frozenset()
        writer.runtime.add("rt_tiny")
    pieces = []
    defs = definitions(body, analysis.single_assigned)  # what inner loops' bounds read
    for n, part in enumerate(interchange_pieces(swap.loop.body) if swap.inner else ()):
        # Each piece sets the loops' variables it runs in (the prologue may have zeroed them).
        piece = SourceBuilder()
        piece.line(f"{swap.loop.var} = int32(rt_it)")
        if isinstance(part, ir.For):
            counter = f"rt_inner{n}"
            piece.line(f"{part.var} = int32({counter})")
            writer.write(part.body, piece, replay=False)
            shared = (inlined(e, defs) for e in (part.start, part.stop, part.step))
            pieces.append(Piece(piece.lines, assigned(part.body), part.var, counter,
                                tuple(writer.code(e) for e in shared)))
        elif part:
            writer.write(part, piece, replay=False)
            pieces.append(Piece(piece.lines, assigned(part)))
    writer.lane_same = None
    writer.write(swap.post, phases[2], replay=False)
    return writer, phases, bounds, pieces


def write_interchanged_adjoint(kernel: ir.KernelIR, body: list[ir.Stmt], swap: Interchange,
                                analysis, variant: Variant):
    """The writer and the phases of an interchanged adjoint, or None where the stacks would
    move differently in different threads, or a local it would carry is not a plain scalar."""
    unbounded = swap.unbounded  # a while loop's stand-in (``interchange._as_for``)
    given = analysis
    if not any(s is swap.loop for s in body):
        # The adjoint differentiates the plan's body: a while loop's stand-in, an early
        # return's flag as the loop's exit (the same values, step by step).
        body = swap.pre + [swap.loop] + swap.post
        analysis = analyze(body, kernel)
    if swap.loop.var in analysis.restored:
        return None
    # (An inner loop's variable is restored around its loop where the plain adjoint needs it:
    # it is read in its loop's body only, which sets it.)
    if any(_reads_locals(kernel, loop) for loop in (swap.loop, *swap.inner)):
        # The stacks get their room before the strips: the bounds (the inner loops' too, set
        # around the strips) are written from the parameters, shapes and constants that the
        # locals they read are computed from.
        defs = definitions(body, analysis.single_assigned)
        inner = {id(s): _with_inlined_bounds(s, defs) for s in swap.inner}
        loop = _with_inlined_bounds(swap.loop, defs)
        loop = dataclasses.replace(loop, body=[inner.get(id(s), s) for s in loop.body])
        if any(_reads_locals(kernel, s) for s in (loop, *inner.values())):
            return None
        body = [loop if s is swap.loop else s for s in body]
        swap = dataclasses.replace(swap, loop=loop, inner=tuple(inner.values()))
        analysis = analyze(body, kernel)

    def write():
        writer = writer_for(kernel, body, analysis, variant, adjoint=True)
        writer.swap_loop, writer.swap_inner = swap.loop, swap.inner
        writer.lane_index = "uint64(rt_lane)"  # set by every thread of a strip
        around = SourceBuilder()
        around.line("# replay: recompute the forward values, saving what later code overwrites")
        writer.write(body, around, replay=True)
        around.line("# reverse: propagate adjoints from the outputs back to the inputs")
        mark = len(around.lines)
        writer.reverse(body, around)
        parts = writer.swap_parts
        return writer, around, around.lines[mark:] + parts.get("reverse", []) + [
            line for inner in parts.get("inner", {}).values() for line in inner["reverse"]]

    writer, around, reverse_lines = write()
    if analysis is not given and writer.pushed:
        # Analysed afresh: save only what the reverse reads, as ``_function`` does.
        analysis.unsaved = writer.pushed - reverse_reads(reverse_lines)
        if analysis.unsaved:
            writer, around, _ = write()
    marks = [k for k, line in enumerate(around.lines) if line == PHASE_MARK]
    if len(marks) != 2:
        raise InternalError(f"kernel '{kernel.name}': the interchanged adjoint's loop was "
                            f"written {len(marks)} times; this is a difftape bug")
    parts = writer.swap_parts
    lines = around.lines
    inner_parts = parts.get("inner", {})
    # One iteration's replay and reverse, a unit per piece (``interchange.pieces``).
    replay_units = _units(parts["replay"], inner_parts, "replay")
    reverse_units = _units(parts["reverse"], inner_parts, "reverse")
    phases = [lines[:marks[0]], *(u for u, _ in replay_units), lines[marks[0] + 1:marks[1]],
              *(u for u, _ in reverse_units), lines[marks[1] + 1:]]
    replay = list(range(1, 1 + len(replay_units)))
    post = replay[-1] + 1
    reverse = list(range(post + 1, post + 1 + len(reverse_units)))
    inner = {unit: inner_parts[key] for unit, (_, key) in
             zip(replay + reverse, replay_units + reverse_units) if key is not None}
    trees = [parse_phase(phase) for phase in phases]
    moves = [stack_moves(tree) for tree in trees]
    loop_lines = [line for unit in replay + reverse for line in phases[unit]]
    if None in moves or (cpu_target.BUILTIN_LOOPS_STAY_PLAIN
                         and _calls_builtins(loop_lines, writer)):
        return None
    alone = []  # the loop's replay and reverse for a thread running on its own
    if swap.exits:
        alone = [_whole(phases, replay, inner) + [f"{RAN} += int32(1)"],
                 _whole(phases, reverse, inner, writer)]
        if any(moves[post].values()):
            return None  # the reverse sets the tops from the iterations: the code after the
            # loop must leave them where it found them
        phases[0] = phases[0] + [f"{RAN} = int32(0)"]
        # A thread leaves the loop after its last inner loop only (``interchange.pieces``).
        for unit in replay:
            phases[unit] = guarded(f"not ({' or '.join(swap.exits)})", phases[unit],
                                    *[f"{RAN} += int32(1)"][:unit == replay[0]])
        for unit in reverse:
            phases[unit] = guarded(f"{parts['reverse_counter']} < {RAN}", phases[unit])
        trees = [parse_phase(phase) for phase in phases]
    flows = [phase_flow(tree) for tree in trees]
    # Names the code around the strip's threads sets (the same in every thread), and the
    # function's own (stacks, per-chunk accumulators).
    outside = {"t0", "tidflat", "rt_lane", "ftop", "itop", "fstack", "istack", swap.loop.var,
               parts["counter"], parts["reverse_counter"], *parts["names"].values(),
               *(f"tid{k}" for k in range(variant.rank))}
    for ip in inner_parts.values():
        outside |= {ip["counter"], ip["reverse_counter"], *ip["names"].values()}
    outside |= {local for local, _, _, _, _ in writer.privates}
    outside |= {lane for lane, _, _ in writer.loop_lane_flushes}
    # The loop's units run once per iteration: what they leave can reach themselves and the
    # units before them.
    first = {unit: group[0] for group in (replay, reverse) for unit in group}
    later = [set().union(*(e for _, e in flows[first.get(k, k + 1):]))
             for k in range(len(phases))]
    types = {**kernel.locals, **writer.declared, RAN: dtypes.int32}
    carried = {}
    for name in sorted(set().union(*(a & later[k] for k, (a, _) in enumerate(flows))) - outside):
        t = types.get(name)
        if t is None or not (dtypes.is_float(t) or dtypes.is_int(t) or t is dtypes.bool_):
            return None
        carried[name] = dtypes.float32 if t is dtypes.float16 else t
    for name in [v for v in carried if v.startswith("adj_")]:  # the prologue zeroes these
        if all(left_zero(tree, name, writer.zero(types[name])) for tree in trees):
            del carried[name]
    size = sum(ADJOINT_STRIP * np.dtype(t._np).itemsize for t in carried.values())
    if size > MAX_BUFFER_BYTES:
        return None
    # The first phase starts from the prologue's zeros, as the thread did, and leaves every
    # carried local: the value it assigned, else that zero.
    loads = [[]] + [[v for v in carried if v in e] for _, e in flows[1:]]
    saves = [[(v, v if v in flows[0][0] else writer.zero(t)) for v, t in carried.items()]]
    # Later phases leave only what something reads (the first phase's values stay: a dead
    # local's loads then read those, into arithmetic LLVM drops).
    # The chunk's accumulators of adds at thread-invariant indices are read after the strips.
    live = live_names(trees, {local for local, _, _, _, _ in writer.privates})
    saves += [[(v, v) for v in carried if v in a and v in later[k] and v in live]
              for k, (a, _) in enumerate(flows) if k]
    # A phase saves back what it loaded where it may leave a local unassigned: a thread that
    # skips an iteration, a branch that restores a local in one arm (its loads are dead code
    # where every path assigns it).
    for k in range(1, len(phases)):
        loads[k] += [v for v, _ in saves[k] if v not in loads[k]]
    swapped = SwappedAdjoint(phases, carried, loads, saves, moves, parts, exits=swap.exits,
                             alone=alone, unbounded=unbounded, replay=replay, reverse=reverse,
                             inner=inner)
    wide = tuple(v for v in swap.widened
                 if carried.get(v) is dtypes.float32 and v in dict(saves[1]))
    wide_replay, wide_reverse = _widened_loop(kernel, body, swap, analysis, variant, wide) \
        if wide else ([], [])
    # line for line the same code as the plain loop's, only spelled widened
    if wide and len(wide_replay) == len(phases[1]) and len(wide_reverse) == len(phases[3]):
        swapped.widened, swapped.wide_replay, swapped.wide_reverse = wide, wide_replay, \
            wide_reverse
        writer.runtime.add("rt_tiny")
    return writer, swapped


def _units(lines: list[str], inner_parts: dict, part: str) -> list[tuple[list[str], int | None]]:
    """A loop's replay or reverse split at the loops inside it (``PHASE_MARK <key>``): runs of
    lines and inner loops' bodies by turns, a run first and last, each with the key of the
    inner loop that runs it, else None. The units after the first start with the loop
    variable's line, as the first does (each thread sets it: the prologue may have zeroed
    it)."""
    units: list[tuple[list[str], int | None]] = [([], None)]
    for line in lines:
        if line.startswith(PHASE_MARK + " "):
            key = int(line[len(PHASE_MARK) + 1:])
            units += [([lines[0]] + inner_parts[key][part], key), ([lines[0]], None)]
        else:
            units[-1][0].append(line)
    return units


def _whole(phases: list[list[str]], units: list[int], inner: dict, writer=None) -> list[str]:
    """One iteration's replay or, given the ``writer``, reverse as a thread runs it on its own:
    its units in turn, the inner loops' as loops of their own (in the reverse, the sums of
    each of their iterations' lanes after it)."""
    lines = []
    for unit in units:
        if unit in inner:
            flushes = writer.lane_flush_lines(inner[unit]["key"]) if writer else []
            lines += [inner_loop_header(inner[unit], writer is not None)]
            lines += ["    " + line for line in phases[unit] + flushes]
        else:
            lines += phases[unit]
    return lines


def _widened_loop(kernel: ir.KernelIR, body: list[ir.Stmt], swap: Interchange, analysis,
                  variant: Variant, wide: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The interchanged adjoint's loop replay with ``wide`` widened, and its reverse with the
    derivative rules' float32 products widened (``interchange.widened``): a second writer
    writes the whole adjoint the same way, so its temporaries have the first's names, and
    keeps these parts of it."""
    writer = writer_for(kernel, body, analysis, variant, adjoint=True)
    writer.swap_loop, writer.wide_replay, writer.wide_reverse = swap.loop, frozenset(wide), True
    writer.write(body, SourceBuilder(), replay=True)
    writer.reverse(body, SourceBuilder())
    return writer.swap_parts["replay"], writer.swap_parts["reverse"]


# Builtins whose compiled code is a few instructions (no tables, no calls): a loop that calls
# them is a loop of arithmetic still, for ``_calls_builtins``.
_INSTRUCTION_BUILTINS = strides.ARITHMETIC | {
    "sqrt", "clamp", "sign", "step", "nonzero", "floor", "ceil", "trunc", "round", "rint", "frac",
    "copysign", "degrees", "radians", "lerp", "smoothstep"}


@functools.cache
def _instruction_symbols() -> frozenset[str]:
    """The names generated code calls ``_INSTRUCTION_BUILTINS`` and their rules by."""
    symbols = {r.symbol for key in _INSTRUCTION_BUILTINS for r in registry.lookup(key)}
    symbols |= {symbol + naming.FLOAT32_SUFFIX for symbol in symbols}
    return frozenset(symbols | {f"adj_{symbol}" for symbol in symbols})


def _calls_builtins(lines: list[str], writer) -> bool:
    """Whether ``lines`` call a compiled builtin or derivative rule other than those of a few
    instructions (``_INSTRUCTION_BUILTINS``). On AMD's Zen cores such a loop keeps its plain
    adjoint (``cpu_target.py``: a loop of float32 ``sin`` terms took 250 ms plain and 380 ms
    interchanged), while loops of arithmetic and comparisons gained 4x there; 24 steps of
    ``sqrt`` and ``abs`` over 1M threads, 15x (backward 264 -> 17 ms, an Intel Xeon)."""
    names = writer.symbols | {f"adj_{symbol}" for symbol in writer.rules}
    names -= _instruction_symbols()
    names |= writer.runtime & set(FLOAT32_ONLY.values())  # rt_sincos: builtins spelled inline
    call = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\(")
    return bool(names) and any(call.search(line) for line in lines)


def _reads_locals(kernel: ir.KernelIR, loop: ir.For) -> bool:
    """Whether the loop's bounds read a local (then they are known only inside the strips)."""
    return any(isinstance(e, ir.Var) and e.name in kernel.locals
               for root in (loop.start, loop.stop, loop.step) for e in ir.walk_expr(root))


def _with_inlined_bounds(loop: ir.For, defs: dict[str, ir.Expr]) -> ir.For:
    return dataclasses.replace(loop, **{key: inlined(getattr(loop, key), defs)
                                        for key in ("start", "stop", "step")})
