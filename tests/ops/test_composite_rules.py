"""Composite builtins (vectors, matrices, quaternions, transforms) against finite differences.

A composite builtin is Python over components. Here it runs on ``TapeScalar`` values that record
each scalar builtin call and then sweep the scalar derivative rules backwards — the same
composition the code generator emits — and the result is checked against float64 central
differences with a dot-product test, at several points, for every registered composite.
"""

import math

import numpy as np
import pytest

import difftape as wp
from difftape._src import composite, dtypes
from difftape._src.ops import registry
from difftape._src.ops.components import from_components, to_components


class PyTape:
    """Records scalar builtin calls made on TapeScalars, then runs their rules in reverse."""

    def __init__(self):
        self.nodes = []  # (record, input scalars, output scalar)

    def call(self, key, args):
        values = [a.value if isinstance(a, TapeScalar) else a for a in args]
        types = tuple(dtypes.bool_ if isinstance(v, (bool, np.bool_)) else dtypes.float64
                      for v in values)
        record, _ = registry.resolve(key, types)
        out = TapeScalar(self, record.forward(*values))
        self.nodes.append((record, list(args), out))
        return out

    def backward(self):
        for record, args, out in reversed(self.nodes):
            if out.adjoint == 0.0 or record.adjoint is None:
                continue
            values = [a.value if isinstance(a, TapeScalar) else a for a in args]
            contributions = record.adjoint(*values, out.value, out.adjoint)
            for arg, c in zip(args, contributions):
                if isinstance(arg, TapeScalar) and c is not None:
                    arg.adjoint += c


def _op(key, reverse=False):
    def method(self, other):
        return self._difftape_tracer.call(key, (other, self) if reverse else (self, other))
    return method


class TapeScalar:
    def __init__(self, tape, value):
        self._difftape_tracer = tape
        self.value = float(value) if not isinstance(value, (bool, np.bool_)) else bool(value)
        self.adjoint = 0.0

    __add__, __radd__ = _op("add"), _op("add", True)
    __sub__, __rsub__ = _op("sub"), _op("sub", True)
    __mul__, __rmul__ = _op("mul"), _op("mul", True)
    __truediv__, __rtruediv__ = _op("div"), _op("div", True)
    __lt__, __le__, __gt__, __ge__ = _op("lt"), _op("le"), _op("gt"), _op("ge")

    def __neg__(self):
        return self._difftape_tracer.call("neg", (self,))

    def __bool__(self):
        raise AssertionError("composite builtins must be branch-free")


def _leaves(structure):
    if isinstance(structure, list):
        return [leaf for item in structure for leaf in _leaves(item)]
    return [structure]


def _flat_values(value, t):
    comps = to_components(value, t)
    return [float(x) for x in _leaves(comps)] if composite.is_composite(t) else [float(comps)]


def _rebuild(t, flat):
    if composite.is_composite(t):
        return to_components(t(flat), t)
    return flat[0]


def evaluate(record, types, flat_inputs):
    """Forward value (flat list) of ``record`` on float inputs."""
    args, offset = [], 0
    for t in types:
        n = t._length if composite.is_composite(t) else 1
        args.append(_rebuild(t, flat_inputs[offset:offset + n]))
        offset += n
    out = record.forward(*args)
    return [float(x) for x in _leaves(out)] if isinstance(out, list) else [float(out)]


def vjp(record, types, flat_inputs, seed):
    """Adjoint of the flat inputs for output adjoint ``seed``, by the scalar-rule composition."""
    tape = PyTape()
    scalars = [TapeScalar(tape, v) for v in flat_inputs]
    args, offset = [], 0
    for t in types:
        n = t._length if composite.is_composite(t) else 1
        part = scalars[offset:offset + n]
        offset += n
        if not composite.is_composite(t):
            args.append(part[0])
        elif composite.is_matrix(t):
            cols = t._shape[1]
            args.append([part[r * cols:(r + 1) * cols] for r in range(t._shape[0])])
        else:
            args.append(part)
    out = record.forward(*args)
    for o, g in zip(_leaves(out) if isinstance(out, list) else [out], seed):
        if isinstance(o, TapeScalar):
            o.adjoint += g
    tape.backward()
    return np.array([s.adjoint for s in scalars])


def composite_cases():
    cases = []
    for record in registry.all_builtins():
        if record.impl != "composite" or not record.is_differentiable:
            continue
        for types in record.examples:
            name = ",".join(dtypes.type_name(t) for t in types)
            cases.append(pytest.param(record, types, id=f"{record.key}({name})"))
    return cases


@pytest.mark.parametrize("record, types", composite_cases())
def test_composite_adjoint_matches_central_differences(record, types, quick):
    rng = np.random.default_rng(abs(hash((record.symbol, types))) % 2**32)
    n = sum(t._length if composite.is_composite(t) else 1 for t in types)
    lo, hi = next(iter(record.sample.values()))
    for _ in range(1 if quick else 4):
        x = rng.uniform(lo, hi, n)
        if record.key in ("inverse", "determinant"):
            size = types[0]._shape[0]
            x = (np.eye(size) * 2.0 + rng.uniform(-0.4, 0.4, (size, size))).reshape(-1)
        out_size = len(evaluate(record, types, list(x)))
        u = rng.uniform(-1, 1, out_size)
        v = rng.uniform(-1, 1, n)
        eps = 1e-6
        plus = np.array(evaluate(record, types, list(x + eps * v)))
        minus = np.array(evaluate(record, types, list(x - eps * v)))
        fd = float(u @ (plus - minus) / (2 * eps))
        ad = float(vjp(record, types, list(x), list(u)) @ v)
        assert math.isclose(ad, fd, rel_tol=record.tolerance * 100, abs_tol=1e-7), \
            f"{record.key}{types}: adjoint·v = {ad}, finite differences = {fd}"


def test_every_differentiable_composite_has_examples():
    for record in registry.all_builtins():
        if record.impl == "composite" and record.is_differentiable and \
                record.key not in ("spatial_top", "spatial_bottom"):
            assert record.examples, f"{record.key} has no test signature"
            for types in record.examples:
                assert registry.resolve(record.key, types) is not None, (record.key, types)


def test_checker_catches_a_wrong_composite():
    wrong = registry.Builtin(key="dot", group="test", forward=lambda a, b: a[0] * b[0] * 2.0,
                             overloads=())
    types = (wp.vec3d, wp.vec3d)
    x = [0.3, -0.2, 0.5, 1.0, 0.7, -0.4]
    # evaluate with the right forward, differentiate the wrong one: they must disagree
    right = registry.resolve("dot", types)[0]
    ad = vjp(wrong, types, x, [1.0])
    eps = 1e-6
    fd = [(evaluate(right, types, list(np.add(x, eps * e)))[0] -
           evaluate(right, types, list(np.add(x, -eps * e)))[0]) / (2 * eps)
          for e in np.eye(6)]
    assert not np.allclose(ad, fd)


# ------------------------------------------------------------------ Warp's edge conventions


def test_length_and_normalize_of_zero_vector_have_zero_gradient():
    zero = [0.0, 0.0, 0.0]
    types = (wp.vec3d,)
    length = registry.resolve("length", types)[0]
    normalize = registry.resolve("normalize", types)[0]
    np.testing.assert_array_equal(vjp(length, types, zero, [1.0]), [0, 0, 0])
    np.testing.assert_array_equal(vjp(normalize, types, zero, [1.0, 1.0, 1.0]), [0, 0, 0])
    assert evaluate(normalize, types, zero) == [0.0, 0.0, 0.0]


def test_max_reduction_tie_goes_to_first_component():
    record = registry.resolve("max", (wp.vec3d,))[0]
    np.testing.assert_array_equal(vjp(record, (wp.vec3d,), [2.0, 2.0, 1.0], [1.0]), [1, 0, 0])


def test_python_scope_values_match_numpy():
    a, b = wp.vec3(1.0, 2.0, 3.0), wp.vec3(-1.0, 0.5, 2.0)
    np.testing.assert_allclose(wp.cross(a, b), np.cross(a, b))
    assert math.isclose(wp.dot(a, b), float(np.dot(a, b)))
    m = wp.mat33(2.0, 1.0, 0.0, 0.5, 3.0, 1.0, 0.0, 1.0, 4.0)
    np.testing.assert_allclose(wp.inverse(m), np.linalg.inv(np.array(m)), rtol=1e-6)
    assert math.isclose(wp.determinant(m), float(np.linalg.det(np.array(m))), rel_tol=1e-6)
    np.testing.assert_allclose(m @ a, np.array(m) @ np.array(a), rtol=1e-6)
    q = wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), math.pi / 2)
    np.testing.assert_allclose(wp.quat_rotate(q, wp.vec3(1.0, 0.0, 0.0)), [0, 1, 0], atol=1e-6)
    np.testing.assert_allclose(wp.quat_to_matrix(q) @ wp.vec3(1.0, 0.0, 0.0), [0, 1, 0],
                               atol=1e-6)
    t = wp.transform(wp.vec3(1.0, 2.0, 3.0), q)
    p = wp.transform_point(t, wp.vec3(1.0, 0.0, 0.0))
    np.testing.assert_allclose(p, [1, 3, 3], atol=1e-6)
    np.testing.assert_allclose(wp.transform_point(wp.transform_inverse(t), p), [1, 0, 0],
                               atol=1e-5)
    assert from_components([1.0, 2.0], wp.vec2) == wp.vec2(1.0, 2.0)
