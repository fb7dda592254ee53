"""Indices proved non-negative (``codegen/signs.py``) are written unsigned, and so are indices
read from arrays (gathers and scatters, out of bounds when negative, as in Warp); the others
keep Numba's negative-index wraparound, and results are the same either way."""

import numpy as np
import pytest

import difftape as wp
from difftape._src.codegen.signs import data_locals, gathered_locals, nonnegative_locals


@wp.kernel(max_unroll=0)  # its loops stay loops, their variables locals of a known sign
def mixed_signs(x: wp.array(dtype=float), y: wp.array(dtype=float), shift: int):
    i = wp.tid()
    n = x.shape[0]
    left = wp.max(i - 1, 0)       # max with a non-negative operand
    right = wp.min(i + 1, n - 1)  # n - 1 may be -1
    back = i - shift              # any sign
    half = i // 2 + i % 3
    total = float(0.0)
    for k in range(3):            # 0, 1, 2
        total += x[k]
    for m in range(-1, 1):        # starts below zero
        total += x[m + 1]
    flip = i
    if i > 2:
        flip = -i                 # a second, negative assignment
    y[i] = x[left] + x[right] + x[back] + x[half] + total + x[flip % n]


def _nonnegative_user_names(kernel) -> set[str]:
    return {name for name in nonnegative_locals(kernel.ir) if not name.startswith("var_")}


def test_which_locals_are_proved_nonnegative():
    proved = _nonnegative_user_names(mixed_signs)
    assert {"i", "n", "left", "half", "k"} <= proved
    assert not proved & {"right", "back", "m", "flip"}


def _forward(source: str) -> str:
    """The forward function (its loop over ``k`` interchanged across threads: the indices are
    written as in the plain loop)."""
    return source.split("def mixed_signs_adjoint")[0]


def test_generated_indices():
    source = _forward(mixed_signs.source())
    assert "x[uint64(left)]" in source and "y[uint64(t0)]" in source  # i: the thread index
    assert "x[uint64(k)]" in source and "x[uint64(half)]" in source
    for signed in ("right", "back", "int32(m", "int32(wp_mod_1(flip"):
        assert f"x[{signed}" in source and f"uint64({signed}" not in source, signed


def test_debug_mode_checks_signed_indices():
    saved = wp.config.mode
    wp.config.mode = "debug"
    try:
        source = mixed_signs.source()
    finally:
        wp.config.mode = saved
    assert "rt_check_index(left," in source and "uint64(" not in source


def test_results_match_numpy_with_wraparound_where_signed():
    n, shift = 9, 2
    xs = np.arange(1.0, n + 1.0, dtype=np.float32) ** 1.5
    x = wp.array(xs, dtype=float)
    y = wp.zeros(n, dtype=float)
    wp.launch(mixed_signs, dim=n, inputs=[x, y, shift])
    expected = []
    for i in range(n):
        total = xs[0] + xs[1] + xs[2] + xs[0] + xs[1]
        flip = -i if i > 2 else i
        rem = int(np.fmod(flip, n))  # C remainder: negative for negative flip → wraps
        expected.append(xs[max(i - 1, 0)] + xs[min(i + 1, n - 1)] + xs[i - shift]
                        + xs[i // 2 + i % 3] + total + xs[rem])
    np.testing.assert_allclose(y.numpy(), np.float32(expected), rtol=1e-6)


@wp.kernel
def gather_scatter(x: wp.array(dtype=float), idx: wp.array(dtype=int),
                   y: wp.array(dtype=float)):
    i = wp.tid()
    j = idx[i]  # loaded from memory: any sign
    y[i] = x[j] * x[i]


def test_gradients_through_unsigned_and_signed_indices():
    rng = np.random.default_rng(3)
    x = wp.array(rng.uniform(-1, 1, 16).astype(np.float32), dtype=float, requires_grad=True)
    idx = wp.array(rng.integers(0, 16, 16).astype(np.int32), dtype=int)
    y = wp.zeros(16, dtype=float, requires_grad=True)
    source = gather_scatter.source(adjoint=True)
    assert "adj_x[uint64(j)]" in source and "adj_x[uint64(t0)]" in source
    assert "x[uint64(j)]" in source.split("def gather_scatter_adjoint")[0]
    tape = wp.Tape()
    with tape:
        wp.launch(gather_scatter, dim=16, inputs=[x, idx], outputs=[y])
    tape.backward(grads={y: wp.ones_like(y)})
    xs, js = x.numpy().astype(np.float64), idx.numpy()
    expected = xs[js].copy()
    np.add.at(expected, js, xs)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)


@wp.kernel
def shifted_rows(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float)):
    i, j = wp.tid()
    k = j + 2
    b[i, j] = a[i, k] + a[i + 1, j]


def test_thread_indices_are_spelled_from_the_loop_counters():
    """An index that is a thread index plus a constant is written from the int64 loop counter:
    the int32 thread index truncates it, which keeps LLVM from seeing consecutive accesses."""
    source = shifted_rows.source(dim=2)
    assert shifted_rows.source() == source  # by default, as many dimensions as wp.tid() unpacks
    assert "b[uint64(t0), uint64(t1)]" in source
    assert "a[uint64(t0), uint64(t1 + 2)]" in source and "a[uint64(t0 + 1), uint64(t1)]" in source
    a0 = np.arange(5 * 7, dtype=np.float32).reshape(5, 7)
    a, b = wp.array(a0, dtype=float), wp.zeros((4, 5), dtype=float)
    wp.launch(shifted_rows, dim=(4, 5), inputs=[a, b])
    np.testing.assert_array_equal(b.numpy(), a0[:4, 2:7] + a0[1:5, :5])


@wp.kernel
def counter_names(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float)):
    i, j = wp.tid()
    t0 = a[i, j] * 2.0  # the generated loops' counters are named t0, t1
    t1 = float(i)
    rt_lane = 3.0
    b[i, j] = t0 + t1 + rt_lane


def test_locals_named_like_the_loop_counters_are_renamed():
    a0 = np.arange(12, dtype=np.float32).reshape(3, 4)
    a, b = wp.array(a0, dtype=float), wp.zeros((3, 4), dtype=float)
    wp.launch(counter_names, dim=(3, 4), inputs=[a, b])
    np.testing.assert_array_equal(b.numpy(), a0 * 2 + np.arange(3)[:, None] + 3)


@wp.kernel
def compaction(x: wp.array(dtype=float), idx: wp.array(dtype=int), count: wp.array(dtype=int),
               y: wp.array(dtype=float)):
    i = wp.tid()
    j = idx[i] + 1          # read from an array, then shifted
    k = j * 2               # computed from such a local
    slot = wp.atomic_add(count, 0, 1)  # an atomic's old value
    later = i
    if x[i] > 0.0:
        later = slot        # one of its values is gathered
    y[later] = x[k % 4] + x[i]


def test_which_locals_are_read_from_arrays():
    gathered = {name for name in gathered_locals(compaction.ir) if not name.startswith("var_")}
    assert {"j", "k", "slot", "later"} <= gathered
    assert "i" not in gathered
    source = compaction.source().split("def compaction_adjoint")[0]
    assert "y[uint64(later)]" in source and "x[uint64(int32(wp_mod_1(k, i32_4)))]" in source


def test_debug_mode_catches_a_negative_loaded_index():
    x = wp.array(np.ones(4, dtype=np.float32), dtype=float)
    idx = wp.array(np.array([0, -1, 2, 3], dtype=np.int32), dtype=int)
    y = wp.zeros(4, dtype=float)
    saved = wp.config.mode
    wp.config.mode = "debug"
    try:
        with pytest.raises(IndexError, match="gather_scatter"):
            wp.launch(gather_scatter, dim=4, inputs=[x, idx], outputs=[y])
    finally:
        wp.config.mode = saved


@wp.kernel
def splat(x: wp.array(dtype=wp.vec2d), w: wp.array(dtype=wp.float64),
          grid: wp.array(dtype=wp.float64), side: int):
    p = wp.tid()
    q = x[p] * wp.float64(side)
    cx = int(wp.floor(q[0]))   # computed from an array element through a float
    cy = int(wp.floor(q[1]))
    fx = q[0] - wp.floor(q[0])
    for k in range(2):
        cell = (cx + k) * (side + 1) + cy
        weight = (wp.float64(1.0) - fx) * w[p]
        if k == 1:
            weight = fx * w[p]
        wp.atomic_add(grid, cell, weight * weight)


def test_a_cell_computed_from_positions_is_unsigned_and_its_gradients_match_fd():
    """A grid cell computed from a particle's position depends on the data, not on the thread
    index: written unsigned (no wraparound select per access), in the forward and the adjoint,
    though no integer array is read (the paired row reads stay for index arrays)."""
    assert {"cx", "cy", "cell", "q_0"} <= data_locals(splat.ir)  # vectors are components
    assert not {"cx", "cy", "cell"} & gathered_locals(splat.ir)
    forward, adjoint = splat.source().split("def splat_adjoint")
    assert "] = uint64(cell)" in forward  # the strip buffer of the deferred adds
    assert "adj_grid[uint64(cell)]" in adjoint
    side, n = 4, 6
    rng = np.random.default_rng(5)
    x0 = rng.uniform(0.05, 0.7, (n, 2))
    w0 = rng.uniform(0.5, 1.5, n)

    def run(xs, ws):
        x = wp.array(xs, dtype=wp.vec2d, requires_grad=True)
        w = wp.array(ws, dtype=wp.float64, requires_grad=True)
        grid = wp.zeros((side + 1) ** 2, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(splat, dim=n, inputs=[x, w, grid, side])
        return x, w, grid, tape

    coeff = rng.uniform(-1, 1, (side + 1) ** 2)
    x, w, grid, tape = run(x0, w0)
    expected = np.zeros((side + 1) ** 2)
    q = x0 * side
    for p in range(n):
        fx = q[p, 0] - np.floor(q[p, 0])
        for k, weight in enumerate(((1 - fx) * w0[p], fx * w0[p])):
            expected[(int(q[p, 0]) + k) * (side + 1) + int(q[p, 1])] += weight ** 2
    np.testing.assert_allclose(grid.numpy(), expected, rtol=1e-12)
    tape.backward(grads={grid: wp.array(coeff, dtype=wp.float64)})
    eps = 1e-6
    for name, base, grad in (("x", x0, x.grad.numpy()), ("w", w0, w.grad.numpy())):
        fd = np.zeros_like(base)
        for index in np.ndindex(base.shape):
            plus, minus = base.copy(), base.copy()
            plus[index] += eps
            minus[index] -= eps
            args = (plus, w0) if name == "x" else (x0, plus)
            up = run(*args)[2].numpy() @ coeff
            args = (minus, w0) if name == "x" else (x0, minus)
            fd[index] = (up - run(*args)[2].numpy() @ coeff) / (2 * eps)
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8, err_msg=name)
