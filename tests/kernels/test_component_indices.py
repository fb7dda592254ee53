"""Vector and matrix components at indices known only at run time: negative indices count from
the end (Warp's rule, for reads and writes alike), and debug mode raises for an index outside
[-n, n) where release code would read the last component or write none."""

import numpy as np
import pytest

import difftape as wp
from tests.fdcheck import check_tape
from tests.kernels.modes import debug_reference

F64 = wp.float64


@wp.kernel
def read_and_write(x: wp.array(dtype=wp.vec3d), m: wp.array(dtype=wp.mat22d),
                   k: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.vec3d),
                   rows: wp.array(dtype=wp.mat22d)):
    i = wp.tid()
    v = x[i]
    c = k[i]
    v[c] = v[c] * v[c - 1]  # a local's component
    local = m[i]
    local[c] = wp.vec2d(local[-1 - c, 1], v[c])  # a row
    out[i] = v
    out[i][-c - 1] = out[i][-c - 1] * local[1, c]  # an array element's component
    rows[i] = local
    rows[i][c, -1 - c] += x[i][c]  # an atomic add into a matrix element's component


def _reference(x, m, k):
    out, rows = np.zeros_like(x), np.zeros_like(m)
    for i, c in enumerate(k):
        v = x[i].copy()
        v[c] = v[c] * v[c - 1]
        local = m[i].copy()
        local[c] = [local[-1 - c, 1], v[c]]
        out[i] = v
        out[i][-c - 1] *= local[1, c]
        rows[i] = local
        rows[i][c, -1 - c] += x[i][c]
    return out, rows


def _inputs(k):
    rng = np.random.default_rng(3)
    n = len(k)
    return rng.uniform(-2.0, 2.0, (n, 3)), rng.uniform(-2.0, 2.0, (n, 2, 2)), np.array(
        k, dtype=np.int32)


def _launch(x, m, k):
    out = wp.zeros(len(k), dtype=wp.vec3d)
    rows = wp.zeros(len(k), dtype=wp.mat22d)
    wp.launch(read_and_write, len(k), inputs=[wp.array(x, dtype=wp.vec3d),
                                              wp.array(m, dtype=wp.mat22d), wp.array(k)],
              outputs=[out, rows])
    return out.numpy(), rows.numpy()


@pytest.mark.parametrize("debug", [False, True])
def test_negative_runtime_indices_count_from_the_end(debug):
    x, m, k = _inputs([0, 1, -1, -2, 1, 0])
    got = debug_reference(lambda: _launch(x, m, k)) if debug else _launch(x, m, k)
    want = _reference(x, m, k)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-14)


def test_gradients_through_negative_runtime_indices():
    x, m, k = _inputs([1, -1, -2, 0])
    k_array = wp.array(k)

    def run(arrays):
        wp.launch(read_and_write, 4, inputs=[arrays["x"], arrays["m"], k_array],
                  outputs=[arrays["out"], arrays["rows"]])

    check_tape(run, {"x": x, "m": m}, {"out": np.zeros((4, 3)), "rows": np.zeros((4, 2, 2))},
               {"x": wp.vec3d, "m": wp.mat22d, "out": wp.vec3d, "rows": wp.mat22d},
               directions=3)


def test_a_constant_negative_index_assigns_from_the_end():
    @wp.kernel
    def last(out: wp.array(dtype=wp.vec3)):
        v = wp.vec3()
        v[-1] = 1.0
        v[-3] = 2.0
        out[0] = v

    out = wp.zeros(1, dtype=wp.vec3)
    wp.launch(last, 1, outputs=[out])
    np.testing.assert_array_equal(out.numpy(), [[2.0, 0.0, 1.0]])


@wp.kernel
def reads(x: wp.array(dtype=wp.vec3), k: wp.array(dtype=wp.int32), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = x[i][k[i]]


@wp.kernel
def local_writes(k: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v = wp.vec3()
    v[k[i]] = 1.0
    out[i] = v


@wp.kernel
def element_adds(k: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[0][k[i]] += 1.0


@wp.kernel
def matrix_columns(m: wp.array(dtype=wp.mat33), k: wp.array(dtype=wp.int32),
                   out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = m[i][1, k[i]]


@wp.kernel
def matrix_rows(m: wp.array(dtype=wp.mat33), k: wp.array(dtype=wp.int32),
                out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    local = m[i]
    local[k[i]] = wp.vec3(1.0, 2.0, 3.0)
    out[i] = local[0]


_CASES = {
    "reads": (reads, "out[i] = x[i][k[i]]", "the 3 components of a vec3f",
              lambda n: [wp.zeros(n, dtype=wp.vec3), None, wp.zeros(n, dtype=float)]),
    "local_writes": (local_writes, "v[k[i]] = 1.0", "the 3 components of a vec3f",
                     lambda n: [None, wp.zeros(n, dtype=wp.vec3)]),
    "element_adds": (element_adds, "out[0][k[i]] += 1.0", "the 3 components of a vec3f",
                     lambda n: [None, wp.zeros(n, dtype=wp.vec3)]),
    "matrix_columns": (matrix_columns, "out[i] = m[i][1, k[i]]", "the 3 columns of a mat33f",
                       lambda n: [wp.zeros(n, dtype=wp.mat33), None, wp.zeros(n, dtype=float)]),
    "matrix_rows": (matrix_rows, "local[k[i]] = wp.vec3(1.0, 2.0, 3.0)",
                    "the 3 rows of a mat33f",
                    lambda n: [wp.zeros(n, dtype=wp.mat33), None, wp.zeros(n, dtype=wp.vec3)]),
}


def _launch_case(name, k):
    kernel, _, _, arrays = _CASES[name]
    args = [wp.array(np.array(k, dtype=np.int32)) if a is None else a for a in arrays(len(k))]
    wp.launch(kernel, len(k), inputs=args)


@pytest.mark.parametrize("name", sorted(_CASES))
@pytest.mark.parametrize("bad", [3, -4, 1 << 20])
def test_debug_mode_catches_a_runtime_component_index_out_of_range(name, bad):
    _, text, what, _ = _CASES[name]
    _launch_case(name, [0, 2, bad, 1])  # release: not checked (as in Warp)
    with pytest.raises(wp.ArrayIndexError) as caught:
        debug_reference(lambda: _launch_case(name, [0, 2, bad, 1]))
    message = str(caught.value)
    assert f"in kernel '{_CASES[name][0].key}' (forward)" in message
    assert f"component index {bad} is out of range for {what}" in message
    assert __file__ in message and text in message
    debug_reference(lambda: _launch_case(name, [0, 2, -3, -1]))  # in range: no error


def test_debug_mode_checks_the_backward_sweep_too(monkeypatch):
    monkeypatch.setattr(wp.config, "overwrite_check", "off")  # the overwrite below is the point
    x = wp.array(np.ones((2, 3), dtype=np.float32), dtype=wp.vec3, requires_grad=True)
    k = wp.array(np.array([0, 1], dtype=np.int32))
    out = wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(reads, 2, inputs=[x, k, out])
    k.assign(np.array([0, 5], dtype=np.int32))  # changed after the forward
    with pytest.raises(wp.ArrayIndexError, match=r"\(adjoint\): component index 5"):
        debug_reference(lambda: tape.backward(grads={out: wp.ones(2, dtype=float)}))


def test_release_code_has_no_checks_and_debug_code_checks_each_runtime_index():
    release, debug = reads.source(), debug_reference(reads.source)
    assert "rt_check_component" not in release
    assert debug.count("rt_check_component(") >= 2  # the forward's and the adjoint's replay


def test_static_loops_unrolled_leave_nothing_to_check():
    @wp.kernel
    def trace(m: wp.array(dtype=wp.mat33), out: wp.array(dtype=float)):
        i = wp.tid()
        s = float(0.0)
        for k in range(3):
            s += m[i][k, k] + m[i][k - 3, -1 - k]
        out[i] = s

    assert "rt_check_component" not in debug_reference(trace.source)
    m = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
    out = wp.zeros(2, dtype=float)
    debug_reference(lambda: wp.launch(trace, 2, inputs=[wp.array(m, dtype=wp.mat33)],
                                      outputs=[out]))
    np.testing.assert_allclose(out.numpy(), [np.trace(a) + np.trace(a[:, ::-1]) for a in m])


@wp.kernel
def guarded(x: wp.array(dtype=wp.vec3), k: wp.array(dtype=wp.int32), out: wp.array(dtype=int)):
    i = wp.tid()
    c = k[i]
    if c < 3 and x[i][c] > 0.0:  # the index is checked only where it is used
        out[i] = 1
    n = int(0)
    while n < 3 and x[i][n] > 0.0:
        n += 1
    out[i] += n * 10


def test_checks_follow_short_circuits_and_while_conditions():
    x = wp.array(np.array([[1.0, 2.0, -1.0], [-1.0, 1.0, 1.0]], dtype=np.float32), dtype=wp.vec3)
    k = wp.array(np.array([1, 7], dtype=np.int32))
    for run in (lambda f: f(), debug_reference):
        out = wp.zeros(2, dtype=int)
        run(lambda: wp.launch(guarded, 2, inputs=[x, k], outputs=[out]))
        np.testing.assert_array_equal(out.numpy(), [21, 0])
