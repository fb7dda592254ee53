"""Index-set splitting of the innermost thread loop (``codegen/splits.py``): interior threads run
a copy of the body without the clamps of the thread index, edge threads the body itself. Values
and gradients must equal a reference at every launch size, interior empty or not."""

import numpy as np
import pytest

import difftape as wp
from tests.fdcheck import check_tape


@wp.kernel
def blur_rows(u: wp.array2d(dtype=wp.float64), out: wp.array2d(dtype=wp.float64)):
    i, j = wp.tid()
    m = u.shape[1]
    left = wp.max(j - 2, 0)
    right = wp.min(j + 1, m - 1)
    out[i, j] = u[i, left] + 2.0 * u[i, j] + 3.0 * u[i, right] \
        + 5.0 * u[i, wp.clamp(j + 3, 0, m - 1)] + 7.0 * u[i, wp.min(j + 1, 6)]


def blur_rows_reference(u: np.ndarray, cols: int) -> np.ndarray:
    m = u.shape[1]
    j = np.arange(cols)
    return (u[:, np.maximum(j - 2, 0)] + 2.0 * u[:, j] + 3.0 * u[:, np.minimum(j + 1, m - 1)]
            + 5.0 * u[:, np.clip(j + 3, 0, m - 1)] + 7.0 * u[:, np.minimum(j + 1, 6)])


@wp.kernel
def smooth(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    n = x.shape[0]
    y[i] = x[wp.max(i - 1, 0)] * x[i] + x[wp.min(i + 1, n - 1)]


def test_clamps_of_the_innermost_index_are_split():
    source = blur_rows.source(dim=2)
    forward = source.split("def blur_rows_adjoint")[0]
    interior = forward.split("for t1 in range(rt_inner_lo, rt_inner_hi):")[1].split("rt_edge")[0]
    assert "rt_inner_lo = max(0, 2, -3)" in forward
    assert "min(dim1, u.shape[1] - 1, u.shape[1] - 3, 6)" in forward
    assert "wp_max" not in interior and "wp_min" not in interior and "wp_clamp" not in interior
    # j + 1 and j - 2 are provably >= 0 inside, and spelled from the loop counters
    assert "u[uint64(t0), uint64(t1 + 1)]" in interior
    assert "u[uint64(t0), uint64(t1 - 2)]" in interior
    assert "for rt_edge in" in smooth.source() and "for t0 in range(rt_inner_lo" in smooth.source()


def test_debug_mode_keeps_one_body():
    saved = wp.config.mode
    wp.config.mode = "debug"
    try:
        assert "rt_inner" not in blur_rows.source(dim=2)
    finally:
        wp.config.mode = saved


@pytest.mark.parametrize("cols", [1, 2, 3, 4, 5, 7, 8, 13])
def test_values_at_every_width(cols):
    rng = np.random.default_rng(cols)
    u0 = rng.integers(-9, 9, (3, max(cols, 8))).astype(np.float64)  # exact sums
    u = wp.array(u0, dtype=wp.float64)
    out = wp.zeros((3, cols), dtype=wp.float64)
    wp.launch(blur_rows, dim=(3, cols), inputs=[u], outputs=[out])
    np.testing.assert_array_equal(out.numpy(), blur_rows_reference(u0, cols))


@pytest.mark.parametrize("cols", [1, 4, 9])
def test_gradients_match_finite_differences(cols):
    rng = np.random.default_rng(cols + 1)
    width = max(cols, 8)
    inputs = {"u": rng.standard_normal((4, width))}
    outputs = {"out": np.zeros((4, cols))}

    def run(a):
        wp.launch(blur_rows, dim=(4, cols), inputs=[a["u"]], outputs=[a["out"]])

    check_tape(run, inputs, outputs, {"u": wp.float64, "out": wp.float64})


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_one_dimensional_split_with_threads(mode):
    saved = (wp.config.cpu_parallel, wp.config.parallel_threshold)
    wp.config.cpu_parallel, wp.config.parallel_threshold = mode, 1
    try:
        n = 1001
        xs = np.sin(np.arange(n, dtype=np.float64))
        x = wp.array(xs, dtype=wp.float64, requires_grad=True)
        y = wp.zeros(n, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(smooth, dim=n, inputs=[x], outputs=[y])
        tape.backward(grads={y: wp.ones_like(y)})
    finally:
        wp.config.cpu_parallel, wp.config.parallel_threshold = saved
    left, right = xs[np.maximum(np.arange(n) - 1, 0)], xs[np.minimum(np.arange(n) + 1, n - 1)]
    np.testing.assert_allclose(y.numpy(), left * xs + right, rtol=1e-15)
    grad = left.copy()
    np.add.at(grad, np.maximum(np.arange(n) - 1, 0), xs)
    np.add.at(grad, np.minimum(np.arange(n) + 1, n - 1), 1.0)
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-13)


# ---------------------------------------------------------------- guards on the thread index


@wp.kernel
def laplacian(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64), n: int):
    i = wp.tid()
    if i >= n:
        return
    if i > 0 and i < x.shape[0] - 1:
        y[i] = x[i - 1] - 2.0 * x[i] + x[i + 1]


def laplacian_reference(xs: np.ndarray, dim: int, n: int) -> np.ndarray:
    y = np.zeros(dim)
    for i in range(min(dim, n)):
        if 0 < i < xs.shape[0] - 1:
            y[i] = xs[i - 1] - 2.0 * xs[i] + xs[i + 1]
    return y


@wp.kernel
def comparisons(x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64), n: int):
    """Every comparison operator, either operand order, against constants, shapes and ``n``;
    each condition that holds adds its own power of two."""
    i = wp.tid()
    m = x.shape[0]
    k = i + 2
    s = wp.float64(0.0)
    if k < m:
        s += 1.0
    if 3 <= i:
        s += 2.0
    if i != 5:
        s += 4.0
    if i == m - 1:
        s += 8.0
    if n > i:
        s += 16.0
    if i - 1 >= 0:
        s += 32.0
    if i <= n - 2:
        s += 64.0
    if i > n:
        s += 128.0
    if i < 4 or i >= m - 3:
        s += 256.0
    if not (i > 1):
        s += 512.0
    if i + 1 == 3:
        s += 1024.0
    if m - 2 != i - 1:
        s += 2048.0
    if 6 > i:
        s += 4096.0
    out[i] = s * x[i]


def comparisons_reference(xs: np.ndarray, dim: int, n: int) -> np.ndarray:
    m = xs.shape[0]
    out = np.zeros(dim)
    for i in range(dim):
        conditions = [i + 2 < m, 3 <= i, i != 5, i == m - 1, n > i, i - 1 >= 0, i <= n - 2,
                      i > n, i < 4 or i >= m - 3, not i > 1, i + 1 == 3, m - 2 != i - 1, 6 > i]
        out[i] = sum(2.0 ** b for b, c in enumerate(conditions) if c) * xs[i]
    return out


def test_guards_of_the_thread_index_are_split():
    forward = laplacian.source().split("def laplacian_adjoint")[0]
    assert "rt_inner_lo = max(lo, 1)" in forward
    assert "min(hi, n, x.shape[0] - 1)" in forward
    interior = forward.split("for t0 in range(rt_inner_lo, rt_inner_hi):")[1].split("rt_edge")[0]
    assert "if " not in interior  # the return and the branch are decided there
    # i - 1 >= 0 inside: read unsigned, from the loop counter
    assert "x[uint64(t0 - 1)]" in interior
    edges = forward.split("for rt_edge in")[1]
    assert "if (i >= n):" in edges


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_guarded_values_at_every_size(threading, mode):
    threading(mode)
    rng = np.random.default_rng(7)
    for size in (1, 2, 3, 5, 9, 40, 1100):
        xs = rng.integers(-9, 9, size).astype(np.float64)
        x = wp.array(xs, dtype=wp.float64)
        for dim in sorted({1, max(size - 2, 1), size}):
            for n in (-3, 0, 1, 2, size // 2, size - 1, size, size + 5):
                y = wp.zeros(dim, dtype=wp.float64)
                wp.launch(laplacian, dim=dim, inputs=[x], outputs=[y, n])
                np.testing.assert_array_equal(y.numpy(), laplacian_reference(xs, dim, n),
                                              err_msg=f"size {size} dim {dim} n {n}")
                out = wp.zeros(dim, dtype=wp.float64)
                wp.launch(comparisons, dim=dim, inputs=[x], outputs=[out, n])
                np.testing.assert_array_equal(out.numpy(), comparisons_reference(xs, dim, n),
                                              err_msg=f"size {size} dim {dim} n {n}")


@pytest.mark.parametrize("size", [2, 3, 8, 21])
def test_guarded_gradients_match_finite_differences(size):
    rng = np.random.default_rng(size)

    def run(a):
        wp.launch(laplacian, dim=size, inputs=[a["x"]], outputs=[a["y"], size - 1])
        wp.launch(comparisons, dim=size, inputs=[a["y"]], outputs=[a["out"], size // 2])

    check_tape(run, {"x": rng.standard_normal(size)}, {"y": np.zeros(size), "out": np.zeros(size)},
               {"x": wp.float64, "y": wp.float64, "out": wp.float64})


@wp.kernel
def guarded_powers(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64), m: int, n: int):
    i = wp.tid()
    p = wp.float64(1.0)
    for j in range(m):  # one trip count for all: run across the strip's threads (interchange.py)
        p = p * x[i]
    if i < n:
        y[i] = p


def test_guards_leave_loop_interchange_alone():
    source = guarded_powers.source().split("def guarded_powers_adjoint")[0]
    assert "rt_carry_" in source and "rt_inner" not in source
    x = wp.array([2.0, 3.0, 1.5, 4.0], dtype=wp.float64)
    y = wp.zeros(4, dtype=wp.float64)
    wp.launch(guarded_powers, dim=4, inputs=[x], outputs=[y, 2, 3])
    np.testing.assert_array_equal(y.numpy(), [4.0, 9.0, 2.25, 0.0])


# ---------------------------------------------------------------- periodic (wrapped) indices


@wp.kernel
def ring(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64), n: int):
    i = wp.tid()
    m = x.shape[0]
    y[i] = x[(i + 1) % m] * x[i] + 2.0 * x[(i + 3) % m] + 3.0 * x[(i - 1) % n + 1] \
        + 5.0 * x[(i + 2) % 7]


def ring_reference(xs: np.ndarray, dim: int, n: int) -> np.ndarray:
    i = np.arange(dim)
    m = xs.shape[0]
    wrapped = np.fmod(i - 1, n) + 1  # C remainder: the sign of the dividend, -1 at i = 0
    return xs[(i + 1) % m] * xs[i] + 2.0 * xs[(i + 3) % m] + 3.0 * xs[wrapped] \
        + 5.0 * xs[(i + 2) % 7]


@wp.kernel
def periodic_rows(u: wp.array2d(dtype=wp.float64), out: wp.array2d(dtype=wp.float64)):
    i, j = wp.tid()
    m = u.shape[1]
    out[i, j] = u[i, (j + 1) % m] - 2.0 * u[i, j] + u[i, (j + m - 1) % m]


def test_wrapped_indices_are_split():
    """``(i + c) % m`` is ``i + c`` wherever ``0 <= i + c < m``: the interior reads neighbours
    without the remainder (consecutive, so vectorized); ``(j + m - 1) % m`` is no thread index
    plus a constant and keeps it."""
    forward = ring.source().split("def ring_adjoint")[0]
    interior = forward.split("for t0 in range(rt_inner_lo, rt_inner_hi):")[1].split("rt_edge")[0]
    assert "rt_inner_lo = max(lo, -1, -3, 1, -2)" in forward  # i - 1 >= 0 from i = 1 on
    assert "min(hi, x.shape[0] - 1, x.shape[0] - 3, n + 1, 5)" in forward  # end of the range
    assert "wp_mod" not in interior
    assert "x[uint64(t0 + 1)]" in interior and "(f64_3p0 * x[uint64(t0)])" in interior
    rows = periodic_rows.source(dim=2).split("def periodic_rows_adjoint")[0]
    interior = rows.split("for t1 in range(rt_inner_lo, rt_inner_hi):")[1].split("rt_edge")[0]
    assert "u[uint64(t0), uint64(t1 + 1)]" in interior and interior.count("wp_mod") == 1


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_wrapped_values_at_every_size(threading, mode):
    threading(mode)
    rng = np.random.default_rng(11)
    for size in (7, 8, 9, 12, 40, 1100):
        xs = rng.integers(-9, 9, size).astype(np.float64)
        x = wp.array(xs, dtype=wp.float64)
        for dim in sorted({1, 3, size - 1, size}):
            for n in (1, 2, size // 2, size - 1):
                y = wp.zeros(dim, dtype=wp.float64)
                wp.launch(ring, dim=dim, inputs=[x], outputs=[y, n])
                np.testing.assert_array_equal(y.numpy(), ring_reference(xs, dim, n),
                                              err_msg=f"size {size} dim {dim} n {n}")
    for cols in (1, 2, 3, 8, 33):
        u0 = rng.integers(-9, 9, (3, cols)).astype(np.float64)
        out = wp.zeros((3, cols), dtype=wp.float64)
        wp.launch(periodic_rows, dim=(3, cols), inputs=[wp.array(u0, dtype=wp.float64)],
                  outputs=[out])
        expected = np.roll(u0, -1, axis=1) - 2.0 * u0 + np.roll(u0, 1, axis=1)
        np.testing.assert_array_equal(out.numpy(), expected, err_msg=f"cols {cols}")


@pytest.mark.parametrize("size", [7, 9, 30])
def test_wrapped_gradients_match_finite_differences(size):
    rng = np.random.default_rng(size)

    def run(a):
        wp.launch(ring, dim=size, inputs=[a["x"]], outputs=[a["y"], size - 2])
        wp.launch(periodic_rows, dim=(2, size // 2), inputs=[a["u"]], outputs=[a["out"]])

    check_tape(run, {"x": rng.standard_normal(size), "u": rng.standard_normal((2, size // 2))},
               {"y": np.zeros(size), "out": np.zeros((2, size // 2))},
               {"x": wp.float64, "y": wp.float64, "u": wp.float64, "out": wp.float64})
