"""Loops inside an interchanged loop (``codegen/interchange.py``: ``pieces``): ``for`` loops at
the top of its body whose bounds every thread shares run with the strip's threads inside them
too. Every thread computes bit for bit what the plain per-thread loops compute (debug mode
keeps those), forward and backward, with carried locals crossing the pieces, two inner loops
over one variable, a ``break`` after the inner loop, and multi-dimensional launches."""

import numpy as np
import pytest

import difftape as wp
from difftape._src.codegen.interchange import ADJOINT_STRIP
from difftape._src.codegen.strips import STRIP
from tests.fdcheck import check_tape
from tests.kernels.modes import debug_reference


@wp.kernel
def damped(x: wp.array(dtype=wp.float32), w: wp.array(dtype=wp.float32), steps: int,
           y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    u = x[i]
    v = float(0.0)
    for s in range(steps):
        kick = u * 0.1  # read after the inner loop: carried across the pieces
        for k in range(w.shape[0]):
            v = v * 0.9 + w[k] * wp.sin(u)  # w[k]'s gradient: every thread adds at k
            u = u + 0.01 * v
        u = u - kick * 0.05
        for m in range(2):  # unrolled (constant bounds)
            v = v + float(m) * 0.001 * u
    y[i] = u + v


@wp.kernel
def damped_steps(x: wp.array(dtype=wp.float32), w: wp.array(dtype=wp.float32), steps: int,
                 two: int, y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    u = x[i]
    v = float(0.0)
    for s in range(steps):
        kick = u * 0.1
        for k in range(w.shape[0]):
            v = v * 0.9 + w[k] * wp.sin(u)
            u = u + 0.01 * v
        u = u - kick * 0.05
        for k in range(two):  # a second loop over the same variable
            v = v + float(k) * 0.001 * u
    y[i] = u + v


@wp.kernel
def scene(origin: wp.array(dtype=wp.vec3), direction: wp.array(dtype=wp.vec3),
          centers: wp.array(dtype=wp.vec3), radii: wp.array(dtype=wp.float32), steps: int,
          depth: wp.array(dtype=wp.float32)):
    i = wp.tid()
    if i >= depth.shape[0]:
        return
    p = origin[0]
    d = direction[i]
    t = float(0.0)
    for s in range(steps):
        dist = float(1.0e6)
        for q in range(centers.shape[0]):
            dist = wp.min(dist, wp.length(p - centers[q]) - radii[q])
        if dist < 1.0e-3:
            break
        dist = wp.min(dist, 0.5)  # rays that miss march on in steps of 0.5
        t = t + dist
        p = p + d * dist
    depth[i] = t


@wp.kernel
def grid_sums(x: wp.array2d(dtype=wp.float64), c: wp.array(dtype=wp.float64), n: int,
              y: wp.array2d(dtype=wp.float64)):
    i, j = wp.tid()
    s = wp.float64(0.0)
    for a in range(n):
        for b in range(c.shape[0]):
            s = s + c[b] * wp.sin(x[i, j] * wp.float64(a + 1) + s * wp.float64(0.1))
    y[i, j] = s


@wp.kernel
def window(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64), steps: int,
           y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    m = w.shape[0] - 1  # the inner loop's bound, read from a local
    s = x[i]
    for t in range(steps):
        for k in range(m):
            s = s * wp.float64(0.5) + w[k + 1] * wp.sin(s)
    y[i] = s


@wp.kernel
def settle(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64),
           y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    v = x[i]
    rounds = int(0)
    while rounds < 60 and wp.abs(v) > wp.float64(1.0e-3):  # each thread its own count
        for k in range(w.shape[0]):
            v = v * w[k] + wp.float64(1.0e-4) * wp.sin(v)
        rounds = rounds + 1
    y[i] = v + wp.float64(rounds)


@wp.kernel
def two_passes(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64), n: int,
               y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    if i >= n:  # the usual early return
        return
    v = x[i]
    s = wp.float64(0.0)
    for k in range(w.shape[0]):  # two loops one after the other
        s = s + w[k] * wp.sin(v * wp.float64(k + 1))
    m = s * wp.float64(0.5)
    for k in range(w.shape[0] - 1):
        m = m * wp.float64(0.9) + w[k + 1] * s
    y[i] = m


@wp.kernel
def sometimes(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64), steps: int,
              y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    v = x[i]
    for t in range(steps):
        v = v * wp.float64(0.95) + wp.float64(0.01)
        if v > wp.float64(0.3):  # a branch holding the inner loop, taken by some threads
            for k in range(w.shape[0]):
                v = v - w[k] * v * v * wp.float64(0.01)
            v = v + wp.float64(0.001)
    y[i] = v


@wp.kernel
def countdown(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64), n: int,
              y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[i]
    for k in reversed(range(n)):  # counted down, the inner loop too
        s = s * wp.float64(0.8) + w[k % 4] * wp.sin(s)
        for j in reversed(range(w.shape[0])):
            s = s + w[j] * wp.float64(0.01) * wp.float64(j - k)
    y[i] = s


def _forward_and_adjoint(kernel, dim: int = 1) -> tuple[str, str]:
    return tuple(kernel.source(dim=dim).split("_adjoint("))


def test_the_inner_loops_run_around_the_strips():
    for kernel, dim, loops in ((damped, 1, 1), (damped_steps, 1, 2), (scene, 1, 1),
                               (grid_sums, 2, 1), (window, 1, 1), (settle, 1, 1),
                               (two_passes, 1, 2), (sometimes, 1, 1), (countdown, 1, 1)):
        forward, adjoint = _forward_and_adjoint(kernel, dim)
        assert "rt_carry_" in forward, kernel.key
        assert sum(f"for rt_inner{n} in range(" in forward for n in range(1, 4)) == loops
        assert "rt_carry_" in adjoint and adjoint.count("rt_trip_it_") >= 2 * loops


def _xw_run(kernel, dim, x0: np.ndarray, w0: np.ndarray, extra=(), dtype=wp.float64):
    """A tape through ``kernel(x, w, *extra) -> y`` seeded with ones: ``run()`` returns
    ``y`` and the gradients of ``x`` and ``w``."""
    def run():
        x = wp.array(x0, dtype=dtype, requires_grad=True)
        w = wp.array(w0, dtype=dtype, requires_grad=True)
        y = wp.zeros(x0.shape, dtype=dtype, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, dim, inputs=[x, w, *extra], outputs=[y])
        tape.backward(grads={y: wp.ones(x0.shape, dtype=dtype)})
        return y.numpy(), x.grad.numpy(), w.grad.numpy()

    return run


def _like_the_plain_loops(run, rtol: float, atol: float = 0.0) -> tuple:
    """``run()``'s values and each thread's gradients are debug mode's bit for bit; the
    gradient of what every thread reads, up to summation order. Returns ``run()``'s."""
    (y, gx, gw), (y_ref, gx_ref, gw_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(gx, gx_ref)
    np.testing.assert_allclose(gw, gw_ref, rtol=rtol, atol=atol)
    return y, gx, gw


def _damped_run(kernel, n, extra=()):
    rng = np.random.default_rng(n)
    x0 = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    w0 = rng.uniform(0.2, 1.0, 5).astype(np.float32)
    return _xw_run(kernel, n, x0, w0, (6, *extra), wp.float32)


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("n", [1, 7, STRIP + 3, 2 * ADJOINT_STRIP + 1])
def test_carried_locals_cross_the_pieces(threading, mode, n):
    """Values and each thread's gradients are the plain loops'; the coefficients', which every
    thread adds into, up to summation order."""
    threading(mode)
    for kernel, extra in ((damped, ()), (damped_steps, (2,))):
        _like_the_plain_loops(_damped_run(kernel, n, extra), rtol=1e-5)


def test_inner_loops_that_run_no_iteration(threading):
    threading("serial")
    _like_the_plain_loops(_damped_run(damped_steps, STRIP + 5, (0,)), rtol=1e-5)


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_sphere_tracing_a_scene_of_spheres(threading, mode):
    """Rays that hit stop after a few steps, rays that miss march all of them; the marching
    loop finds the nearest of the spheres in an inner loop. Depths and the gradients with
    respect to the eye, the spheres' centers and radii are the plain loops'."""
    threading(mode)
    n = 3 * ADJOINT_STRIP + 17
    launched = n + 5  # threads past the data return early
    rng = np.random.default_rng(3)
    dirs = np.concatenate([rng.uniform(-0.25, 0.25, (n, 2)), np.ones((n, 1))], axis=1)
    dirs = (dirs / np.linalg.norm(dirs, axis=1, keepdims=True)).astype(np.float32)
    centers0 = np.array([[0.0, 0.0, 4.0], [0.6, 0.3, 5.0], [-0.5, -0.4, 4.5]], np.float32)
    radii0 = np.array([0.5, 0.7, 0.4], np.float32)

    def run():
        eye = wp.array(np.array([[0.02, -0.01, 0.0]], np.float32), dtype=wp.vec3,
                       requires_grad=True)
        d = wp.array(dirs, dtype=wp.vec3, requires_grad=True)
        centers = wp.array(centers0, dtype=wp.vec3, requires_grad=True)
        radii = wp.array(radii0, dtype=wp.float32, requires_grad=True)
        depth = wp.zeros(n, dtype=wp.float32, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(scene, launched, inputs=[eye, d, centers, radii, 48], outputs=[depth])
        tape.backward(grads={depth: wp.ones(n, dtype=wp.float32)})
        return (depth.numpy(), d.grad.numpy(), eye.grad.numpy(), centers.grad.numpy(),
                radii.grad.numpy())

    got, want = run(), debug_reference(run)
    depth = got[0]
    assert 10 < (depth < 8.0).sum() < n - 10  # hits and misses side by side
    np.testing.assert_array_equal(depth, want[0])
    np.testing.assert_array_equal(got[1], want[1])
    for g, g_ref in zip(got[2:], want[2:]):  # summed over the threads in another order
        assert np.any(g != 0.0)
        np.testing.assert_allclose(g, g_ref, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_rows_of_a_nest(threading, mode):
    threading(mode)
    shape = (3, ADJOINT_STRIP + 9)
    rng = np.random.default_rng(5)
    x0 = rng.uniform(-1.0, 1.0, shape)
    c0 = rng.uniform(-0.5, 0.5, 4)
    _like_the_plain_loops(_xw_run(grid_sums, shape, x0, c0, (3,)), rtol=1e-12)


def test_a_nest_differentiates():
    """Finite differences of the interchanged nest (float64): the values each thread reads and
    the coefficients every thread reads in the inner loop."""
    shape = (2, 5)
    rng = np.random.default_rng(8)

    def run(a):
        wp.launch(grid_sums, shape, inputs=[a["x"], a["c"], 3], outputs=[a["y"]])

    check_tape(run, {"x": rng.uniform(-1.0, 1.0, shape), "c": rng.uniform(-0.5, 0.5, 4)},
               {"y": np.zeros(shape)}, {"x": wp.float64, "c": wp.float64, "y": wp.float64})


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_inner_bounds_read_from_a_local(threading, mode):
    threading(mode)
    n = ADJOINT_STRIP + 11
    x0 = np.random.default_rng(12).uniform(-1.0, 1.0, n)
    w0 = np.random.default_rng(13).uniform(-0.5, 0.5, 5)
    _, _, gw = _like_the_plain_loops(_xw_run(window, n, x0, w0, (4,)), rtol=1e-12)
    assert gw[0] == 0.0 and np.all(gw[1:] != 0.0)
    check_tape(lambda a: wp.launch(window, 6, inputs=[a["x"], a["w"], 3], outputs=[a["y"]]),
               {"x": x0[:6], "w": w0}, {"y": np.zeros(6)},
               {"x": wp.float64, "w": wp.float64, "y": wp.float64})


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_a_while_loop_holding_a_loop(threading, mode):
    """A while loop whose threads run different numbers of rounds of an inner loop (some past
    the adjoint stacks' first room, ``cpu_loops.WHILE_ROOM``): its condition is checked after
    each round (``interchange._as_for``), values and gradients are the plain loops'."""
    threading(mode)
    n = 2 * ADJOINT_STRIP + 5
    rng = np.random.default_rng(14)
    x0 = rng.uniform(-2.0, 2.0, n)
    x0[7] = 0.0  # no round at all
    w0 = np.array([0.9, 0.95, 0.99])  # |v| shrinks by 0.85 a round: up to ~50 rounds
    y, _, _ = _like_the_plain_loops(_xw_run(settle, n, x0, w0), rtol=1e-12)
    rounds = np.floor(y + 0.5)
    assert rounds.min() == 0 and rounds.max() > 40
    check_tape(lambda a: wp.launch(settle, 5, inputs=[a["x"], a["w"]], outputs=[a["y"]]),
               {"x": np.array([0.5, -1.3, 0.02, 1.9, -0.7]), "w": w0}, {"y": np.zeros(5)},
               {"x": wp.float64, "w": wp.float64, "y": wp.float64})


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_loops_one_after_the_other(threading, mode):
    """Two loops in a row run as the loops inside a loop of one iteration (``interchange.ONCE``),
    both interchanged: values and gradients are the plain loops'."""
    threading(mode)
    size = 2 * ADJOINT_STRIP + 9
    n = size - 4  # threads past it return early
    rng = np.random.default_rng(15)
    x0 = rng.uniform(-1.0, 1.0, size)
    w0 = rng.uniform(-0.5, 0.5, 6)
    y, gx, _ = _like_the_plain_loops(_xw_run(two_passes, size, x0, w0, (n,)), rtol=1e-12)
    assert np.all(y[n:] == 0.0) and np.all(gx[n:] == 0.0)
    check_tape(lambda a: wp.launch(two_passes, 6, inputs=[a["x"], a["w"], 5], outputs=[a["y"]]),
               {"x": x0[:6], "w": w0}, {"y": np.zeros(6)},
               {"x": wp.float64, "w": wp.float64, "y": wp.float64})


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_an_inner_loop_in_a_branch(threading, mode):
    """A branch in the loop that holds the inner loop is spread out around it
    (``interchange._lifted_inner_branches``): threads that did not take it run its iterations
    doing nothing. Values and gradients are the plain loops'."""
    threading(mode)
    size = 2 * ADJOINT_STRIP + 3
    x0 = np.linspace(-1.0, 1.0, size)
    w0 = np.random.default_rng(16).uniform(0.2, 1.0, 5)
    _like_the_plain_loops(_xw_run(sometimes, size, x0, w0, (12,)), rtol=1e-12)
    check_tape(lambda a: wp.launch(sometimes, 5, inputs=[a["x"], a["w"], 6], outputs=[a["y"]]),
               {"x": np.array([-0.8, 0.1, 0.45, 0.7, 0.95]), "w": w0}, {"y": np.zeros(5)},
               {"x": wp.float64, "w": wp.float64, "y": wp.float64})


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_loops_counted_down(threading, mode):
    """``reversed(range(...))`` loops run as the same ranges counted down
    (``interchange._forward_order``): values and gradients are the plain loops'."""
    threading(mode)
    size = ADJOINT_STRIP + 21
    x0 = np.linspace(-1.0, 1.0, size)
    w0 = np.random.default_rng(17).uniform(-0.5, 0.5, 4)
    for n in (0, 1, 7):
        _like_the_plain_loops(_xw_run(countdown, size, x0, w0, (n,)), rtol=1e-12, atol=1e-12)
    check_tape(lambda a: wp.launch(countdown, 4, inputs=[a["x"], a["w"], 5], outputs=[a["y"]]),
               {"x": x0[:4], "w": w0}, {"y": np.zeros(4)},
               {"x": wp.float64, "w": wp.float64, "y": wp.float64})
