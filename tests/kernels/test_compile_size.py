"""What keeps Numba's compile time down for composite-heavy kernels: each component of an array
element a composite builtin reads is loaded once into a temporary, constant indices are typed
module constants, and Numba answers repeated typing questions from a memo
(``backends/cpu_numba_memo.py``). Gradients stay exact."""

import operator
import re

import numba
import numpy as np
import pytest
from numba.core import ir as numba_ir
from numba.core import lowering, types
from numba.core.registry import cpu_target
from numba.core.errors import TypingError
from numba.core.types.functions import BaseFunction

import difftape as wp
from difftape._src.backends import cpu_numba_memo
from tests.fdcheck import check_tape


@wp.kernel
def rigid_chain(q: wp.array(dtype=wp.quatd), t: wp.array(dtype=wp.transformd),
                v: wp.array(dtype=wp.vec3d), out: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    a = v[i]
    r = q[i]
    a = wp.quat_rotate(r, a)
    a = wp.transform_point(t[i], a)
    r = wp.normalize(r * q[i])
    a = wp.transform_vector(t[i], wp.quat_rotate_inv(r, a))
    out[i] = a + wp.cross(a, v[i])


DTYPES = {"q": wp.quatd, "t": wp.transformd, "v": wp.vec3d, "out": wp.vec3d}


def _inputs(n: int = 5, seed: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    t = np.concatenate([rng.standard_normal((n, 3)), q[::-1]], axis=1)
    return {"q": q, "t": t, "v": rng.standard_normal((n, 3))}


def _run(arrays: dict) -> None:
    wp.launch(rigid_chain, dim=arrays["v"].shape[0],
              inputs=[arrays["q"], arrays["t"], arrays["v"], arrays["out"]])


def _functions(source: str) -> dict[str, str]:
    """Generated function name -> its body without comments."""
    parts = re.split(r"\ndef (\w+)\(", source)
    return {name: "\n".join(line for line in body.splitlines()
                            if not line.strip().startswith("#"))
            for name, body in zip(parts[1::2], parts[2::2])}


def test_each_element_component_is_read_once_per_statement():
    """``transform_point(t[i], a)`` reads the rotation's w five times, and ``transform_vector``
    reads the rotation only: each rotation component is loaded once in each of the two
    statements (into a temporary where it is used more than once), each translation component
    once in all. The adjoint adds into ``t``'s gradient as often."""
    functions = _functions(rigid_chain.source())
    reads = {k: 1 if k < 3 else 2 for k in range(7)}
    for k, count in reads.items():
        assert len(re.findall(rf"\bt\[uint64\(t0\), u64_{k}\]",
                              functions["rigid_chain_forward"])) == count, k
        assert len(re.findall(rf"adj_t\[uint64\(t0\), u64_{k}\] \+=",
                              functions["rigid_chain_adjoint"])) == count, k


def test_constant_indices_are_module_constants():
    source = rigid_chain.source()
    assert "u64_3 = np.uint64(3)" in source
    assert "uint64(i32_" not in source


def test_the_replay_assigns_once_assigned_locals_directly():
    """``tmp_7 = link[...]``, not ``var_19 = link[...]`` and then ``tmp_7 = var_19``: the value's
    temporary is the local itself, which nothing reassigns before the reverse sweep reads it.
    Locals assigned again (``a``, ``r``) still get their value through a temporary."""
    adjoint = _functions(rigid_chain.source())["rigid_chain_adjoint"]
    assert re.search(r"^\s*tmp_\d+ = \(?[\w\[]", adjoint, re.M)
    assert not re.search(r"^\s*tmp_\d+ = var_\d+$", adjoint, re.M)
    assert re.search(r"^\s*a_0 = var_\d+$", adjoint, re.M)


def test_an_accumulator_known_to_be_zero_starts_with_its_first_add():
    """In straight-line reverse code an accumulator's first add is a plain assignment
    (``acc_7 = g``, not ``acc_7 = adj_x + g`` with ``adj_x`` zero), also after its value was
    taken (no ``acc_9 = f64_0p0 + g``); one whose adds all became versions is never zeroed."""
    adjoint = _functions(rigid_chain.source())["rigid_chain_adjoint"]
    assert re.search(r"^\s*acc_\d+ = \(", adjoint, re.M)
    assert not re.search(r"= f(32|64)_0p0 \+ ", adjoint)
    zeroed = re.findall(r"^\s*(adj_\w+) = f64_0p0$", adjoint, re.M)
    for name in zeroed:
        assert len(re.findall(rf"\b{name}\b", adjoint)) > 1, name
    first = {}
    for version, source in re.findall(r"^\s*(acc_\d+) = (adj_\w+) \+ ", adjoint, re.M):
        first.setdefault(source, version)
    assert all(name in zeroed for name in first), "read by name, so zeroed first"


def test_gradients_match_finite_differences():
    check_tape(_run, _inputs(), {"out": np.zeros((5, 3))}, DTYPES)


def test_call_type_memo_gives_numbas_answers():
    @numba.njit  # compiled here whatever the disk cache holds
    def scaled(x, y):
        return x * y + x

    assert scaled(2.0, 3.0) == 8.0
    get_call_type = BaseFunction.get_call_type
    assert get_call_type.original is not None
    memo = get_call_type.memo
    assert any(f.typing_key is operator.mul and args == (types.float64, types.float64)
               for f, _, args in memo)
    for (function, context, args), signature in list(memo.items()):
        assert function.get_call_type.__func__ is get_call_type
        assert get_call_type.original(function, context, args, {}) == signature


def test_memo_scope():
    context = cpu_target.typing_context
    context.refresh()
    mul = context.resolve_value_type(operator.mul)
    f32 = types.float32
    assert cpu_numba_memo.memoizable(mul, (f32, f32), {})
    assert cpu_numba_memo.memoizable(mul, (types.Array(f32, 2, "C"), types.UniTuple(
        types.uint64, 2)), {})
    assert not cpu_numba_memo.memoizable(mul, (types.literal(2), f32), {})
    assert not cpu_numba_memo.memoizable(mul, (f32, f32), {"x": f32})
    assert not cpu_numba_memo.memoizable(mul, (types.unicode_type, f32), {})
    assert not cpu_numba_memo.memoizable(context.resolve_value_type(max), (f32, f32), {})
    size = len(BaseFunction.get_call_type.memo)
    with pytest.raises(TypingError):  # no template matches: raised, and raised again
        mul.get_call_type(context, (types.NPDatetime("s"), types.boolean), {})
    with pytest.raises(TypingError):
        mul.get_call_type(context, (types.NPDatetime("s"), types.boolean), {})
    assert len(BaseFunction.get_call_type.memo) == size
    assert mul.get_call_type(context, (f32, f32), {}).return_type == f32


def test_lowering_shortcut_and_apply_once():
    shortcut = lowering._lit_or_omitted
    assert shortcut(numba_ir.UNDEFINED) == shortcut.original(numba_ir.UNDEFINED)
    assert shortcut(numba_ir.UNDEFINED) == types.Omitted(numba_ir.UNDEFINED)
    assert shortcut(3) == types.literal(3)
    get_call_type = BaseFunction.get_call_type
    cpu_numba_memo.apply()
    assert BaseFunction.get_call_type is get_call_type and lowering._lit_or_omitted is shortcut


def test_operators_resolve_as_numba_resolves_them():
    from numba.core.typing.context import BaseContext
    context = cpu_target.typing_context
    context.refresh()
    resolve = BaseContext.resolve_value_type
    for op in (operator.mul, operator.add, operator.getitem, operator.setitem, operator.iadd,
               operator.neg, operator.lt, operator.truediv):
        assert resolve(context, op) is resolve.original(context, op)
    assert resolve(context, max) == resolve.original(context, max)  # not an operator
    assert resolve(context, 3) == types.int64
    with pytest.raises(ValueError):
        resolve(context, object())
