"""The thread loops of a generated CPU function: rows ``lo:hi`` of the first launch dimension,
nested loops for the others, an innermost dimension split into interior and edge threads
(``codegen/splits.py``) or run in strips (``codegen/strips.py``), and the strip-wise loops of
interchanged kernels (``codegen/interchange.py``). ``backends/cpu.py`` writes the bodies and
hands them here.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..codegen.emitter import SourceBuilder, plus
from ..codegen.expressions import WIDE_ONE, WIDE_PREFIX
from ..codegen.interchange import ADJOINT_STRIP, WIDE_CHECK, Interchange
from ..codegen.signs import assigned
from ..codegen.splits import Split
from ..codegen.strips import MIN_STRIPPED, STRIP, Strips
from ..frontend import ir

if TYPE_CHECKING:
    from .cpu import Variant


def thread_loops(kernel: ir.KernelIR, variant: Variant, out: SourceBuilder, stacks: list[str],
                  split: Split | None, bodies: list[list[str]], strips: Strips | None,
                  lanes: bool = False, row_flush: list[str] = ()) -> None:
    """The per-thread loop nest over this chunk's rows ``lo:hi`` of the first dimension, each
    thread running ``bodies[0]``; with a split, the innermost dimension's interior threads run
    ``bodies[1]`` (``codegen/splits.py``), in a loop of their own before the edge threads.

    With ``strips``, the last body defers adds (``codegen/strips.py``) and its loop runs in
    strips, where it is long enough: a launch of ``(n, 4)`` has nothing to vectorize, and the
    buffers and flush loops would double its cost. A shorter innermost loop runs ``bodies[0]``
    from start to end instead (a deferring body is never the first in a multi-dimensional
    launch: ``cpu._write_bodies``).

    With ``lanes`` (the bodies add into lane arrays of privates, ``ExprCoder.private``), every
    innermost loop runs in strips too, each thread on its strip lane ``rt_lane``; the threads
    outside a split's interior use lane 0. ``row_flush`` runs after each row's innermost loop
    (a multi-dimensional launch's lane arrays of adds at the row's index, ``loop_lane``)."""
    for line in stacks:
        out.line(line)
    last = variant.rank - 1
    if last > 0:
        out.line("for t0 in range(lo, hi):")
        out.level += 1
    for k in range(1, last):
        out.line(f"for t{k} in range(dim{k}):")
        out.level += 1
    start, stop = ("lo", "hi") if last == 0 else ("0", f"dim{last}")
    interior = (start, stop)
    if split is not None:
        lower = ", ".join(str(k) for k in split.lower)
        ends = [str(offset + 1) if param is None else f"{param}{plus(offset + 1)}"
                if axis is None else f"{param}.shape[{axis}]{plus(offset + 1)}"
                for param, axis, offset in split.upper]
        out.line(f"rt_inner_lo = max({start}, {lower})" if lower else f"rt_inner_lo = {start}")
        out.line(f"rt_inner_hi = max(rt_inner_lo, min({', '.join([stop] + ends)}))")
        interior = ("rt_inner_lo", "rt_inner_hi")
    if strips is None:
        _loop(kernel, variant, out, *interior, bodies[-1], lanes)
        _edges(kernel, variant, out, start, stop, split, bodies[0], lanes)
    elif len(bodies) == 1:  # one-dimensional, no split: every chunk of rows runs in strips
        _strips(kernel, variant, out, start, stop, bodies[0], strips, lanes)
    else:
        with out.block(f"if {interior[1]} - {interior[0]} >= {MIN_STRIPPED}:"):
            _strips(kernel, variant, out, *interior, bodies[-1], strips, lanes)
            _edges(kernel, variant, out, start, stop, split, bodies[0], lanes)
        with out.block("else:"):
            _loop(kernel, variant, out, start, stop, bodies[0], lanes)
    if row_flush:
        with out.block(f"if {stop} > {start}:"):  # the row ran: its index is one
            for line in row_flush:
                out.line(line)


def _loop(kernel: ir.KernelIR, variant: Variant, out: SourceBuilder, start: str, stop: str,
          body: list[str], lanes: bool) -> None:
    if lanes:
        _strips(kernel, variant, out, start, stop, body, None, lanes)
        return
    with out.block(f"for t{variant.rank - 1} in range({start}, {stop}):"):
        thread_body(kernel, variant, out, body)


def _edges(kernel: ir.KernelIR, variant: Variant, out: SourceBuilder, start: str, stop: str,
           split: Split | None, body: list[str], lanes: bool) -> None:
    """The threads outside a split's interior, after it."""
    if split is None:
        return
    last = variant.rank - 1
    with out.block(f"for rt_edge in range({stop} - {start} - (rt_inner_hi - rt_inner_lo)):"):
        out.line(f"t{last} = {start} + rt_edge")
        out.line(f"if t{last} >= rt_inner_lo: t{last} += rt_inner_hi - rt_inner_lo")
        thread_body(kernel, variant, out, (["rt_lane = 0"] if lanes else []) + body)


def _strips(kernel: ir.KernelIR, variant: Variant, out: SourceBuilder, start: str, stop: str,
            body: list[str], strips: Strips | None, lanes: bool) -> None:
    """The innermost loop in strips of ``STRIP`` threads: ``strips``' deferred adds are flushed
    after each, and with ``lanes`` every thread knows its lane."""
    last = variant.rank - 1
    with out.block(f"for rt_strip in range({start}, {stop}, {STRIP}):"):
        out.line(f"rt_strip_end = min(rt_strip + {STRIP}, {stop})")
        with out.block(f"for t{last} in range(rt_strip, rt_strip_end):"):
            lane = [f"rt_lane = t{last} - rt_strip"] if lanes else []
            thread_body(kernel, variant, out, lane + body)
        for line in strips.flush() if strips is not None else ():
            out.line(line)


def thread_body(kernel: ir.KernelIR, variant: Variant, out: SourceBuilder, lines: list[str]):
    for k, _ in enumerate(kernel.tid_vars):
        out.line(f"tid{k} = int32(t{k})")
    if kernel.tid_flat:
        flat = "t0"
        for k in range(1, variant.rank):
            flat = f"({flat} * dim{k} + t{k})"
        out.line(f"tidflat = int32({flat})")
    for line in lines:
        out.line(line)


@contextmanager
def _rows(variant: Variant, out: SourceBuilder):
    """Around an interchanged kernel's strips: the loops over a multi-dimensional launch's outer
    dimensions (a row's threads are the innermost dimension's, run in strips). Yields the range
    of a row's threads and their loop variable: ``lo:hi`` and ``t0`` in a one-dimensional
    launch."""
    last = variant.rank - 1
    if last == 0:
        yield "lo", "hi", "t0"
        return
    level = out.level
    out.line("for t0 in range(lo, hi):")
    out.level += 1
    for k in range(1, last):
        out.line(f"for t{k} in range(dim{k}):")
        out.level += 1
    yield "0", f"dim{last}", f"t{last}"
    out.level = level


@dataclass
class Piece:
    """A part of an interchanged loop's body that the strip's threads run one after the other
    (``interchange.pieces``): per-thread lines, the locals its statements assign, and where it
    is the body of a loop inside the interchanged one, that loop's variable, the counter the
    code around the strip's threads runs it by, and its bounds (the same in every thread)."""

    lines: list[str]
    changed: set[str]
    var: str | None = None
    counter: str = ""
    bounds: tuple[str, ...] = ()

    def header(self) -> str:
        return f"for {self.counter} in range({', '.join(self.bounds)}):"


@dataclass
class SwappedAdjoint:
    """An interchanged adjoint (``codegen/interchange.py``): per strip, every thread's replay of
    the code before the loop, the loop's replay with the strip's threads inside it, the code
    after the loop (replay and reverse), the loop's reverse, the reverse of the code before."""

    phases: list[list[str]]  # the five phases' per-thread lines
    carried: dict[str, type]  # locals kept in strip arrays between phases and iterations
    loads: list[list[str]]  # per phase: the carried locals it reads before assigning them
    saves: list[list[tuple[str, str]]]  # per phase: (carried local, value code) it leaves
    moves: list[dict[str, int]]  # per phase: how far it moves each stack's top (every thread)
    parts: dict  # what the writer kept of the loop: its bounds and counters
    widened: tuple[str, ...] = ()  # ``interchange.widened`` locals of the loop's replay
    wide_replay: list[str] = field(default_factory=list)  # that replay's widened version
    wide_reverse: list[str] = field(default_factory=list)  # the loop's reverse, widened
    exits: tuple[str, ...] = ()  # the loop's break flags (``Interchange.exits``)
    # With exits: the loop's replay and its reverse as a thread runs them on its own (the
    # phases' versions are guarded: by the flags, and by the iterations ``RAN`` counted).
    alone: list[list[str]] = field(default_factory=list)
    # A while loop's stand-in (``interchange._as_for``): its iterations have no bound, so the
    # stacks get room for some (``WHILE_ROOM``), and more where a strip needs it.
    unbounded: bool = False
    # Where loops run inside the loop (``interchange.pieces``), one iteration's replay and
    # reverse are several phases: their indices in ``phases``, in the order they run, and
    # for those that are an inner loop's body, what the writer kept of that loop.
    replay: list[int] = field(default_factory=lambda: [1])
    reverse: list[int] = field(default_factory=lambda: [3])
    inner: dict[int, dict] = field(default_factory=dict)

    @property
    def post(self) -> int:
        """The phase of the code after the loop."""
        return self.replay[-1] + 1

    def per_iteration(self, kind: str) -> str:
        """How far one iteration's replay moves ``kind``'s stack top (an expression: inner
        loops move it by their trip counts, ``rt_trip_<counter>``)."""
        terms = []
        for unit in self.replay:
            n = self.moves[unit][f"{kind}top"]
            if n and unit in self.inner:
                terms.append(f"{n} * rt_trip_{self.inner[unit]['counter']}")
            elif n:
                terms.append(str(n))
        return f"({' + '.join(terms)})" if len(terms) > 1 else (terms or ["0"])[0]

    def alone_io(self, units: list[int]) -> tuple[list[str], list[tuple[str, str]]]:
        """The carried locals a lone thread's run of ``units`` (``alone``) loads and saves."""
        loads = list(dict.fromkeys(v for unit in units for v in self.loads[unit]))
        saves = list(dict.fromkeys(pair for unit in units for pair in self.saves[unit]))
        return loads, saves


def guarded(test: str, lines: list[str], *last: str) -> list[str]:
    """``lines`` (and ``last``) under ``if test:``."""
    if not lines and not last:
        return []
    return [f"if {test}:"] + [f"    {line}" for line in [*lines, *last]]


def inner_loop_header(parts: dict, reverse: bool) -> str:
    """The loop header of an interchanged loop's inner loop (``SwappedAdjoint.inner``), in its
    replay or its reverse (which runs the trip count down)."""
    if reverse:
        return f"for {parts['reverse_counter']} in range(rt_trip_{parts['counter']} - 1, -1, -1):"
    names = parts["names"]
    return f"for {parts['counter']} in range({names['start']}, {names['stop']}, {names['step']}):"


# The carried local counting the iterations a thread ran of an interchanged loop with exits.
RAN = "rt_ran"

# The iterations of a while loop that an interchanged adjoint's stacks first get room for; a
# strip one of whose threads runs longer runs again with twice as much. The stacks may not grow
# inside the loop over the strips (the reverse's loop over a strip's threads then stayed
# scalar), and the replay may not run over the whole of int32's range (its runtime check that
# the two stacks do not overlap then failed, and it ran scalar): 1M Newton square roots of ~5
# steps, backward 19 and 22 ms those ways, 6.7 ms with this room (warp-lang 21).
WHILE_ROOM = 64


def interchanged_adjoint_loops(kernel: ir.KernelIR, variant: Variant, out: SourceBuilder,
                                setup: list[str], prologue: list[str], swap: SwappedAdjoint,
                                writer) -> None:
    """The thread loop of an interchanged adjoint: per strip, the five phases of
    ``SwappedAdjoint``, the two loop phases with the strip's threads inside the loop. Every
    thread pushes and pops the same values at the same points, so the stacks' tops are the
    strip's (``rt_ftop``, ``rt_itop``) and each thread's value sits in its lane."""
    for line in setup:
        out.line(line)
    kinds = [k for k, used in (("f", writer.uses_fstack), ("i", writer.uses_istack)) if used]
    at = "uint64(rt_lane)"
    parts, names = swap.parts, swap.parts["names"]
    start, stop, step = names["start"], names["stop"], names["step"]

    def threads(phase: int, wide: bool = False, lines: list[str] | None = None) -> None:
        """Every thread of the strip runs ``phase`` (or, where ``phase`` is 1 or 3, a lone
        thread's run of one iteration's replay or reverse, ``lines``, which leave the strip's
        tops as they are)."""
        widened = set(swap.widened) if wide and phase == 1 else set()  # the replay's locals
        moves = {} if lines is not None else swap.moves[phase]
        carried_in, carried_out = swap.loads[phase], swap.saves[phase]
        if lines is None:
            lines = ({1: swap.wide_replay, 3: swap.wide_reverse}[phase] if wide
                     else swap.phases[phase])
        else:
            carried_in, carried_out = swap.alone_io(swap.replay if phase == 1 else swap.reverse)
        with out.block(f"for {tv} in range(rt_strip, rt_strip_end):"):
            loads = [f"{_wide_name(v, v in widened)} = {_carry(v, v in widened)}[{at}]"
                     for v in carried_in]
            saves = [f"{_carry(v, v in widened)}[{at}] = {_wide_name(value, v in widened)}"
                     for v, value in carried_out]
            thread_body(kernel, variant, out, [f"rt_lane = {tv} - rt_strip"] + prologue + loads
                         + lines + saves)
        for kind in kinds:
            n = moves.get(f"{kind}top", 0)
            if n:
                out.line(f"rt_{kind}top {'+' if n > 0 else '-'}= {abs(n)}")

    # The loop's bounds are the same in every thread and come from no local: the stacks get
    # their room before the strips (``_stack_room``; growing them inside the loop over the
    # strips kept LLVM from vectorizing the reverse sweep's loops: 10x slower).
    inner_loops = {loop["key"]: loop for loop in swap.inner.values()}  # replay's and reverse's
    for loop in [parts, *inner_loops.values()]:  # inner loops' bounds read no local either
        names, bounds = loop["names"], loop["bounds"]
        out.line(f"{names['start']}, {names['stop']}, {names['step']} = "
                 f"{bounds['start']}, {bounds['stop']}, {bounds['step']}")
        trip = "rt_trip" if loop is parts else f"rt_trip_{loop['counter']}"
        out.line(f"{trip} = len(range({names['start']}, {names['stop']}, {names['step']}))")

    def iteration(units: list[int], wide: bool = False) -> None:
        """One iteration's replay or reverse: its phases in turn, inner loops' inside them (in
        the reverse, each iteration's adds at an index it picks summed after it)."""
        for unit in units:
            with ExitStack() as inner:
                loop = swap.inner.get(unit)
                if loop is not None:
                    inner.enter_context(out.block(inner_loop_header(loop, unit in swap.reverse)))
                threads(unit, wide)
                if loop is not None and unit in swap.reverse:
                    flushes = writer.lane_flush_lines(loop["key"])
                    if flushes:  # the loops' variables, which the indices read
                        out.line(parts["reverse"][0])
                        out.line(loop["reverse"][0])
                        for line in flushes:
                            out.line(line)

    def strips(row_start: str, row_stop: str, tv: str) -> None:
        """The loop over a row's strips, each running the five phases."""
        first = "rt_from" if swap.unbounded else row_start
        with out.block(f"for rt_strip in range({first}, {row_stop}, {ADJOINT_STRIP}):"):
            out.line(f"rt_strip_end = min(rt_strip + {ADJOINT_STRIP}, {row_stop})")
            for kind in kinds:
                out.line(f"rt_{kind}top = 0")
            threads(0)
            if swap.exits:
                _replay_with_exits(out, swap, kinds, threads, iteration, tv)
            elif swap.widened:
                _switched(out, swap.widened, f"for {parts['counter']} in range({start}, {stop}, "
                          f"{step}):", lambda wide: threads(1, wide))
            else:
                with out.block(f"for {parts['counter']} in range({start}, {stop}, {step}):"):
                    iteration(swap.replay)
            threads(swap.post)

            def reverse(wide: bool) -> None:
                with out.block(f"for {parts['reverse_counter']} in range(rt_trip - 1, -1, -1):"):
                    iteration(swap.reverse, wide)
                    flushes = writer.lane_flush_lines()
                    if flushes:  # the iteration's adds at one index, per site
                        out.line(parts["reverse"][0])  # the loop variable, which the indices read
                        for line in flushes:
                            out.line(line)

            if swap.exits:
                _reverse_with_exits(out, swap, kinds, threads, iteration,
                                    writer.lane_flush_lines())
            elif swap.widened:  # the strip's reverse runs widened where its replay ended widened
                with out.block("if rt_wide:"):
                    reverse(True)
                with out.block("else:"):
                    reverse(False)
            else:
                reverse(False)
            threads(len(swap.phases) - 1)

    if swap.unbounded:
        out.line(f"rt_cap = {WHILE_ROOM}")
    else:
        _stack_room(out, swap, kinds, writer, "rt_trip")
    with ExitStack() as around:
        row_start, row_stop, tv = around.enter_context(_rows(variant, out))
        if swap.unbounded:  # room for ``rt_cap`` iterations, the row's strips from ``rt_from`` on
            out.line(f"rt_from = {row_start}")
            around.enter_context(out.block(f"while rt_from < {row_stop}:"))
            out.line(f"rt_stop = {start} + min(rt_trip, rt_cap) * {step}")
            out.line(f"rt_resume = {row_stop}")
            _stack_room(out, swap, kinds, writer, "min(rt_trip, rt_cap)")
        strips(row_start, row_stop, tv)
        if swap.unbounded:  # a strip that ran out of room runs again, from its start, with twice
            with out.block(f"if rt_resume < {row_stop}:"):
                out.line("rt_cap *= 2")
            out.line("rt_from = rt_resume")


def _stack_room(out: SourceBuilder, swap: SwappedAdjoint, kinds: list[str], writer,
                iterations: str) -> None:
    """New stacks with room for a strip's saves over ``iterations`` of the loop: new arrays,
    whatever room the ones before had (a stack that is one array or another by a branch taken
    at run time kept LLVM from vectorizing the reverse's loop over the strip: 1M Newton square
    roots, backward 17.2 -> 5.2 ms). Nothing on them outlives a strip."""
    for kind in kinds:
        n = swap.per_iteration(kind)  # saved per iteration
        if n != "0":
            room = (f"({swap.moves[0][f'{kind}top']} + {iterations} * {n} + {kind}slack) * "
                    f"{ADJOINT_STRIP}")
            dtype = (writer.stack_float if kind == "f" else writer.stack_int).__name__
            out.line(f"{kind}stack = rt_empty(max({room}, {kind}stack.shape[0]), np.{dtype})")


def _replay_with_exits(out: SourceBuilder, swap: SwappedAdjoint, kinds: list[str],
                       threads, iteration, tv: str) -> None:
    """The replay of an interchanged loop with exits: each iteration for the strip's threads
    still in the loop (a thread that has left skips it, and its ``RAN`` stops counting), as the
    forward does (``_finish_when_few_left``), the last few threads on their own. Every thread's
    values of its k-th iteration lie at the strip's tops as they were before iteration k,
    whichever way it ran, so the reverse finds them by k: the tops end at the longest
    thread's."""
    parts, names = swap.parts, swap.parts["names"]
    counter, stop, step = parts["counter"], names["stop"], names["step"]
    left = " or ".join(swap.exits)
    stored = " or ".join(f"rt_carry_{flag}[uint64({tv} - rt_strip)]" for flag in swap.exits)
    for kind in kinds:
        out.line(f"rt_{kind}base = rt_{kind}top")
    out.line("rt_vec = 0")
    if swap.unbounded:  # as far as the stacks have room (``interchanged_adjoint_loops``)
        stop = "rt_stop"
    with out.block(f"for {counter} in range({names['start']}, {stop}, {step}):"):
        iteration(swap.replay)
        out.line("rt_vec += 1")
        out.line("rt_running = int32(0)")
        with out.block(f"for {tv} in range(rt_strip, rt_strip_end):"):
            out.line(f"rt_running += int32(not ({stored}))")
        with out.block(f"if rt_running * {FEW_LEFT} <= rt_strip_end - rt_strip:"):
            with out.block("if rt_running > 0:"):
                out.line(f"rt_next = {counter} + {step}")  # the threads' own loops set the counter
                threads(1, lines=[f"if not ({left}):",
                                  f"    for rt_rest in range(rt_next, {stop}, {step}):",
                                  f"        {counter} = rt_rest",
                                  *("        " + line for line in swap.alone[0]),
                                  f"        if {left}: break"])
            out.line("break")
    out.line("rt_most = int32(0)")
    with out.block(f"for {tv} in range(rt_strip, rt_strip_end):"):
        out.line(f"rt_most = max(rt_most, rt_carry_{RAN}[uint64({tv} - rt_strip)])")
    if swap.unbounded:  # a thread still in the loop: the strip runs again with more room
        with out.block("if rt_most == min(rt_trip, rt_cap):"):
            with out.block(f"for {tv} in range(rt_strip, rt_strip_end):"):
                with out.block(f"if not ({stored}):"):
                    out.line("rt_resume = rt_strip")
            with out.block("if rt_resume == rt_strip:"):
                out.line("break")
    for kind in kinds:
        out.line(f"rt_{kind}top = rt_{kind}base + rt_most * {swap.per_iteration(kind)}")


def _reverse_with_exits(out: SourceBuilder, swap: SwappedAdjoint, kinds: list[str],
                        threads, iteration, flushes: list[str]) -> None:
    """The reverse of an interchanged loop with exits: the iterations that threads ran on their
    own (``_replay_with_exits``), each such thread on its own from its last iteration, then the
    strip's iterations from the last down, each reversed by the threads that ran it. After each
    iteration, ``flushes`` sum its adds at an index the loop's variable picks (lanes of threads
    that did not run it hold zeros), also after each of a lone thread's."""
    counter = swap.parts["reverse_counter"]
    tops = [f"    {kind}top = rt_{kind}base + {RAN} * {swap.per_iteration(kind)}"
            for kind in kinds]
    with out.block("if rt_most > rt_vec:"):
        threads(3, lines=[f"if {RAN} > rt_vec:", *tops,
                          f"    for {counter} in range({RAN} - 1, rt_vec - 1, -1):",
                          *("        " + line for line in swap.alone[1] + flushes)])
    for kind in kinds:
        out.line(f"rt_{kind}top = rt_{kind}base + rt_vec * {swap.per_iteration(kind)}")
    with out.block(f"for {counter} in range(rt_vec - 1, -1, -1):"):
        iteration(swap.reverse)
        if flushes:
            out.line(swap.parts["reverse"][0])  # the loop variable, which the indices read
            for line in flushes:
                out.line(line)


def widening_setup(widened: tuple[str, ...], width: int) -> list[str]:
    """The setup of a function with widened iterations (``interchange.widened``): the float64
    strip arrays of its widened locals (``width`` threads a strip), and ``WIDE_ONE``: 1.0 inside
    the loop over the strips, which runs only where ``lo < hi``, but not a constant to LLVM
    (``ExprCoder.wide_product``)."""
    if not widened:
        return []
    return [f"rt_wide_{v} = rt_stack_array({width}, np.float64)" for v in widened] + [
        f"{WIDE_ONE} = float64(1.0) if lo < hi else float64(3.0)"]


def _carry(name: str, wide: bool) -> str:
    """The strip array holding carried local ``name``: float64 where it is widened."""
    return f"rt_wide_{name}" if wide else f"rt_carry_{name}"


def _wide_name(name: str, wide: bool) -> str:
    """How the iteration's code names local ``name``: ``rt_w_<name>`` where it is widened."""
    return f"{WIDE_PREFIX}{name}" if wide else name


def _switched(out: SourceBuilder, widened: tuple[str, ...], header: str, iteration) -> None:
    """An interchanged loop over ``header`` whose strip has widened locals
    (``interchange.widened``): ``iteration(False)``, the iteration as written, until a check
    finds one of them tiny in some thread, then ``iteration(True)``, its widened version, to
    the strip's end, those locals in float64 strip arrays."""
    count = "rt_strip_end - rt_strip"
    out.line(f"rt_wide, rt_check, rt_done = False, {WIDE_CHECK}, 0")
    with out.block(header):
        with out.block("if rt_wide:"):
            iteration(True)
        with out.block("else:"):
            iteration(False)
            out.line("rt_done += 1")
            with out.block("if rt_done == rt_check:"):
                out.line("rt_check *= 2")
                out.line("rt_found = int32(0)")
                with out.block(f"for rt_l in range({count}):"):
                    tests = " | ".join(f"rt_tiny(rt_carry_{v}[rt_l])" for v in widened)
                    out.line(f"rt_found |= {tests}")
                with out.block("if rt_found:"):
                    out.line("rt_wide = True")
                    with out.block(f"for rt_l in range({count}):"):
                        for v in widened:
                            out.line(f"rt_wide_{v}[rt_l] = float64(rt_carry_{v}[rt_l])")
    with out.block("if rt_wide:"):
        with out.block(f"for rt_l in range({count}):"):
            for v in widened:
                out.line(f"rt_carry_{v}[rt_l] = float32(rt_wide_{v}[rt_l])")


# An interchanged loop with ``break`` runs on one thread at a time once at most this share
# of its strip's threads is still in it: a vector step costs about as much as one thread's step
# for every 16 (or fewer) threads of the strip, whether or not they still run.
FEW_LEFT = 16


def _finish_when_few_left(kernel: ir.KernelIR, variant: Variant, out: SourceBuilder,
                          swap: Interchange, tv: str, entry: list[str], body: list[str],
                          saves: list[str], writer) -> None:
    """After an iteration of an interchanged loop with ``break`` (``Interchange.exits``): leave
    the loop once every thread of the strip has left it, and once few still run, run each of
    those threads' remaining iterations on its own, as the plain loop would. A loop of up to
    1000 iterations that its threads leave after 5 then takes 5, and one thread of the strip
    running longer than the others costs its own iterations only."""
    left = " or ".join(swap.exits)
    out.line("rt_running = int32(0)")
    with out.block(f"for {tv} in range(rt_strip, rt_strip_end):"):
        stored = " or ".join(f"rt_carry_{flag}[uint64({tv} - rt_strip)]" for flag in swap.exits)
        out.line(f"rt_running += int32(not ({stored}))")
    with out.block(f"if rt_running * {FEW_LEFT} <= rt_strip_end - rt_strip:"):
        with out.block("if rt_running > 0:"):
            flushes = writer.lane_flush_lines()
            rest = [f"if not ({left}):",
                    "    for rt_rest in range(rt_it + rt_step, rt_stop, rt_step):",
                    f"        {swap.loop.var} = int32(rt_rest)",
                    *("        " + line for line in body + flushes),  # the iteration's lane sums
                    f"        if {left}: break"]
            with out.block(f"for {tv} in range(rt_strip, rt_strip_end):"):
                thread_body(kernel, variant, out, entry + rest + saves)
        out.line("break")


def interchanged_loops(kernel: ir.KernelIR, variant: Variant, out: SourceBuilder,
                        setup: list[str], prologue: list[str], phases: list[SourceBuilder],
                        bounds: tuple[str, str, str], swap: Interchange, writer,
                        pieces: list[Piece] = ()) -> None:
    """The thread loop of an interchanged forward: per strip, every thread's code before the
    loop, then the loop with the strip's threads inside it, then every thread's code after.
    Each phase starts from the ``prologue`` (typed zeros of names read before they are set),
    then takes the carried locals back, as the thread would have found them. Where loops run
    inside the loop, each iteration runs its ``pieces`` in turn, an inner loop's with the
    strip's threads inside it too."""
    for line in setup:
        out.line(line)
    before = assigned(swap.pre)
    with _rows(variant, out) as (start, stop, tv):
        at = f"uint64({tv} - rt_strip)"
        with out.block(f"for rt_strip in range({start}, {stop}, {STRIP}):"):
            out.line(f"rt_strip_end = min(rt_strip + {STRIP}, {stop})")
            with out.block(f"for {tv} in range(rt_strip, rt_strip_end):"):
                saves = [f"rt_carry_{v}[{at}] = {v if v in before else writer.zero(t)}"
                         for v, t in swap.carried.items()]
                thread_body(kernel, variant, out, prologue + phases[0].lines + saves)
            out.line(f"rt_start, rt_stop, rt_step = {', '.join(bounds)}")
            changed = assigned(swap.loop.body)

            def iteration(wide: bool) -> None:
                out.line(f"{swap.loop.var} = int32(rt_it)")
                widened = set(swap.widened) if wide else set()
                loads = [f"{_wide_name(v, v in widened)} = {_carry(v, v in widened)}[{at}]"
                         for v in swap.carried]

                def saved(names: set[str]) -> list[str]:
                    return [f"{_carry(v, v in widened)}[{at}] = {_wide_name(v, v in widened)}"
                            for v in swap.carried if v in names]

                body = phases[3 if wide else 1].lines
                for piece in pieces or [Piece(body, changed)]:
                    with ExitStack() as inner:
                        if piece.var is not None:
                            inner.enter_context(out.block(piece.header()))
                        # A thread that has left the loop does nothing more in it (a flag is set
                        # after the last inner loop only). Its locals are saved back as loaded:
                        # stores under the guard would be masked, and masked stores of bools
                        # ran the loop 7x slower than plain ones.
                        part = guarded(f"not ({' or '.join(swap.exits)})", piece.lines) \
                            if swap.exits else piece.lines
                        with out.block(f"for {tv} in range(rt_strip, rt_strip_end):"):
                            thread_body(kernel, variant, out,
                                        prologue + loads + part + saved(piece.changed))
                for line in writer.lane_flush_lines():  # the iteration's adds at one index
                    out.line(line)
                if swap.exits:
                    _finish_when_few_left(kernel, variant, out, swap, tv, prologue + loads, body,
                                          saved(changed), writer)

            header = "for rt_it in range(rt_start, rt_stop, rt_step):"
            if swap.widened:
                _switched(out, swap.widened, header, iteration)
            else:
                with out.block(header):
                    iteration(False)
            with out.block(f"for {tv} in range(rt_strip, rt_strip_end):"):
                loads = [f"{v} = rt_carry_{v}[{at}]" for v in swap.carried]
                thread_body(kernel, variant, out, prologue + loads + phases[2].lines)

