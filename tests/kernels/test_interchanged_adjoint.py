"""Interchanged adjoints (``codegen/interchange.py``, ``backends/cpu.py``): the adjoint of a kernel
built around a loop of the same length in every thread runs, per strip of threads, the replay
and the reverse sweep of that loop with the strip's threads inside it, its stacks laid out one
lane per thread. Each thread's own gradients must be bit for bit those of the plain adjoint
(debug mode keeps it); adds that several threads share only change their summation order."""

import numpy as np
import pytest

import difftape as wp
from difftape._src.backends import cpu_target
from difftape._src.codegen.interchange import ADJOINT_STRIP
from difftape._src.codegen.strips import STRIP
from tests.fdcheck import check_tape
from tests.kernels.modes import debug_reference


@wp.kernel
def horner(x: wp.array(dtype=wp.float64), c: wp.array(dtype=wp.float64), n: int,
           y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    xi = x[i]
    p = wp.float64(1.0)
    acc = wp.float64(0.0)
    for k in range(n):
        t = c[k] * p
        if t > 0.0:
            acc = acc + t * t * t
        else:
            acc = acc + 0.5 * t * t
        p = p * xi
    acc = acc * xi  # overwritten after the loop: saved and restored there
    y[i] = acc


@wp.kernel
def counted(x: wp.array(dtype=wp.float32), n: int, y: wp.array(dtype=wp.float32),
            loss: wp.array(dtype=wp.float32)):
    i = wp.tid()
    s = x[i]
    j = wp.int64(i)
    for k in range(2, n + 2):
        j = (j * wp.int64(3) + wp.int64(1)) & wp.int64(7)  # an int64 saved every iteration
        s = s * wp.float32(0.9) + wp.float32(j) * x[i]
        wp.atomic_add(loss, 0, s)  # a thread-invariant add inside the loop
    y[i] = s


@wp.kernel
def shared_scale(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64), n: int,
                 y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[i]
    for k in range(n):
        s = s * w[0] + x[i] * w[1]  # every thread reads w[0], w[1]: per-chunk sums
    y[i] = s


@wp.kernel
def branch_saves(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[i]
    for k in range(n):
        if s > 0.5:
            s = s * s  # saved under a branch: threads save different counts
    y[i] = s


@wp.kernel
def sines(x: wp.array(dtype=wp.float32), c: wp.array(dtype=wp.float32), n: int,
          y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    s = wp.float32(0.0)
    for k in range(n):
        s = s * 0.9 + wp.sin(c[k] * x[i])  # calls that LLVM does not inline in adjoints
    y[i] = s


@wp.kernel
def damped_roots(x: wp.array(dtype=wp.float32), n: int, y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    s = x[i]
    for k in range(n):  # builtins of a few instructions: still a loop of arithmetic
        s = wp.sqrt(s * s + 0.5) * 0.7 + wp.abs(s - 0.25) * 0.1 + wp.min(s, 0.2)
    y[i] = s


@wp.kernel
def local_bounds(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    m = n * 2  # the same in every thread, but a local
    s = x[i]
    for k in range(m):
        s = s * x[i] + 1.0
    y[i] = s


@wp.kernel
def coefficients(x: wp.array(dtype=wp.float64), c: wp.array(dtype=wp.float64),
                 d: wp.array(dtype=wp.vec3d), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    xi = x[i]
    p = wp.float64(1.0)
    acc = wp.float64(0.0)
    for k in range(n):
        t = c[k] * p + c[k] * c[k + 1] * xi  # two sites at c[k], one at c[k + 1]
        if t > 0.0:
            acc = acc + t + d[n - 1 - k][1] * p  # a vector's component, under a branch
        else:
            acc = acc + d[k][0] * xi + d[k][1] * p + d[k][2]
        p = p * xi
    y[i] = acc


@wp.kernel
def branchy_sum(x: wp.array(dtype=wp.float64), c: wp.array(dtype=wp.float64), n: int,
                y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    xi = x[i]
    p = wp.float64(1.0)
    acc = wp.float64(0.0)
    for k in range(n):
        t = c[k] * p
        if t > 0.0:
            acc = acc + t
        else:
            acc = acc + 0.5 * t  # the sum is linear: its reverse reads no value of acc
        p = p * xi
    y[i] = acc


@wp.kernel
def many_coefficients(x: wp.array(dtype=wp.float64), c: wp.array2d(dtype=wp.float64), n: int,
                      y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    p = wp.float64(1.0)
    acc = wp.float64(0.0)
    for k in range(n):
        for m in range(12):  # unrolled: 24 sites at c[k, m]
            acc = acc + c[k, m] * p + c[k, m + 12] * p
        p = p * x[i]
    y[i] = acc


@wp.kernel
def restored_in_one_arm(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = x[i]
    b = a * a  # its reverse reads a, as it stood before the loop
    s = wp.float64(0.25) + a
    for k in range(n):
        s = s * wp.float64(0.9) + wp.float64(0.1)
        if s > wp.float64(0.5):
            a = s  # the reverse restores a in this arm only, and reads it nowhere in the loop
    y[i] = s + a * b


def _interchanged_adjoint(kernel) -> bool:
    return "rt_carry_" in kernel.source().split("_adjoint(")[1]


def _gradient_and_values(kernel, x: np.ndarray, inputs: list, dtype=wp.float64) -> tuple:
    """``x``'s gradient through ``kernel(x, *inputs) -> y`` with ``y`` seeded with ones, and
    ``y``."""
    xa = wp.array(x, dtype=dtype, requires_grad=True)
    y = wp.zeros(x.size, dtype=dtype, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, x.size, inputs=[xa, *inputs], outputs=[y])
    tape.backward(grads={y: wp.ones(x.size, dtype=dtype)})
    return xa.grad.numpy(), y.numpy()


def test_which_adjoints_are_interchanged():
    assert _interchanged_adjoint(horner) and _interchanged_adjoint(counted)
    assert _interchanged_adjoint(shared_scale) and "priv_" in shared_scale.source()
    # one arm saves, the other skips the slot (``ForwardWriter.arm_pads``), and its reverse too
    source = branch_saves.source().split("_adjoint(")[1]
    assert _interchanged_adjoint(branch_saves)
    assert "    else:\n                    ftop += 1\n" in source
    assert "    else:\n                    ftop -= 1\n" in source
    # bounds read from a local written from a parameter: the stacks' room from the parameter
    assert _interchanged_adjoint(local_bounds)
    assert "start_2, stop_2, step_2 = i32_0, int32(n * i32_2), i32_1" in local_bounds.source()
    assert _interchanged_adjoint(damped_roots)  # sqrt, abs and min are instructions
    source = horner.source().split("_adjoint(")[1]
    assert f"fstack[uint64(ftop * {ADJOINT_STRIP} + rt_lane)] = p; ftop += 1" in source
    assert "for k_" in source and "in range(rt_trip - 1, -1, -1):" in source
    assert "istack = rt_empty(" in source and "np.int32)" in source  # conditions as int32
    assert "np.int64)" in counted.source().split("_adjoint(")[1]  # an int64 local is saved
    # adds at c[k] from every thread of a strip: into lane arrays, summed once per iteration
    assert "rt_lane_flush(" in source and "rt_loop_lane_" in source
    source = coefficients.source().split("_adjoint(")[1]
    assert _interchanged_adjoint(coefficients)
    assert source.count("= rt_stack_zeros(512") == 2 + 4  # c[k], c[k + 1]; d's 3 + d[.][1]


@pytest.mark.parametrize("plain", [True, False])
def test_loops_of_compiled_builtins_stay_plain_on_zen_cores_only(monkeypatch, plain):
    """``cpu_target.BUILTIN_LOOPS_STAY_PLAIN``: the adjoint of a loop of ``sin`` terms is plain
    where it is set (AMD Zen), interchanged elsewhere; the forward is interchanged either way,
    and the gradients are the plain loop's."""
    monkeypatch.setattr(cpu_target, "BUILTIN_LOOPS_STAY_PLAIN", plain)
    assert _interchanged_adjoint(sines) is not plain
    assert "rt_carry_" in sines.source().split("_adjoint(")[0]
    assert cpu_target.stamp() == (plain,)  # the kernel index keys on it


def test_loops_of_compiled_builtins_differentiate(threading):
    threading("serial")
    size, n = STRIP + 9, 6
    rng = np.random.default_rng(31)
    x, c = rng.uniform(-1.0, 1.0, size), rng.uniform(-1.0, 1.0, n)

    def run():
        xa = wp.array(x.astype(np.float32), dtype=wp.float32, requires_grad=True)
        y = wp.zeros(size, dtype=wp.float32, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(sines, size, inputs=[xa, wp.array(c.astype(np.float32), dtype=wp.float32),
                                           n], outputs=[y])
        tape.backward(grads={y: wp.ones(size, dtype=wp.float32)})
        return xa.grad.numpy()

    np.testing.assert_array_equal(run(), debug_reference(run))


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_a_sum_nothing_reads_back_is_not_carried(threading, mode):
    """The replay of a loop-carried sum whose reverse reads no value of it (the benchmark's
    dynamic loop) is dead code: the loop's replay leaves no copy of it per iteration, and the
    gradients are still the per-thread code's."""
    source = branchy_sum.source().split("_adjoint(")[1]
    assert _interchanged_adjoint(branchy_sum)
    assert source.count("rt_carry_acc[uint64(rt_lane)] = acc") == 1  # the first phase's only
    assert source.count("rt_carry_p[uint64(rt_lane)] = p") == 2  # p: the reverse reads it
    threading(mode)
    size, n = STRIP + 19, 11
    rng = np.random.default_rng(13)
    x, c = rng.uniform(-0.99, 0.99, size), rng.uniform(-1.0, 1.0, n)

    def run():
        xa = wp.array(x, dtype=wp.float64, requires_grad=True)
        y = wp.zeros(size, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(branchy_sum, size, inputs=[xa, wp.array(c, dtype=wp.float64), n],
                      outputs=[y])
        tape.backward(grads={y: wp.ones(size, dtype=wp.float64)})
        return xa.grad.numpy(), y.numpy()

    (gx, y), (gx_ref, y_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(gx, gx_ref)
    powers = x[:, None] ** np.arange(n)
    weights = np.where(c * powers > 0.0, 1.0, 0.5)
    np.testing.assert_allclose(gx, (weights * c * np.arange(n) * x[:, None] ** np.maximum(
        np.arange(n) - 1, 0)).sum(axis=1), rtol=1e-12, atol=1e-12)


def test_lane_arrays_stop_at_the_stack_budget(threading):
    """Lane arrays live on the stack: 16 float64 ones fill MAX_LANE_BYTES (64 KB), and the
    other sites add in place, with the same gradients."""
    source = many_coefficients.source().split("_adjoint(")[1]
    assert _interchanged_adjoint(many_coefficients)
    assert source.count("= rt_stack_zeros(512, np.float64") == 16
    threading("serial")
    size, n = STRIP + 3, 5
    x = np.random.default_rng(15).uniform(-0.9, 0.9, size)
    c = np.random.default_rng(16).standard_normal((n, 24))
    xa = wp.array(x, dtype=wp.float64, requires_grad=True)
    ca = wp.array(c, dtype=wp.float64, requires_grad=True)
    y = wp.zeros(size, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(many_coefficients, size, inputs=[xa, ca, n], outputs=[y])
    tape.backward(grads={y: wp.ones(size, dtype=wp.float64)})
    powers = x[:, None] ** np.arange(n)
    np.testing.assert_allclose(ca.grad.numpy(), np.repeat(powers.sum(0)[:, None], 24, axis=1),
                               rtol=1e-12)
    np.testing.assert_allclose(xa.grad.numpy(), (c.sum(1) * np.arange(n) * x[:, None] ** np.maximum(
        np.arange(n) - 1, 0)).sum(1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["serial", "auto", "parallel", "replicate"])
def test_loop_indexed_adds_from_every_thread(threading, mode):
    """Adjoints of coefficients the loop's variable picks, added by every thread of a strip
    at each iteration: the threads' gradients are the per-thread code's, and the coefficients'
    theirs up to summation order; all of them match finite differences."""
    threading(mode)
    size, n = 2 * STRIP + 37, 7
    rng = np.random.default_rng(12)
    x = rng.uniform(-0.95, 0.95, size)
    c = rng.uniform(-1.0, 1.0, n + 1)
    d = rng.uniform(-1.0, 1.0, (n, 3))
    seed_y = rng.standard_normal(size)

    def run():
        xa = wp.array(x, dtype=wp.float64, requires_grad=True)
        ca = wp.array(c, dtype=wp.float64, requires_grad=True)
        da = wp.array(d, dtype=wp.vec3d, requires_grad=True)
        y = wp.zeros(size, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(coefficients, size, inputs=[xa, ca, da, n], outputs=[y])
        tape.backward(grads={y: wp.array(seed_y, dtype=wp.float64)})
        return xa.grad.numpy(), ca.grad.numpy(), da.grad.numpy(), y.numpy()

    got, want = run(), debug_reference(run)
    np.testing.assert_array_equal(got[3], want[3])
    np.testing.assert_array_equal(got[0], want[0]) if mode == "serial" else \
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12)
    for g, w in zip(got[1:3], want[1:3]):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-11)
    if mode == "auto":
        def taped(a):
            wp.launch(coefficients, 40, inputs=[a["x"], a["c"], a["d"], n], outputs=[a["y"]])

        check_tape(taped, {"x": x[:40], "c": c, "d": d}, {"y": np.zeros(40)},
                   {"x": wp.float64, "c": wp.float64, "d": wp.vec3d, "y": wp.float64})


def _horner_run(size, n, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-0.99, 0.99, size)
    c = rng.uniform(-1.0, 1.0, n)
    seed_y = rng.standard_normal(size)

    def run():
        xa = wp.array(x, dtype=wp.float64, requires_grad=True)
        ca = wp.array(c, dtype=wp.float64, requires_grad=True)
        y = wp.zeros(size, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(horner, size, inputs=[xa, ca, n], outputs=[y])
        tape.backward(grads={y: wp.array(seed_y, dtype=wp.float64)})
        return xa.grad.numpy(), ca.grad.numpy(), y.numpy()

    return run


@pytest.mark.parametrize("mode", ["serial", "auto", "parallel"])
@pytest.mark.parametrize("size", [1, 7, ADJOINT_STRIP - 1, ADJOINT_STRIP + 1, STRIP - 1, STRIP,
                                  STRIP + 1, 2 * STRIP + 300])
def test_each_threads_gradient_is_bit_identical(threading, mode, size):
    threading(mode)
    run = _horner_run(size, 37, size)
    (gx, gc, y), (gx_ref, gc_ref, y_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(gx, gx_ref)
    np.testing.assert_allclose(gc, gc_ref, rtol=1e-12, atol=1e-12)  # summation order only


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_instruction_builtins_in_the_loop(threading, mode):
    """A loop of ``sqrt``, ``abs`` and ``min`` has its adjoint interchanged (24 such steps over
    1M threads, one core: backward 264 -> 17 ms); each thread's gradient is bit for bit the
    plain adjoint's, ties of ``abs`` and ``min`` included."""
    threading(mode)
    size = 2 * STRIP + 17
    x = np.random.default_rng(21).uniform(-1.0, 1.0, size).astype(np.float32)
    x[:4] = (0.25, 0.2, -0.25, 0.0)

    def run():
        return _gradient_and_values(damped_roots, x, [24], wp.float32)

    for got, want in zip(run(), debug_reference(run)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_long_loops_grow_the_stacks(threading, mode):
    threading(mode)
    run = _horner_run(STRIP + 5, 300, 1)  # 300 saves per thread: far past the first room
    (gx, gc, _), (gx_ref, gc_ref, _) = run(), debug_reference(run)
    np.testing.assert_array_equal(gx, gx_ref)
    np.testing.assert_allclose(gc, gc_ref, rtol=1e-12, atol=1e-12)


def test_zero_trip_loop(threading):
    threading("serial")
    run = _horner_run(STRIP + 3, 0, 2)
    gx, gc, y = run()
    x = np.random.default_rng(2).uniform(-0.99, 0.99, STRIP + 3)
    np.testing.assert_array_equal(y, np.zeros_like(y))
    assert gc.shape == (0,) and np.all(np.isfinite(gx)) and np.all(gx == 0.0 * x)


def test_horner_gradients_match_finite_differences():
    size, n = 23, 9
    rng = np.random.default_rng(8)

    def run(a):
        wp.launch(horner, size, inputs=[a["x"], a["c"], n], outputs=[a["y"]])

    check_tape(run, {"x": rng.uniform(-0.9, 0.9, size), "c": rng.uniform(-1.0, 1.0, n)},
               {"y": np.zeros(size)}, {"x": wp.float64, "c": wp.float64, "y": wp.float64})


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_int64_saves_and_a_shared_add_in_the_loop(threading, mode):
    threading(mode)
    size, n = STRIP + 40, 12
    x = np.random.default_rng(4).uniform(-1.0, 1.0, size).astype(np.float32)

    def run():
        xa = wp.array(x, dtype=wp.float32, requires_grad=True)
        y = wp.zeros(size, dtype=wp.float32, requires_grad=True)
        loss = wp.zeros(1, dtype=wp.float32, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(counted, size, inputs=[xa, n], outputs=[y, loss])
        tape.backward(grads={y: wp.ones(size, dtype=wp.float32),
                             loss: wp.array([0.5], dtype=wp.float32)})
        return xa.grad.numpy(), y.numpy(), loss.numpy()

    (gx, y, loss), (gx_ref, y_ref, loss_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(gx, gx_ref)
    np.testing.assert_allclose(loss, loss_ref, rtol=1e-5)
    # d/dx of y and of 0.5 * sum of every s: per thread, s_k = a_k * x with a known a_k
    a, j, total = np.ones(size), np.arange(size, dtype=np.int64), np.zeros(size)
    for _ in range(n):
        j = (j * 3 + 1) & 7
        a = a * 0.9 + j
        total += a
    np.testing.assert_allclose(gx, a + 0.5 * total, rtol=1e-5)


@pytest.mark.parametrize("mode", ["serial", "auto", "parallel"])
def test_thread_invariant_gradients_in_the_loop(threading, mode):
    threading(mode)
    size, n = 2 * STRIP + 11, 6
    rng = np.random.default_rng(9)

    def run(a):
        wp.launch(shared_scale, size, inputs=[a["x"], a["w"], n], outputs=[a["y"]])

    check_tape(run, {"x": rng.uniform(-1.0, 1.0, size), "w": np.array([0.7, -0.3])},
               {"y": np.zeros(size)}, {"x": wp.float64, "w": wp.float64, "y": wp.float64})


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("size", [5, 2 * STRIP + 30])
def test_arms_that_save_unalike(threading, mode, size):
    """Threads of one strip take different arms of a branch, one of which saves: each thread's
    gradient is the plain adjoint's bit for bit (float32, 24 steps over 1M threads, one core:
    backward 101 -> 16 ms)."""
    threading(mode)
    x = np.random.default_rng(size).uniform(0.0, 1.0, size)

    def run():
        return _gradient_and_values(branch_saves, x, [6])

    (gx, y), (gx_ref, y_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(gx, gx_ref)
    s = x.copy()
    steps = np.zeros(size)
    for _ in range(6):
        steps += s > 0.5
        s = np.where(s > 0.5, s * s, s)
    np.testing.assert_allclose(gx, 2.0 ** steps * x ** (2.0 ** steps - 1.0), rtol=1e-12)


@wp.kernel
def shifted_orbit(x: wp.array(dtype=wp.float64), origin: wp.array(dtype=wp.vec3d), n: int,
                  y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    p = wp.vec3d(x[i], wp.float64(0.5), wp.float64(1.0)) + origin[0]  # read by every thread
    s = wp.float64(0.0)
    for k in range(n):
        s = s * wp.float64(0.5) + wp.length(p) * wp.float64(0.25)
        p = p * wp.float64(0.9)
    y[i] = s


def test_gradients_of_values_every_thread_reads_before_the_loop():
    """``origin``'s gradient is added up in the reverse of the code before the loop, into a
    chunk's accumulator read after the strips: what reaches it is carried between the phases
    (it was not: the gradient was zero)."""
    size, n = ADJOINT_STRIP + 9, 5
    rng = np.random.default_rng(17)
    assert _interchanged_adjoint(shifted_orbit) and "priv_" in shifted_orbit.source()

    def run(a):
        wp.launch(shifted_orbit, size, inputs=[a["x"], a["origin"], n], outputs=[a["y"]])

    check_tape(run, {"x": rng.uniform(-1.0, 1.0, size), "origin": np.array([[0.3, -0.2, 0.1]])},
               {"y": np.zeros(size)}, {"x": wp.float64, "origin": wp.vec3d, "y": wp.float64})


@wp.kernel
def nested_saves(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[i]
    t = wp.float64(0.0)
    for k in range(n):
        if s > 0.3:
            if s > 0.6:  # saves s and t; its other arm, s only
                s = s * s
                t = t + s
            else:
                s = s * 0.9
        else:
            s = s + 0.25  # saves s: the outer arms move the stacks alike once the inner is padded
    y[i] = s * t + s


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_nested_branches_that_save_unalike(threading, mode):
    threading(mode)
    size = ADJOINT_STRIP + 13
    x = np.random.default_rng(23).uniform(0.0, 1.2, size)
    assert _interchanged_adjoint(nested_saves)

    def run():
        return _gradient_and_values(nested_saves, x, [7])

    for got, want in zip(run(), debug_reference(run)):
        np.testing.assert_array_equal(got, want)
    check_tape(lambda a: wp.launch(nested_saves, 9, inputs=[a["x"], 7], outputs=[a["y"]]),
               {"x": np.random.default_rng(24).uniform(0.05, 1.2, 9)}, {"y": np.zeros(9)},
               {"x": wp.float64, "y": wp.float64})


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_bounds_read_from_a_local(threading, mode):
    threading(mode)
    size = ADJOINT_STRIP + 3
    x = np.random.default_rng(29).uniform(-0.9, 0.9, size)

    def run():
        return _gradient_and_values(local_bounds, x, [4])

    for got, want in zip(run(), debug_reference(run)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kernel", [branch_saves, local_bounds])
def test_branch_saves_and_local_bounds_differentiate(kernel):
    size, n = 17, 4
    rng = np.random.default_rng(6)

    def run(a):
        wp.launch(kernel, size, inputs=[a["x"], n], outputs=[a["y"]])

    check_tape(run, {"x": rng.uniform(0.2, 0.9, size)}, {"y": np.zeros(size)},
               {"x": wp.float64, "y": wp.float64})


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_a_local_restored_in_one_arm(threading, mode):
    """The loop's reverse restores ``a`` in one arm of a branch: a thread whose arm did not
    carries ``a`` on unchanged (it came out as the phase's zero, and the gradient of the code
    before the loop, which reads ``a``, was wrong)."""
    threading(mode)
    assert _interchanged_adjoint(restored_in_one_arm)
    x = np.linspace(-1.0, 1.0, ADJOINT_STRIP + 9)

    def run():
        return _gradient_and_values(restored_in_one_arm, x, [6])

    for got, want in zip(run(), debug_reference(run)):
        np.testing.assert_array_equal(got, want)
    check_tape(lambda a: wp.launch(restored_in_one_arm, 9, inputs=[a["x"], 6],
                                   outputs=[a["y"]]),
               {"x": np.linspace(-0.9, 0.8, 9)}, {"y": np.zeros(9)},
               {"x": wp.float64, "y": wp.float64})
