"""Turn ``break``, ``continue``, ``return`` and inlined-function regions into flags and guards.

After this pass the IR has only straight-line statements, ``If``, ``For`` and ``While``: each
exit sets a bool flag, the rest of the enclosing block runs under ``if not flag``, and loops end
early through their ``exit_flags``. With no jumps left, reversing the code is mechanical, which
is what makes gradients through ``break``/``continue``/``return`` exact.
"""

from __future__ import annotations

from .. import dtypes
from ..frontend import ir
from ..ops import registry


def _flag(kind: str, ident: int) -> str:
    return f"flag_{kind}{ident}"


def break_flag(loop_id: int) -> str:
    """The flag a ``break`` in loop ``loop_id`` sets (the loop's other exits are returns)."""
    return _flag("brk", loop_id)


def kernel_return_flag() -> str:
    """The flag a ``return`` in the kernel's own body sets (an inlined function's returns set
    flags of their own, cleared where the function's code ends)."""
    return _flag("ret", 0)


class _Structurer:
    def __init__(self, locals_: dict[str, type]):
        self.locals = locals_
        self.not_ = registry.lookup("logical_not")[0]

    def declare(self, name: str) -> str:
        self.locals[name] = dtypes.bool_
        return name

    def set_flag(self, name: str, value: bool, like: ir.Stmt) -> ir.Assign:
        return ir.Assign(line=like.line, text=like.text, file=like.file, target=self.declare(name),
                         value=ir.Const(dtypes.bool_, value))

    def none_set(self, flags: set[str]) -> ir.Expr:
        names = sorted(flags)
        any_set: ir.Expr = ir.Var(dtypes.bool_, names[0]) if len(names) == 1 else ir.BoolOp(
            dtypes.bool_, "or", tuple(ir.Var(dtypes.bool_, n) for n in names))
        return ir.Call(dtypes.bool_, self.not_, (any_set,))

    def block(self, stmts: list[ir.Stmt]) -> tuple[list[ir.Stmt], set[str]]:
        out: list[ir.Stmt] = []
        raised: set[str] = set()
        for idx, s in enumerate(stmts):
            new, flags = self.one(s)
            out.extend(new)
            raised |= flags
            rest = stmts[idx + 1:]
            if flags and rest:
                lowered_rest, rest_flags = self.block(rest)
                raised |= rest_flags
                if lowered_rest:
                    out.append(ir.If(line=rest[0].line, text=rest[0].text, file=rest[0].file,
                                     cond=self.none_set(flags), body=lowered_rest, orelse=[]))
                return out, raised
        return out, raised

    def one(self, s: ir.Stmt) -> tuple[list[ir.Stmt], set[str]]:
        if isinstance(s, ir.Break):
            name = break_flag(s.loop_id)
            return [self.set_flag(name, True, s)], {name}
        if isinstance(s, ir.Continue):
            name = _flag("cnt", s.loop_id)
            return [self.set_flag(name, True, s)], {name}
        if isinstance(s, ir.Return):
            name = _flag("ret", s.region)
            return [self.set_flag(name, True, s)], {name}
        if isinstance(s, ir.If):
            body, f1 = self.block(s.body)
            orelse, f2 = self.block(s.orelse)
            return [ir.If(line=s.line, text=s.text, file=s.file, cond=s.cond, body=body, orelse=orelse)], f1 | f2
        if isinstance(s, (ir.For, ir.While)):
            return self.loop(s)
        if isinstance(s, ir.GradOf):
            s.body = self.block(s.body)[0]
            return [s], set()
        if isinstance(s, ir.CustomCall):
            s.forward_body = self.block(s.forward_body)[0]
            if s.replay_body is not None:
                s.replay_body = self.block(s.replay_body)[0]
            s.grad_body = self.block(s.grad_body)[0]
            return [s], set()
        if isinstance(s, ir.Region):
            body, flags = self.block(s.body)
            own = _flag("ret", s.region)
            pre = [self.set_flag(own, False, s)] if own in flags else []
            return pre + body, flags - {own}
        return [s], set()

    def loop(self, s: ir.For | ir.While) -> tuple[list[ir.Stmt], set[str]]:
        body, flags = self.block(s.body)
        brk, cnt = break_flag(s.loop_id), _flag("cnt", s.loop_id)
        if cnt in flags:
            body = [self.set_flag(cnt, False, s)] + body
        exits = tuple(sorted(flags - {cnt}))
        pre = [self.set_flag(brk, False, s)] if brk in flags else []
        if isinstance(s, ir.For):
            new = ir.For(line=s.line, text=s.text, file=s.file, var=s.var, start=s.start,
                         stop=s.stop, step=s.step, body=body, loop_id=s.loop_id, exit_flags=exits,
                         reverse=s.reverse)
        else:
            new = ir.While(line=s.line, text=s.text, file=s.file, cond=s.cond, body=body, loop_id=s.loop_id,
                           exit_flags=exits)
        return pre + [new], flags - {brk, cnt}


def structure(kernel: ir.KernelIR) -> list[ir.Stmt]:
    """The kernel body with every exit lowered to flags; new flags are added to ``kernel.locals``."""
    worker = _Structurer(kernel.locals)
    body, flags = worker.block(kernel.body)
    own = kernel_return_flag()
    if own in flags:
        body = [worker.set_flag(own, False, body[0] if body else ir.Stmt())] + body
    return body
