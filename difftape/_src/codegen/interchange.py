"""Loop interchange across threads, for forward kernels built around one loop of fixed length.

A thread that runs ``for k in range(n)`` with a loop-carried value (``p = p * x``) waits on
that value's latency every iteration, and LLVM cannot vectorize across threads. When the trip
count is the same for every thread, the generated forward runs a strip of ``STRIP`` threads
at a time in three phases: every thread's code before the loop, then ``for k: for thread in
strip: body``, then every thread's code after the loop. Locals that live across the phases or
from one iteration to the next are kept in strip arrays. The loop over the strip's threads has
no dependence from one thread to the next, so it vectorizes: the benchmark's dynamic loop ran
94 -> 10 ms on normal data (and 333 -> 218 ms where it underflows into denormals). In a
multi-dimensional launch, the strips are a row's threads (the innermost dimension's).

Every thread computes exactly what it computed before; only the order in which threads
interleave changes. Warp's threads are unordered, so that is unobservable unless threads share
memory, which is excluded: an array the kernel writes may be read by it only where every access
is at the thread's own element (``x[i] = x[i] + v[i] * dt``: 1M threads of 64 such steps,
forward 160 -> 8.3 ms and backward 562 -> 37 ms on one core, warp-lang 230 / 587), and arrays
passed twice or overlapping keep the plain loop (``cpu._function``). The loop qualifies when

- it is a ``for`` at the top level of the body (under no branch but an early return's:
  ``if i >= n: return`` before it puts the rest of the body under the return's flag, which
  becomes one more exit of the loop, threads that returned skipping it and the code around it:
  ``_returned_early``), or at the top level of a branch without ``else`` (``if active[i]:``),
  whose condition is kept in a flag that becomes an exit the same way (``_lifted_branch``);
  ``reversed(range(...))`` in steps of 1 runs as the same range counted down
  (``_forward_order``); a branch in it that holds loops is spread out around them
  (``_lifted_inner_branches``); the loops inside it must be ``for`` loops at the top
  of its body whose bounds every thread shares (``_uniform_inner_loops``): the strip's threads
  then run inside them too, a piece of the body at a time (``pieces``), where a loop over the
  strip's threads around a per-thread inner loop would not vectorize (15% slower measured);
- a ``break`` in it ends it for its thread alone (and so does a ``return``, whose flag the
  code after the loop is under already: ``structure.kernel_return_flag``): the flag it sets is
  carried, a thread whose flag is set skips the rest of the iterations, and the strip leaves
  the loop once every thread's is (``exits``; ``backends/cpu_loops.py`` runs the last few
  threads on their own, and sums the adds at an index the loop's variable picks after each of
  their iterations too). 1M sphere-tracing loops of up to 32 steps, forward: 152 -> 15 ms on
  one core (warp-lang 148), backward 533 -> 79 ms (below).
- a ``while`` loop is such a ``for`` (``_as_for``), over ``range(WHILE_STEPS)``, whose thread
  breaks once its condition fails; it is taken where the body has no top-level ``for``.
  Loops one after the other at the top of the body are the loops inside a loop of one
  iteration around the body (``ONCE``). 1M
  Newton square roots of ~5 steps: 8.8 -> 2.6 ms (warp-lang 9.6). Its adjoint differentiates
  that ``for``, whose stacks get room for some iterations, and a strip that needs more runs
  again with more (``backends/cpu_loops.py``: ``WHILE_ROOM``).
- its bounds are the same for every thread (constants, shapes, scalar parameters and locals
  computed from those only), and its variable is not read after it;
- the carried locals are plain scalars and fit in ``MAX_BUFFER_BYTES`` of stack.

The adjoint of such a kernel is interchanged the same way, in five phases per strip: the replay
of the code before the loop, the loop's replay (``for k: for thread``), the code after the loop
(replay and reverse), the loop's reverse (``for k descending: for thread``), the reverse of the
code before, in strips of ``ADJOINT_STRIP`` threads. Its stacks hold one lane per thread of
the strip (element ``top * ADJOINT_STRIP + lane``) under one top for the strip, so every thread
must move it alike: the arm of a branch that saves fewer values than the other skips as many
slots (``ForwardWriter.arm_pads``), a loop outside the interchanged one that saves keeps the
adjoint plain (``stack_moves``). With
``break``, a thread's k-th iteration saves at the tops as they stood before iteration k, and it
counts the iterations it ran (``backends/cpu_loops.py``: ``_replay_with_exits``), by which the
reverse knows which iterations are its own. The stacks get their room before the strips
(growing them inside kept LLVM from vectorizing the reverse loop), so bounds read from locals
are written from the parameters, shapes and constants those hold (``inlined``). On AMD's
Zen cores, loops that call a compiled builtin keep the plain adjoint
(``backends/cpu_interchange.py``: ``_calls_builtins``; ``backends/cpu_target.py``). The locals
it carries include the writer's own (replay temporaries, branch conditions, adjoint
accumulators other than those every phase leaves zero: ``left_zero``), so ``phase_flow`` reads
them off the generated code. Each thread's gradients are bit for bit the plain adjoint's;
adds that several threads make into one element are summed in another (fixed) order. The
benchmark's dynamic-loop backward went from 310 to 73 ms on one core.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..frontend import ir
from ..ops import registry
from .activity import own_element
from .offsets import constant, definitions, independent
from .signs import assigned, bindings
from .strips import MAX_BUFFER_BYTES, STRIP
from .structure import break_flag, kernel_return_flag

# The first check for a widened local grown tiny (``widened``) follows this many iterations,
# and each later one twice as many as the one before: checking after every iteration cost 70%
# on normal data, every 16th 5%. A product decaying by a constant factor that is still above
# 2**-64 after c iterations stays above 2**-128 for c more (a denormal for at most the last
# few of them), so the doubling spacing loses little, and a long loop checks rarely.
WIDE_CHECK = 16

# The iterations a ``while`` loop may run in an interchanged forward (``_as_for``): int32's
# range; a thread's loop that ran longer would not end in any time a kernel runs.
WHILE_STEPS = 2**31 - 1

# The variable of the loop of one iteration that ``plan`` puts around loops one after the other.
ONCE = "rt_once"

# The threads of an interchanged adjoint's strip (the forward's are ``STRIP``). Its stacks hold
# every thread's values of every iteration, so their memory grows with the strip, and shorter
# strips measured as fast or faster (one core, backward, strips of 512 -> 64 threads: 1M rays
# of sphere tracing 78 -> 69-74 ms, 1M Newton square roots 5.3 ms both; one thread running
# 100k steps that save two values, 80 ms and 240 MB -> 3.4 ms and 24 MB).
ADJOINT_STRIP = 64


@dataclass
class Interchange:
    pre: list[ir.Stmt]
    loop: ir.For
    post: list[ir.Stmt]
    carried: dict[str, type]  # local → type, kept in a strip array between phases/iterations
    widened: tuple[str, ...] = ()  # carried float32 products, see ``widened``
    exits: tuple[str, ...] = ()  # break and return flags: a thread whose flag is set is done
    unbounded: bool = False  # a while loop's stand-in (``_as_for``)
    inner: tuple[ir.For, ...] = ()  # loops inside ``loop`` (``pieces``)


def plan(kernel: ir.KernelIR, body: list[ir.Stmt], rank: int,
         single_assigned: set[str]) -> Interchange | None:
    """The interchange of ``body`` for launches of ``rank`` dimensions (a row's threads, those
    of the innermost, run in strips), or None."""
    if not (kernel.tid_flat or kernel.tid_vars):
        return None
    head, rest, guard = _returned_early(body)
    if sum(isinstance(s, ir.For) for s in rest) > 1 and \
            kernel.locals.get(ONCE, dtypes.int32) is dtypes.int32:
        # Loops one after the other: the body as the one iteration of a loop around them,
        # which makes them loops inside it (``pieces``), every one interchanged.
        once = ir.For(line=rest[0].line, text=rest[0].text, file=rest[0].file, var=ONCE,
                      start=ir.Const(dtypes.int32, 0), stop=ir.Const(dtypes.int32, 1),
                      step=ir.Const(dtypes.int32, 1), body=rest, loop_id=-1)
        kernel.locals[ONCE] = dtypes.int32
        whole = head + (_under(guard, [once]) if guard else [once])
        swap = plan(kernel, whole, rank, single_assigned)
        if swap is not None:
            return swap
    skip, before, after = None, [], []
    if not any(isinstance(s, (ir.For, ir.While)) for s in rest):
        lifted = _lifted_branch(kernel, rest)
        if lifted is None:
            return None
        before, rest, after, skip = lifted
    at = next((k for k, s in enumerate(rest) if isinstance(s, ir.For)), None)
    unbounded = at is None
    if not unbounded:
        loop, pre = rest[at], rest[:at]
    else:
        at = next((k for k, s in enumerate(rest) if isinstance(s, ir.While)), None)
        if at is None:
            return None
        flag_init, loop = _as_for(kernel, rest[at])
        pre = rest[:at] + flag_init
    post = rest[at + 1:]
    if skip is not None:  # threads whose branch is not taken skip the loop and the code around it
        pre = before + _under(skip, pre)
        post = _under(skip, post) + after
        loop = dataclasses.replace(loop, exit_flags=tuple(sorted({*loop.exit_flags, skip})))
    if guard is not None:  # threads that returned skip the code before, in and after the loop
        pre = head + _under(guard, pre)
        post = _under(guard, post)
        loop = dataclasses.replace(loop, exit_flags=tuple(sorted({*loop.exit_flags, guard})))
    loop = _forward_order(loop)
    if loop.reverse or _shares_memory(kernel, body, single_assigned) or _has_opaque(body):
        return None
    if not set(loop.exit_flags) <= {break_flag(loop.loop_id), kernel_return_flag(), skip}:
        return None
    loop = _lifted_inner_branches(kernel, loop)
    defs = definitions(body, single_assigned)
    params = {p.symbol for p in kernel.flat_params() if not p.is_array}
    fixed = params - assigned(body)
    if not all(independent(e, defs, fixed) for e in (loop.start, loop.stop, loop.step)):
        return None
    if loop.var in _reads(post) or loop.var in _reads(pre):
        return None
    if not _uniform_inner_loops(kernel, loop, defs, fixed, _reads(pre) | _reads(post)):
        return None
    inner = tuple(s for s in loop.body if isinstance(s, ir.For))
    threads = {"tidflat", *(f"tid{k}" for k in range(rank))}
    assigned_before = assigned(pre)
    exposed = set().union(*(_exposed(p if isinstance(p, list) else [p])
                            for p in pieces(loop.body)))
    carried_names = (assigned_before & (_reads(loop.body) | _reads(post))) \
        | (assigned(loop.body) & (exposed | _reads(post)))
    carried_names -= threads | {loop.var} | {s.var for s in inner}
    carried_names |= set(loop.exit_flags)  # read by the guard around each iteration
    if skip is not None:
        kernel.locals[skip] = dtypes.bool_
    carried = {}
    for name in sorted(carried_names):
        t = kernel.locals.get(name)
        if t is None or not (dtypes.is_float(t) or dtypes.is_int(t) or t is dtypes.bool_):
            return None
        carried[name] = t
    size = sum(STRIP * np.dtype(t._np).itemsize for t in carried.values())
    if size > MAX_BUFFER_BYTES:
        return None
    wide = widened(loop, carried) if not loop.exit_flags else ()
    if size + 8 * STRIP * len(wide) > MAX_BUFFER_BYTES:
        wide = ()
    return Interchange(pre, loop, post, carried, wide, loop.exit_flags, unbounded, inner)


def pieces(stmts: list[ir.Stmt]) -> list[list[ir.Stmt] | ir.For]:
    """An interchanged loop's body split at the loops inside it (``_uniform_inner_loops``):
    runs of statements and those loops by turns, a run (maybe empty) first and last. Each
    runs for the strip's threads in a loop of its own, an inner loop's body once per
    iteration of it."""
    split: list[list[ir.Stmt] | ir.For] = [[]]
    for s in stmts:
        if isinstance(s, ir.For):
            split += [s, []]
        else:
            split[-1].append(s)
    return split


def inlined(e: ir.Expr, defs: dict[str, ir.Expr]) -> ir.Expr:
    """``e`` with each local assigned once (``defs``) replaced by the expression it holds."""
    if isinstance(e, ir.Var) and e.name in defs:
        return inlined(defs[e.name], defs)
    if isinstance(e, ir.Cast):
        return dataclasses.replace(e, value=inlined(e.value, defs))
    if isinstance(e, ir.Call):
        return dataclasses.replace(e, args=tuple(inlined(a, defs) for a in e.args))
    return e


def _uniform_inner_loops(kernel: ir.KernelIR, loop: ir.For, defs: dict[str, ir.Expr],
                         fixed: set[str], read_around: set[str]) -> bool:
    """Whether the loops inside ``loop`` (if any) can run with the strip's threads inside them,
    as ``loop`` does: ``for`` loops at the top level of its body, with no loops inside, no
    exits and bounds every thread shares (they are computed around the strip's threads, from
    the parameters, shapes and constants the locals they read hold: ``inlined``), whose
    variables are read in their own bodies only. A ``break`` of
    ``loop`` must follow the last of them (the structuring pass puts the code after a break
    under its flag, so one before would put them under a branch), so that a thread leaves
    ``loop`` between iterations only, as each piece's guard assumes.

    The strip's threads then run each iteration of an inner loop side by side: 262k threads
    of 8 x 8 steps of ``v = v * 0.9 + w[k] * sin(u)``, forward 528 -> ~50 ms."""
    nested = [s for s in ir.walk_stmts(loop.body) if isinstance(s, (ir.For, ir.While))]
    inner = [s for s in loop.body if isinstance(s, ir.For)]
    if len(nested) != len(inner):
        return False  # under a branch, or deeper
    for s in inner:
        if s.reverse or s.exit_flags:
            return False
        bounds = [inlined(e, defs) for e in (s.start, s.stop, s.step)]
        if any(isinstance(e, ir.Var) and e.name in kernel.locals
               for root in bounds for e in ir.walk_expr(root)):
            return False
        if not all(independent(e, {}, fixed) for e in bounds):
            return False
        # (another loop over the same variable is no reader: it sets its own)
        others = [t for t in loop.body if not (isinstance(t, ir.For) and t.var == s.var)]
        if s.var in read_around | _reads(others) | assigned(others) | assigned(s.body):
            return False
    if inner and loop.exit_flags:
        last = max(k for k, s in enumerate(loop.body) if isinstance(s, ir.For))
        if set(loop.exit_flags) & assigned(loop.body[:last + 1]):
            return False
    return True


def _returned_early(body: list[ir.Stmt]) -> tuple[list[ir.Stmt], list[ir.Stmt], str | None]:
    """``body`` as the code before an early ``return`` (``if i >= n: return``), the code after
    it, and the return's flag, where the structuring pass put all of the body after the return
    under ``if not flag`` (``codegen/structure.py``); else ``([], body, None)``."""
    flag = kernel_return_flag()
    if not body or not isinstance(body[-1], ir.If) or body[-1].orelse:
        return [], body, None
    cond = body[-1].cond
    if not (isinstance(cond, ir.Call) and cond.builtin.key == "logical_not"
            and isinstance(cond.args[0], ir.Var) and cond.args[0].name == flag):
        return [], body, None
    head = body[:-1]
    if any(isinstance(s, (ir.For, ir.While)) for s in ir.walk_stmts(head)):
        return [], body, None
    return head, body[-1].body, flag


def _lifted_branch(kernel: ir.KernelIR, stmts: list[ir.Stmt]):
    """Where the loop sits in a branch (``if active[i]: ... for k in range(n): ...``): the
    statements before the branch with the assignment of a new flag, true where the branch is
    not taken (``flag = not cond``); the branch's body; the statements after it; and the flag,
    which becomes one more exit of the loop, set before it, as an early return's flag does
    (``_returned_early``). None where no branch without ``else`` holds a loop at its top level,
    or loops stand elsewhere."""
    at = next((k for k, s in enumerate(stmts) if isinstance(s, ir.If) and not s.orelse
               and any(isinstance(t, (ir.For, ir.While)) for t in s.body)), None)
    if at is None:
        return None
    branch, around = stmts[at], stmts[:at] + stmts[at + 1:]
    if any(isinstance(s, (ir.For, ir.While)) for s in ir.walk_stmts(around)):
        return None
    flag = f"flag_skip{at}"  # added to the kernel's locals where the plan holds (``plan``)
    if kernel.locals.get(flag, dtypes.bool_) is not dtypes.bool_:
        return None
    cleared = ir.Assign(line=branch.line, text=branch.text, file=branch.file, target=flag,
                        value=_not(branch.cond))
    return stmts[:at] + [cleared], branch.body, stmts[at + 1:], flag


def _forward_order(loop: ir.For) -> ir.For:
    """A ``reversed(range(start, stop))`` loop as ``range(stop - 1, start - 1, -1)``, the same
    values in the same order (the loops inside it too); other loops as they are, a reversed
    one with another step too."""
    inner = [_forward_order(s) if isinstance(s, ir.For) else s for s in loop.body]
    if any(a is not b for a, b in zip(inner, loop.body)):
        loop = dataclasses.replace(loop, body=inner)
    if not loop.reverse or constant(loop.step) != 1:
        return loop
    bounds = []
    for e in (loop.stop, loop.start):
        found = registry.resolve("sub", (e.type, e.type))
        if found is None:
            return loop
        bounds.append(ir.Call(found[1], found[0], (e, ir.Const(e.type, 1))))
    return dataclasses.replace(loop, start=bounds[0], stop=bounds[1],
                               step=ir.Const(loop.step.type, -1), reverse=False)


def _lifted_inner_branches(kernel: ir.KernelIR, loop: ir.For) -> ir.For:
    """``loop`` with each branch without ``else`` at the top of its body that holds loops at its
    own top (``if c: A; for j ...: B; C``) spread out so that those loops stand at the top of
    the body: the condition goes to a flag, true where the branch is not taken, and each run of
    the branch's statements and each of its loops' bodies is under ``if not flag`` (the loops
    run for every thread then, doing nothing in those that did not take the branch)."""
    body, changed = [], False
    for s in loop.body:
        loops = [t for t in s.body if isinstance(t, ir.For)] if isinstance(s, ir.If) else []
        flag = f"rt_skip_in{loops[0].loop_id}" if loops else ""
        if not loops or s.orelse or kernel.locals.get(flag, dtypes.bool_) is not dtypes.bool_:
            body.append(s)
            continue
        kernel.locals[flag] = dtypes.bool_
        body.append(ir.Assign(line=s.line, text=s.text, file=s.file, target=flag,
                              value=_not(s.cond)))
        for part in pieces(s.body):
            if isinstance(part, ir.For):
                body.append(dataclasses.replace(part, body=_under(flag, part.body)))
            else:
                body += _under(flag, part)
        changed = True
    return dataclasses.replace(loop, body=body) if changed else loop


def _under(flag: str, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    """``stmts`` under ``if not flag`` (nothing where there are none)."""
    if not stmts:
        return []
    first = stmts[0]
    return [ir.If(line=first.line, text=first.text, file=first.file,
                  cond=_not(ir.Var(dtypes.bool_, flag)), body=stmts, orelse=[])]


def _not(e: ir.Expr) -> ir.Expr:
    """``not e``."""
    return ir.Call(dtypes.bool_, registry.lookup("logical_not")[0], (e,))


def _as_for(kernel: ir.KernelIR, loop: ir.While) -> tuple[list[ir.Stmt], ir.For]:
    """``while cond: body`` as a ``for`` over ``range(WHILE_STEPS)`` that a thread leaves by
    the while loop's break flag, set once ``cond`` is false: ``if not cond: flag = True``, then
    the body under ``if not flag`` (where loops stand in the body, the body, then the check
    under ``if not flag``, the first check before the loop). Also the statements before the
    loop: the one that clears the flag, where the while loop has no ``break`` (the structuring
    pass clears it otherwise), and that first check. The flag and the loop's counter are added
    to ``kernel.locals``, as the structuring pass adds its flags."""
    flag, counter = break_flag(loop.loop_id), f"rt_while{loop.loop_id}"
    kernel.locals[flag], kernel.locals[counter] = dtypes.bool_, dtypes.int32
    where = {"line": loop.line, "text": loop.text, "file": loop.file}
    cleared = [] if flag in loop.exit_flags else [
        ir.Assign(**where, target=flag, value=ir.Const(dtypes.bool_, False))]
    check = ir.If(**where, cond=_not(loop.cond),
                  body=[ir.Assign(**where, target=flag, value=ir.Const(dtypes.bool_, True))])
    running = _not(ir.Var(dtypes.bool_, flag))
    if any(isinstance(s, ir.For) for s in loop.body):
        # Loops inside stay at the top of the body (``_uniform_inner_loops``): the condition is
        # checked before the loop and after each iteration that did not break instead.
        cleared.append(check)
        body = [*loop.body, ir.If(**where, cond=running, body=[check])]
    else:
        body = [check, ir.If(**where, cond=running, body=loop.body)]
    steps = [ir.Const(dtypes.int32, v) for v in (0, WHILE_STEPS, 1)]
    return cleared, ir.For(**where, var=counter, start=steps[0], stop=steps[1], step=steps[2],
                           body=body, loop_id=loop.loop_id,
                           exit_flags=tuple(sorted({*loop.exit_flags, flag})))


def widened(loop: ir.For, carried: dict[str, type]) -> tuple[str, ...]:
    """The carried float32 locals that the loop multiplies by something (``p = p * x``).

    Such a product underflows into float32's denormal range whenever it decays (``x**k`` for
    |x| < 1/4 within 64 iterations), and x86 cores take a microcode assist (~40 ns on Intel)
    for every multiply that reads or makes a denormal, however few of a vector's lanes do: the
    benchmark's dynamic loop ran 10 ms on normal data and 175 ms where half its threads
    underflowed. Its strip therefore gets a second version of the iteration, switched to once a
    check (after ``WIDE_CHECK`` iterations, then after twice as many each time) finds such a
    local below 2**-64 in one of the strip's threads (``rt_tiny``): there the local is kept as
    a float64 holding its float32 value, and every float32 product is taken in float64 and
    rounded to float32 (``ExprCoder.wide_product``). That is the float32 product bit for bit
    (two 24-bit significands multiply exactly within float64's 53 bits and exponent range,
    and one rounding follows, to normal or denormal alike), and the float64 multiply takes no
    assist: 164 -> 26 ms. The checks cost ~5% on normal data. Only loops of assignments and
    branches qualify, whose second version writes no other state. The adjoint's replay of the
    loop is widened the same way, and so are the products of its reverse where the strip's
    replay ended widened (``backends/cpu.py``: ``_widened_loop``): backward 195 -> 62 ms."""
    if not all(isinstance(s, (ir.Assign, ir.If)) for s in ir.walk_stmts(loop.body)):
        return ()
    found = set()
    for s in ir.walk_stmts(loop.body):
        if (isinstance(s, ir.Assign) and carried.get(s.target) is dtypes.float32
                and _multiplies(s.value, s.target)):
            found.add(s.target)
    return tuple(sorted(found))


def float32_product(e: ir.Expr) -> bool:
    """Whether ``e`` is a float32 multiply, which a widened iteration takes in float64."""
    return isinstance(e, ir.Call) and e.builtin.key == "mul" and e.type is dtypes.float32


def _multiplies(e: ir.Expr, name: str) -> bool:
    return float32_product(e) and any(isinstance(a, ir.Var) and a.name == name for a in e.args)


def _shares_memory(kernel: ir.KernelIR, body: list[ir.Stmt], single_assigned: set[str]) -> bool:
    """Whether threads could see each other's writes (which a different interleaving would
    change): an array the body writes is also read by it, other than at the thread's own
    element only (``x[i] = x[i] + v[i] * dt`` is safe). The adjoint's replay stores into a
    copy of the array taken before the launch, each thread into its own element too."""
    written, read, shared = set(), set(), set()
    locals_read = _reads(body)
    for s in ir.walk_stmts(body):
        if isinstance(s, (ir.Store, ir.Atomic)):
            written.add(s.array.param)
            if isinstance(s, ir.Atomic) and s.result in locals_read:  # the old value is used
                read.add(s.array.param)
            if not own_element(s.array, s.indices, kernel, single_assigned):
                shared.add(s.array.param)
        for root in ir.statement_exprs(s):
            for e in ir.walk_expr(root):
                if isinstance(e, ir.Load):
                    read.add(e.array.param)
                    if not own_element(e.array, e.indices, kernel, single_assigned):
                        shared.add(e.array.param)
    return bool(written & read & shared)


def _has_opaque(body: list[ir.Stmt]) -> bool:
    """Statements whose locals this module does not follow (custom gradients, ``wp.grad``)."""
    return any(isinstance(s, (ir.CustomCall, ir.GradOf, ir.Print)) for s in ir.walk_stmts(body))


def _reads(stmts: list[ir.Stmt]) -> set[str]:
    names = set()
    for s in ir.walk_stmts(stmts):
        for root in ir.statement_exprs(s):
            for e in ir.walk_expr(root):
                if isinstance(e, ir.Var):
                    names.add(e.name)
    return names


def _exposed(stmts: list[ir.Stmt], defined: set[str] | None = None) -> set[str]:
    """Locals an iteration of ``stmts`` may read before assigning them (they carry a value in
    from the previous iteration). An assignment defines a local for what follows it in the same
    block; a loop defines its variable for its body."""
    defined = set() if defined is None else set(defined)
    exposed: set[str] = set()
    for s in stmts:
        exposed |= _expr_reads(s) - defined
        if isinstance(s, ir.If):
            exposed |= _exposed(s.body, defined) | _exposed(s.orelse, defined)
        elif isinstance(s, ir.For):
            exposed |= _exposed(s.body, defined | {s.var})
        elif isinstance(s, (ir.While, ir.Region)):
            exposed |= _exposed(s.body, defined)
        for name, _ in bindings(s):
            defined.add(name)
    return exposed


def _expr_reads(s: ir.Stmt) -> set[str]:
    """Locals read by ``s``'s own expressions (not those of statements inside it)."""
    return {e.name for root in ir.statement_exprs(s) for e in ir.walk_expr(root)
            if isinstance(e, ir.Var)}


# ---------------------------------------------------------------- adjoints

def parse_phase(lines: list[str]) -> ast.Module:
    """A phase of an interchanged adjoint's generated per-thread code, parsed.

    The adjoint carries the names the writer generates (replay temporaries, branch conditions,
    adjoint accumulators) as well as the user's, so ``phase_flow`` and ``stack_moves`` read the
    generated code itself rather than the IR."""
    return ast.parse(textwrap.dedent("\n".join(lines)))


def phase_flow(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The locals a phase assigns, and those it may read before assigning them (upward
    exposed: their value comes in from an earlier phase or iteration)."""
    exposed, _ = _flow(tree.body, set())
    return _stores(tree), exposed


def live_names(trees: list[ast.Module], outlive: set[str] = frozenset()) -> set[str]:
    """The locals whose values the phases' effects depend on: those read by a statement other
    than an assignment to a plain name (stores into arrays and stacks, a branch's test, a
    loop's range, a call made for its effect), the locals in ``outlive`` (read after the
    phases: a chunk's accumulators of thread-invariant adds), and, in turn, those an assignment
    to a live local reads. A carried local outside this set (a loop-carried sum the reverse
    sweep never reads) need not be carried: the replay's arithmetic on it is dead code once
    nothing stores it."""
    assigns: list[tuple[set[str], set[str]]] = []  # (targets, names read), plain names only
    live: set[str] = set(outlive)

    def visit(stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, ast.If):
                live.update(_loads(s.test))
                visit(s.body)
                visit(s.orelse)
            elif isinstance(s, (ast.For, ast.While)):
                live.update(_loads(s.iter if isinstance(s, ast.For) else s.test))
                visit(s.body)
            elif isinstance(s, (ast.Assign, ast.AugAssign)) and all(
                    isinstance(t, ast.Name) for t in (
                        s.targets if isinstance(s, ast.Assign) else [s.target])):
                reads = _loads(s.value)
                if isinstance(s, ast.AugAssign):
                    reads.add(s.target.id)
                assigns.append((_stores(s), reads))
            else:
                live.update(_loads(s))

    for tree in trees:
        visit(tree.body)
    changed = True
    while changed:
        changed = False
        for targets, reads in assigns:
            if targets & live and not reads <= live:
                live |= reads
                changed = True
    return live


def left_zero(tree: ast.Module, name: str, zero: str) -> bool:
    """Whether a phase that starts with local ``name`` equal to ``zero`` (a constant's name)
    leaves it so on every path: where it assigns it, its last assignment is ``zero``. An
    adjoint accumulator read by ``+=`` and cleared once consumed (``adj_h``) is then zero
    between phases and iterations, and need not be carried: the prologue's zero stands in."""
    return _left_zero(tree.body, name, zero, True)


def _left_zero(stmts: list[ast.stmt], name: str, zero: str, zeroed: bool) -> bool:
    for s in stmts:
        if isinstance(s, ast.If):
            zeroed = (_left_zero(s.body, name, zero, zeroed)
                      and _left_zero(s.orelse, name, zero, zeroed))
        elif isinstance(s, (ast.For, ast.While)):
            zeroed = zeroed and _left_zero(s.body, name, zero, zeroed)
        elif name in _stores(s):
            zeroed = (isinstance(s, ast.Assign) and len(s.targets) == 1
                      and isinstance(s.targets[0], ast.Name)
                      and isinstance(s.value, ast.Name) and s.value.id == zero)
    return zeroed


def stack_moves(tree: ast.Module) -> dict[str, int] | None:
    """How far a phase moves each stack's top (``ftop``, ``itop``), or None where that differs
    between paths: a branch whose arms save different counts, a loop that saves. The stacks of
    an interchanged adjoint have one lane per thread of the strip and one top for all of them,
    so every thread must move it alike."""
    return _moves(tree.body)


def _moves(stmts: list[ast.stmt]) -> dict[str, int] | None:
    total = {"ftop": 0, "itop": 0}
    for s in stmts:
        if isinstance(s, ast.If):
            arm, other = _moves(s.body), _moves(s.orelse)
            if arm is None or arm != other:
                return None
            moves = arm
        elif isinstance(s, (ast.For, ast.While)):
            moves = _moves(s.body)
            if moves is None or any(moves.values()):
                return None
            continue
        elif isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) \
                and s.target.id in total:
            if not isinstance(s.value, ast.Constant) or not isinstance(s.op, (ast.Add, ast.Sub)):
                return None
            moves = {s.target.id: s.value.value if isinstance(s.op, ast.Add) else -s.value.value}
        elif _stores(s) & total.keys():
            return None
        else:
            continue
        for top, n in moves.items():
            total[top] += n
    return total


def _flow(stmts: list[ast.stmt], defined: set[str]) -> tuple[set[str], set[str]]:
    """Names ``stmts`` may read before assigning, and the names defined on every path after."""
    defined = set(defined)
    exposed: set[str] = set()
    for s in stmts:
        if isinstance(s, ast.If):
            exposed |= _loads(s.test) - defined
            exposed_body, after_body = _flow(s.body, defined)
            exposed_else, after_else = _flow(s.orelse, defined)
            exposed |= exposed_body | exposed_else
            defined = after_body & after_else
        elif isinstance(s, (ast.For, ast.While)):
            head = s.iter if isinstance(s, ast.For) else s.test
            exposed |= _loads(head) - defined
            inner = defined | (_stores(s.target) if isinstance(s, ast.For) else set())
            exposed |= _flow(s.body, inner)[0]  # it may run no iteration: defines nothing
        else:
            reads = _loads(s)
            if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
                reads.add(s.target.id)
            exposed |= reads - defined
            defined |= _stores(s)
    return exposed, defined


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _stores(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)}
