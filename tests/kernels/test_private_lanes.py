"""Thread-invariant adds (a loss at index 0, a shared coefficient's adjoint) go to a per-chunk
local; a float one is a strip-long lane array, one lane per thread of the strip
(``ExprCoder.private``), summed lane by lane when the chunk flushes it. Sums must be right at
every size around the strip's length, in every threading mode, in forward and adjoint code, in
split and multi-dimensional launches; debug mode keeps one plain local."""

import textwrap

import numpy as np
import pytest

import difftape as wp
from difftape._src.codegen.expressions import MAX_LANE_BYTES
from tests.fdcheck import check_tape
from tests.fresh_process import IR_OF, run_fresh
from tests.kernels.modes import debug_reference


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float), count: wp.array(dtype=int)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])
    wp.atomic_sub(loss, 1, 2.0 * y[i])
    wp.atomic_add(count, 0, 1)  # integer: stays a plain local


@wp.kernel
def scaled(x: wp.array(dtype=wp.float64), c: wp.array(dtype=wp.float64),
           y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = c[0] * x[i] + c[1] * x[i] * x[i]  # adjoint: c's adds are thread-invariant


@wp.kernel
def looped(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    for k in range(3):
        if x[i] > float(k):
            wp.atomic_add(loss, 0, x[i] * float(k + 1))


@wp.kernel
def blurred_energy(u: wp.array2d(dtype=wp.float64), loss: wp.array(dtype=wp.float64)):
    i, j = wp.tid()
    m = u.shape[1]
    right = wp.min(j + 1, m - 1)  # a split: interior threads and edge threads
    d = u[i, right] - u[i, j]
    wp.atomic_add(loss, 0, d * d)


def test_float_privates_are_lane_arrays_outside_debug_mode():
    source = total.source()
    forward = source.split("def total_adjoint")[0]
    assert "priv_1[uint64(rt_lane)] += " in forward and "priv_2[uint64(rt_lane)] -= " in forward
    assert "priv_3 += " in forward  # the integer count
    assert "priv_1 = rt_stack_zeros(512, np.float32, rt_lanes)" in forward
    assert "rt_lane_total(priv_1, rt_lanes)" in forward
    assert "[uint64(rt_lane)]" in scaled.source().split("def scaled_adjoint")[1]
    debug = debug_reference(total.source)
    assert "rt_lane" not in debug and "priv_1 += " in debug


@pytest.mark.parametrize("mode", ["serial", "auto", "parallel", "replicate"])
@pytest.mark.parametrize("n", [1, 2, 511, 512, 513, 1025, 5000])
def test_sums_at_every_size(threading, mode, n):
    threading(mode)
    values = np.arange(n, dtype=np.float32) % 7 - 3  # small integers: every order is exact
    y, loss = wp.array(values, dtype=float), wp.zeros(2, dtype=float)
    count = wp.zeros(1, dtype=int)
    wp.launch(total, dim=n, inputs=[y, loss, count])
    np.testing.assert_array_equal(loss.numpy(), [values.sum(), -2 * values.sum()])
    assert count.numpy()[0] == n


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_adjoint_lanes_give_the_shared_coefficients_gradient(threading, mode):
    threading(mode)
    n = 1500
    rng = np.random.default_rng(5)
    x = wp.array(rng.uniform(-1, 1, n), dtype=wp.float64)
    c = wp.array([0.5, -1.5], dtype=wp.float64, requires_grad=True)
    y = wp.zeros(n, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scaled, dim=n, inputs=[x, c], outputs=[y])
    tape.backward(grads={y: wp.ones_like(y)})
    xs = x.numpy()
    np.testing.assert_allclose(c.grad.numpy(), [xs.sum(), (xs * xs).sum()], rtol=1e-12)


def test_adds_inside_loops_and_branches():
    n = 2000
    xs = (np.arange(n) % 5).astype(np.float32)
    x, loss = wp.array(xs, dtype=float), wp.zeros(1, dtype=float)
    wp.launch(looped, dim=n, inputs=[x, loss])
    expected = sum(float(v) * (k + 1) for v in xs for k in range(3) if v > k)
    assert loss.numpy()[0] == expected


@pytest.mark.parametrize("cols", [1, 3, 600, 1100])
def test_split_launches_and_their_gradient(cols):
    rng = np.random.default_rng(cols)
    u0 = rng.uniform(-1, 1, (3, cols))
    u, loss = wp.array(u0, dtype=wp.float64), wp.zeros(1, dtype=wp.float64)
    assert "rt_lane = 0" in blurred_energy.source(dim=2)  # the edge threads' lane
    wp.launch(blurred_energy, dim=(3, cols), inputs=[u, loss])
    d = u0[:, np.minimum(np.arange(cols) + 1, cols - 1)] - u0
    np.testing.assert_allclose(loss.numpy()[0], (d * d).sum(), rtol=1e-12)
    check_tape(lambda a: wp.launch(blurred_energy, dim=(3, cols), inputs=[a["u"], a["loss"]]),
               inputs={"u": u0}, outputs={"loss": np.zeros(1)},
               dtypes_={"u": wp.float64, "loss": wp.float64})


@wp.kernel
def many_totals(y: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    i = wp.tid()
    v = y[i]
    wp.atomic_add(out, 0, v)
    wp.atomic_add(out, 1, v * 2.0)
    wp.atomic_add(out, 2, v * 3.0)
    wp.atomic_add(out, 3, v * 4.0)
    wp.atomic_add(out, 4, v * 5.0)
    wp.atomic_add(out, 5, v * 6.0)
    wp.atomic_add(out, 6, v * 7.0)
    wp.atomic_add(out, 7, v * 8.0)
    wp.atomic_add(out, 8, v * 9.0)
    wp.atomic_add(out, 9, v * 10.0)
    wp.atomic_add(out, 10, v * 11.0)
    wp.atomic_add(out, 11, v * 12.0)
    wp.atomic_add(out, 12, v * 13.0)
    wp.atomic_add(out, 13, v * 14.0)
    wp.atomic_add(out, 14, v * 15.0)
    wp.atomic_add(out, 15, v * 16.0)
    wp.atomic_add(out, 16, v * 17.0)
    wp.atomic_add(out, 17, v * 18.0)


def test_lane_arrays_are_bounded_in_stack_bytes():
    forward = many_totals.source().split("def many_totals_adjoint")[0]
    laned = forward.count("= rt_stack_zeros(512, np.")
    assert laned * 512 * 8 <= MAX_LANE_BYTES < (laned + 1) * 512 * 8
    assert "priv_18 += " in forward  # past the bound: a plain local
    n = 1000
    values = np.arange(n, dtype=np.float64) % 11
    y, out = wp.array(values, dtype=wp.float64), wp.zeros(18, dtype=wp.float64)
    wp.launch(many_totals, dim=n, inputs=[y, out])
    np.testing.assert_array_equal(out.numpy(), values.sum() * np.arange(1, 19))


_VECTORIZED = IR_OF + textwrap.dedent("""
    import re
    import difftape as wp

    @wp.kernel
    def flat_sum(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, y[i])

    @wp.kernel
    def grid_energy(u: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
        i, j = wp.tid()
        wp.atomic_add(loss, 0, u[i, j] * u[i, j])

    wp.config.cpu_parallel = "serial"
    loss = wp.zeros(1, dtype=float)
    wp.launch(flat_sum, dim=4096, inputs=[wp.ones(4096, dtype=float), loss])
    wp.launch(grid_energy, dim=(8, 1024), inputs=[wp.ones((8, 1024), dtype=float), loss])
    print(loss.numpy()[0])
    for kernel in (flat_sum, grid_energy):
        print(bool(re.search(r"fadd <\\d+ x float>", ir_of(kernel))))
""")


def test_lane_adds_vectorize(tmp_path):
    """The strip loop adding into lanes vectorizes, in 1-D and 2-D launches: lanes are indexed
    unsigned, since Numba's wraparound of a signed index kept LLVM from vectorizing the adds
    (a 1024 x 1024 sum of squares took 0.9 ms instead of 0.15). A fresh cache: Numba cannot
    inspect cached code."""
    assert run_fresh(tmp_path, _VECTORIZED) == ["12288.0", "True", "True"]


def test_lane_intrinsics_zero_and_sum_in_order():
    """``rt_stack_zeros`` zeroes the lanes a chunk uses; ``rt_lane_total`` adds them first to
    last, as a Python loop does in float32 (the order matters for these values)."""
    from numba import njit

    from difftape._src.backends.cpu_runtime import rt_lane_total, rt_stack_zeros

    @njit
    def lanes(values, count):
        lane = rt_stack_zeros(512, np.float32, count)
        zeroed = True
        for k in range(count):
            zeroed = zeroed and lane[k] == 0
            lane[k] += values[k]
        return zeroed, rt_lane_total(lane, count)

    rng = np.random.default_rng(0)
    values = (rng.standard_normal(512) * 10.0 ** rng.integers(-4, 5, 512)).astype(np.float32)
    for count in (1, 2, 7, 300, 512):
        zeroed, total = lanes(values, count)
        expected = values[0]
        for v in values[1:count]:
            expected = np.float32(expected + v)
        assert zeroed and total == expected, count
    ones = np.ones(512, np.float32)
    ones[0] = 2.0 ** 24  # adding 1 to it rounds back to it; the ones summed first would not
    assert lanes(ones, 300)[1] == 2.0 ** 24


def test_stack_arrays_are_padded_against_4k_aliasing():
    """Each stack array is ``STACK_PADDING`` bytes longer than its shape (cpu_runtime.py): two
    arrays of 2 KiB side by side then never sit a multiple of 4 KiB apart."""
    from numba import njit

    from difftape._src.backends.cpu_runtime import STACK_PADDING, rt_stack_array

    @njit
    def two():
        a = rt_stack_array(512, np.float32)
        b = rt_stack_array(512, np.uint64)
        for k in range(512):
            a[k] = k
            b[k] = k
        return a.shape[0], b.shape[0], a.sum() + b.sum()

    assert two() == (512, 512, 2.0 * sum(range(512)))
    ir = next(iter(two.inspect_llvm().values()))
    pad32, pad64 = STACK_PADDING // 4, STACK_PADDING // 8
    assert f"alloca float, i64 {512 + pad32}" in ir or f"alloca [{512 + pad32} x float]" in ir
    assert f"alloca i64, i64 {512 + pad64}" in ir or f"alloca [{512 + pad64} x i64]" in ir
