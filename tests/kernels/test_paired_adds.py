"""Paired scattered adds (``ExprCoder._paired_with_previous``, ``cpu_runtime.rt_add_pair``): the
adds of a vector value into components ``c`` and ``c + 1`` of a row at a data-dependent index
(``out[idx[i]] += v``, a grid cell) are one two-lane load, add and store. Results must be those
of the adds one by one: repeated rows, every composite shape, subtraction, strided views;
thread-indexed rows keep separate adds."""

import typing

import numpy as np
import pytest

import difftape as wp


@wp.kernel
def scatter(v: wp.array(dtype=typing.Any), idx: wp.array(dtype=wp.int32),
            out: wp.array(dtype=typing.Any)):
    i = wp.tid()
    wp.atomic_add(out, idx[i], v[i] + v[i])


@wp.kernel
def scatter_sub(v: wp.array(dtype=wp.vec3), w: wp.array(dtype=float), idx: wp.array(dtype=wp.int32),
                out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    wp.atomic_sub(out, idx[i], v[i] * w[i])


@wp.kernel
def own_rows(v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    wp.atomic_add(out, i, v[i])


@wp.kernel
def reads_itself(v: wp.array(dtype=wp.vec2), idx: wp.array(dtype=wp.int32),
                 out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    j = idx[i]
    wp.atomic_add(out, j, wp.vec2(v[i][0], out[j][0]))


def _forward(kernel, arrays) -> str:
    specialized = kernel.specialize(arrays) if hasattr(kernel, "specialize") else kernel
    return specialized.source().split(f"def {specialized.key}_adjoint")[0]


SHAPES = {wp.vec2: (2,), wp.vec3: (3,), wp.vec4: (4,), wp.mat22: (2, 2), wp.mat33: (3, 3),
          wp.vec3d: (3,)}


@pytest.mark.parametrize("mode", ["serial", "auto"])
@pytest.mark.parametrize("dtype", list(SHAPES), ids=lambda t: t.__name__)
def test_paired_adds_equal_the_adds_one_by_one(dtype, mode):
    shape = SHAPES[dtype]
    scalar = np.float64 if dtype is wp.vec3d else np.float32
    n, rows = 3000, 37
    rng = np.random.default_rng(4)
    v0 = rng.uniform(-1, 1, (n, *shape)).astype(scalar)
    idx0 = rng.integers(0, rows, n).astype(np.int32)  # every row many times
    v, idx = wp.array(v0, dtype=dtype), wp.array(idx0, dtype=wp.int32)
    out = wp.zeros(rows, dtype=dtype)
    pairs = (shape[-1] // 2) * (shape[0] if len(shape) == 2 else 1)
    assert _forward(scatter, [v, idx, out]).count("rt_add_pair(rep_view_out") == pairs
    saved = wp.config.cpu_parallel
    wp.config.cpu_parallel = mode
    try:
        wp.launch(scatter, dim=n, inputs=[v, idx], outputs=[out])
    finally:
        wp.config.cpu_parallel = saved
    expected = np.zeros((rows, *shape), dtype=np.float64)
    np.add.at(expected, idx0, 2.0 * v0.astype(np.float64))
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_subtraction_pairs_and_gradients_flow_through_it():
    n, rows = 64, 5
    rng = np.random.default_rng(7)
    v0 = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    w0 = rng.uniform(0.5, 2, n).astype(np.float32)
    idx0 = rng.integers(0, rows, n).astype(np.int32)
    v = wp.array(v0, dtype=wp.vec3, requires_grad=True)
    w = wp.array(w0, dtype=float, requires_grad=True)
    idx = wp.array(idx0, dtype=wp.int32)
    out = wp.zeros(rows, dtype=wp.vec3, requires_grad=True)
    assert "rt_sub_pair(rep_view_out" in _forward(scatter_sub, [v, w, idx, out])
    tape = wp.Tape()
    with tape:
        wp.launch(scatter_sub, dim=n, inputs=[v, w, idx], outputs=[out])
    expected = np.zeros((rows, 3))
    np.subtract.at(expected, idx0, v0 * w0[:, None])
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
    seed = rng.uniform(-1, 1, (rows, 3)).astype(np.float32)
    tape.backward(grads={out: wp.array(seed, dtype=wp.vec3)})
    np.testing.assert_allclose(v.grad.numpy(), -seed[idx0] * w0[:, None], rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), -np.sum(seed[idx0] * v0, axis=1), rtol=1e-5)


def test_strided_view_rows_pair_too():
    n, rows = 200, 9
    rng = np.random.default_rng(2)
    v0 = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    idx0 = rng.integers(0, rows, n).astype(np.int32)
    base = wp.zeros(2 * rows, dtype=wp.vec3)
    out = base[::2]
    wp.launch(scatter, dim=n, inputs=[wp.array(v0, dtype=wp.vec3), wp.array(idx0, dtype=wp.int32)],
              outputs=[out])
    expected = np.zeros((2 * rows, 3))
    np.add.at(expected, 2 * idx0, 2.0 * v0)
    np.testing.assert_allclose(base.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_rows_of_the_thread_stay_apart():
    v = wp.zeros(4, dtype=wp.vec3)
    assert "rt_add_pair" not in _forward(own_rows, [v, wp.zeros(4, dtype=wp.vec3)])


@wp.kernel
def swap(out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    out[i] = wp.vec2(out[i][1], out[i][0])


def test_a_value_that_reads_its_own_target_is_computed_before_it_changes():
    """``out[i] = vec2(out[i][1], out[i][0])`` swaps, and an atomic's vector value that reads the
    row it adds into sees the row before its first component is added (as in Warp)."""
    a = wp.array(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), dtype=wp.vec2)
    wp.launch(swap, dim=2, inputs=[a])
    assert a.numpy().tolist() == [[2.0, 1.0], [4.0, 3.0]]
    n = 50
    rng = np.random.default_rng(9)
    v0 = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    idx0 = rng.integers(0, 3, n).astype(np.int32)
    v, idx = wp.array(v0, dtype=wp.vec2), wp.array(idx0, dtype=wp.int32)
    out = wp.zeros(3, dtype=wp.vec2)
    saved = wp.config.cpu_parallel
    wp.config.cpu_parallel = "serial"
    try:
        wp.launch(reads_itself, dim=n, inputs=[v, idx], outputs=[out])
    finally:
        wp.config.cpu_parallel = saved
    expected = np.zeros((3, 2), dtype=np.float32)
    for i in range(n):  # one thread after the other, each reading what the ones before added
        j = idx0[i]
        expected[j] += (v0[i, 0], expected[j, 0])
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)
