"""Whole kernels on vectors, matrices, quaternions and transforms: forward values and gradients."""

import math

import numpy as np
import pytest

import difftape as wp

from .fdcheck import check_tape

# ------------------------------------------------------------------ mass-spring (vec3, atomics)


@wp.kernel
def spring_forces(x: wp.array(dtype=wp.vec3d), springs: wp.array2d(dtype=wp.int32),
                  rest: wp.array(dtype=wp.float64), stiffness: wp.float64,
                  f: wp.array(dtype=wp.vec3d)):
    s = wp.tid()
    i = springs[s, 0]
    j = springs[s, 1]
    d = x[j] - x[i]
    length = wp.length(d)
    direction = wp.normalize(d)
    fs = direction * (stiffness * (length - rest[s]))
    wp.atomic_add(f, i, fs)
    wp.atomic_sub(f, j, fs)


@wp.kernel
def integrate(x: wp.array(dtype=wp.vec3d), v: wp.array(dtype=wp.vec3d),
              f: wp.array(dtype=wp.vec3d), dt: wp.float64, gravity: wp.vec3d,
              x_new: wp.array(dtype=wp.vec3d), v_new: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    vel = v[i] + (f[i] + gravity) * dt
    v_new[i] = vel
    x_new[i] = x[i] + vel * dt


def test_mass_spring_two_steps_match_finite_differences():
    rng = np.random.default_rng(1)
    n, m = 6, 9
    springs = np.stack([rng.integers(0, n, m), rng.integers(0, n, m)], 1).astype(np.int32)
    springs[springs[:, 0] == springs[:, 1], 1] = (springs[springs[:, 0] == springs[:, 1], 0]
                                                  + 1) % n
    dtypes_ = {"x0": wp.vec3d, "v0": wp.vec3d, "rest": wp.float64, "x2": wp.vec3d,
               "v2": wp.vec3d}
    inputs = {"x0": rng.uniform(-1, 1, (n, 3)), "v0": rng.uniform(-0.3, 0.3, (n, 3)),
              "rest": rng.uniform(0.2, 0.8, m)}
    outputs = {"x2": np.zeros((n, 3)), "v2": np.zeros((n, 3))}
    index = wp.array(springs, dtype=wp.int32)
    gravity = wp.vec3d(0.0, -9.8, 0.0)

    def run(a):
        x, v = a["x0"], a["v0"]
        for step in range(2):
            f = wp.zeros(n, dtype=wp.vec3d, requires_grad=True)
            wp.launch(spring_forces, m, inputs=[x, index, a["rest"], 3.0, f])
            last = step == 1
            x_new = a["x2"] if last else wp.zeros(n, dtype=wp.vec3d, requires_grad=True)
            v_new = a["v2"] if last else wp.zeros(n, dtype=wp.vec3d, requires_grad=True)
            wp.launch(integrate, n, inputs=[x, v, f, 0.05, gravity, x_new, v_new])
            x, v = x_new, v_new

    check_tape(run, inputs, outputs, dtypes_)


# ------------------------------------------------------------------ rigid pose (quat, transform)


@wp.func
def integrate_rotation(q: wp.quatd, omega: wp.vec3d, dt: wp.float64):
    spin = wp.quatd(omega[0], omega[1], omega[2], wp.float64(0.0))
    return wp.normalize(q + spin * q * (dt * 0.5))


@wp.kernel
def pose_update(q: wp.array(dtype=wp.quatd), p: wp.array(dtype=wp.vec3d),
                omega: wp.array(dtype=wp.vec3d), local: wp.array(dtype=wp.vec3d),
                world: wp.array(dtype=wp.vec3d), frame: wp.array(dtype=wp.transformd)):
    i = wp.tid()
    q_new = integrate_rotation(q[i], omega[i], wp.float64(0.1))
    t = wp.transformd(p[i], q_new)
    frame[i] = wp.transform_multiply(t, wp.transform_inverse(t))
    world[i] = wp.transform_point(t, local[i]) + wp.quat_rotate_inv(q_new, local[i]) * 0.5
    world[i].y += wp.transform_vector(t, local[i]).x


def test_rigid_pose_update_matches_finite_differences():
    rng = np.random.default_rng(2)
    n = 4
    q = rng.standard_normal((n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    dtypes_ = {"q": wp.quatd, "p": wp.vec3d, "omega": wp.vec3d, "local": wp.vec3d,
               "world": wp.vec3d, "frame": wp.transformd}
    inputs = {"q": q, "p": rng.uniform(-1, 1, (n, 3)), "omega": rng.uniform(-2, 2, (n, 3)),
              "local": rng.uniform(-1, 1, (n, 3))}
    outputs = {"world": np.zeros((n, 3)), "frame": np.zeros((n, 7))}

    def run(a):
        wp.launch(pose_update, n, inputs=[a[k] for k in ("q", "p", "omega", "local", "world",
                                                          "frame")])

    check_tape(run, inputs, outputs, dtypes_)
    arrays = {k: wp.array(v, dtype=dtypes_[k]) for k, v in {**inputs, **outputs}.items()}
    run(arrays)
    identity = np.tile([0, 0, 0, 0, 0, 0, 1.0], (n, 1))
    frames = arrays["frame"].numpy()
    frames[:, 3:] *= np.sign(frames[:, 6:7])
    np.testing.assert_allclose(frames, identity, atol=1e-9)


# ------------------------------------------------------------------ SPEC §5.5 item 25


@wp.kernel
def matrix_check(m: wp.array(dtype=wp.mat22), v: wp.array(dtype=wp.vec2),
                 out: wp.array(dtype=float)):
    mv = m[0] * v[0]
    out[0] = wp.dot(mv, mv) + wp.determinant(m[0]) + wp.trace(wp.inverse(m[0]))


def test_spec_2x2_matrix_gradients():
    m = wp.array([[[2.0, 1.0], [0.0, 3.0]]], dtype=wp.mat22, requires_grad=True)
    v = wp.array([[1.0, 2.0]], dtype=wp.vec2, requires_grad=True)
    out = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(matrix_check, 1, inputs=[m, v, out])
    tape.backward(loss=out)
    assert math.isclose(out.numpy()[0], 58.8333, rel_tol=1e-5)
    np.testing.assert_allclose(m.grad.numpy()[0], [[10.75, 16.0], [11.138889, 25.888889]],
                               rtol=1e-5)
    np.testing.assert_allclose(v.grad.numpy()[0], [16.0, 44.0], rtol=1e-5)


# ------------------------------------------------------------------ component writes (SPEC 31)


@wp.kernel
def write_y(x: wp.array(dtype=float), v: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v[i].y = 2.0 * x[i]


def test_component_store_consumes_only_its_slot():
    x = wp.array([1.0, 2.0], dtype=float, requires_grad=True)
    v = wp.zeros(2, dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(write_y, 2, inputs=[x, v])
    np.testing.assert_allclose(v.numpy(), [[0, 2, 0], [0, 4, 0]])
    tape.backward(grads={v: wp.array(np.ones((2, 3)), dtype=wp.vec3)})
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    np.testing.assert_allclose(v.grad.numpy(), [[1, 0, 1], [1, 0, 1]])


def test_local_component_writes_are_exact():
    x0 = np.array([0.5, -1.2, 2.0])
    x = wp.array(x0, dtype=wp.float64, requires_grad=True)
    check_tape(lambda a: wp.launch(local_components64, 3, inputs=[a["x"], a["y"]]),
               {"x": x0}, {"y": np.zeros(3)}, {"x": wp.float64, "y": wp.float64})
    y = wp.zeros(3, dtype=wp.float64)
    wp.launch(local_components64, 3, inputs=[x, y])
    v0, v1 = 3 * x0, 3 * x0 * x0
    np.testing.assert_allclose(y.numpy(), v0 + v1 + v0 * v0 + v1 * v1)


@wp.kernel
def local_components64(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    v = wp.vec3d()
    v[0] = x[i]
    v[0] = 3.0 * x[i]
    v.y = v[0] * x[i]
    m = wp.mat22d(v[0], v[1], 1.0, 2.0)
    m[1, 0] = v.y
    y[i] = m[0, 0] + m[1][0] + wp.length_sq(v)


# ------------------------------------------------------------------ matrices, loops, funcs


@wp.func
def frame_of(a: wp.vec3d, b: wp.vec3d):
    n = wp.normalize(wp.cross(a, b))
    return wp.outer(n, a) + wp.skew(b), n


@wp.kernel
def matrix_mix(a: wp.array(dtype=wp.vec3d), b: wp.array(dtype=wp.vec3d), n: int,
               out: wp.array(dtype=wp.float64), mats: wp.array(dtype=wp.mat33d)):
    i = wp.tid()
    m, axis = frame_of(a[i], b[i])
    m = m + wp.diag(a[i]) * 3.0 + wp.identity(n=3, dtype=wp.float64)
    acc = wp.vec3d(0.0)
    for k in range(n):
        acc = acc + m[k] * axis[k] if k % 2 == 0 else acc - wp.transpose(m)[k] * a[i][k]
    inv = wp.inverse(m)
    mats[i] = inv @ wp.transpose(m) * wp.determinant(m)
    out[i] = wp.dot(acc, acc) + wp.trace(inv) + wp.ddot(m, inv) + wp.max(acc) + wp.min(a[i])


def test_matrix_kernel_with_loops_and_funcs_matches_finite_differences():
    rng = np.random.default_rng(4)
    n = 5
    inputs = {"a": rng.uniform(0.5, 1.5, (n, 3)), "b": rng.uniform(-1, 1, (n, 3))}
    outputs = {"out": np.zeros(n), "mats": np.zeros((n, 3, 3))}
    dtypes_ = {"a": wp.vec3d, "b": wp.vec3d, "out": wp.float64, "mats": wp.mat33d}
    check_tape(lambda arr: wp.launch(matrix_mix, n, inputs=[arr["a"], arr["b"], 3, arr["out"],
                                                            arr["mats"]]),
               inputs, outputs, dtypes_, rtol=1e-5)


@wp.kernel
def vector_params(x: wp.array(dtype=wp.vec3d), offset: wp.vec3d, scale: wp.mat33d,
                  y: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    y[i] = scale @ (x[i] + offset) + wp.cw_mul(x[i], offset) - wp.cw_div(offset, x[i] + wp.vec3d(3.0))


def test_vector_and_matrix_parameters():
    x = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]])
    offset = wp.vec3d(0.1, 0.2, 0.3)
    scale = wp.mat33d(2.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 4.0)
    y = wp.zeros(2, dtype=wp.vec3d)
    wp.launch(vector_params, 2, inputs=[wp.array(x, dtype=wp.vec3d), offset, scale, y])
    o = np.array(offset)
    expected = (x + o) * [2, 3, 4] + x * o - o / (x + 3)
    np.testing.assert_allclose(y.numpy(), expected)
    with pytest.raises(wp.LaunchTypeError, match="offset"):
        wp.launch(vector_params, 2, inputs=[wp.array(x, dtype=wp.vec3d), 1.0, scale, y])


@wp.kernel
def vector_atomics(x: wp.array(dtype=wp.vec3), idx: wp.array(dtype=wp.int32),
                   total: wp.array(dtype=wp.vec3), peak: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    total[idx[i]] += x[i]
    wp.atomic_max(peak, 0, x[i])


def test_vector_atomics_forward_and_gradient():
    x = wp.array([[1, 5, 0], [3, 2, 0], [2, 5, 1]], dtype=wp.vec3, requires_grad=True)
    idx = wp.array([0, 1, 0], dtype=wp.int32)
    total = wp.zeros(2, dtype=wp.vec3, requires_grad=True)
    peak = wp.array([[-9, -9, -9]], dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(vector_atomics, 3, inputs=[x, idx, total, peak])
    np.testing.assert_allclose(total.numpy(), [[3, 10, 1], [3, 2, 0]])
    np.testing.assert_allclose(peak.numpy(), [[3, 5, 1]])
    tape.backward(grads={total: wp.array([[1, 2, 3], [4, 5, 6]], dtype=wp.vec3),
                         peak: wp.array([[10, 20, 30]], dtype=wp.vec3)})
    # atomic_max ties (y = 5 twice) give both threads the gradient, as Warp
    np.testing.assert_allclose(x.grad.numpy(), [[1, 22, 3], [14, 5, 6], [1, 22, 33]])


@wp.kernel
def self_referencing_assignments(out: wp.array(dtype=wp.vec3)):
    m = wp.mat33(0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    v = wp.vec3(1.0, 2.0, 3.0)
    v = m * v
    r = wp.quat(0.1, 0.2, 0.3, 0.9)
    r = r * wp.quat(0.0, 0.0, 0.7071068, 0.7071068)
    out[0] = v
    out[1] = wp.vec3(r[0], r[1], r[2])


def test_composite_assignment_reading_its_own_target():
    out = wp.zeros(2, dtype=wp.vec3)
    wp.launch(self_referencing_assignments, 1, inputs=[out])
    r = wp.quat(0.1, 0.2, 0.3, 0.9) * wp.quat(0.0, 0.0, 0.7071068, 0.7071068)
    np.testing.assert_allclose(out.numpy(), [[2.0, 1.0, 3.0], [r[0], r[1], r[2]]], rtol=1e-6)


def test_fill_vector_arrays():
    np.testing.assert_array_equal(wp.ones(2, dtype=wp.vec3).numpy(), np.ones((2, 3)))
    full = wp.full(2, wp.vec3(1.0, 2.0, 3.0), dtype=wp.vec3).numpy()
    np.testing.assert_array_equal(full, [[1, 2, 3], [1, 2, 3]])


# ------------------------------------------------------------------ spatial vectors and matrices


@wp.kernel
def spatial_products(m: wp.array(dtype=wp.spatial_matrixd), v: wp.array(dtype=wp.spatial_vectord),
                     vs: wp.array(dtype=wp.spatial_vectord), ms: wp.array(dtype=wp.spatial_matrixd),
                     e: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = m[i]
    b = v[i]
    vs[i] = a * b + b * a + wp.get_diag(a)  # products of spatial values stay spatial
    ms[i] = a * a + wp.transpose(a) + wp.outer(b, b) + wp.diag(b)
    e[i] = wp.dot(b, a * b)


def test_products_of_spatial_values_stay_spatial():
    rng = np.random.default_rng(4)
    m, v = rng.uniform(-1, 1, (3, 6, 6)), rng.uniform(-1, 1, (3, 6))

    def run(arrays):
        wp.launch(spatial_products, 3, inputs=[arrays["m"], arrays["v"]],
                  outputs=[arrays["vs"], arrays["ms"], arrays["e"]])

    kinds = {"m": wp.spatial_matrixd, "v": wp.spatial_vectord, "vs": wp.spatial_vectord,
             "ms": wp.spatial_matrixd, "e": wp.float64}
    outputs = {"vs": np.zeros((3, 6)), "ms": np.zeros((3, 6, 6)), "e": np.zeros(3)}
    check_tape(run, {"m": m, "v": v}, outputs, kinds, directions=3)
    arrays = {name: wp.array(value, dtype=kinds[name]) for name, value in
              {"m": m, "v": v, **outputs}.items()}
    run(arrays)
    np.testing.assert_allclose(arrays["vs"].numpy(), np.einsum("irc,ic->ir", m, v) + np.einsum(
        "ir,irc->ic", v, m) + np.einsum("ikk->ik", m), rtol=1e-13)
    np.testing.assert_allclose(arrays["ms"].numpy(), m @ m + m.transpose(0, 2, 1) + np.einsum(
        "ir,ic->irc", v, v) + np.stack([np.diag(x) for x in v]), rtol=1e-13)
    np.testing.assert_allclose(arrays["e"].numpy(), np.einsum("ir,irc,ic->i", v, m, v), rtol=1e-13)


def test_a_spatial_vector_mixed_with_a_plain_one_is_a_clear_error():
    vec6 = wp.vec(length=6, dtype=float)

    @wp.kernel
    def mixed(b: wp.array(dtype=wp.spatial_vector), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.dot(b[i], vec6(1.0, 2.0, 3.0, 4.0, 5.0, 6.0))

    with pytest.raises(wp.KernelTypeError, match=r"dot\(\) does not accept \(spatial_vectorf, "
                       r"vec6f\).*convert one, e\.g\. wp\.spatial_vectorf\(\.\.\.\)"):
        wp.launch(mixed, 1, inputs=[wp.zeros(1, dtype=wp.spatial_vector), wp.zeros(1, dtype=float)])
