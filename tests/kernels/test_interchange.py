"""Loop interchange across threads (``codegen/interchange.py``): a forward built around a loop of
the same length in every thread runs that loop outside a strip of threads. Every thread must
compute bit for bit what it computed before (checked against debug mode, which keeps the plain
loop), at every size around the strip's and in every threading mode; kernels whose threads
could observe the new order must keep the plain loop."""

import numpy as np
import pytest

import difftape as wp
from difftape._src.codegen.strips import STRIP
from tests.fdcheck import check_tape
from tests.kernels.modes import debug_reference


@wp.kernel
def poly(x: wp.array(dtype=wp.float32), c: wp.array(dtype=wp.float32), n: int,
         y: wp.array(dtype=wp.float32)):
    acc = wp.float32(0.0)
    i = wp.tid()
    xi = x[i]
    p = wp.float32(1.0)
    for k in range(n):
        t = p * c[k]
        acc = acc + wp.where(t > 0.0, t, 0.5 * t)
        p = xi * p
    y[i] = xi + acc


@wp.kernel
def nested(x: wp.array(dtype=wp.float64), m: wp.array(dtype=int), n: int,
           y: wp.array(dtype=wp.float64), hist: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.float64(0.0)
    for k in range(1, n, 2):
        if x[k] < 0.0:
            continue
        s = s * 0.5 + x[k] * wp.float64(m[i] + 1)
        wp.atomic_add(hist, k, s)
    y[i] = wp.sqrt(s + 1.0)


@wp.kernel
def inner_loop(x: wp.array(dtype=wp.float64), m: wp.array(dtype=int), n: int,
               y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.float64(0.0)
    for k in range(n):
        for j in range(m[i]):  # not vectorizable across threads: the plain loop is faster
            s = s * 0.5 + x[k] * wp.float64(j + 1)
    y[i] = s


@wp.kernel
def early_exit(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.float64(0.0)
    for k in range(n):
        s = s + x[i] * x[k]
        if s > 3.0:
            break
    y[i] = s


@wp.kernel
def own_length(x: wp.array(dtype=wp.float64), m: wp.array(dtype=int),
               y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.float64(0.0)
    for k in range(m[i]):
        s = s + x[k]
    y[i] = s


@wp.kernel
def reads_outputs(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    for k in range(n):
        y[i] = y[i] * 0.5 + x[k]  # read and written at the thread's own element only


@wp.kernel
def reads_neighbours(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    for k in range(n):
        y[i] = y[(i + 1) % y.shape[0]] * 0.5 + x[k]  # a neighbour's element: order shows


@wp.kernel
def in_place_steps(x: wp.array(dtype=wp.float64), v: wp.array(dtype=wp.vec2d), n: int,
                   e: wp.array(dtype=wp.float64)):
    i = wp.tid()
    e[i] = x[i] * x[i]
    for k in range(n):
        v[i] = v[i] * 0.99 - wp.vec2d(0.01 * x[i] * x[i], 0.02 * v[i][0])
        x[i] = x[i] + v[i][1] * 0.1
        e[i] += 0.5 * v[i][0] * v[i][0]  # an add at the own element, read after the loop
        if x[i] > 1.4:
            x[i] = x[i] * 0.5
    e[i] = e[i] + x[i]


@wp.kernel
def var_after(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.float64(0.0)
    k = int(0)
    for k in range(n):
        s = s + x[k]
    y[i] = s + wp.float64(k)


@wp.kernel
def moments(x: wp.array(dtype=wp.float64), n: int, s: wp.array(dtype=wp.float64),
            d: wp.array(dtype=wp.vec3d), old: wp.array(dtype=wp.float64)):
    i = wp.tid()
    p = wp.float64(1.0)
    for k in range(n):
        wp.atomic_add(s, k, p)  # the same element for every thread at each iteration
        wp.atomic_sub(s, k + 1, 0.5 * p)
        wp.atomic_add(d, n - 1 - k, wp.vec3d(p, x[i], 1.0))
        if x[i] > 0.0:
            wp.atomic_add(s, k, x[i])  # under a branch: into s[k]'s lane array too
        wp.atomic_add(old, k, 1.0)
        p = p * x[i]


@wp.kernel
def decays(x: wp.array(dtype=wp.float32), n: int, y: wp.array(dtype=wp.float32),
           z: wp.array(dtype=wp.float32)):
    i = wp.tid()
    xi = x[i]
    p = wp.float32(1.0)
    q = wp.float32(1.0)
    s = wp.float32(0.0)
    for k in range(n):
        s = s + wp.abs(p) * 3.0 + q  # widened locals read outside a product
        if p < 0.0:
            q = q * p * xi  # q * p: two widened factors
        else:
            q = 0.75 * q
        p = p * xi
    y[i] = s
    z[i] = p + q


@wp.kernel
def damped(x: wp.array(dtype=wp.float32), n: int, y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    xi = x[i]
    p = wp.float32(1.0)
    q = wp.float32(1.0)
    s = wp.float32(0.0)
    for k in range(n):
        s = s + p * q - 0.5 * p
        if p < 0.0:
            q = q * xi
        else:
            q = 0.75 * q
        p = p * xi
    y[i] = s


def _interchanged(kernel) -> bool:
    return "rt_carry_" in kernel.source().split("_adjoint(")[0]


def test_which_loops_are_interchanged():
    assert _interchanged(poly) and _interchanged(nested)
    assert _interchanged(early_exit)  # its break: tests/kernels/test_interchanged_break.py
    assert _interchanged(reads_outputs) and _interchanged(in_place_steps)
    for kernel in (own_length, reads_neighbours, var_after, inner_loop):
        assert not _interchanged(kernel), kernel.key
    source = poly.source().split("def poly_adjoint")[0]
    assert "for rt_it in range(rt_start, rt_stop, rt_step):" in source
    assert "rt_carry_t " not in source  # t lives within one iteration
    assert all(f"rt_carry_{v} = rt_stack_array" in source for v in ("p", "acc", "xi"))
    saved = wp.config.mode
    wp.config.mode = "debug"
    try:
        assert not _interchanged(poly)
    finally:
        wp.config.mode = saved


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("size", [1, 5, STRIP - 1, STRIP, STRIP + 1, 2 * STRIP + 300])
def test_values_are_bit_identical(threading, mode, size):
    threading(mode)
    rng = np.random.default_rng(size)
    x = wp.array(rng.uniform(-0.99, 0.99, size).astype(np.float32), dtype=wp.float32)
    c = wp.array(rng.uniform(-1.0, 1.0, 40).astype(np.float32), dtype=wp.float32)

    def run():
        y = wp.zeros(size, dtype=wp.float32)
        wp.launch(poly, size, inputs=[x, c, 40], outputs=[y])
        return y.numpy()

    np.testing.assert_array_equal(run(), debug_reference(run))


@pytest.mark.parametrize("mode", ["serial", "auto", "parallel", "replicate"])
def test_adds_at_the_loop_index_from_every_thread(threading, mode):
    """Atomics at an index only the loop's variable varies (every thread of a strip adds into
    ``s[k]`` at iteration k) go to lane arrays summed once per iteration: the sums match the
    per-thread code's up to their order, and float64 references; gradients match finite
    differences."""
    source = moments.source().split("def moments_adjoint")[0]
    assert _interchanged(moments)
    assert source.count("= rt_stack_zeros(512") == 2 + 3 + 1  # s[k] (both), s[k + 1]; d; old
    threading(mode)
    size, n = 2 * STRIP + 29, 6
    x = np.random.default_rng(14).uniform(-0.95, 0.95, size)

    def run():
        s = wp.zeros(n + 1, dtype=wp.float64)
        d = wp.zeros(n, dtype=wp.vec3d)
        old = wp.zeros(n, dtype=wp.float64)
        wp.launch(moments, size, inputs=[wp.array(x, dtype=wp.float64), n], outputs=[s, d, old])
        return s.numpy(), d.numpy(), old.numpy()

    got, want = run(), debug_reference(run)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    powers = x[:, None] ** np.arange(n)
    s_ref = np.zeros(n + 1)
    s_ref[:n] += powers.sum(0) + np.where(x > 0, x, 0.0).sum()
    s_ref[1:] -= 0.5 * powers.sum(0)
    np.testing.assert_allclose(got[0], s_ref, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(got[1][::-1], np.stack(
        [powers.sum(0), np.full(n, x.sum()), np.full(n, float(size))], axis=1), rtol=1e-11)
    np.testing.assert_array_equal(got[2], np.full(n, float(size)))
    if mode == "auto":
        def taped(a):
            wp.launch(moments, 30, inputs=[a["x"], n], outputs=[a["s"], a["d"], a["old"]])

        check_tape(taped, {"x": x[:30]},
                   {"s": np.zeros(n + 1), "d": np.zeros((n, 3)), "old": np.zeros(n)},
                   {"x": wp.float64, "s": wp.float64, "d": wp.vec3d, "old": wp.float64})


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_nested_loops_continue_and_atomics(threading, mode):
    threading(mode)
    size, n = STRIP + 77, 9
    rng = np.random.default_rng(3)
    x = wp.array(rng.integers(-2, 3, size).astype(np.float64), dtype=wp.float64)
    m = wp.array(rng.integers(0, 4, size).astype(np.int32), dtype=int)

    def run():
        y = wp.zeros(size, dtype=wp.float64)
        hist = wp.zeros(n, dtype=wp.float64)
        wp.launch(nested, size, inputs=[x, m, n], outputs=[y, hist])
        return y.numpy(), hist.numpy()

    (y, hist), (y_ref, hist_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_allclose(hist, hist_ref, rtol=1e-12)  # atomics: summation order only


def test_gradients_through_an_interchanged_forward():
    size, n = 40, 7
    rng = np.random.default_rng(5)
    m = rng.integers(0, 4, size)

    def run(a):
        wp.launch(nested, size, inputs=[a["x"], a["m"], n], outputs=[a["y"], a["hist"]])

    check_tape(run, {"x": rng.uniform(0.1, 1.0, size)},
               {"y": np.zeros(size), "hist": np.zeros(n), "m": m},
               {"x": wp.float64, "y": wp.float64, "hist": wp.float64, "m": wp.int32})


@wp.kernel
def early_return(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[0]
    for k in range(1, n):
        s = wp.max(s, x[k] * x[i])
    if s > 0.0:
        y[i] = s
        return  # its flag must start cleared in every thread, not as the previous one left it
    y[i] = -s


def test_flags_after_the_loop_start_cleared_in_every_thread(threading):
    threading("serial")
    assert _interchanged(early_return)
    size = STRIP + 9
    rng = np.random.default_rng(11)
    xs = rng.uniform(-1.0, 1.0, size)
    y = wp.zeros(size, dtype=wp.float64)
    wp.launch(early_return, size, inputs=[wp.array(xs, dtype=wp.float64), 6], outputs=[y])
    s = np.maximum(xs[0], np.max(xs[1:6][None, :] * xs[:, None], axis=1))
    np.testing.assert_allclose(y.numpy(), np.where(s > 0.0, s, -s), rtol=1e-14)


def _decays_float32(x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``decays`` thread by thread in numpy float32 arithmetic (IEEE, denormals kept)."""
    p, q, s = np.ones_like(x), np.ones_like(x), np.zeros_like(x)
    with np.errstate(all="ignore"):
        for _ in range(n):
            s = s + np.abs(p) * np.float32(3.0) + q
            q = np.where(p < 0, q * p * x, np.float32(0.75) * q)
            p = p * x
    return s, p + q


def test_widened_products_are_the_float32_products(threading):
    """Carried float32 locals a loop multiplies by something are widened once a check finds one
    tiny (``interchange.widened``): float64 products rounded once to float32. Each value must
    be the float32 one bit for bit, through the denormal range down to zero, for strips that
    switch and strips that never do, and for infinities, NaNs, signed zeros and denormal
    inputs."""
    from difftape._src.codegen.interchange import widened
    from difftape._src.frontend import ir

    source = decays.source().split("def decays_adjoint")[0]
    assert "rt_wide_p = rt_stack_array" in source and "rt_wide_q = rt_stack_array" in source
    assert "rt_tiny(rt_carry_p[rt_l]) | rt_tiny(rt_carry_q[rt_l])" in source
    assert "rt_wide_" in poly.source().split("def poly_adjoint")[0]
    for kernel in (nested, moments):  # float64 products; a loop with atomics
        assert "rt_wide_" not in kernel.source().split("_adjoint(")[0], kernel.key
    loop = next(s for s in decays.ir.body if isinstance(s, ir.For))
    assert widened(loop, {"p": wp.float32, "q": wp.float32, "s": wp.float32}) == ("p", "q")
    assert widened(loop, {"p": wp.float64, "q": wp.float32}) == ("q",)
    threading("serial")
    rng = np.random.default_rng(5)
    size, n = 3 * STRIP + 17, 200
    x = rng.uniform(-0.95, 0.95, size).astype(np.float32)
    x[:STRIP] = rng.uniform(0.97, 0.99, STRIP)  # a strip that never switches
    x[STRIP:STRIP + 8] = [0.0, -0.0, 1e-40, -3e-39, 1e-20, np.nan, 3.0, -np.inf]

    def run():
        y, z = wp.zeros(size, dtype=wp.float32), wp.zeros(size, dtype=wp.float32)
        wp.launch(decays, size, inputs=[wp.array(x, dtype=wp.float32), n], outputs=[y, z])
        return y.numpy(), z.numpy()

    got, want = run(), _decays_float32(x, n)
    for g, w, d in zip(got, want, debug_reference(run)):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(g, d)
        assert np.array_equal(np.signbit(g), np.signbit(w))
    p = np.abs(x[STRIP:].astype(np.float64)) ** np.arange(n)[:, None]
    assert ((p > 0) & (p < 2.0 ** -126)).any(axis=1).sum() > 50  # iterations with denormals


def test_widened_adjoint_gives_the_plain_adjoints_gradients(threading):
    """The interchanged adjoint's loop replay widens the same locals as the forward, and its
    reverse the products of ``mul``'s rule (``decays``' adjoint stays plain: its loop calls
    ``abs``): every thread's gradient must be debug mode's (the plain per-thread adjoint) bit
    for bit."""
    source = damped.source().split("def damped_adjoint")[1]
    assert "rt_wide_p = rt_stack_array" in source and "rt_w_q = rt_wide_q[" in source
    assert "* rt_one) * xi)" in source  # a widened product of the reverse sweep
    threading("serial")
    rng = np.random.default_rng(8)
    size, n = 2 * STRIP + 45, 150
    x = rng.uniform(-0.9, 0.9, size).astype(np.float32)
    x[:8] = [0.0, -0.0, 1e-40, -3e-39, 1e-20, 0.5, 0.97, -0.3]
    seed = rng.uniform(-1, 1, size).astype(np.float32)

    def run():
        xs = wp.array(x, dtype=wp.float32, requires_grad=True)
        y = wp.zeros(size, dtype=wp.float32, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(damped, size, inputs=[xs, n], outputs=[y])
        tape.backward(grads={y: wp.array(seed)})
        return y.numpy(), xs.grad.numpy()

    (y, got), (y_want, want) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_want)
    np.testing.assert_array_equal(got, want)
    assert np.isfinite(got).all() and (got[8:] != 0).mean() > 0.9


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("size", [5, 63, 65, STRIP + 1, 2 * STRIP + 300])
def test_arrays_read_and_written_at_the_threads_own_element(threading, mode, size):
    """Each thread touches its own elements only, so the order of threads cannot show: the
    interchanged forward gives the plain loop's values bit for bit, and the interchanged
    adjoint, whose replay stores into the launch's copy of x and v, the plain adjoint's
    gradients; those pass central differences."""
    threading(mode)
    rng = np.random.default_rng(size)
    x0 = rng.uniform(0.5, 1.5, size)
    v0 = rng.uniform(-1.0, 1.0, (size, 2))
    seed = rng.standard_normal(size)

    def run():
        x = wp.array(x0, dtype=wp.float64, requires_grad=True)
        v = wp.array(v0, dtype=wp.vec2d, requires_grad=True)
        e = wp.zeros(size, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(in_place_steps, size, inputs=[x, v, 30, e])
        values = np.concatenate([x.numpy(), v.numpy().ravel(), e.numpy()])
        tape.backward(grads={e: wp.array(seed, dtype=wp.float64)})
        return values, np.concatenate([x.grad.numpy(), v.grad.numpy().ravel()])

    values, grads = run()
    want_values, want_grads = debug_reference(run)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_allclose(grads, want_grads, rtol=1e-12, atol=1e-12)
    small = {"x": x0[:5], "v": v0[:5]}
    check_tape(lambda a: wp.launch(in_place_steps, 5, inputs=[a["x"], a["v"], 30, a["e"]]),
               small, {"e": np.zeros(5)}, {"x": wp.float64, "v": wp.vec2d, "e": wp.float64},
               rtol=1e-6, atol=1e-8)
