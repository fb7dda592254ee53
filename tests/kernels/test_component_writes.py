"""Assignments to vector and matrix components: at indices known only at run time (as Warp
allows), and with values that read the components being assigned."""

import numpy as np
import pytest

import difftape as wp
from tests.fdcheck import check_tape

F64 = wp.float64


@wp.kernel
def runtime_components(n: int, x: wp.array(dtype=F64), out: wp.array(dtype=wp.vec3d),
                       rows: wp.array(dtype=wp.mat22d)):
    i = wp.tid()
    v = wp.vec3d()
    m = wp.mat22d()
    for k in range(n):  # a dynamic loop: k is known only at run time
        v[k % 3] = v[k % 3] + x[i] * F64(k + 1)
        m[k % 2, (k + 1) % 2] = wp.sin(x[i] * F64(k))
        m[(k + i) % 2] = wp.vec2d(m[0, 1], x[i])
    out[i] = v
    for k in range(n):
        out[i][k % 3] = out[i][k % 3] * x[i]  # an array element's component
        wp.atomic_add(rows, 0, m * x[i])
        rows[1][k % 2] += wp.vec2d(x[i], F64(k))  # an atomic add into a row


def _reference(n: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    out = np.zeros((len(x), 3))
    rows = np.zeros((2, 2, 2))
    for i, xi in enumerate(x):
        v = np.zeros(3)
        m = np.zeros((2, 2))
        for k in range(n):
            v[k % 3] += xi * (k + 1)
            m[k % 2, (k + 1) % 2] = np.sin(xi * k)
            m[(k + i) % 2] = [m[0, 1], xi]
        out[i] = v
        for k in range(n):
            out[i][k % 3] *= xi
            rows[0] += m * xi
            rows[1][k % 2] += [xi, k]
    return out, rows


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_components_at_runtime_indices(mode, monkeypatch):
    monkeypatch.setattr(wp.config, "cpu_parallel", mode)
    x = np.linspace(-1.0, 1.5, 8)
    out = wp.zeros(8, dtype=wp.vec3d)
    rows = wp.zeros(2, dtype=wp.mat22d)
    wp.launch(runtime_components, 8, inputs=[5, wp.array(x, dtype=F64)], outputs=[out, rows])
    want_out, want_rows = _reference(5, x)
    np.testing.assert_allclose(out.numpy(), want_out, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(rows.numpy(), want_rows, rtol=1e-13, atol=1e-13)


def test_gradients_through_components_at_runtime_indices():
    def run(arrays):
        wp.launch(runtime_components, 4, inputs=[5, arrays["x"]],
                  outputs=[arrays["out"], arrays["rows"]])

    check_tape(run, {"x": np.linspace(-1.0, 1.5, 4)},
               {"out": np.zeros((4, 3)), "rows": np.zeros((2, 2, 2))},
               {"x": F64, "out": wp.vec3d, "rows": wp.mat22d}, directions=3)


@wp.kernel
def swap_in_place(x: wp.array(dtype=wp.vec2d), m: wp.array(dtype=wp.mat22d),
                  out: wp.array(dtype=F64)):
    i = wp.tid()
    local = m[i]
    local[0] = wp.vec2d(local[0][1], local[0][0] * x[i][0])  # reads what it assigns
    m[i][1] = wp.vec2d(m[i][1][1], m[i][1][0])  # the same in an array element
    out[i] = local[0, 0] * F64(10.0) + local[0, 1] + m[i][1, 0] * x[i][1]


def test_values_that_read_the_assigned_components_are_taken_first():
    x = wp.array(np.array([[2.0, 3.0]]), dtype=wp.vec2d)
    m = wp.array(np.array([[[1.0, 2.0], [3.0, 4.0]]]), dtype=wp.mat22d)
    out = wp.zeros(1, dtype=F64)
    wp.launch(swap_in_place, 1, inputs=[x, m], outputs=[out])
    # local[0] = (2, 1 * 2); m[0][1] = (4, 3)
    assert out.numpy()[0] == 2.0 * 10.0 + 2.0 + 4.0 * 3.0
    np.testing.assert_array_equal(m.numpy()[0], [[1.0, 2.0], [4.0, 3.0]])


def test_a_constant_component_index_out_of_range_is_an_error():
    @wp.kernel
    def past_the_end(out: wp.array(dtype=wp.vec3)):
        v = wp.vec3()
        v[3] = 1.0
        out[0] = v

    with pytest.raises(wp.KernelError, match="component index 3 is out of range for 3"):
        wp.launch(past_the_end, 1, inputs=[wp.zeros(1, dtype=wp.vec3)])
