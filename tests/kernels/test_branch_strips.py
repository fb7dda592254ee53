"""Strip-deferred adds under branches (``codegen/strips.py``): a site in an ``if`` (a rope's
segments, guarded neighbours) stores its value and sets its branch's flag; the flush adds only
where the flag is set. Every element must get the same additions as the per-thread code, in
the same order, whichever branches ran; sites of one row at one offset share a flush loop; and
values the replay computes in a branch and the reverse sweep reads in its own branch no longer
keep the adjoint's thread loop from vectorizing (``backends/cpu.py``)."""

import re
import textwrap

import numpy as np
import pytest

import difftape as wp
from difftape._src.codegen.strips import STRIP
from tests.fdcheck import check_tape
from tests.fresh_process import IR_OF, run_fresh
from tests.kernels.modes import assert_matches_debug, debug_reference


@wp.kernel
def guarded(x: wp.array(dtype=wp.float64), f: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_add(f, i, x[i])
    if x[i] > 0.0:
        wp.atomic_add(f, i + 1, x[i] * wp.sin(x[i]))
    else:
        wp.atomic_sub(f, i + 1, x[i] * wp.cos(x[i]))  # the same element, the other branch
        if x[i] < -1.0:
            wp.atomic_add(f, i, 2.0 * x[i])  # a branch in a branch


@wp.kernel
def scattered(x: wp.array(dtype=float), idx: wp.array(dtype=int), f: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    if x[i] > -0.5:  # a random row, added only where the branch runs
        wp.atomic_add(f, idx[i], wp.vec3(wp.sin(x[i]), wp.exp(x[i]), x[i] * x[i]))


@wp.kernel
def rope(x: wp.array(dtype=wp.vec3), rest: float, e: wp.array(dtype=float)):
    i = wp.tid()
    if i < x.shape[0] - 1:
        stretch = wp.length(x[i + 1] - x[i]) - rest
        e[i] = 0.5 * stretch * stretch


@wp.kernel
def rope64(x: wp.array(dtype=wp.vec3d), rest: wp.float64, e: wp.array(dtype=wp.float64)):
    i = wp.tid()
    if i < x.shape[0] - 1:
        stretch = wp.length(x[i + 1] - x[i]) - rest
        e[i] = wp.float64(0.5) * stretch * stretch


@wp.kernel
def interior(u: wp.array2d(dtype=float), out: wp.array2d(dtype=float)):
    i, j = wp.tid()
    n = u.shape[0]
    m = u.shape[1]
    if i > 0 and i < n - 1 and j > 0 and j < m - 1:
        out[i, j] = wp.sin(u[i, j]) * wp.exp(u[i - 1, j]) + 0.1 * (
            u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])


def _flush(kernel, adjoint: bool) -> str:
    source = re.sub(r"\brt_s\d+\b", "rt_s", kernel.source())
    part = source.split(f"def {kernel.key.split('.')[-1]}_adjoint")[1 if adjoint else 0]
    return part[part.find("for rt_s in range("):]


def test_sites_under_branches_are_deferred_with_flags():
    flush = _flush(guarded, adjoint=False)
    assert "rt_flag" in flush and flush.count("for rt_s in range(") >= 3
    # the rope's interior (splits.py: no branch there); its last thread runs the branch after
    adjoint = _flush(rope, adjoint=True).split("for rt_edge")[0]
    # x[i + 1] and x[i]: one loop per row, its three components added together
    loops = [loop for loop in adjoint.split("for rt_s in range(") if "rep_view_adj_x" in loop]
    assert len(loops) == 2 and all(loop.count("rep_view_adj_x[") == 3 for loop in loops)


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("n", [STRIP - 3, 3 * STRIP + 7])
def test_branched_offset_sites_equal_adds_in_place(threading, mode, n):
    threading(mode)
    xs = np.random.default_rng(1).uniform(-2.0, 2.0, n)

    def run():
        f = wp.zeros(n + 1, dtype=wp.float64)
        wp.launch(guarded, dim=n, inputs=[wp.array(xs, dtype=wp.float64)], outputs=[f])
        return f.numpy()

    got = run()
    assert_matches_debug(got, run, mode, 1e-13)


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_branched_scattered_sites_equal_adds_in_place(threading, mode):
    threading(mode)
    n, rows = 3 * STRIP + 11, 29
    rng = np.random.default_rng(2)
    x = wp.array(rng.uniform(-1.0, 1.0, n).astype(np.float32), dtype=float)
    idx = wp.array(rng.integers(0, rows, n).astype(np.int32), dtype=int)

    def run():
        f = wp.zeros(rows, dtype=wp.vec3)
        wp.launch(scattered, dim=n, inputs=[x, idx], outputs=[f])
        return f.numpy()

    assert "rt_flag" in _flush(scattered, adjoint=False)
    got = run()
    assert_matches_debug(got, run, mode, 1e-5)


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_rope_gradients_equal_the_per_thread_code(threading, mode):
    threading(mode)
    n = 2 * STRIP + 9
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((n, 3)).astype(np.float32)
    seed = rng.standard_normal(n).astype(np.float32)

    def run():
        x = wp.array(xs, dtype=wp.vec3, requires_grad=True)
        e = wp.zeros(n, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(rope, dim=n, inputs=[x, 0.5], outputs=[e])
        tape.backward(grads={e: wp.array(seed, dtype=float)})
        return x.grad.numpy()

    got = run()
    assert_matches_debug(got, run, mode, 1e-5)


def test_rope_gradients_match_finite_differences():
    def run(arrays):
        wp.launch(rope64, dim=7, inputs=[arrays["x"], wp.float64(0.3)], outputs=[arrays["e"]])

    check_tape(run, {"x": np.random.default_rng(4).standard_normal((7, 3))},
               {"e": np.zeros(7)}, {"x": wp.vec3d, "e": wp.float64}, directions=3)


_SCRIPT = IR_OF + textwrap.dedent("""
    import re
    import numpy as np
    import difftape as wp

    @wp.func
    def bond_energy(a: wp.vec3, b: wp.vec3, rest: float):
        stretch = wp.length(a - b) - rest
        return 0.5 * stretch * stretch

    # three neighbours per point, each under its own data-dependent if, through a @wp.func
    # (rows read before the branch: under it, AVX2 has no masked interleaved loads)
    @wp.kernel
    def neighbours(x: wp.array(dtype=wp.vec3), w: wp.array(dtype=float),
                   e: wp.array(dtype=float)):
        i = wp.tid()
        total = float(0.0)
        for k in range(1, 4):
            a = x[i]
            b = x[i + k]
            if w[i] > float(k) * 0.25:
                total += bond_energy(a, b, float(k) * 0.01)
        e[i] = total

    wp.config.cpu_parallel = "serial"
    n = 4096
    rng = np.random.default_rng(0)
    x = wp.array(rng.random((n + 3, 3)).astype(np.float32), dtype=wp.vec3, requires_grad=True)
    w = wp.array(rng.random(n).astype(np.float32), dtype=float)
    e = wp.zeros(n, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(neighbours, dim=n, inputs=[x, w], outputs=[e])
    tape.backward(grads={e: wp.ones_like(e)})
    print(bool(re.search(r"fdiv <\\d+ x float>", ir_of(neighbours, adjoint=True))))
""")


def test_values_read_across_branches_leave_the_adjoint_vectorized(tmp_path):
    # The replay's square roots, computed under each ``if``, are read by the reverse sweep
    # under its own ``if``: declared at the top of the thread body, the loop vectorizes.
    assert run_fresh(tmp_path, _SCRIPT) == ["True"]


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_branched_sites_in_other_rows_buffer_their_row(threading, mode):
    """``u[i - 1, j]`` under a branch: the row is the same for all threads of the inner loop,
    but captured where the branch ran it would leave the thread loop only on some iterations
    (which keeps it scalar); the sites buffer it instead, and their flush reads it at the
    strip's first thread that ran the branch and adds along the row, no scattered flush."""
    threading(mode)
    shape = (5, 2 * STRIP + 13)
    rng = np.random.default_rng(6)
    us = rng.standard_normal(shape).astype(np.float32)
    seed = rng.standard_normal(shape).astype(np.float32)

    def run():
        u = wp.array(us, dtype=float, requires_grad=True)
        out = wp.zeros(shape, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(interior, dim=shape, inputs=[u], outputs=[out])
        tape.backward(grads={out: wp.array(seed, dtype=float)})
        return u.grad.numpy()

    got = run()
    adjoints = [p.source.split("def interior_adjoint")[1] for p in interior._built.values()
                if "def interior_adjoint" in p.source and "rt_strip" in p.source]
    assert adjoints and all("rt_flag" in a and "rt_fix" not in a for a in adjoints)
    assert all("_first" in a and "rt_ahead" not in a for a in adjoints)
    # Each element takes up to five adds, flushed row by row: in another order than thread by
    # thread (as offset sites' adds are everywhere), so float32 sums differ in the last bits.
    np.testing.assert_allclose(got, debug_reference(run), rtol=1e-5, atol=1e-5)


@wp.kernel
def cloth(x: wp.array2d(dtype=wp.vec3d), f: wp.array2d(dtype=wp.vec3d)):
    i, j = wp.tid()
    acc = wp.vec3d(0.0, 0.0, 0.0)
    if i > 0:  # the same for all threads of a row: the first row's strips never run it
        acc = acc + (x[i - 1, j] - x[i, j]) * wp.sin(x[i, j][1])
    if i < x.shape[0] - 1:
        acc = acc + (x[i + 1, j] - x[i, j]) * x[i + 1, j][0]
    if j > 0:
        acc = acc + (x[i, j - 1] - x[i, j])
    f[i, j] = acc * wp.float64(10.0)


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_rows_under_row_wide_branches_equal_adds_in_place(threading, mode):
    """A grid's boundary branches (``if i > 0``) run for every thread of a row or for none;
    the flush of a strip whose threads never ran one adds nothing, and reads no row."""
    threading(mode)
    shape = (4, STRIP + 40)
    rng = np.random.default_rng(9)
    xs = rng.standard_normal(shape + (3,))
    seed = rng.standard_normal(shape + (3,))

    def run():
        x = wp.array(xs, dtype=wp.vec3d, requires_grad=True)
        f = wp.zeros(shape, dtype=wp.vec3d, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(cloth, dim=shape, inputs=[x], outputs=[f])
        tape.backward(grads={f: wp.array(seed, dtype=wp.vec3d)})
        return x.grad.numpy()

    got = run()
    adjoint = _flush(cloth, adjoint=True)
    assert "_first" in adjoint and "rt_ahead" not in adjoint
    np.testing.assert_allclose(got, debug_reference(run), rtol=1e-12, atol=1e-12)  # add order


def test_rows_under_row_wide_branches_match_finite_differences():
    shape = (3, 21)

    def run(a):
        wp.launch(cloth, dim=shape, inputs=[a["x"]], outputs=[a["f"]])

    rng = np.random.default_rng(10)
    check_tape(run, {"x": rng.standard_normal(shape + (3,))}, {"f": np.zeros(shape + (3,))},
               {"x": wp.vec3d, "f": wp.vec3d})
