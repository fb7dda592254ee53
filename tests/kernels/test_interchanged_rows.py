"""Interchanged loops in multi-dimensional launches (``codegen/interchange.py``,
``cpu_loops._rows``): each row of the innermost dimension runs in strips, with the loop over a
strip's threads inside the loop, forward and adjoint. Every thread computes bit for bit what
the plain per-thread loop computes (debug mode keeps it), rows of any length, with ``break``,
``while``, and adds into coefficients the loop's variable picks."""

import numpy as np
import pytest

import difftape as wp
from difftape._src.codegen.interchange import ADJOINT_STRIP
from difftape._src.codegen.strips import STRIP
from tests.kernels.modes import debug_reference


@wp.kernel
def powers(x: wp.array2d(dtype=wp.float32), c: wp.array(dtype=wp.float32), n: int,
           y: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    p = wp.float32(1.0)
    s = wp.float32(0.0)
    for k in range(n):
        s = s + c[k] * p  # c[k]'s gradient: every thread of a row adds at k
        p = p * x[i, j]
    y[i, j] = s


@wp.func
def ball(p: wp.vec3):
    return wp.length(p - wp.vec3(0.0, 0.0, 3.0)) - 1.0


@wp.kernel
def render(w: int, h: int, eye: wp.array(dtype=wp.vec3), depth: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    u = (float(j) / float(w) - 0.5) * 1.2
    v = (float(i) / float(h) - 0.5) * 1.2
    d = wp.normalize(wp.vec3(u, v, 1.0) + eye[0])
    s = float(0.0)
    for k in range(40):
        dist = ball(d * s)
        if wp.abs(dist) < 1.0e-4:
            break
        s = s + wp.min(dist, 0.5)  # rays that miss march on in steps of 0.5
    depth[i, j] = s


@wp.kernel
def settle(a: wp.array3d(dtype=wp.float64), steps: wp.array3d(dtype=int),
           y: wp.array3d(dtype=wp.float64)):
    i, j, k = wp.tid()
    r = a[i, j, k] + wp.float64(1.0)
    m = int(0)
    while m < steps[i, j, k]:
        r = wp.float64(0.5) * (r + a[i, j, k] / r)
        m = m + 1
    y[i, j, k] = r * r


@wp.kernel
def flat_index(x: wp.array(dtype=wp.float32), n: int, y: wp.array(dtype=wp.float32)):
    t = wp.tid()  # a flat index in a two-dimensional launch
    p = x[t]
    for k in range(n):
        p = p * 0.75 + wp.sqrt(wp.abs(p))
    y[t] = p


def _adjoint(kernel, dim: int) -> str:
    return kernel.source(dim=dim).split("_adjoint(")[1]


def test_which_kernels_are_interchanged():
    for kernel, dim in ((powers, 2), (render, 2), (settle, 3), (flat_index, 2)):
        source = kernel.source(dim=dim)
        forward, adjoint = source.split("_adjoint(")
        assert "rt_carry_" in forward and "rt_carry_" in adjoint, kernel.key
        last = dim - 1
        assert f"for rt_strip in range(0, dim{last}, {STRIP}):" in forward
        assert f"for rt_strip in range(" in adjoint and f"dim{last}, {ADJOINT_STRIP}):" in adjoint


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("shape", [(3, 5), (2, STRIP + 3), (5, 2 * ADJOINT_STRIP + 1)])
def test_rows_of_a_loop(threading, mode, shape):
    """Values and each thread's gradients are the plain loop's; the coefficients', which every
    thread adds into, up to summation order."""
    threading(mode)
    n = 9
    rng = np.random.default_rng(shape[1])
    x0 = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
    c0 = rng.uniform(-1.0, 1.0, n).astype(np.float32)

    def run():
        x = wp.array(x0, dtype=wp.float32, requires_grad=True)
        c = wp.array(c0, dtype=wp.float32, requires_grad=True)
        y = wp.zeros(shape, dtype=wp.float32, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(powers, shape, inputs=[x, c, n], outputs=[y])
        tape.backward(grads={y: wp.ones(shape, dtype=wp.float32)})
        return y.numpy(), x.grad.numpy(), c.grad.numpy()

    (y, gx, gc), (y_ref, gx_ref, gc_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(gx, gx_ref)
    np.testing.assert_allclose(gc, gc_ref, rtol=1e-5)
    x64 = x0.astype(np.float64)
    np.testing.assert_allclose(gc, (x64[..., None] ** np.arange(n)).sum((0, 1)), rtol=1e-4)


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_rows_of_sphere_tracing(threading, mode):
    """Rays of a row that hit stop after a few steps, those that miss run all 40; the depths
    and the gradient with respect to the eye offset are the plain loop's."""
    threading(mode)
    h, w = 7, ADJOINT_STRIP + STRIP // 2 + 3

    def run():
        eye = wp.array(np.array([[0.05, -0.02, 0.0]], np.float32), dtype=wp.vec3,
                       requires_grad=True)
        depth = wp.zeros((h, w), dtype=wp.float32, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(render, (h, w), inputs=[w, h, eye], outputs=[depth])
        tape.backward(grads={depth: wp.ones((h, w), dtype=wp.float32)})
        return depth.numpy(), eye.grad.numpy()

    (depth, g), (depth_ref, g_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(depth, depth_ref)
    hits = depth < 3.0
    assert 10 < hits.sum() < depth.size - 10  # rows mix rays that converge with rays that miss
    assert np.all(g != 0.0)
    np.testing.assert_allclose(g, g_ref, rtol=1e-5)  # summed over the threads in another order


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_while_loops_in_three_dimensions(threading, mode):
    """A while loop per thread of a 3-D launch, some threads running past the stacks' first
    room (``cpu_loops.WHILE_ROOM``): values and gradients are the plain loop's."""
    threading(mode)
    shape = (2, 3, ADJOINT_STRIP + 5)
    rng = np.random.default_rng(4)
    a0 = rng.uniform(0.5, 4.0, shape)
    counts = rng.integers(0, 8, shape)
    counts[1, 2, 3] = 150

    def run():
        a = wp.array(a0, dtype=wp.float64, requires_grad=True)
        y = wp.zeros(shape, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(settle, shape, inputs=[a, wp.array(counts.astype(np.int32), dtype=int)],
                      outputs=[y])
        tape.backward(grads={y: wp.ones(shape, dtype=wp.float64)})
        return y.numpy(), a.grad.numpy()

    (y, g), (y_ref, g_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(g, g_ref)
    np.testing.assert_allclose(y[counts >= 7], a0[counts >= 7], rtol=1e-6)  # converged: r*r = a


def test_a_flat_index_in_a_two_dimensional_launch(threading):
    threading("serial")
    shape = (3, STRIP + 11)
    x0 = np.random.default_rng(9).uniform(-2.0, 2.0, shape[0] * shape[1]).astype(np.float32)

    def run():
        x = wp.array(x0, dtype=wp.float32, requires_grad=True)
        y = wp.zeros(x0.size, dtype=wp.float32, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(flat_index, shape, inputs=[x, 12], outputs=[y])
        tape.backward(grads={y: wp.ones(x0.size, dtype=wp.float32)})
        return y.numpy(), x.grad.numpy()

    for got, want in zip(run(), debug_reference(run)):
        np.testing.assert_array_equal(got, want)
