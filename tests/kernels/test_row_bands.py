"""Row windows of scatter sites (``codegen/offsets.py``) and launches that run row bands adding
straight into the array (``chunks.run`` with a margin) instead of per-chunk copies."""

import numpy as np
import pytest

import difftape as wp
from difftape._src import chunks, thread_choice


@wp.kernel
def diffuse(u: wp.array2d(dtype=wp.float64), u1: wp.array2d(dtype=wp.float64)):
    i, j = wp.tid()
    n = u.shape[0]
    m = u.shape[1]
    up = wp.max(i - 1, 0)
    down = wp.min(i + 1, n - 1)
    u1[i, j] = u[i, j] + u[up, j] + u[down, j] + u[i, wp.max(j - 1, 0)] \
        + u[i, wp.min(j + 1, m - 1)]


@wp.kernel
def spread(x: wp.array(dtype=wp.float64), f: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_add(f, i, x[i])
    wp.atomic_add(f, i + 2, 2.0 * x[i])
    wp.atomic_add(f, wp.clamp(i - 3, 0, f.shape[0] - 1), 3.0 * x[i])


@wp.kernel
def far_scatter(x: wp.array(dtype=wp.float64), idx: wp.array(dtype=int),
                f: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_add(f, idx[i], x[i])            # anywhere
    wp.atomic_add(f, wp.min(i + 1, 5), x[i])  # every row from 5 on lands on 5


@wp.kernel
def looped(x: wp.array(dtype=wp.float64), f: wp.array(dtype=wp.float64), reach: int):
    i = wp.tid()
    for k in range(reach):
        wp.atomic_add(f, i + k, x[i])  # k is not a constant: no window is claimed


@wp.kernel
def unrolled(x: wp.array(dtype=wp.float64), f: wp.array(dtype=wp.float64)):
    i = wp.tid()
    for k in range(3):  # unrolled (max_unroll): k is a constant in each copy
        wp.atomic_add(f, i + k, x[i])


def _windows(kernel, rank, adjoint):
    # An adjoint's program is compiled for its launch's flags: every array with a gradient.
    flags = (True,) * (2 * len([p for p in kernel.ir.flat_params() if p.is_array]))
    program = kernel.program(rank, flags=flags if adjoint else None)
    return {v.param: v.window for v in program.views[adjoint]}


def test_windows_of_clamped_and_shifted_indices():
    window = _windows(diffuse, 2, True)["u"]
    assert (window.lo, window.hi) == (-1, 1)
    assert window.guards == {("u", 0, 0)}  # min(i + 1, n - 1) needs u.shape[0] >= rows
    assert window.holds(8, lambda p, a: 8) and not window.holds(9, lambda p, a: 8)
    spread_window = _windows(spread, 1, False)["f"]
    assert (spread_window.lo, spread_window.hi) == (-3, 2)
    assert _windows(far_scatter, 1, False)["f"] is None
    assert _windows(looped, 1, False)["f"] is None
    unrolled_window = _windows(unrolled, 1, False)["f"]
    assert (unrolled_window.lo, unrolled_window.hi) == (0, 2)


@pytest.fixture
def margins(monkeypatch):
    seen = []
    run = chunks.run

    def spy(fn, dims, args, views, count, margin=0):
        seen.append((count, margin, [v[3] for v in views]))
        return run(fn, dims, args, views, count, margin)

    monkeypatch.setattr(chunks, "run", spy)
    monkeypatch.setattr(thread_choice, "TIMED", False)  # every launch that may use threads does
    saved = (wp.config.cpu_parallel, wp.config.parallel_threshold)
    wp.config.cpu_parallel, wp.config.parallel_threshold = "auto", 1
    yield seen
    wp.config.cpu_parallel, wp.config.parallel_threshold = saved


def _chunked(monkeypatch, count):
    monkeypatch.setattr("numba.get_num_threads", lambda: count)


@pytest.mark.parametrize("count", [2, 3, 7])
def test_banded_adjoint_equals_serial(margins, monkeypatch, count):
    _chunked(monkeypatch, count)
    rng = np.random.default_rng(count)
    # Integer-valued float64 data: every sum is exact, so any order of adds gives the same bits.
    u0 = rng.integers(-50, 50, (23, 9)).astype(np.float64)
    seed = rng.integers(-5, 5, (23, 9)).astype(np.float64)

    def gradient():
        u = wp.array(u0, dtype=wp.float64, requires_grad=True)
        u1 = wp.zeros_like(u)
        tape = wp.Tape()
        with tape:
            wp.launch(diffuse, dim=u0.shape, inputs=[u], outputs=[u1])
        tape.backward(grads={u1: wp.array(seed, dtype=wp.float64)})
        return u.grad.numpy()

    banded = gradient()
    assert any(m == 2 and flags == [True] for _, m, flags in margins), margins
    wp.config.cpu_parallel = "serial"
    np.testing.assert_array_equal(banded, gradient())


@pytest.mark.parametrize("count", [2, 4])
def test_banded_forward_scatter_equals_serial(margins, monkeypatch, count):
    _chunked(monkeypatch, count)
    n = 41
    x = wp.array(np.arange(n, dtype=np.float64) - 7.0, dtype=wp.float64)

    def run():
        f = wp.zeros(n + 2, dtype=wp.float64)
        wp.launch(spread, dim=n, inputs=[x, f])
        return f.numpy()

    banded = run()
    assert any(m == 5 and flags == [True] for _, m, flags in margins), margins
    wp.config.cpu_parallel = "serial"
    np.testing.assert_array_equal(banded, run())


@wp.kernel
def clamp_to(x: wp.array(dtype=wp.float64), short: wp.array(dtype=wp.float64),
             f: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_add(f, wp.min(i + 1, short.shape[0] - 1), x[i])


@pytest.mark.parametrize("short", [10, 40])
def test_guards_decide_per_launch(margins, monkeypatch, short):
    _chunked(monkeypatch, 2)
    x = wp.array(np.ones(30), dtype=wp.float64)
    f = wp.zeros(40, dtype=wp.float64)
    wp.launch(clamp_to, dim=30, inputs=[x, wp.zeros(short, dtype=wp.float64), f])
    # With 10 rows in `short`, rows 9.. all add into f[9]: not within a window of their row.
    assert margins == [(2, 1, [True])] if short == 40 else margins == [(2, 0, [False])], margins
    expected = np.zeros(40)
    np.add.at(expected, np.minimum(np.arange(30) + 1, short - 1), 1.0)
    np.testing.assert_array_equal(f.numpy(), expected)


def test_unbounded_sites_use_copies(margins, monkeypatch):
    _chunked(monkeypatch, 2)
    x = wp.array(np.ones(30), dtype=wp.float64)
    f = wp.zeros(30, dtype=wp.float64)
    wp.launch(far_scatter, dim=30, inputs=[x, wp.array(np.arange(30)[::-1].copy(), dtype=int), f])
    assert margins == [(2, 0, [False])], margins
    expected = np.ones(30)
    expected[1:6] += 1
    expected[5] += 30 - 5
    np.testing.assert_array_equal(f.numpy(), expected)
