"""@wp.struct: Python-scope instances, kernel parameters, values, arrays of structs, tape adjoints."""

import numpy as np
import pytest

import difftape as wp

from .fdcheck import check_tape


@wp.struct
class Multiplicands:
    x: wp.array(dtype=float)
    y: wp.array(dtype=float)


@wp.kernel
def multiply(s: Multiplicands, z: wp.array(dtype=float)):
    i = wp.tid()
    z[i] = s.x[i] * s.y[i]


def test_spec_scenario_3_struct_of_arrays_on_the_tape():
    s = Multiplicands()
    s.x = wp.full(8, 16.0, dtype=float, requires_grad=True)
    s.y = wp.full(8, 32.0, dtype=float, requires_grad=True)
    z = wp.zeros(8, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(multiply, 8, inputs=[s, z])
    tape.backward(grads={z: wp.ones(8, dtype=float)})
    np.testing.assert_allclose(tape.gradients[s].x.numpy(), 32.0)
    np.testing.assert_allclose(tape.gradients[s].y.numpy(), 16.0)
    tape.backward(grads={z: wp.ones(8, dtype=float)})
    np.testing.assert_allclose(tape.gradients[s].x.numpy(), 64.0)
    np.testing.assert_allclose(tape.gradients[s].y.numpy(), 32.0)
    tape.reset()
    assert tape.launches == []
    np.testing.assert_allclose(s.x.grad.numpy(), 0.0)
    np.testing.assert_allclose(s.y.grad.numpy(), 0.0)


@wp.struct
class Inner:
    arr: wp.array(dtype=float)


@wp.struct
class Outer:
    a: wp.array(dtype=float)
    scale: float
    v: wp.vec3
    inner: Inner
    no_grad: wp.array(dtype=float)


@wp.kernel
def weighted(s: Outer, out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(out, 0, s.a[i] * s.scale * s.v[1] + s.inner.arr[i] + s.no_grad[i])


def test_spec_scenario_9_mirrored_adjoint_struct():
    s = Outer()
    s.a = wp.array([1.0, 2.0], dtype=float, requires_grad=True)
    s.scale = 3.0
    s.v = wp.vec3(5.0, 6.0, 7.0)
    s.inner.arr = wp.array([1.0, 1.0], dtype=float, requires_grad=True)
    s.no_grad = wp.array([0.5, 0.5], dtype=float)
    out = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(weighted, 2, inputs=[s, out])
    assert out.numpy()[0] == pytest.approx(3.0 * 6.0 * 3.0 + 2.0 + 1.0)
    tape.backward(loss=out)
    adj = tape.gradients[s]
    assert adj.a is s.a.grad and adj.inner.arr is s.inner.arr.grad
    assert adj.no_grad is None
    assert adj.scale == 3.0 and adj.v == wp.vec3(5.0, 6.0, 7.0)
    np.testing.assert_allclose(s.a.grad.numpy(), [18.0, 18.0])
    np.testing.assert_allclose(s.inner.arr.grad.numpy(), [1.0, 1.0])
    assert len(tape.gradients) == 5  # s, s.a, s.inner, s.inner.arr, out
    tape.zero()
    np.testing.assert_allclose(s.inner.arr.grad.numpy(), [0.0, 0.0])
    np.testing.assert_allclose(s.a.grad.numpy(), [0.0, 0.0])


@wp.struct
class Wrapper:
    nested: Inner


@wp.kernel
def nested_sum(w: Wrapper, out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(out, 0, w.nested.arr[i])


def test_spec_scenario_10_nested_struct_atomic_sum():
    w = Wrapper()
    w.nested.arr = wp.array([1.0], dtype=float, requires_grad=True)
    out = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(nested_sum, 1, inputs=[w, out])
    tape.backward(loss=out)
    np.testing.assert_allclose(w.nested.arr.grad.numpy(), [1.0])
    tape.zero()
    np.testing.assert_allclose(w.nested.arr.grad.numpy(), [0.0])


@wp.struct
class Holder:
    v: wp.vec3
    w: float


@wp.func
def make_holder(x: float):
    h = Holder()
    h.v = wp.vec3(2.0 * x, 0.0, 0.0)
    h.w = x
    return h


@wp.kernel
def struct_from_func(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    s = make_holder(x[i])
    y[i] = wp.dot(s.v, s.v)


def test_struct_returned_from_func_keeps_its_gradient():  # GH-1598: 8x
    x = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(struct_from_func, 3, inputs=[x, y])
    tape.backward(grads={y: wp.ones(3, dtype=float)})
    np.testing.assert_allclose(x.grad.numpy(), [8.0, 16.0, 24.0])


@wp.struct
class Nested2:
    v: float


@wp.struct
class Parent:
    a: float
    n: Nested2


@wp.kernel
def struct_values(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    p = Parent(x[i], Nested2(x[i] * 4.0))
    y[i] = p.a + p.n.v


def test_struct_values_built_in_kernels():  # test_struct_attribute_gradient: 5.0
    x = wp.array([1.0], dtype=float, requires_grad=True)
    y = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(struct_values, 1, inputs=[x, y])
    tape.backward(grads={y: wp.ones(1, dtype=float)})
    np.testing.assert_allclose(x.grad.numpy(), [5.0])


@wp.struct
class Pair:
    a: float
    b: wp.vec2


@wp.kernel
def field_store(x: wp.array(dtype=float), y: wp.array(dtype=Pair)):
    i = wp.tid()
    y[i].a = x[i]
    y[i].b = wp.vec2(x[i] * 2.0, 1.0)


def test_field_write_into_array_of_structs():  # GH-1174: x.grad = 1 from field a
    x = wp.array([1.5, 2.5], dtype=float, requires_grad=True)
    y = wp.zeros(2, dtype=Pair, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(field_store, 2, inputs=[x, y])
    np.testing.assert_allclose(y.numpy()["a"], [1.5, 2.5])
    np.testing.assert_allclose(y.numpy()["b"], [[3.0, 1.0], [5.0, 1.0]])
    seed = np.zeros(2, y.numpy().dtype)
    seed["a"] = 1.0
    tape.backward(grads={y: wp.array(seed, dtype=Pair)})
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])


@wp.struct
class Particle:
    pos: wp.vec3d
    vel: wp.vec3d
    mass: wp.float64


@wp.func
def kinetic(p: Particle):
    return 0.5 * p.mass * wp.dot(p.vel, p.vel)


@wp.kernel
def particle_step(ps: wp.array(dtype=Particle), dt: wp.float64, out: wp.array(dtype=Particle),
                  energy: wp.array(dtype=wp.float64)):
    i = wp.tid()
    p = ps[i]
    p.vel = p.vel + wp.vec3d(0.0, -9.8, 0.0) * dt - p.pos * (dt / p.mass)
    p.pos = p.pos + p.vel * dt
    out[i] = p
    wp.atomic_add(energy, 0, kinetic(p) + p.mass * p.pos[1] * 9.8)


def test_struct_array_particle_system_matches_finite_differences():
    rng = np.random.default_rng(5)
    n = 4
    data = np.zeros(n, dtype=Particle._numpy_dtype())
    data["pos"] = rng.uniform(-1, 1, (n, 3))
    data["vel"] = rng.uniform(-1, 1, (n, 3))
    data["mass"] = rng.uniform(0.5, 2.0, n)

    def run(a):
        mid = wp.zeros(n, dtype=Particle, requires_grad=True)
        wp.launch(particle_step, n, inputs=[a["ps"], 0.1, mid, a["e1"]])
        wp.launch(particle_step, n, inputs=[mid, 0.1, a["out"], a["e2"]])

    inputs = {"ps": data}
    outputs = {"out": np.zeros(n, dtype=data.dtype), "e1": np.zeros(1), "e2": np.zeros(1)}
    dtypes_ = {"ps": Particle, "out": Particle, "e1": wp.float64, "e2": wp.float64}
    check_tape(run, inputs, outputs, dtypes_)


def test_visualize_names_struct_array_fields():
    pytest.importorskip("pydot")
    from .test_visualize import all_nodes, parse  # imports pydot's parser without warnings

    s = Multiplicands()
    s.x = wp.ones(3, dtype=float, requires_grad=True)
    s.y = wp.ones(3, dtype=float)
    z = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(multiply, 3, inputs=[s], outputs=[z])
    nodes = [n for name, n in all_nodes(parse(tape.visualize())).items()
             if name.startswith("arr")]
    labels = {n.get_label().strip('"') for n in nodes}
    assert {"s.x", "s.y", "z"} <= labels
    colors = {n.get_label().strip('"'): n.get("fillcolor") for n in nodes}
    assert colors["s.x"].strip('"') == "#76B900" and colors["s.y"].strip('"') == "lightgray"
