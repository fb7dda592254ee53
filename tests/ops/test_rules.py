"""Every builtin record, checked from the registry (STYLE §7.8).

* Tier A, uncompiled: each derivative rule passes the dot-product test against float64 central
  differences at points drawn from the record's ``sample``; forwards match their ``reference``;
  Warp's edge conventions (SPEC §6 items 24–29) hold when the rules are called directly.
* Meta-tests: every record is complete, every rule is exercised, the checker rejects wrong rules.
* Tier B: every forward and rule compiles with ``numba.njit`` and agrees with the Python result.
"""

from __future__ import annotations

import functools
import inspect
import math
import zlib

import numba
import numpy as np
import pytest

import difftape._src.ops  # noqa: F401 - registers every builtin
from difftape._src import dtypes
from difftape._src.backends import cpu_symbols
from difftape._src.codegen import naming
from difftape._src.ops import registry
from difftape._src.ops.registry import Builtin, Float, Overload, TypeVar

POINTS = 4  # sample points per derivative and reference check
EPS = 1e-6  # central-difference step
DEFAULT_FLOAT_DOMAIN = (-3.0, 3.0)  # where a record gives no sample for an input
DEFAULT_INT_DOMAIN = (-5, 6)
TEST_TYPE = {registry.Float: dtypes.float64, registry.Int: dtypes.int64}

# Warp names that must exist (the brief's list; operators by their keys).
REQUIRED_KEYS = """
    add sub mul div mod floordiv pow neg pos lt le gt ge eq ne bit_and bit_or bit_xor lshift
    rshift invert logical_not min max clamp abs sign step nonzero floor ceil round rint trunc frac
    sqrt cbrt exp log log2 log10 sin cos tan sinh cosh tanh asin acos atan atan2 degrees radians
    lerp smoothstep copysign where isnan isinf isfinite atomic_add atomic_sub atomic_min atomic_max
""".split()


# --- Cases from the registry ----------------------------------------------------------------------


def instantiate(ov: Overload, table: dict = TEST_TYPE) -> tuple[type, ...]:
    """Concrete input types of ``ov``, each TypeVar replaced by its type in ``table``."""
    return tuple(table[spec] if isinstance(spec, TypeVar) else spec for _, spec in ov.inputs)


def case_id(record: Builtin, types: tuple[type, ...]) -> str:
    """``sin(float64)``, ``where(bool,float64)``: the key and the distinct input types."""
    names = dict.fromkeys(dtypes.type_name(t) for t in types)
    return f"{record.key}({','.join(names)})"


def is_testable(record: Builtin) -> bool:
    """False for records the code generator lowers itself (atomics): no runnable forward."""
    return record.impl is None


def differentiable_cases() -> list:
    cases = []
    for record in registry.all_builtins():
        if not record.is_differentiable or record.impl == "random":  # test_random_rules
            continue
        for ov in record.overloads:
            types = instantiate(ov)
            if any(record.differentiable[name] and dtypes.is_float(t)
                   for name, t in zip(record.param_names, types)):
                cases.append(pytest.param(record, types, id=case_id(record, types)))
    return cases


def reference_cases() -> list:
    return [pytest.param(record, instantiate(ov), id=case_id(record, instantiate(ov)))
            for record in registry.all_builtins() if record.reference is not None
            for ov in record.overloads]


def record_id(record: Builtin) -> str:
    """``add(a,b: Float|Int)``, ``div(a,b: Int)``: the key, its parameters and each overload's
    distinct input types."""
    sigs = (",".join(dict.fromkeys(repr(s) if isinstance(s, TypeVar) else dtypes.type_name(s)
                                   for _, s in ov.inputs)) for ov in record.overloads)
    return f"{record.key}({','.join(record.param_names)}: {'|'.join(dict.fromkeys(sigs))})"


def record_cases(testable: bool = True) -> list:
    """Scalar records; composite records (vectors, matrices…) are checked in test_composite_rules,
    random draws in test_random_rules."""
    return [pytest.param(record, id=record_id(record)) for record in registry.all_builtins()
            if is_testable(record) == testable and record.impl not in ("composite", "random")]


DIFFERENTIABLE_CASES = differentiable_cases()


def rng_for(name: str) -> np.random.Generator:
    """A generator seeded from the case name: fixed, and independent between cases."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def draw_point(record: Builtin, types: tuple[type, ...], rng: np.random.Generator) -> tuple:
    """One input tuple of Python scalars drawn from the record's ``sample`` or a default domain."""
    point = []
    for name, t in zip(record.param_names, types):
        if t is dtypes.bool_:
            point.append(bool(rng.integers(2)))
        elif dtypes.is_int(t):
            lo, hi = record.sample.get(name, DEFAULT_INT_DOMAIN)
            if not (isinstance(lo, int) and isinstance(hi, int)):  # a float sample: cover it
                lo, hi = math.floor(lo), math.floor(hi) + 1
            point.append(int(rng.integers(lo, hi)))
        else:
            lo, hi = record.sample.get(name, DEFAULT_FLOAT_DOMAIN)
            point.append(float(rng.uniform(lo, hi)))
    return tuple(point)


# --- The checker ----------------------------------------------------------------------------------


def check_rule(record: Builtin, point: tuple, direction: tuple, adj_ret: float) -> None:
    """Dot-product test of ``record.adjoint`` at ``point``; raises AssertionError if it fails.

    ``sum_i adj_i · v_i`` must equal ``adj_ret · (f(x + εv) − f(x − εv)) / 2ε`` within
    ``record.tolerance`` (relative), plus the rounding error of the difference quotient (absolute).
    Non-differentiable inputs must get ``None`` and stay fixed.
    """
    names = record.param_names
    ret = record.forward(*point)
    adj = record.adjoint(*point, ret, adj_ret)
    assert isinstance(adj, tuple) and len(adj) == len(names), (
        f"{record.key}: the rule must return a tuple of {len(names)} entries, got {adj!r}")
    lhs = 0.0
    for name, a, v in zip(names, adj, direction):
        if record.differentiable[name]:
            assert a is not None, f"{record.key}: differentiable input {name!r} got None"
            lhs += float(a) * v
        else:
            assert a is None, f"{record.key}: non-differentiable input {name!r} got {a!r}, not None"
    shift = [EPS * v if record.differentiable[name] else 0.0 for name, v in zip(names, direction)]
    f_plus = record.forward(*(x + s if s else x for x, s in zip(point, shift)))
    f_minus = record.forward(*(x - s if s else x for x, s in zip(point, shift)))
    rhs = adj_ret * (f_plus - f_minus) / (2.0 * EPS)
    atol = 1e-9 * abs(adj_ret) * max(1.0, abs(ret))
    tol = record.tolerance * max(abs(lhs), abs(rhs)) + atol
    assert abs(lhs - rhs) <= tol, (
        f"{record.key} at {point}, direction {direction}: rule gives {lhs!r}, "
        f"central differences give {rhs!r} (difference {abs(lhs - rhs):.3g} > {tol:.3g})")


def check_record_at_points(record: Builtin, types: tuple[type, ...], seed_name: str) -> None:
    rng = rng_for(seed_name)
    for _ in range(POINTS):
        point = draw_point(record, types, rng)
        direction = tuple(float(rng.uniform(-1.0, 1.0)) if dtypes.is_float(t) else 0.0
                          for t in types)
        adj_ret = float(rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2.0))
        check_rule(record, point, direction, adj_ret)


# --- Tier A: derivative rules and forwards --------------------------------------------------------


@pytest.mark.parametrize(("record", "types"), DIFFERENTIABLE_CASES)
def test_rule_matches_central_differences(record, types):
    check_record_at_points(record, types, case_id(record, types))


@pytest.mark.parametrize(("record", "types"), reference_cases())
def test_forward_matches_reference(record, types):
    rng = rng_for("reference " + case_id(record, types))
    for _ in range(POINTS):
        point = draw_point(record, types, rng)
        got, want = record.forward(*point), record.reference(*point)
        if dtypes.is_float(record.resolve(types)):
            assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12), (point, got, want)
        else:
            assert got == want, (point, got, want)


# --- Meta-tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("record", record_cases() + record_cases(testable=False))
def test_record_is_complete(record):
    assert record.doc and "\n" not in record.doc, "needs a one-line docstring"
    names = record.param_names
    for ov in record.overloads:
        assert tuple(n for n, _ in ov.inputs) == names, "overloads must share parameter names"
    for name in names:
        if record.differentiable[name]:
            assert record.adjoint is not None, f"{name!r} is differentiable but there is no rule"
            lo, hi = record.sample[name]
            assert lo < hi, f"empty sample for {name!r}"
        else:
            assert record.reason.strip(), f"{name!r} is not differentiable: give a reason"
    if record.adjoint is not None:
        assert record.is_differentiable, "a rule on a record with no differentiable input"
        params = list(inspect.signature(record.adjoint).parameters)
        assert params == [*names, "ret", "adj_ret"], params


def test_every_rule_is_exercised():
    tested = [p.id for p in DIFFERENTIABLE_CASES]
    assert len(tested) == len(set(tested)), "duplicate test ids"
    records = [p.id for p in record_cases() + record_cases(testable=False)]
    assert len(records) == len(set(records)), "duplicate record ids"
    tested_records = {id(p.values[0]) for p in DIFFERENTIABLE_CASES}
    with_rule = {id(r) for r in registry.all_builtins() if r.adjoint is not None}
    assert tested_records == with_rule


def test_required_warp_keys_are_registered():
    keys = {r.key for r in registry.all_builtins()}
    assert set(REQUIRED_KEYS) <= keys, sorted(set(REQUIRED_KEYS) - keys)


def all_instantiations(ov: Overload) -> list[tuple[type, ...]]:
    """Every concrete signature ``ov`` accepts (each TypeVar over all of its allowed types)."""
    variables = list(dict.fromkeys(s for _, s in ov.inputs if isinstance(s, TypeVar)))
    tables = [{}]
    for var in variables:
        tables = [{**table, var: t} for table in tables for t in var.allowed]
    return [instantiate(ov, table) for table in tables]


def test_every_overload_is_reachable():
    """``resolve`` picks each overload for its own types: no record shadows another of its key."""
    for record in registry.all_builtins():
        for ov in record.overloads:
            for types in all_instantiations(ov):
                found = registry.resolve(record.key, types)
                assert found is not None and found[0] is record, (record.symbol, types)
                assert found[1] is ov.bind(types)


def test_resolve_picks_int_and_float_records():
    assert registry.resolve("div", (dtypes.int32, dtypes.int32))[1] is dtypes.int32
    assert registry.resolve("div", (dtypes.float32, dtypes.float32))[1] is dtypes.float32
    assert registry.resolve("lt", (dtypes.float64, dtypes.float64))[1] is dtypes.bool_
    assert registry.resolve("eq", (dtypes.bool_, dtypes.bool_))[1] is dtypes.bool_
    assert registry.resolve("add", (dtypes.float32, dtypes.float64)) is None
    assert registry.resolve("bit_and", (dtypes.float32, dtypes.float32)) is None


def _fake(adjoint):
    """An unregistered sin record with the given rule."""
    return Builtin(key="fake_sin", group="test", forward=math.sin,
                   overloads=(Overload((("x", Float),), Float),), doc="Fake.", adjoint=adjoint,
                   differentiable={"x": True}, sample={"x": (-3.0, 3.0)})


def _fake_pair(adjoint):
    """An unregistered a*b record, differentiable in ``a`` only, with the given rule."""
    return Builtin(key="fake_mul", group="test", forward=lambda a, b: a * b,
                   overloads=(Overload((("a", Float), ("b", Float)), Float),), doc="Fake.",
                   adjoint=adjoint, differentiable={"a": True, "b": False}, reason="fake",
                   sample={"a": (-3.0, 3.0), "b": (-3.0, 3.0)})


@pytest.mark.parametrize("adjoint", [
    pytest.param(lambda x, ret, g: (2.0 * math.cos(x) * g,), id="twice_cos"),
    pytest.param(lambda x, ret, g: (math.cos(x),), id="ignores_adj_ret"),
    pytest.param(lambda x, ret, g: (-math.cos(x) * g,), id="wrong_sign"),
    pytest.param(lambda x, ret, g: (math.cos(x) * g * (1.0 + 1e-4),), id="slightly_off"),
    pytest.param(lambda x, ret, g: math.cos(x) * g, id="not_a_tuple"),
    pytest.param(lambda x, ret, g: (math.cos(x) * g, 0.0), id="wrong_arity"),
    pytest.param(lambda x, ret, g: (None,), id="none_for_differentiable"),
])
def test_checker_rejects_wrong_rules(adjoint):
    record = _fake(adjoint)
    with pytest.raises(AssertionError):
        check_record_at_points(record, (dtypes.float64,), "checker")


def test_checker_rejects_gradient_for_non_differentiable_input():
    record = _fake_pair(lambda a, b, ret, g: (b * g, a * g))
    with pytest.raises(AssertionError, match="non-differentiable"):
        check_record_at_points(record, (dtypes.float64, dtypes.float64), "checker")


def test_checker_accepts_right_rules():
    check_record_at_points(_fake(lambda x, ret, g: (math.cos(x) * g,)), (dtypes.float64,), "ok")
    check_record_at_points(_fake_pair(lambda a, b, ret, g: (b * g, None)),
                           (dtypes.float64, dtypes.float64), "ok")


# --- Warp's edge conventions (SPEC §5.5, §6 items 24–29), evaluated on the rules ------------------


def grad(key: str, *args: float, wrt: int = 0) -> float:
    """The adjoint of input ``wrt`` of builtin ``key`` at ``args`` (float64), seeded with 1."""
    record = registry.resolve(key, (dtypes.float64,) * len(args))[0]
    return record.adjoint(*args, record.forward(*args), 1.0)[wrt]


def g_list(key: str, xs: list[float]) -> list[float]:
    return [grad(key, x) for x in xs]


def test_abs_sqrt_reciprocal_log_edges():  # item 24
    assert g_list("abs", [-2.0, 0.0, 3.0]) == [-1.0, 1.0, 1.0]
    assert g_list("sqrt", [0.0, 4.0]) == [math.inf, 0.25]
    assert [grad("div", 1.0, x, wrt=1) for x in (0.0, 2.0)] == [-math.inf, -0.25]
    assert g_list("log", [0.0, 1.0]) == [math.inf, 1.0]


def test_min_max_clamp_ties():  # item 25
    def two_calls(key, x):
        return grad(key, x, 1.0, wrt=0) + 10.0 * grad(key, 1.0, x, wrt=1)

    assert [two_calls("min", x) for x in (0.0, 1.0, 2.0)] == [11.0, 10.0, 0.0]
    assert [two_calls("max", x) for x in (0.0, 1.0, 2.0)] == [0.0, 10.0, 11.0]
    assert [grad("clamp", x, 0.0, 1.0) for x in (-1.0, 0.0, 0.5, 1.0, 2.0)] == [0, 1, 1, 0, 0]


def test_clamp_bounds_get_the_gradient_where_selected():
    def grads(x):
        return tuple(grad("clamp", x, 0.0, 1.0, wrt=i) for i in range(3))

    assert grads(-1.0) == (0.0, 1.0, 0.0)
    assert grads(0.0) == (1.0, 0.0, 0.0)
    assert grads(1.0) == (0.0, 0.0, 1.0)
    assert grads(2.0) == (0.0, 0.0, 1.0)


def test_min_max_nan_operand_sends_gradient_to_the_other():
    nan = math.nan
    assert [grad("min", nan, 1.0, wrt=i) for i in (0, 1)] == [0.0, 1.0]
    assert [grad("min", 1.0, nan, wrt=i) for i in (0, 1)] == [1.0, 0.0]
    assert [grad("max", nan, 1.0, wrt=i) for i in (0, 1)] == [0.0, 1.0]
    assert [grad("max", 1.0, nan, wrt=i) for i in (0, 1)] == [1.0, 0.0]
    assert registry.lookup("min")[0](nan, 1.0) == 1.0
    assert registry.lookup("max")[0](1.0, nan) == 1.0


def test_where_sends_gradient_to_selected_value():  # item 26: where(x>0, x², 3x) at [-1,0,2]
    where = registry.lookup("where")[0]

    def d(x):
        sq, tri = x * x, 3.0 * x
        _, g_sq, g_tri = where.adjoint(x > 0, sq, tri, where(x > 0, sq, tri), 1.0)
        return g_sq * 2.0 * x + g_tri * 3.0

    assert [d(x) for x in (-1.0, 0.0, 2.0)] == [3.0, 3.0, 4.0]
    assert where.adjoint(True, 1.0, 2.0, 1.0, 1.0)[0] is None


def test_piecewise_constant_and_trig_edges():  # item 27
    for key in ("floor", "sign", "round", "rint", "trunc", "ceil", "step", "nonzero", "frac"):
        assert all(not r.is_differentiable and r.adjoint is None for r in registry.lookup(key))
    assert grad("mod", 2.3, 0.7) == 1.0
    assert grad("mod", -2.3, 0.7) == 1.0
    assert g_list("acos", [1.0, 0.0, -1.0]) == [0.0, -1.0, 0.0]
    assert g_list("asin", [1.0, 0.0, -1.0, 1.5, math.nan]) == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert grad("atan2", 0.0, 0.0, wrt=0) + grad("atan2", 0.0, 0.0, wrt=1) == 0.0
    assert grad("tan", 0.0) == 1.0


def test_pow_edges():  # item 28
    dx = [grad("pow", x, 2.0, wrt=0) for x in (0.0, 2.0, -1.0)]
    de = [grad("pow", x, 2.0, wrt=1) for x in (0.0, 2.0, -1.0)]
    assert dx == [0.0, 4.0, -2.0]
    assert math.isnan(de[0]) and math.isnan(de[2])
    assert de[1] == pytest.approx(2.7725887, rel=1e-7)
    assert grad("pow", -2.0, 3.0) == 12.0
    assert math.isnan(grad("pow", -2.0, 0.5))  # negative base, fractional exponent
    assert grad("pow", 0.0, 0.5) == math.inf


def test_smooth_functions_at_zero_and_interpolation():  # item 28
    assert grad("tanh", 0.0) + grad("exp", 0.0) + grad("sin", 0.0) == 3.0
    smooth = grad("smoothstep", 0.0, 1.0, 0.5, wrt=2)
    assert smooth + grad("lerp", 0.0, 2.0, 0.5, wrt=2) == 3.5
    assert [grad("smoothstep", 0.0, 1.0, x, wrt=2) for x in (-1.0, 0.0, 1.0, 2.0)] == [0.0] * 4
    assert grad("smoothstep", 1.0, 1.0, 1.0, wrt=2) == 0.0


def test_copysign_gradient():
    pairs = ((2.0, 3.0), (2.0, -3.0), (-2.0, -3.0), (0.0, -1.0))
    assert [grad("copysign", x, y) for x, y in pairs] == [1.0, -1.0, 1.0, -1.0]
    assert grad("copysign", 2.0, -3.0, wrt=1) == 0.0


def test_cbrt_log_variants_at_zero():
    assert grad("cbrt", 0.0) == math.inf
    assert grad("log2", 0.0) == math.inf
    assert grad("log10", 0.0) == math.inf


# --- Forward semantics: C where Python differs, IEEE where Python raises --------------------------


def fwd(key: str, *args, types=None):
    types = types or tuple(dtypes.int64 if isinstance(a, int) and not isinstance(a, bool)
                           else dtypes.float64 for a in args)
    return registry.resolve(key, types)[0].forward(*args)


@pytest.mark.parametrize(("a", "b", "q", "r"), [
    (7, 2, 3, 1), (-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1), (6, 3, 2, 0), (5, 0, 0, 0)])
def test_integer_division_truncates_like_c(a, b, q, r):
    assert fwd("div", a, b) == q
    assert fwd("floordiv", a, b) == q
    assert fwd("mod", a, b) == r


def test_float_mod_and_floordiv_follow_c():
    assert fwd("mod", -1.5, 1.0) == -0.5
    assert fwd("mod", 1.5, -1.0) == 0.5
    assert fwd("mod", 5.25, 2.0) == 1.25
    assert math.isnan(fwd("mod", 1.0, 0.0))
    assert fwd("floordiv", 1.0, 0.1) == 10.0  # floor(1/0.1); Python's 1.0 // 0.1 is 9.0
    assert fwd("floordiv", -3.0, 2.0) == -2.0
    assert fwd("floordiv", 1.0, 0.0) == math.inf


def test_ieee_results_instead_of_python_exceptions():
    assert fwd("div", 1.0, 0.0) == math.inf
    assert fwd("div", -1.0, 0.0) == -math.inf
    assert math.isnan(fwd("div", 0.0, 0.0))
    assert math.isnan(fwd("sqrt", -1.0))
    assert fwd("log", 0.0) == -math.inf and math.isnan(fwd("log", -1.0))
    assert fwd("log2", 0.0) == -math.inf and fwd("log10", 0.0) == -math.inf
    assert fwd("exp", 1000.0) == math.inf
    assert fwd("acos", 2.0) == 0.0 and fwd("asin", -2.0) == -math.pi / 2  # clamped to [-1, 1]
    assert fwd("pow", 0.0, -1.0) == math.inf
    assert math.isnan(fwd("pow", -8.0, 1.0 / 3.0))
    assert fwd("pow", -2.0, 3.0) == -8.0
    assert fwd("cbrt", -27.0) == -3.0 and fwd("cbrt", 8.0) == 2.0


@pytest.mark.parametrize(("x", "rounded", "rinted"), [
    (0.5, 1.0, 0.0), (1.5, 2.0, 2.0), (2.5, 3.0, 2.0), (-0.5, -1.0, -0.0), (-2.5, -3.0, -2.0),
    (2.4, 2.0, 2.0), (-2.6, -3.0, -3.0), (0.49999999999999994, 0.0, 0.0), (1e300, 1e300, 1e300)])
def test_round_half_away_and_rint_half_even(x, rounded, rinted):
    assert fwd("round", x) == rounded
    assert fwd("rint", x) == rinted and math.copysign(1.0, fwd("rint", x)) == math.copysign(1, x)


def test_truncation_functions():
    assert [fwd("floor", x) for x in (-1.5, -0.0, 2.0, 2.7)] == [-2.0, 0.0, 2.0, 2.0]
    assert [fwd("ceil", x) for x in (-1.5, 0.2, 2.0)] == [-1.0, 1.0, 2.0]
    assert [fwd("trunc", x) for x in (-1.5, 1.5)] == [-1.0, 1.0]
    assert [fwd("frac", x) for x in (-1.25, 1.25, 3.0)] == [-0.25, 0.25, 0.0]
    assert fwd("floor", math.inf) == math.inf and math.isnan(fwd("frac", math.inf))


def test_sign_step_nonzero_follow_warp():
    assert [fwd("sign", x) for x in (-2.0, 0.0, 3.0)] == [-1.0, 1.0, 1.0]
    assert [fwd("step", x) for x in (-2.0, 0.0, 3.0)] == [1.0, 0.0, 0.0]
    assert [fwd("nonzero", x) for x in (-2.0, 0.0, 3.0)] == [1.0, 0.0, 1.0]
    assert [fwd("sign", x) for x in (-2, 0, 3)] == [-1, 1, 1]
    assert [fwd("step", x) for x in (-2, 0, 3)] == [1, 0, 0]
    assert [fwd("nonzero", x) for x in (-2, 0, 3)] == [1, 0, 1]
    assert isinstance(fwd("sign", -2), int) and isinstance(fwd("sign", -2.0), float)


def test_clamp_lerp_smoothstep_values():
    assert [fwd("clamp", x, 0.0, 1.0) for x in (-1.0, 0.5, 2.0)] == [0.0, 0.5, 1.0]
    assert [fwd("clamp", x, 0, 3) for x in (-1, 2, 7)] == [0, 2, 3]
    assert fwd("lerp", 1.0, 3.0, 0.25) == 1.5
    assert [fwd("smoothstep", 0.0, 1.0, x) for x in (-1.0, 0.5, 2.0)] == [0.0, 0.5, 1.0]
    assert [fwd("smoothstep", 1.0, 1.0, x) for x in (0.0, 2.0)] == [0.0, 1.0]


def test_atomics_are_declarations_for_the_code_generator():
    for key in ("atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_exch",
                "atomic_cas"):
        (record,) = registry.lookup(key)
        assert record.side_effect and record.impl == "atomic" and not record.is_differentiable
        with pytest.raises(RuntimeError, match=f"{key}\\(\\) can only be called inside kernels"):
            record(None, 0, *[1.0] * (len(record.param_names) - 2))


# --- Tier B: every forward and rule compiles with Numba and agrees with Python --------------------

COMPILE_TYPES = {Float: (dtypes.float32, dtypes.float64), registry.Int: (dtypes.int64,)}


def compile_instantiations(ov: Overload) -> list[tuple[type, ...]]:
    """Float overloads at float32 and float64, Int overloads at int64."""
    var = next((s for _, s in ov.inputs if isinstance(s, TypeVar)), None)
    if var is None:
        return [instantiate(ov)]
    return [instantiate(ov, {var: t}) for t in COMPILE_TYPES[var]]


def close(got, want, single: bool) -> bool:
    if want is None or isinstance(want, (bool, np.bool_)) or isinstance(want, (int, np.integer)):
        return got == want
    rtol, atol = (1e-4, 1e-6) if single else (1e-12, 1e-12)
    return bool(np.isclose(float(got), float(want), rtol=rtol, atol=atol, equal_nan=True))


@pytest.mark.parametrize("record", record_cases())
def test_compiles_with_numba(record):
    forward = numba.njit(record.forward)
    adjoint = numba.njit(record.adjoint) if record.adjoint is not None else None
    rng = rng_for("numba " + record.symbol)
    for ov in record.overloads:
        for types in compile_instantiations(ov):
            point = draw_point(record, instantiate(ov), rng)
            typed = tuple(dtypes.numpy_dtype(t).type(x) for t, x in zip(types, point))
            as_python = tuple(x.item() for x in typed)  # float32-rounded values, as Python scalars
            single = dtypes.float32 in types
            want = record.forward(*as_python)
            got = forward(*typed)
            assert close(got, want, single), (types, point, got, want)
            if adjoint is None or not any(dtypes.is_float(t) for t in types):
                continue
            out_type = dtypes.numpy_dtype(record.resolve(types)).type
            adj_ret = out_type(0.75)
            want_adj = record.adjoint(*as_python, want, adj_ret.item())
            got_adj = adjoint(*typed, out_type(got), adj_ret)
            assert len(got_adj) == len(want_adj)
            for g, w in zip(got_adj, want_adj):
                assert (g is None) == (w is None) and close(g, w, single), (types, point, g, w)
        for types in compile_instantiations(ov):
            if not all(t is dtypes.float32 for t in types if dtypes.is_float(t)) or \
                    not any(dtypes.is_float(t) for t in types):
                continue
            # the copy kernels call where every float is float32 (cpu_symbols._float32_copy)
            point = draw_point(record, instantiate(ov), rng)
            typed = tuple(dtypes.numpy_dtype(t).type(x) for t, x in zip(types, point))
            as_python = tuple(x.item() for x in typed)
            want = record.forward(*as_python)
            symbol = record.symbol + naming.FLOAT32_SUFFIX
            got = getattr(cpu_symbols, symbol)(*typed)
            assert close(got, want, True), ("float32 copy", types, point, got, want)
            if adjoint is None:
                continue
            out_type = dtypes.numpy_dtype(record.resolve(types)).type
            want_adj = record.adjoint(*as_python, want, 0.75)
            got_adj = getattr(cpu_symbols, "adj_" + symbol)(*typed, out_type(got), out_type(0.75))
            for g, w in zip(got_adj, want_adj):
                assert (g is None) == (w is None) and close(g, w, True), \
                    ("float32 copy", types, point, g, w)


# Edge values where Python and Numba could part ways (IEEE, C integer semantics, NaN tests). Each
# row: key, float64/int64 arguments, forward value, rule result with a seed of 1 (None: no rule).
nan, inf = math.nan, math.inf
EDGE_VALUES = [
    ("div", (1.0, 0.0), inf, (inf, -inf)),
    ("div", (-7, 2), -3, None),
    ("div", (5, 0), 0, None),
    ("mod", (-7, 2), -1, None),
    ("mod", (-1.5, 1.0), -0.5, (1.0, None)),
    ("floordiv", (1.0, 0.1), 10.0, None),
    ("floordiv", (-7, 2), -3, None),
    ("sqrt", (0.0,), 0.0, (inf,)),
    ("log", (0.0,), -inf, (inf,)),
    ("exp", (0.0,), 1.0, (1.0,)),
    ("abs", (0.0,), 0.0, (1.0,)),
    ("min", (nan, 1.0), 1.0, (0.0, 1.0)),
    ("min", (1.0, 1.0), 1.0, (0.0, 1.0)),
    ("max", (1.0, nan), 1.0, (1.0, 0.0)),
    ("clamp", (1.0, 0.0, 1.0), 1.0, (0.0, 0.0, 1.0)),
    ("clamp", (0.0, 0.0, 1.0), 0.0, (1.0, 0.0, 0.0)),
    ("pow", (0.0, 2.0), 0.0, (0.0, nan)),
    ("pow", (-2.0, 3.0), -8.0, (12.0, nan)),
    ("acos", (1.0,), 0.0, (0.0,)),
    ("atan2", (0.0, 0.0), 0.0, (0.0, 0.0)),
    ("smoothstep", (0.0, 1.0, 1.0), 1.0, (0.0, 0.0, 0.0)),
    ("round", (-2.5,), -3.0, None),
    ("rint", (2.5,), 2.0, None),
    ("floor", (-0.5,), -1.0, None),
    ("isnan", (nan,), True, None),
]


@functools.cache
def jitted(fn):
    return numba.njit(fn)


@pytest.mark.parametrize("compiled", [False, True], ids=["python", "numba"])
@pytest.mark.parametrize(("key", "args", "value", "adjoints"), EDGE_VALUES,
                         ids=[f"{k}{a}" for k, a, _, _ in EDGE_VALUES])
def test_edge_values(key, args, value, adjoints, compiled):
    record = registry.resolve(key, tuple(dtypes.int64 if isinstance(a, int) else dtypes.float64
                                         for a in args))[0]
    forward = jitted(record.forward) if compiled else record.forward
    ret = forward(*args)
    assert close(ret, value, single=False), ret
    if adjoints is not None:
        adjoint = jitted(record.adjoint) if compiled else record.adjoint
        got = adjoint(*args, ret, 1.0)
        assert all((g is None) == (w is None) and close(g, w, single=False)
                   for g, w in zip(got, adjoints)), got
