"""The Numba compiler pipeline generated kernels are compiled with: Numba's nopython pipeline less
the passes for constructs generated code never contains.

Numba's default pipeline serves any Python function: it inlines closures, lifts ``with`` blocks,
unrolls literal loops, rewrites array expressions after typing, and rebuilds SSA form so that a
variable may hold values of different types. Generated kernels have none of these: one statement
per operation, every literal typed, every local of one type throughout. On the rigid chain's
~4,000-statement adjoint, SSA reconstruction alone cost 0.4 s (it searches a basic block for each
definition it renames, and the thread loop's body is one block of thousands of statements). The
rigid chain's forward and adjoint compile in 3.6 s of CPU time instead of 4.6 (the fastest of four
alternating cold runs each).

Without SSA, Numba types a variable assigned more than once by unifying the types of its
definitions: ``float32`` and ``float64`` would silently become ``float64``. Generated code never
does that, and :class:`CheckOneTypePerLocal` makes sure of it after typing: a variable defined
with two different types fails the trimmed pipeline, and Numba then compiles the function again
with its default pipeline (SSA included), which types it as before, so the result never depends
on which pipeline compiled it.
"""

from __future__ import annotations

from numba.core import errors, ir, types
from numba.core.compiler import Compiler, CompilerBase
from numba.core.compiler_machinery import AnalysisPass, PassManager, register_pass
from numba.core.typed_passes import (IRLegalization, NativeLowering, NopythonTypeInference,
                                     NoPythonBackend, NoPythonSupportedFeatureValidation,
                                     PreLowerStripPhis, InlineOverloads)
from numba.core.typing.typeof import typeof
from numba.core.untyped_passes import (DeadBranchPrune, FixupArgs, GenericRewrites, IRProcessing,
                                       LiteralPropagationSubPipelinePass, RewriteDynamicRaises,
                                       RewriteSemanticConstants, TranslateByteCode)


# (function, reason) of each compilation the trimmed pipeline gave up on, for tests and debugging.
GAVE_UP: list[tuple[str, str]] = []


class MixedTypeLocal(errors.NumbaError):
    """A variable is defined with values of different types (the trimmed pipeline gives up)."""


@register_pass(mutates_CFG=False, analysis_only=True)
class CheckOneTypePerLocal(AnalysisPass):
    """Fail unless every variable defined more than once gets the same type from each
    definition (what SSA reconstruction would have kept apart)."""

    _name = "difftape_one_type_per_local"

    def __init__(self):
        AnalysisPass.__init__(self)

    def run_pass(self, state):
        definitions: dict[str, list] = {}
        for block in state.func_ir.blocks.values():
            for stmt in block.body:
                if isinstance(stmt, ir.Assign):
                    definitions.setdefault(stmt.target.name, []).append(stmt.value)
        for name, values in definitions.items():
            if len(values) < 2:
                continue
            expected = types.unliteral(state.typemap[name])
            for value in values:
                found = _value_type(value, state)
                if found is None or not _same_values(types.unliteral(found), expected):
                    reason = f"'{name}' is {expected} but defined as {found}"
                    GAVE_UP.append((state.func_id.func_qualname, reason))
                    raise MixedTypeLocal(reason)
        return False


def _same_values(found, expected) -> bool:
    """Whether a value of type ``found`` held as ``expected`` computes exactly as it would held
    as ``found``: the same type, or an integer widened to one of the same signedness (Numba
    computes integer arithmetic in 64 bits anyway, so ``trip += int32(1)`` is int64 after its
    first step either way)."""
    if found == expected:
        return True
    return (isinstance(found, types.Integer) and isinstance(expected, types.Integer)
            and found.signed == expected.signed and found.bitwidth <= expected.bitwidth)


def _value_type(value, state):
    """The type of an assignment's right-hand side; None where typing did not record one."""
    if isinstance(value, ir.Var):
        return state.typemap.get(value.name)
    if isinstance(value, ir.Arg):
        return state.args[value.index]
    if isinstance(value, (ir.Const, ir.Global, ir.FreeVar)):
        try:
            return typeof(value.value)
        except ValueError:
            return None
    if isinstance(value, ir.Expr):
        signature = state.calltypes.get(value)
        if signature is not None:
            return signature.return_type
        if value.op == "cast":
            return state.typemap.get(value.value.name)
        if value.op == "static_getitem" and isinstance(value.index, int):
            container = state.typemap.get(value.value.name)
            if isinstance(container, types.BaseTuple):  # rt_sincos(x)[1]
                return container[value.index]
    return None


class GeneratedCodeCompiler(CompilerBase):
    """Numba's compiler for generated kernels (``@njit(pipeline_class=...)``): the trimmed
    pipeline, or where it gives up, Numba's default compiler from the start (a new one: the
    trimmed pipeline's typing leaves its state, the return type among it, decided)."""

    def __init__(self, typingctx, targetctx, library, args, return_type, flags, locals):
        super().__init__(typingctx, targetctx, library, args, return_type, flags, locals)
        self._arguments = (typingctx, targetctx, library, args, return_type, flags, locals)

    def define_pipelines(self):
        return [_trimmed(self.state)]

    def compile_extra(self, func):
        try:
            return super().compile_extra(func)
        except MixedTypeLocal:
            return Compiler(*self._arguments).compile_extra(func)


def _trimmed(state) -> PassManager:
    pm = PassManager("difftape_generated")
    if state.func_ir is None:
        pm.add_pass(TranslateByteCode, "analyzing bytecode")
        pm.add_pass(FixupArgs, "fix up args")
    pm.add_pass(IRProcessing, "processing IR")
    pm.add_pass(RewriteSemanticConstants, "rewrite semantic constants")
    pm.add_pass(GenericRewrites, "nopython rewrites")  # constant getitems, raises, print
    pm.add_pass(RewriteDynamicRaises, "rewrite dynamic raises")
    pm.add_pass(DeadBranchPrune, "dead branch pruning")  # `if True:` of specialised adjoints
    pm.add_pass(LiteralPropagationSubPipelinePass, "literal propagation")
    pm.add_pass(NopythonTypeInference, "nopython frontend")
    pm.add_pass(CheckOneTypePerLocal, "one type per local")
    pm.add_pass(PreLowerStripPhis, "remove phis nodes")
    pm.add_pass(InlineOverloads, "inline overloaded functions")
    pm.add_pass(NoPythonSupportedFeatureValidation, "ensure supported features")
    pm.add_pass(IRLegalization, "ensure IR is legal prior to lowering")
    pm.add_pass(NativeLowering, "native lowering")
    pm.add_pass(NoPythonBackend, "nopython mode backend")
    pm.finalize()
    return pm
