"""Interchanged loops with ``break``, and ``while`` loops (``codegen/interchange.py``,
``Interchange.exits``): a thread that breaks, or whose ``while`` condition fails, skips the rest
of the loop, the strip leaves the loop once every thread has, and once few threads still run,
each finishes alone. Every thread must compute bit for bit what the plain loop computes (debug
mode keeps it), whichever of those paths its strip takes. The adjoint of a ``for`` loop with
``break`` is interchanged the same way (``cpu_loops._replay_with_exits``), and its gradients
must be the plain loop's bit for bit too, and so is a ``while`` loop's (``_as_for``)."""

import re

import numpy as np
import pytest

import difftape as wp
from difftape._src.backends import cpu_target
from difftape._src.backends.cpu_loops import FEW_LEFT
from difftape._src.codegen.interchange import ADJOINT_STRIP
from difftape._src.codegen.strips import STRIP
from tests.fdcheck import check_tape
from tests.kernels.modes import debug_reference


@wp.kernel
def march(x: wp.array(dtype=wp.float32), stop: wp.array(dtype=int), n: int,
          y: wp.array(dtype=wp.float32), last: wp.array(dtype=wp.float32)):
    i = wp.tid()
    t = wp.float32(0.0)
    h = x[i]
    for k in range(n):
        h = h * 0.9 + wp.sqrt(wp.abs(t) + 1.0) * 0.01
        if k >= stop[i]:
            break
        t = t + h
        last[i] = t * 2.0  # stored in the loop (never read by the kernel)
    y[i] = t + h


@wp.func
def sphere(p: wp.vec3):
    return wp.length(p - wp.vec3(0.0, 0.0, 5.0)) - 1.0  # the func's return is not the loop's


@wp.kernel
def trace(dirs: wp.array(dtype=wp.vec3), depth: wp.array(dtype=wp.float32)):
    i = wp.tid()
    d = wp.normalize(dirs[i])
    t = wp.float32(0.0)
    for k in range(48):
        h = sphere(d * t)
        if wp.abs(h) < 1.0e-4:
            break
        t = t + h
    depth[i] = t


@wp.kernel
def settle(x: wp.array(dtype=wp.float64), stop: wp.array(dtype=int), n: int,
           y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[i]
    for k in range(n):
        if k == stop[i]:
            break
        s = wp.sin(s) * 0.5 + x[i] * wp.float64(k)
    y[i] = s * s


@wp.kernel
def count_up(x: wp.array(dtype=wp.float32), stop: wp.array(dtype=int),
             y: wp.array(dtype=wp.float32), last: wp.array(dtype=wp.float32)):
    i = wp.tid()
    k = int(0)
    s = x[i]
    while k < stop[i]:
        s = s * 0.99 + wp.sqrt(wp.abs(s) + 1.0)
        k = k + 1
        if k % 3 == 0:
            continue
        last[i] = s
    y[i] = s + wp.float32(k)


@wp.kernel
def newton(a: wp.array(dtype=wp.float64), tol: wp.float64, y: wp.array(dtype=wp.float64),
           steps: wp.array(dtype=int)):
    i = wp.tid()
    r = a[i] + wp.float64(1.0)
    k = int(0)
    while k < 60 and wp.abs(r * r - a[i]) > tol:
        r = wp.float64(0.5) * (r + a[i] / r)
        k = k + 1
        if r < wp.float64(0.0):
            break
    y[i] = r * r + wp.sin(r)
    steps[i] = k


@wp.kernel
def counts_atomically(x: wp.array(dtype=wp.float64), n: int, hist: wp.array(dtype=wp.float64),
                      total: wp.array(dtype=wp.float64)):
    i = wp.tid()
    for k in range(n):
        if x[i] * wp.float64(k) > 2.0:
            break
        wp.atomic_add(hist, k, 1.0)  # lanes summed after each iteration, a lone thread's too
        wp.atomic_add(total, 0, x[i])  # one element for every thread


@wp.kernel
def returns_inside(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.float64(0.0)
    for k in range(n):
        s = s + x[i]
        if s > 2.0:
            y[i] = s
            return
    y[i] = -s


def _forward(kernel) -> str:
    return kernel.source().split("_adjoint(")[0]


def _adjoint(kernel) -> str:
    return kernel.source().split("_adjoint(")[1]


def test_which_loops_with_break_are_interchanged():
    for kernel in (march, trace, settle, count_up, newton):
        source = _forward(kernel)
        assert "rt_carry_" in source and "rt_running" in source, kernel.key
        assert "for rt_rest in range(rt_it + rt_step, rt_stop, rt_step):" in source
    for kernel in (march, trace):
        assert "rt_carry_rt_ran" in _adjoint(kernel) and "rt_most" in _adjoint(kernel)
    # accumulators cleared once consumed are zero between iterations: only the prologue's
    # zero (``interchange.left_zero``); those that carry a sum across iterations are carried
    assert "rt_carry_adj_t =" in _adjoint(trace) and "rt_carry_adj_d_0 =" in _adjoint(trace)
    assert "adj_h +=" in _adjoint(trace) and "rt_carry_adj_h" not in _adjoint(trace)
    # settle's loop calls sin: plain on AMD Zen cores only (``cpu_target``)
    assert ("rt_carry_rt_ran" in _adjoint(settle)) is not cpu_target.BUILTIN_LOOPS_STAY_PLAIN
    for kernel in (count_up, newton):  # unbounded: room for some iterations, then more
        source = _adjoint(kernel)
        assert "rt_carry_rt_ran" in source and "while rt_from < hi:" in source, kernel.key
        assert re.search(r"for it_\d+ in range\(start_\d+, rt_stop, step_\d+\):", source)
        assert "if rt_resume < hi:\n" in source and "rt_cap *= 2" in source
    assert "rt_carry_" in _forward(counts_atomically)
    # a return ends the thread's loop like a break, and the code after the loop is under the
    # return's flag already (``codegen/structure.py``)
    assert "rt_carry_flag_ret0" in _forward(returns_inside)
    assert "rt_carry_flag_ret0" in _adjoint(returns_inside)


@wp.kernel
def guarded_sum(x: wp.array(dtype=wp.float64), n: int, m: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    if i >= n:  # threads past the data: the usual early return
        return
    p = x[i]
    s = wp.float64(0.0)
    for k in range(m):
        s = s + p
        p = p * wp.float64(0.9)
    y[i] = s


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("n", [0, 5, ADJOINT_STRIP + 3, 2 * STRIP + 30])
def test_a_return_before_the_loop(threading, mode, n):
    """The early return's flag is one more exit of the interchanged loop (threads that returned
    skip it, and the code before and after it): values and gradients are the plain code's."""
    threading(mode)
    size, m = 2 * STRIP + 30, 9
    assert "rt_carry_flag_ret0" in _forward(guarded_sum)
    assert "rt_carry_flag_ret0" in _adjoint(guarded_sum)
    x0 = np.random.default_rng(n).uniform(-1.0, 1.0, size)

    def run():
        x = wp.array(x0, dtype=wp.float64, requires_grad=True)
        y = wp.full(size, -1.0, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(guarded_sum, size, inputs=[x, n, m], outputs=[y])
        tape.backward(grads={y: wp.ones(size, dtype=wp.float64)})
        return y.numpy(), x.grad.numpy()

    (y, g), (y_ref, g_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(g, g_ref)
    ran = np.arange(size) < n
    factor = (1.0 - 0.9 ** m) / 0.1
    np.testing.assert_allclose(y, np.where(ran, x0 * factor, -1.0), rtol=1e-12)
    np.testing.assert_allclose(g, np.where(ran, factor, 0.0), rtol=1e-12)


@wp.kernel
def branch_sum(x: wp.array(dtype=wp.float64), active: wp.array(dtype=int), m: int,
               y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.float64(1.0)
    if active[i] != 0:  # the loop in a branch some threads take
        p = x[i]
        s = wp.float64(0.0)
        for k in range(m):
            s = s + p
            p = p * wp.float64(0.9)
        s = s * wp.float64(2.0)
    y[i] = s + x[i]


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("taken", ["none", "some", "all"])
def test_a_loop_in_a_branch(threading, mode, taken):
    """The branch's flag (``interchange._lifted_branch``) is one more exit of the interchanged
    loop: threads whose branch is not taken skip it and the branch's other code, and run the
    code after the branch. Values and gradients are the plain code's and the closed form's."""
    threading(mode)
    size, m = 2 * STRIP + 30, 9
    assert "rt_carry_flag_skip" in _forward(branch_sum)
    assert "rt_carry_flag_skip" in _adjoint(branch_sum)
    rng = np.random.default_rng(len(taken))
    x0 = rng.uniform(-1.0, 1.0, size)
    on = {"none": np.zeros(size, bool), "all": np.ones(size, bool),
          "some": rng.random(size) < 0.5}[taken]

    def run():
        x = wp.array(x0, dtype=wp.float64, requires_grad=True)
        y = wp.zeros(size, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(branch_sum, size, inputs=[x, wp.array(on.astype(np.int32), dtype=int), m],
                      outputs=[y])
        tape.backward(grads={y: wp.ones(size, dtype=wp.float64)})
        return y.numpy(), x.grad.numpy()

    (y, g), (y_ref, g_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(g, g_ref)
    factor = 2.0 * (1.0 - 0.9 ** m) / 0.1
    np.testing.assert_allclose(y, np.where(on, x0 * factor, 1.0) + x0, rtol=1e-12)
    np.testing.assert_allclose(g, np.where(on, factor, 0.0) + 1.0, rtol=1e-12)


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("size", [3, ADJOINT_STRIP + 7, 2 * STRIP + 30])
def test_returns_inside_the_loop(threading, mode, size):
    threading(mode)
    x0 = np.random.default_rng(size).uniform(0.0, 0.6, size)
    x0[::7] = 0.01  # never return: the code after the loop runs

    def run():
        x = wp.array(x0, dtype=wp.float64, requires_grad=True)
        y = wp.zeros(size, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(returns_inside, size, inputs=[x, 12], outputs=[y])
        tape.backward(grads={y: wp.ones(size, dtype=wp.float64)})
        return y.numpy(), x.grad.numpy()

    (y, g), (y_ref, g_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(g, g_ref)
    steps = np.minimum(np.floor(2.0 / x0) + 1, 12)  # s = k x after k steps; returns once s > 2
    returned = x0 * steps > 2.0
    np.testing.assert_allclose(y, np.where(returned, x0 * steps, -12 * x0), rtol=1e-12)
    np.testing.assert_allclose(g, np.where(returned, steps, -12.0), rtol=1e-12)


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("pattern", ["mixed", "one runs long", "few left"])
def test_atomic_adds_in_a_loop_with_break(threading, mode, pattern):
    """Counts per iteration: every thread's iterations counted once, whether it ran them with
    its strip or on its own (the counts are whole numbers: exact in any order)."""
    threading(mode)
    size, n = 2 * STRIP + 40, 30
    stops = _stops(pattern, size, n, np.random.default_rng(1))
    x0 = 2.0 / (stops + 0.5)  # x * k > 2 from k = stop + 1 on

    def run():
        hist, total = wp.zeros(n, dtype=wp.float64), wp.zeros(1, dtype=wp.float64)
        wp.launch(counts_atomically, size, inputs=[wp.array(x0, dtype=wp.float64), n],
                  outputs=[hist, total])
        return hist.numpy(), total.numpy()

    (hist, total), (hist_ref, total_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(hist, hist_ref)
    np.testing.assert_allclose(total, total_ref, rtol=1e-12)
    ran = np.minimum(np.floor(2.0 / x0 - 1e-9).astype(int) + 1, n)  # iterations before the break
    np.testing.assert_array_equal(hist, [(ran > k).sum() for k in range(n)])


def _assert_like_the_plain_loop(kernel, size: int, inputs: list) -> None:
    """``kernel``'s outputs ``y`` and ``last`` are the plain loop's (debug mode) bit for bit."""
    def run():
        y, last = wp.zeros(size, dtype=wp.float32), wp.full(size, -7.0, dtype=wp.float32)
        wp.launch(kernel, size, inputs=inputs, outputs=[y, last])
        return y.numpy(), last.numpy()

    for got, want in zip(run(), debug_reference(run)):
        np.testing.assert_array_equal(got, want)


def _x_gradient(kernel, x0: np.ndarray, inputs: list, seeds: np.ndarray) -> np.ndarray:
    """``x``'s gradient through ``kernel(x, *inputs)`` into ``y`` and ``last``, seeded with
    ``seeds[0]`` and ``seeds[1]``."""
    x = wp.array(x0, dtype=wp.float32, requires_grad=True)
    y, last = (wp.zeros(x0.size, dtype=wp.float32, requires_grad=True) for _ in range(2))
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, x0.size, inputs=[x, *inputs], outputs=[y, last])
    tape.backward(grads={y: wp.array(seeds[0], dtype=wp.float32),
                         last: wp.array(seeds[1], dtype=wp.float32)})
    return x.grad.numpy()


def _stops(pattern: str, size: int, n: int, rng, strip: int = STRIP) -> np.ndarray:
    """Each thread's iteration to leave the loop at, by ``pattern``, for strips of ``strip``
    threads (the forward's; an interchanged adjoint's are ``ADJOINT_STRIP``)."""
    lane = np.arange(size) % strip
    if pattern == "never":
        return np.full(size, n + 3)
    if pattern == "at once":
        return np.zeros(size, int)
    if pattern == "mixed":
        return rng.integers(0, n + 2, size)
    if pattern == "one runs long":  # every strip finishes that thread alone after iteration 0
        return np.where(lane == 37, n - 1, 1)
    # after iteration 4 just over 1/FEW_LEFT of a whole strip still runs, after 9 just that
    few = strip // FEW_LEFT
    return np.where(lane < few, n - 2, np.where(lane < few + 2, 9, 4))


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("size", [1, 5, STRIP - 1, STRIP, STRIP + 1, 2 * STRIP + 300])
@pytest.mark.parametrize("pattern", ["never", "at once", "mixed", "one runs long", "few left"])
def test_values_match_the_plain_loop(threading, mode, size, pattern):
    threading(mode)
    n = 30
    rng = np.random.default_rng(size)
    x = wp.array(rng.uniform(-2.0, 2.0, size).astype(np.float32), dtype=wp.float32)
    stop = wp.array(_stops(pattern, size, n, rng).astype(np.int32), dtype=int)
    _assert_like_the_plain_loop(march, size, [x, stop, n])


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_sphere_tracing_matches_the_plain_loop(threading, mode):
    """Rays that hit converge in a few steps, rays that miss run all 48, in the same strips."""
    threading(mode)
    size = 3 * STRIP + 11
    rng = np.random.default_rng(2)
    dirs = rng.uniform(-0.3, 0.3, (size, 3)).astype(np.float32)
    dirs[:, 2] = 1.0
    dirs[::7] = 0.0  # zero directions: normalize gives 0, and the ray never moves

    def run():
        depth = wp.zeros(size, dtype=wp.float32)
        wp.launch(trace, size, inputs=[wp.array(dirs, dtype=wp.vec3)], outputs=[depth])
        return depth.numpy()

    got = run()
    np.testing.assert_array_equal(got, debug_reference(run))
    cos = dirs[:, 2] / np.maximum(np.linalg.norm(dirs.astype(np.float64), axis=1), 1e-30)
    room = 1.0 - 25.0 * (1.0 - cos ** 2)  # the ray meets the unit sphere at z = 5 where > 0
    hits = (room > 0.05) & (np.arange(size) % 7 != 0)
    assert 50 < hits.sum() < size - 50  # strips mix rays that converge with rays that miss
    np.testing.assert_allclose(got[hits], 5.0 * cos[hits] - np.sqrt(room[hits]), atol=1e-3)


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("size", [1, 5, ADJOINT_STRIP + 1, STRIP, 2 * STRIP + 300])
@pytest.mark.parametrize("pattern", ["never", "at once", "mixed", "one runs long", "few left"])
def test_gradients_match_the_plain_loop(threading, mode, size, pattern):
    """The interchanged adjoint's gradients are the plain loop's bit for bit, whether a thread
    ran its last iterations with its strip or on its own."""
    threading(mode)
    n = 30
    rng = np.random.default_rng(size + 7)
    stops = wp.array(_stops(pattern, size, n, rng, ADJOINT_STRIP).astype(np.int32), dtype=int)
    x0 = rng.uniform(-2.0, 2.0, size).astype(np.float32)
    seeds = rng.uniform(0.5, 1.5, (2, size)).astype(np.float32)

    def run():
        return _x_gradient(march, x0, [stops, n], seeds)

    got = run()
    np.testing.assert_array_equal(got, debug_reference(run))
    assert np.all(np.isfinite(got)) and np.any(got != 0.0)


@wp.kernel
def weighted_march(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64),
                   stop: wp.array(dtype=int), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[i]
    for k in range(n):
        s = s * wp.float64(0.9) + w[k] * x[i]  # w[k]'s gradient: summed per iteration
        if k >= stop[i]:
            break
    y[i] = s * s


@pytest.mark.parametrize("size", [ADJOINT_STRIP - 20, 2 * ADJOINT_STRIP + 9])
@pytest.mark.parametrize("pattern", ["mixed", "one runs long", "few left"])
def test_coefficients_the_loop_picks(threading, size, pattern):
    """Adds at ``w[k]`` from the threads of a strip go to a lane array summed after each
    iteration's reverse (``ForwardWriter.loop_lane``); threads that left the loop add nothing
    to it, and a thread reversing its last iterations on its own sums after each of them."""
    threading("serial")
    n = 24
    rng = np.random.default_rng(size)
    stops = wp.array(_stops(pattern, size, n, rng, ADJOINT_STRIP).astype(np.int32), dtype=int)
    x0, w0 = rng.uniform(-1.0, 1.0, size), rng.uniform(-0.5, 0.5, n)
    assert "rt_lane_flush(" in _adjoint(weighted_march)
    assert "rt_carry_rt_ran" in _adjoint(weighted_march)

    def run():
        x = wp.array(x0, dtype=wp.float64, requires_grad=True)
        w = wp.array(w0, dtype=wp.float64, requires_grad=True)
        y = wp.zeros(size, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(weighted_march, size, inputs=[x, w, stops, n], outputs=[y])
        tape.backward(grads={y: wp.ones(size, dtype=wp.float64)})
        return x.grad.numpy(), w.grad.numpy()

    (gx, gw), (gx_ref, gw_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(gx, gx_ref)
    np.testing.assert_allclose(gw, gw_ref, rtol=1e-12, atol=1e-12)
    assert np.any(gw[n // 2:] != 0.0)  # late iterations: run by the long threads only


def test_sphere_tracing_gradients():
    """Depths' gradients with respect to the rays' directions, where rays that converge in a
    few steps share strips with rays that miss and take every step: the plain loop's bit for
    bit, and for rays that hit, central differences of the same march in float64."""
    size = 2 * STRIP + 17
    rng = np.random.default_rng(5)
    dirs = rng.uniform(-0.1, 0.1, (size, 3)).astype(np.float32)  # all within the sphere's cone
    dirs[:, 2] = 1.0
    dirs[::11, :2] = 0.5  # but these

    def run():
        d = wp.array(dirs, dtype=wp.vec3, requires_grad=True)
        depth = wp.zeros(size, dtype=wp.float32, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(trace, size, inputs=[d], outputs=[depth])
        tape.backward(grads={depth: wp.ones(size, dtype=wp.float32)})
        return d.grad.numpy()

    got = run()
    np.testing.assert_array_equal(got, debug_reference(run))
    eps = 1e-3
    for i in (i for i in range(1, size, 37) if i % 11):  # the rays that hit
        for c in range(3):
            plus, minus = dirs[i].copy(), dirs[i].copy()
            plus[c] += eps
            minus[c] -= eps
            steps = _depth(dirs[i])[1]
            fd = (_depth(plus, steps)[0] - _depth(minus, steps)[0]) / (2 * eps)
            np.testing.assert_allclose(got[i, c], fd, rtol=1e-3, atol=1e-3)


def _depth(direction: np.ndarray, steps: int | None = None) -> tuple[float, int]:
    """``trace``'s depth along one direction in float64, and the steps it took; with ``steps``,
    that many steps whatever ``h`` (the gradient differentiates the steps the thread took)."""
    d = direction.astype(np.float64) / np.linalg.norm(direction.astype(np.float64))
    t = 0.0
    for k in range(48 if steps is None else steps):
        h = np.linalg.norm(d * t - np.array([0.0, 0.0, 5.0])) - 1.0
        if steps is None and abs(h) < 1.0e-4:
            return t, k
        t += h
    return t, 48 if steps is None else steps


def test_gradients_through_a_loop_with_break():
    size, n = 37, 12
    rng = np.random.default_rng(8)
    stop = rng.integers(0, n + 2, size)
    stop[:3] = (0, n, n + 1)

    def run(a):
        wp.launch(settle, size, inputs=[a["x"], a["stop"], n], outputs=[a["y"]])

    check_tape(run, {"x": rng.uniform(-1.0, 1.0, size)}, {"y": np.zeros(size), "stop": stop},
               {"x": wp.float64, "y": wp.float64, "stop": wp.int32})


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("size", [1, STRIP - 1, 2 * STRIP + 300])
@pytest.mark.parametrize("pattern", ["never", "at once", "mixed", "one runs long", "few left"])
def test_while_loops_match_the_plain_loop(threading, mode, size, pattern):
    threading(mode)
    rng = np.random.default_rng(size + 1)
    x = wp.array(rng.uniform(-2.0, 2.0, size).astype(np.float32), dtype=wp.float32)
    counts = _stops(pattern, size, 30, rng)
    counts[::5] = 0  # threads whose condition fails at once
    stop = wp.array(counts.astype(np.int32), dtype=int)
    _assert_like_the_plain_loop(count_up, size, [x, stop])


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_newton_iterations_match_the_plain_loop(threading, mode):
    threading(mode)
    size = 2 * STRIP + 45
    a = np.random.default_rng(4).uniform(0.0, 50.0, size)
    a[::9] = 1.0  # converge in a few steps
    a[5] = -1.0  # no root: the first step divides by r = 0, and the negative iterate breaks

    def run():
        y, steps = wp.zeros(size, dtype=wp.float64), wp.zeros(size, dtype=int)
        wp.launch(newton, size, inputs=[wp.array(a, dtype=wp.float64), 1e-12], outputs=[y, steps])
        return y.numpy(), steps.numpy()

    (y, steps), (y_ref, steps_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(steps, steps_ref)
    assert steps[0] > 3 and steps[5] == 1 and len(set(steps.tolist())) > 3
    ok = a >= 0.0
    r = np.sqrt(a[ok])
    np.testing.assert_allclose(y[ok], r * r + np.sin(r), rtol=1e-9)


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("size", [1, STRIP - 1, 2 * STRIP + 300])
@pytest.mark.parametrize("pattern", ["never", "at once", "mixed", "one runs long", "few left"])
def test_while_loop_gradients_match_the_plain_loop(threading, mode, size, pattern):
    """A while loop's interchanged adjoint: strips whose threads run more iterations than the
    stacks have room for (``WHILE_ROOM``) run again with more room (up to 150 here: 64, then
    128, then 256), whether the long ones run with the strip or finish alone."""
    threading(mode)
    rng = np.random.default_rng(size + 2)
    counts = _stops(pattern, size, 150, rng, ADJOINT_STRIP)
    counts[::5] = 0
    x0 = rng.uniform(-2.0, 2.0, size).astype(np.float32)
    seeds = np.stack([np.full(size, 0.5), np.ones(size)]).astype(np.float32)

    def run():
        return _x_gradient(count_up, x0, [wp.array(counts.astype(np.int32), dtype=int)], seeds)

    got = run()
    np.testing.assert_array_equal(got, debug_reference(run))
    assert np.all(np.isfinite(got)) and np.any(got != 0.0)


def test_gradients_through_a_while_loop():
    size = 29
    rng = np.random.default_rng(12)

    def run(a):
        wp.launch(newton, size, inputs=[a["a"], 1e-13], outputs=[a["y"], a["steps"]])

    check_tape(run, {"a": rng.uniform(0.5, 20.0, size)},
               {"y": np.zeros(size), "steps": np.zeros(size, int)},
               {"a": wp.float64, "y": wp.float64, "steps": wp.int32}, rtol=1e-5)
