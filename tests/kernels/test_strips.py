"""Strip-mined innermost loops (``codegen/strips.py``): adds at the thread index plus a constant
are stored in strip buffers and added into their array after each strip. Every element must get
the same additions as before, at every launch size (strips full, partial, several) and in every
threading mode; sites that cannot move must stay where they are."""

import re

import numpy as np
import pytest

import difftape as wp
from difftape._src.codegen.strips import MAX_BUFFER_BYTES, MIN_STRIPPED, STRIP
from tests.fdcheck import check_tape
from tests.kernels.modes import assert_matches_debug


@wp.kernel
def spread(x: wp.array(dtype=wp.float64), f: wp.array(dtype=wp.float64)):
    i = wp.tid()
    twice = 2.0 * x[i]
    wp.atomic_add(f, i + 2, twice)
    wp.atomic_sub(f, wp.clamp(i - 3, 0, f.shape[0] - 1), 1.5 * twice)  # an offset after the split
    wp.atomic_add(f, i, x[i])


def spread_reference(xs: np.ndarray, size: int) -> np.ndarray:
    f = np.zeros(size)
    i = np.arange(xs.size)
    np.add.at(f, i, xs)
    np.add.at(f, i + 2, 2.0 * xs)
    np.add.at(f, np.clip(i - 3, 0, size - 1), -3.0 * xs)
    return f


@wp.kernel
def diffuse(u: wp.array2d(dtype=wp.float64), k: wp.float64, u1: wp.array2d(dtype=wp.float64)):
    i, j = wp.tid()
    n = u.shape[0]
    m = u.shape[1]
    up = wp.max(i - 1, 0)
    down = wp.min(i + 1, n - 1)
    left = wp.max(j - 1, 0)
    right = wp.min(j + 1, m - 1)
    c = u[i, j]
    u1[i, j] = c + k * (u[up, j] + u[down, j] + u[i, left] + u[i, right] - 4.0 * c)


def diffuse_adjoint_reference(g: np.ndarray, k: float) -> np.ndarray:
    n, m = g.shape
    i, j = np.meshgrid(np.arange(n), np.arange(m), indexing="ij")
    out = (1.0 - 4.0 * k) * g
    for rows, cols in ((np.maximum(i - 1, 0), j), (np.minimum(i + 1, n - 1), j),
                       (i, np.maximum(j - 1, 0)), (i, np.minimum(j + 1, m - 1))):
        np.add.at(out, (rows, cols), k * g)
    return out


@wp.kernel
def row_shift(x: wp.array2d(dtype=wp.float64), r: int, f: wp.array2d(dtype=wp.float64)):
    i, j = wp.tid()
    wp.atomic_add(f, r, j + 1, x[i, j])  # the row is a parameter: the same for every j


@wp.kernel
def row_shift_rebound(x: wp.array2d(dtype=wp.float64), r: int,
                      f: wp.array2d(dtype=wp.float64)):
    i, j = wp.tid()
    r = r + j  # now the row changes with j: a scattered site
    wp.atomic_add(f, r, j + 1, wp.exp(x[i, j]))


@wp.kernel
def looped(x: wp.array(dtype=wp.float64), f: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_add(f, i, x[i])
    k = int(0)
    while k < 3 and x[i] > 0.0:  # runs any number of times per thread
        if x[i] > 1.0:
            wp.atomic_add(f, i + 1, x[i])  # stays: so does the first
        k += 1


@wp.kernel
def reads_back(x: wp.array(dtype=wp.float64), f: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_add(f, i + 1, x[i] + f[i])


@wp.kernel
def springs(x: wp.array(dtype=wp.vec3d), si: wp.array(dtype=int), sj: wp.array(dtype=int),
            f: wp.array(dtype=wp.vec3d)):
    s = wp.tid()
    i = si[s]
    j = sj[s]
    d = x[j] - x[i]
    fs = wp.length(d) * wp.exp(-wp.length(d)) * d  # work enough to vectorize (Strips.pays)
    wp.atomic_add(f, i, fs)
    wp.atomic_sub(f, j, fs)
    wp.atomic_add(f, i + 1, 0.5 * fs)  # i is loaded: i + 1 is anywhere too


def springs_reference(xs, si, sj, size):
    d = xs[sj] - xs[si]
    norm = np.linalg.norm(d, axis=1, keepdims=True)
    fs = norm * np.exp(-norm) * d
    f = np.zeros((size, 3))
    np.add.at(f, si, fs)
    np.add.at(f, sj, -fs)
    np.add.at(f, si + 1, 0.5 * fs)
    return f


@wp.kernel
def partly_random(x: wp.array(dtype=wp.float64), idx: wp.array(dtype=int),
                  f: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_add(f, i + 1, wp.exp(x[i]))
    wp.atomic_add(f, idx[i], x[i])


@wp.kernel
def diagonal(x: wp.array2d(dtype=wp.float64), f: wp.array2d(dtype=wp.float64)):
    i, j = wp.tid()
    wp.atomic_add(f, j, j + 1, wp.exp(x[i, j]))  # the row follows j too: a scattered site


@wp.kernel
def histogram(x: wp.array(dtype=wp.float64), idx: wp.array(dtype=int),
              f: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_add(f, idx[i], x[i])  # no work to vectorize: buffers would only cost


@wp.kernel
def vectors(x: wp.array(dtype=wp.vec3d), f: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    wp.atomic_add(f, i + 1, x[i])  # offset sites followed by a component index


def _source(kernel, rank: int) -> str:
    """The kernel's module, its flush loops' variables (``rt_s1``, ``rt_s2``, ...) all ``rt_s``."""
    return re.sub(r"\brt_s\d+\b", "rt_s", kernel.source(dim=rank))


def _strip_mined(kernel, rank: int, adjoint: bool) -> str | None:
    """The deferred part of the generated function (its flush loops), or None."""
    source = _source(kernel, rank)
    part = source.split(f"def {kernel.key.split('.')[-1]}_adjoint")[1 if adjoint else 0]
    starts = [part.find(marker) for marker in ("for rt_s in range(", "rt_ahead = ")]
    if "for rt_strip in range(" not in part or max(starts) < 0:  # (interchanged: no flushes)
        return None
    return part[min(k for k in starts if k >= 0):]


def test_neighbour_adds_move_out_of_the_thread_loop():
    numbered = diffuse.source(dim=2).split("def diffuse_adjoint")[1]
    # Each flush loop's variable is its own: Numba's SSA pass costs a pass per reassigned name.
    assert [f"for rt_s{k} in range(" in numbered for k in range(1, 7)] == [True] * 5 + [False]
    source = _source(diffuse, 2).split("def diffuse_adjoint")[1]
    threads = source.split("for t1 in range(rt_strip, rt_strip_end):")[1].split("if has_adj_u:")[0]
    assert "rep_view_adj_u[" not in threads  # the thread loop only fills buffers
    assert threads.count("rt_buf_") == 2  # k * g for four neighbours, its own adjoint for one
    assert source.count("for rt_s in range(rt_strip_end - rt_strip):") == 5  # one per site
    assert "uint64(rt_strip + rt_s - 1)" in source and "uint64(rt_strip + rt_s + 1)" in source
    assert _strip_mined(spread, 1, adjoint=False)
    assert _strip_mined(row_shift, 2, adjoint=False)
    flush = _strip_mined(vectors, 1, adjoint=False)
    assert "rep_view_f[uint64(rt_strip + rt_s + 1), u64_2]" in flush


def test_scattered_adds_share_buffers_and_one_flush_loop():
    flush = _strip_mined(springs, 1, adjoint=False).split("\n\n")[0]
    # One loop, in the order each thread ran them, prefetching; then the last 16 threads'.
    ahead, last = flush.split("for rt_s in range(rt_ahead, rt_strip_end - rt_strip):")
    assert "rt_ahead = max(rt_strip_end - rt_strip - 16, 0)" in ahead
    scattered = [line.strip() for line in ahead.splitlines()
                 if "rt_buf" in line and "rt_prefetch" not in line]
    # Per row, in the order each thread ran them: x and y added by one two-lane pair, then z.
    assert [line.split("(")[0].split("[")[0] for line in scattered] == \
        ["rt_add_pair", "rep_view_f", "rt_sub_pair", "rep_view_f", "rt_add_pair", "rep_view_f"]
    assert scattered[0] == ("rt_add_pair(rep_view_f, (rt_buf_2[uint64(rt_s)], u64_0,), "
                            "rt_buf_1[uint64(rt_s)], rt_buf_3[uint64(rt_s)])")
    assert scattered[1] == "rep_view_f[rt_buf_2[uint64(rt_s)], u64_2] += rt_buf_4[uint64(rt_s)]"
    assert [line.strip() for line in last.splitlines() if line.strip()] == scattered
    assert "if " not in ahead  # no test per thread of whether to prefetch
    prefetched = [line.strip() for line in ahead.splitlines() if "rt_prefetch" in line]
    assert len(prefetched) == 3  # the rows at i, j and i + 1 of the thread 16 ahead
    assert "rt_buf_2[uint64(rt_s + 16)]" in prefetched[0]
    index_buffers = {line.split("rt_buf_")[1].split("[")[0] for line in scattered}
    assert len(index_buffers) == 3  # i, j and i + 1, each stored once
    source = springs.source().split("def springs_adjoint")[0]
    assert source.count("rt_stack_array(512") == 3 + 3 + 3  # i, j, i + 1; fs; 0.5 * fs
    # Loaded indices are spelled unsigned, in the thread loop and in their buffers, so that
    # neither wraps them around.
    assert source.count("rt_stack_array(512, np.uint64)") == 3
    assert "x[uint64(j), u64_0]" in source
    for kernel, rank in ((row_shift_rebound, 2), (diagonal, 2)):
        assert "rt_buf" in _strip_mined(kernel, rank, adjoint=False).split("+=")[0]
    loops = _strip_mined(partly_random, 1, adjoint=False).split("for rt_s in range(")
    assert len(loops) == 4  # the offset site's own loop, then the scattered one's two
    assert "rep_view_f[uint64(rt_strip + rt_s + 1)]" in loops[1]


@wp.kernel
def cheap_scatter(x: wp.array(dtype=wp.float64), idx: wp.array(dtype=int),
                  f: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_add(f, idx[i], x[i] * 2.0 + x[i] * x[i])  # adds and multiplies only


@wp.kernel
def covariance(x: wp.array(dtype=wp.vec3d), nbr: wp.array2d(dtype=int),
               c: wp.array(dtype=wp.mat33d)):
    i = wp.tid()
    m = wp.mat33d()
    for k in range(6):
        d = x[nbr[i, k]] - x[i]
        m = m + wp.outer(d, d)
    c[i] = m


@pytest.mark.parametrize("kernel,rank", [(reads_back, 1), (histogram, 1), (looped, 1),
                                         (cheap_scatter, 1)])
def test_sites_that_cannot_move_stay(kernel, rank):
    assert not _strip_mined(kernel, rank, adjoint=False)


def test_cheap_arithmetic_keeps_scattered_adds_in_place():
    """Adds and multiplies count a quarter of a builtin's work (``Strips.pays``): the adjoint
    of sums of outer products over 6 gathered neighbours adds into them in place (250k
    threads, one core: 27 ms deferred, 17.5 in place), with the gradients of the plain code."""
    assert "rt_ahead" not in (_strip_mined(covariance, 1, adjoint=True) or "")
    n = 40
    rng = np.random.default_rng(30)
    nbr = rng.integers(0, n, (n, 6))

    def run(a):
        wp.launch(covariance, n, inputs=[a["x"], a["nbr"]], outputs=[a["c"]])

    check_tape(run, {"x": rng.standard_normal((n, 3))}, {"c": np.zeros((n, 3, 3)), "nbr": nbr},
               {"x": wp.vec3d, "c": wp.mat33d, "nbr": wp.int32})


def test_debug_mode_and_overlapping_arrays_keep_adds_in_place():
    saved = wp.config.mode
    wp.config.mode = "debug"
    try:
        assert not _strip_mined(diffuse, 2, adjoint=True)
    finally:
        wp.config.mode = saved
    assert "rt_strip" not in diffuse.program(2, noalias=False).source


@pytest.mark.parametrize("mode", ["serial", "auto", "replicate"])
@pytest.mark.parametrize("n", [1, 2, 5, STRIP - 1, STRIP, STRIP + 1, 2 * STRIP + 7])
def test_forward_adds_equal_the_reference(threading, mode, n):
    threading(mode)
    xs = np.random.default_rng(n).integers(-50, 50, n).astype(np.float64)  # exact sums
    f = wp.zeros(n + 2, dtype=wp.float64)
    wp.launch(spread, dim=n, inputs=[wp.array(xs, dtype=wp.float64)], outputs=[f])
    np.testing.assert_array_equal(f.numpy(), spread_reference(xs, n + 2))


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("shape", [(3, 1), (4, 2), (3, 9), (5, STRIP + 2), (2, 2 * STRIP + 5)])
def test_stencil_adjoint_equals_the_reference(threading, mode, shape):
    threading(mode)
    rng = np.random.default_rng(shape[1])
    g = rng.integers(-20, 20, shape).astype(np.float64)
    k = 0.25  # a power of two: every product and sum below is exact
    u = wp.array(rng.standard_normal(shape), dtype=wp.float64, requires_grad=True)
    u1 = wp.zeros(shape, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(diffuse, dim=shape, inputs=[u, k], outputs=[u1])
    tape.backward(grads={u1: wp.array(g, dtype=wp.float64)})
    np.testing.assert_array_equal(u.grad.numpy(), diffuse_adjoint_reference(g, k))


@pytest.mark.parametrize("width", [5, MIN_STRIPPED, STRIP + 3])
def test_row_parameter_sites(threading, width):
    threading("serial")
    rng = np.random.default_rng(3)
    xs = rng.integers(-9, 9, (3, width)).astype(np.float64)
    f = wp.zeros((4, width + 1), dtype=wp.float64)
    wp.launch(row_shift, dim=xs.shape, inputs=[wp.array(xs, dtype=wp.float64), 2], outputs=[f])
    expected = np.zeros((4, width + 1))
    expected[2, 1:] = xs.sum(axis=0)
    np.testing.assert_array_equal(f.numpy(), expected)


def test_short_rows_run_the_body_that_adds_in_place():
    forward = row_shift.source(dim=2).split("def row_shift_adjoint")[0]
    strips, plain = forward.split(f"if dim1 - 0 >= {MIN_STRIPPED}:")[1].split("else:")
    assert "for rt_strip in range(0, dim1, 512):" in strips and "rep_view_f[" not in \
        strips.split("for rt_s")[0]
    assert "for t1 in range(0, dim1):" in plain and "rep_view_f[" in plain
    adjoint = diffuse.source(dim=2).split("def diffuse_adjoint")[1]
    assert f"if rt_inner_hi - rt_inner_lo >= {MIN_STRIPPED}:" in adjoint  # else: all in place
    assert "MIN_STRIPPED" not in spread.source() and "if lo" not in spread.source()


@pytest.mark.parametrize("shape", [(3, 4), (4, 11)])
def test_stencil_gradients_match_finite_differences(shape):
    rng = np.random.default_rng(sum(shape))

    def run(a):
        wp.launch(diffuse, dim=shape, inputs=[a["u"], 0.3], outputs=[a["u1"]])

    check_tape(run, {"u": rng.standard_normal(shape)}, {"u1": np.zeros(shape)},
               {"u": wp.float64, "u1": wp.float64})


@pytest.mark.parametrize("mode", ["serial", "auto", "replicate"])
@pytest.mark.parametrize("n", [1, 3, STRIP, STRIP + 1, 3 * STRIP - 2])
def test_scattered_adds_equal_the_reference(threading, mode, n):
    threading(mode)
    rng = np.random.default_rng(n)
    size = 40
    xs = rng.integers(-4, 5, (size, 3)).astype(np.float64)
    si = rng.integers(0, size - 1, n).astype(np.int32)
    sj = rng.integers(0, size, n).astype(np.int32)
    f = wp.zeros(size, dtype=wp.vec3d)
    wp.launch(springs, dim=n, inputs=[wp.array(xs, dtype=wp.vec3d), wp.array(si, dtype=int),
                                      wp.array(sj, dtype=int)], outputs=[f])
    np.testing.assert_allclose(f.numpy(), springs_reference(xs, si, sj, size), rtol=1e-12,
                               atol=1e-9)


@wp.kernel
def two_columns(x: wp.array(dtype=float), idx: wp.array(dtype=int), f: wp.array2d(dtype=float)):
    i = wp.tid()
    v = wp.sin(x[i]) * 2.0 + wp.cos(x[i])
    r = idx[i]
    wp.atomic_sub(f, r, 0, v)
    wp.atomic_sub(f, r, 1, v * 3.0)


@pytest.mark.parametrize("mode", ["serial", "auto", "replicate"])
@pytest.mark.parametrize("strided", [False, True])
def test_paired_components_equal_adds_in_place(threading, mode, strided):
    """Columns 0 and 1 of a row are flushed as one pair; in a view of every other column they
    are not neighbours in memory, and the pair adds them one by one. Either way each element
    gets the same float32 additions in the same order as the plain per-thread code."""
    assert "rt_sub_pair(rep_view_f" in two_columns.source()
    threading(mode)
    n, rows = 3 * STRIP + 5, 37
    rng = np.random.default_rng(4)
    x = wp.array(rng.standard_normal(n).astype(np.float32), dtype=float)
    idx = wp.array(rng.integers(0, rows, n).astype(np.int32), dtype=int)

    def run():
        base = wp.zeros((rows, 4), dtype=float)
        f = base[:, ::2] if strided else wp.zeros((rows, 2), dtype=float)
        wp.launch(two_columns, dim=n, inputs=[x, idx], outputs=[f])
        return f.numpy()

    got = run()
    assert_matches_debug(got, run, mode, 1e-5)


@wp.kernel
def pull(x: wp.array(dtype=wp.vec3), si: wp.array(dtype=int), sj: wp.array(dtype=int),
         e: wp.array(dtype=float)):
    s = wp.tid()
    d = x[sj[s]] - x[si[s]]
    e[s] = wp.length(d) * wp.sin(d[0]) + d[1] * d[2]


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_adjoint_pairs_components_across_rows_and_keeps_each_elements_order(threading, mode):
    """The adjoint adds into ``x[j]`` and ``x[i]`` component by component, z first (j.z, i.z,
    j.y, i.y, ...); its flush moves j.y up to j.z, past i.z, which is another component, and
    adds each row's y and z as a pair; ``x[i]`` gets ``-v`` where ``x[j]`` gets ``v``, flushed
    as a subtraction of the same buffer. With springs from a row to itself and rows shared by
    many springs, every element still gets the float32 additions of the plain per-thread code
    in the same order."""
    adjoint = pull.source().split("def pull_adjoint")[1]
    # Per flush loop (two of them): a pair added into x[j], the same pair subtracted from x[i].
    assert adjoint.count("rt_add_pair(rep_view_adj_x") == 2
    assert adjoint.count("rt_sub_pair(rep_view_adj_x") == 2
    assert adjoint.count("rt_stack_array(512, np.float32)") == 3  # x, y, z of one value
    threading(mode)
    n, rows = 3 * STRIP + 5, 23
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((rows, 3)).astype(np.float32)
    si = rng.integers(0, rows, n).astype(np.int32)
    sj = np.where(rng.random(n) < 0.1, si, rng.integers(0, rows, n)).astype(np.int32)

    def run():
        x = wp.array(xs, dtype=wp.vec3, requires_grad=True)
        e = wp.zeros(n, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(pull, dim=n, inputs=[x, wp.array(si, dtype=int), wp.array(sj, dtype=int)],
                      outputs=[e])
        tape.backward(grads={e: wp.array(rng_seed.astype(np.float32), dtype=float)})
        return x.grad.numpy()

    rng_seed = rng.standard_normal(n)
    got = run()
    assert_matches_debug(got, run, mode, 1e-4)


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_scattered_adjoint_gradients(threading, mode):
    threading(mode)
    rng = np.random.default_rng(7)
    size, n = 30, STRIP + 40
    si = rng.integers(0, size - 1, n)
    sj = (si + rng.integers(1, size - 1, n)) % (size - 1)

    def run(a):
        wp.launch(springs, dim=n, inputs=[a["x"], a["si"], a["sj"]], outputs=[a["f"]])

    check_tape(run, {"x": rng.standard_normal((size, 3))},
               {"f": np.zeros((size, 3)), "si": si, "sj": sj},
               {"x": wp.vec3d, "f": wp.vec3d, "si": wp.int32, "sj": wp.int32})


@wp.struct
class Field:
    values: wp.array(dtype=wp.float32)
    scale: wp.float32


@wp.kernel
def struct_scatter(x: wp.array(dtype=wp.float32), idx: wp.array(dtype=int), f: Field):
    i = wp.tid()
    wp.atomic_add(f.values, idx[i], wp.sin(x[i]) * f.scale)
    wp.atomic_add(f.values, i + 1, wp.cos(x[i]))


@wp.kernel
def half_scatter(x: wp.array(dtype=wp.float32), f: wp.array(dtype=wp.float16)):
    i = wp.tid()
    wp.atomic_add(f, i + 1, wp.sin(x[i]))


@wp.kernel
def reassigned(x: wp.array(dtype=wp.float64), f: wp.array(dtype=wp.float64)):
    i = wp.tid()
    v = wp.sin(x[i])
    wp.atomic_add(f, i + 1, v)
    v = v * 3.0  # the second site must add the new value, not share the first one's buffer
    wp.atomic_add(f, i, v)


@wp.kernel
def cube(u: wp.array3d(dtype=wp.float64), out: wp.array3d(dtype=wp.float64)):
    i, j, k = wp.tid()
    m = u.shape[2]
    out[i, j, k] = u[i, j, wp.max(k - 1, 0)] * 2.0 + u[i, j, wp.min(k + 1, m - 1)] \
        + wp.sin(u[i, j, k])


def test_struct_fields_float16_and_rebound_values():
    assert all(_strip_mined(k, 1, adjoint=False)
               for k in (struct_scatter, half_scatter, reassigned))
    rng = np.random.default_rng(0)
    n = STRIP + 300
    xs = rng.random(n).astype(np.float32)
    idx = rng.integers(0, n + 1, n).astype(np.int32)
    field = Field()
    field.values = wp.zeros(n + 1, dtype=wp.float32)
    field.scale = 2.0
    wp.launch(struct_scatter, n, inputs=[wp.array(xs, dtype=wp.float32),
                                         wp.array(idx, dtype=int), field])
    expected = np.zeros(n + 1)
    np.add.at(expected, idx, 2.0 * np.sin(xs.astype(np.float64)))
    expected[1:] += np.cos(xs.astype(np.float64))
    np.testing.assert_allclose(field.values.numpy(), expected, rtol=1e-5, atol=1e-5)

    halves = wp.zeros(n + 1, dtype=wp.float16)
    wp.launch(half_scatter, n, inputs=[wp.array(xs, dtype=wp.float32), halves])
    assert np.array_equal(halves.numpy()[1:], np.sin(xs).astype(np.float16))

    x64 = rng.random(n)
    f = wp.zeros(n + 1, dtype=wp.float64)
    wp.launch(reassigned, n, inputs=[wp.array(x64, dtype=wp.float64), f])
    expected = np.zeros(n + 1)
    expected[1:] += np.sin(x64)
    expected[:-1] += 3.0 * np.sin(x64)
    np.testing.assert_allclose(f.numpy(), expected, rtol=1e-15)


@pytest.mark.parametrize("shape", [(2, 3, 5), (3, 2, STRIP + 9)])
def test_three_dimensional_adjoint(shape):
    assert "rt_strip" in cube.source(dim=3).split("def cube_adjoint")[1]
    rng = np.random.default_rng(shape[2])
    u = rng.standard_normal(shape)
    g = rng.integers(-8, 8, shape).astype(np.float64)
    ua = wp.array(u, dtype=wp.float64, requires_grad=True)
    out = wp.zeros(shape, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(cube, shape, inputs=[ua], outputs=[out])
    tape.backward(grads={out: wp.array(g, dtype=wp.float64)})
    k = np.arange(shape[2])
    expected = np.cos(u) * g
    np.add.at(expected, (slice(None), slice(None), np.maximum(k - 1, 0)), 2.0 * g)
    np.add.at(expected, (slice(None), slice(None), np.minimum(k + 1, shape[2] - 1)), g)
    np.testing.assert_allclose(ua.grad.numpy(), expected, rtol=1e-13, atol=1e-13)


@wp.kernel
def many_buffers(x: wp.array(dtype=wp.mat44d), idx: wp.array(dtype=int),
                 f: wp.array(dtype=wp.mat44d)):
    i = wp.tid()
    m = x[i]
    a = m[0, 0]
    for_one = idx[i]  # plenty of float work: the buffers alone keep these adds in place
    wp.atomic_add(f, for_one, m * (wp.sin(a) + wp.cos(a)))
    wp.atomic_add(f, for_one + 1, m * (wp.sin(2.0 * a) + wp.cos(2.0 * a)))
    wp.atomic_add(f, for_one + 2, m * (wp.sin(3.0 * a) + wp.cos(3.0 * a)))
    wp.atomic_add(f, for_one + 3, m * (wp.sin(4.0 * a) + wp.cos(4.0 * a)))
    wp.atomic_add(f, for_one + 4, m * (wp.sin(5.0 * a) + wp.cos(5.0 * a)))


def test_kernels_needing_too_many_buffers_add_in_place():
    assert 16 * 5 * STRIP * 8 > MAX_BUFFER_BYTES  # 80 float64 value buffers
    assert not _strip_mined(many_buffers, 1, adjoint=False)
    rng = np.random.default_rng(1)
    n = 600
    xs = rng.integers(-3, 4, (n, 4, 4)).astype(np.float64)
    idx = rng.integers(0, 10, n).astype(np.int32)
    f = wp.zeros(14, dtype=wp.mat44d)
    wp.launch(many_buffers, n, inputs=[wp.array(xs, dtype=wp.mat44d), wp.array(idx, dtype=int)],
              outputs=[f])
    a = xs[:, 0, 0]
    expected = np.zeros((14, 4, 4))
    for k in range(5):
        scale = np.sin((k + 1) * a) + np.cos((k + 1) * a)
        np.add.at(expected, idx + k, xs * scale[:, None, None])
    np.testing.assert_allclose(f.numpy(), expected, rtol=1e-12, atol=1e-12)
