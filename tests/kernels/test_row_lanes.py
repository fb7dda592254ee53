"""Adds at a row's index in multi-dimensional launches (``ForwardWriter.loop_lane``): the threads
of a row run in the innermost loop, and an add at an index only the outer thread indices make
(``atomic_add(force, i, f)`` over ``(i, j)`` pairs, the gradient of ``x[i]``) goes to the thread's
lane of a lane array, summed into the array after the row. Added in place, each thread's add
waited on the previous one and the row's loop stayed scalar (2048 x 2048 row sums: 3.4 ms, 0.7 in
lanes). Each thread's own values are the per-thread code's; the row sums differ in order only."""

import numpy as np
import pytest

import difftape as wp
from tests.fdcheck import check_tape
from tests.kernels.modes import debug_reference


@wp.kernel
def pair_forces(x: wp.array(dtype=wp.vec3d), f: wp.array(dtype=wp.vec3d),
                e: wp.array(dtype=wp.float64)):
    i, j = wp.tid()
    if i != j:
        d = x[j] - x[i]
        r2 = wp.dot(d, d) + 0.01
        wp.atomic_add(f, i, d / (r2 * wp.sqrt(r2)))  # the row's particle: into lanes
        wp.atomic_sub(e, i, 1.0 / wp.sqrt(r2))


@wp.kernel
def row_stats(u: wp.array2d(dtype=wp.float64), s: wp.array(dtype=wp.float64),
              m: wp.array(dtype=wp.float64)):
    i, j = wp.tid()
    left = u[i, wp.max(j - 1, 0)]  # a clamp: interior and edge threads, both into lanes
    wp.atomic_add(s, i, u[i, j] * left)
    if u[i, j] > 0.5:
        wp.atomic_add(m, i, u[i, j])


@wp.kernel
def depth_sum(v: wp.array3d(dtype=wp.float64), w: wp.array(dtype=wp.float64),
              out: wp.array2d(dtype=wp.float64)):
    i, j, k = wp.tid()
    wp.atomic_add(out, i, j, v[i, j, k] * w[k])


def _forward_and_adjoint(kernel):
    source = kernel.source(dim=len(kernel.ir.tid_vars))
    return source.split("_adjoint(")


def test_row_index_adds_take_lanes():
    forward, adjoint = _forward_and_adjoint(pair_forces)
    assert forward.count("= rt_stack_zeros(512") == 3 + 1  # f[i]'s components, e[i]
    assert "if dim1 > 0:" in forward and "rt_lane_flush(" in forward
    assert "rt_loop_lane_" in adjoint  # x[i]'s gradient, read in every thread of the row
    forward, _ = _forward_and_adjoint(row_stats)
    assert forward.count("= rt_stack_zeros(512") == 2
    forward, adjoint = _forward_and_adjoint(depth_sum)
    assert "if dim2 > 0:" in forward and "rt_loop_lane_" in forward
    assert "rt_loop_lane_" not in adjoint  # w[k]'s gradient: k varies along the row


@pytest.mark.parametrize("mode", ["serial", "auto", "parallel", "replicate"])
def test_pair_forces_match_the_per_thread_code(threading, mode):
    threading(mode)
    n = 700  # rows longer than a strip of 512 lanes
    rng = np.random.default_rng(21)
    x = rng.uniform(-1.0, 1.0, (n, 3))
    seed = rng.standard_normal((n, 3))

    def run():
        xa = wp.array(x, dtype=wp.vec3d, requires_grad=True)
        f = wp.zeros(n, dtype=wp.vec3d, requires_grad=True)
        e = wp.zeros(n, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(pair_forces, (n, n), inputs=[xa], outputs=[f, e])
        tape.backward(grads={f: wp.array(seed, dtype=wp.vec3d), e: wp.ones(n, dtype=wp.float64)})
        return f.numpy(), e.numpy(), xa.grad.numpy()

    got, want = run(), debug_reference(run)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-11)
    d = x[None, :, :] - x[:, None, :]
    r2 = (d * d).sum(-1) + 0.01
    np.fill_diagonal(r2, np.inf)
    np.testing.assert_allclose(got[0], (d / r2[..., None] ** 1.5).sum(1), rtol=1e-11)
    np.testing.assert_allclose(got[1], -(1.0 / np.sqrt(r2)).sum(1), rtol=1e-11)


@pytest.mark.parametrize("mode", ["serial", "auto", "replicate"])
@pytest.mark.parametrize("shape", [(3, 1), (5, 7), (9, 600), (4, 0)])
def test_rows_with_edges_branches_and_empty_rows(threading, mode, shape):
    threading(mode)
    u = np.random.default_rng(sum(shape)).uniform(0.0, 1.0, shape)

    def run():
        s = wp.zeros(shape[0], dtype=wp.float64)
        m = wp.zeros(shape[0], dtype=wp.float64)
        wp.launch(row_stats, shape, inputs=[wp.array(u, dtype=wp.float64)], outputs=[s, m])
        return s.numpy(), m.numpy()

    (s, m), (s_ref, m_ref) = run(), debug_reference(run)
    np.testing.assert_allclose(s, s_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m, m_ref, rtol=1e-12, atol=1e-12)
    if shape[1]:
        left = np.concatenate([u[:, :1], u[:, :-1]], axis=1)
        np.testing.assert_allclose(s, (u * left).sum(1), rtol=1e-12)
        np.testing.assert_allclose(m, np.where(u > 0.5, u, 0.0).sum(1), rtol=1e-12)
    else:
        assert not s.any() and not m.any()


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_three_dimensional_rows(threading, mode):
    threading(mode)
    shape = (3, 4, 530)
    rng = np.random.default_rng(22)
    v, w = rng.standard_normal(shape), rng.standard_normal(shape[2])

    def run():
        out = wp.zeros(shape[:2], dtype=wp.float64)
        wp.launch(depth_sum, shape, inputs=[wp.array(v, dtype=wp.float64),
                                            wp.array(w, dtype=wp.float64)], outputs=[out])
        return out.numpy()

    got = run()
    np.testing.assert_allclose(got, debug_reference(run), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, v @ w, rtol=1e-11, atol=1e-11)


def test_row_lane_gradients_match_finite_differences():
    n = 9
    rng = np.random.default_rng(23)

    def run(a):
        wp.launch(pair_forces, (n, n), inputs=[a["x"]], outputs=[a["f"], a["e"]])

    check_tape(run, {"x": rng.uniform(-1.0, 1.0, (n, 3))},
               {"f": np.zeros((n, 3)), "e": np.zeros(n)},
               {"x": wp.vec3d, "f": wp.vec3d, "e": wp.float64})
