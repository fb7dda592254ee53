"""Pair loads (``ExprCoder.paired_lane``, ``cpu_runtime.rt_load_pair``): components 2k and 2k + 1
of a float32 vector or matrix row read through a loaded index are read together by one 64-bit
load. The values read must be exactly the elements' bits, for every composite shape, in strided
views, in vectorized loops and their remainders; rows indexed by the thread, float64 arrays and
debug mode keep plain reads."""

import typing

import numpy as np
import pytest

import difftape as wp
from tests.kernels.modes import debug_reference


@wp.kernel
def gather(x: wp.array(dtype=typing.Any), idx: wp.array(dtype=int),
           out: wp.array(dtype=typing.Any)):
    s = wp.tid()
    out[s] = x[idx[s]]


@wp.kernel
def gather_grid(x: wp.array2d(dtype=wp.vec3), idx: wp.array(dtype=int),
                out: wp.array(dtype=wp.vec3)):
    s = wp.tid()
    out[s] = x[idx[s], s % 3]


SHAPES = {wp.vec3: (3,), wp.vec2: (2,), wp.vec4: (4,), wp.quat: (4,), wp.mat22: (2, 2),
          wp.mat33: (3, 3)}


def gather_source(dtype) -> str:
    """The forward of ``gather`` specialised for arrays of ``dtype``."""
    x = wp.zeros(1, dtype=dtype)
    kernel = gather.specialize([x, wp.zeros(1, dtype=int), x])
    return kernel.source().split(f"def {kernel.key}_adjoint")[0]


def awkward_floats(rng, shape) -> np.ndarray:
    """float32 values whose bits a conversion or an arithmetic operation would change: signed
    zeros, quiet and signalling NaNs with payloads, infinities, subnormals."""
    bits = rng.standard_normal(shape).astype(np.float32).view(np.uint32)
    special = np.array([0x80000000, 0x00000000, 0x7FC00001, 0xFFC12345, 0x7F800001,
                        0x7FA00000, 0x7F800000, 0xFF800000, 0x00000001, 0x807FFFFF],
                       dtype=np.uint32)
    flat = bits.reshape(-1)
    where = rng.choice(flat.size, size=min(flat.size, 4 * special.size), replace=False)
    flat[where] = np.resize(special, where.size)
    return bits.view(np.float32)


def test_gathered_components_are_read_in_pairs():
    """x[idx[s]] of a vec3: x and y by one pair read, z alone; other shapes pair every two
    neighbouring components along their last axis."""
    forward = gather_source(wp.vec3)
    assert "rt_load_pair(x, (uint64(" in forward
    assert forward.count("rt_load_pair(x, (") == 2  # lanes 0 and 1 of one pair
    assert "u64_2]" in forward  # the z component, read alone
    vec4 = gather_source(wp.vec4)
    assert "u64_0,))[0]" in vec4 and "u64_0,))[1]" in vec4
    assert "u64_2,))[0]" in vec4 and "u64_2,))[1]" in vec4


@wp.kernel
def local_rows(x: wp.array(dtype=wp.vec3), y: wp.array(dtype=wp.vec3d),
               idx: wp.array(dtype=int), out: wp.array(dtype=wp.vec3)):
    s = wp.tid()
    out[s] = x[s] + wp.vec3(y[idx[s]])


def test_thread_rows_float64_and_debug_mode_keep_plain_reads():
    """Rows at the thread index vectorize as interleaved loads and keep plain reads; float64
    components are 64-bit each already; debug mode checks every index as written."""
    assert "rt_load_pair" not in local_rows.source()
    saved = wp.config.mode
    wp.config.mode = "debug"
    try:
        assert "rt_load_pair" not in gather_source(wp.vec3)
    finally:
        wp.config.mode = saved


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("dtype", list(SHAPES), ids=lambda t: t.__name__)
@pytest.mark.parametrize("n", [1, 7, 1029])
def test_pair_reads_return_the_elements_bits(threading, mode, dtype, n):
    """Every component of every gathered row, awkward values included, arrives bit for bit:
    launches of 1 and 7 threads run the loops' scalar remainders, 1029 their vector bodies."""
    threading(mode)
    rng = np.random.default_rng(n)
    rows = 11
    xs = awkward_floats(rng, (rows, *SHAPES[dtype]))
    idx = rng.integers(0, rows, n).astype(np.int32)
    out = wp.zeros(n, dtype=dtype)
    wp.launch(gather, dim=n, inputs=[wp.array(xs, dtype=dtype), wp.array(idx, dtype=int)],
              outputs=[out])
    np.testing.assert_array_equal(out.numpy().view(np.uint32), xs[idx].view(np.uint32))


@pytest.mark.parametrize("dtype", [wp.vec3, wp.vec4, wp.mat33], ids=lambda t: t.__name__)
def test_strided_views_read_each_component(dtype):
    """A view of every other row is not C-contiguous: the pair is read element by element."""
    rng = np.random.default_rng(3)
    rows, n = 9, 600
    xs = awkward_floats(rng, (2 * rows, *SHAPES[dtype]))
    base = wp.array(xs, dtype=dtype)
    idx = rng.integers(0, rows, n).astype(np.int32)
    out = wp.zeros(n, dtype=dtype)
    wp.launch(gather, dim=n, inputs=[base[::2], wp.array(idx, dtype=int)], outputs=[out])
    np.testing.assert_array_equal(out.numpy().view(np.uint32), xs[::2][idx].view(np.uint32))


def test_two_dimensional_arrays_pair_the_components_of_gathered_rows():
    rng = np.random.default_rng(5)
    rows, n = 6, 1000
    xs = awkward_floats(rng, (rows, 3, 3))
    idx = rng.integers(0, rows, n).astype(np.int32)
    out = wp.zeros(n, dtype=wp.vec3)
    assert "rt_load_pair(x, (" in gather_grid.source()
    wp.launch(gather_grid, dim=n, inputs=[wp.array(xs, dtype=wp.vec3), wp.array(idx, dtype=int)],
              outputs=[out])
    expected = xs[idx, np.arange(n) % 3]
    np.testing.assert_array_equal(out.numpy().view(np.uint32), expected.view(np.uint32))


@wp.kernel
def spread(x: wp.array(dtype=wp.vec3), idx: wp.array(dtype=int),
           out: wp.array(dtype=wp.vec3)):
    s = wp.tid()
    out[idx[s]] = wp.vec3(x[s][1], x[s][2], x[s][0]) * 3.0


@wp.kernel
def springs(x: wp.array(dtype=wp.vec3), si: wp.array(dtype=int), sj: wp.array(dtype=int),
            e: wp.array(dtype=float)):
    s = wp.tid()
    d = x[sj[s]] - x[si[s]]
    e[s] = wp.length(d) * wp.sin(d[0]) + d[1] * d[2]


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_gradients_through_pair_reads_equal_the_plain_code(threading, mode):
    """The adjoint reads the gathered rows again (``springs``) and the adjoint of rows written
    through an index (``spread``: the output adjoint adj_out[idx[s]]) in pairs: gradients equal
    the debug-mode code's, which reads element by element."""
    assert "rt_load_pair(adj_out, (" in spread.source()
    assert "rt_load_pair(x, (" in springs.source().split("def springs_adjoint")[1]
    threading(mode)
    rng = np.random.default_rng(9)
    rows, n = 40, 1500
    xs = rng.standard_normal((rows, 3)).astype(np.float32)
    si = rng.integers(0, rows, n).astype(np.int32)
    sj = rng.integers(0, rows, n).astype(np.int32)
    perm = rng.permutation(n).astype(np.int32)  # spread writes each row once
    seed_e = rng.standard_normal(n).astype(np.float32)
    seed_out = rng.standard_normal((n, 3)).astype(np.float32)

    def run():
        x = wp.array(xs, dtype=wp.vec3, requires_grad=True)
        y = wp.array(xs[si], dtype=wp.vec3, requires_grad=True)
        e = wp.zeros(n, dtype=float, requires_grad=True)
        out = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(springs, dim=n, inputs=[x, wp.array(si, dtype=int), wp.array(sj, dtype=int)],
                      outputs=[e])
            wp.launch(spread, dim=n, inputs=[y, wp.array(perm, dtype=int)], outputs=[out])
        tape.backward(grads={e: wp.array(seed_e, dtype=float),
                             out: wp.array(seed_out, dtype=wp.vec3)})
        return np.concatenate([x.grad.numpy().ravel(), y.grad.numpy().ravel()])

    got = run()
    if mode == "serial":
        np.testing.assert_array_equal(got, debug_reference(run))
    else:  # chunks add in another order
        np.testing.assert_allclose(got, debug_reference(run), rtol=1e-4, atol=1e-4)
