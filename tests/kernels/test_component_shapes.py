"""Generated functions first test that every vector and matrix array has its element's shape as
trailing dimensions (``cpu._component_shape_guard``): past the test LLVM knows a row's length,
so loops over vec3 arrays vectorize. Missing adjoints of such arrays are stand-ins of that shape
too, and gradients stay exact."""

import textwrap

import numpy as np

import difftape as wp
from tests.fdcheck import check_tape
from tests.fresh_process import IR_OF, run_fresh


@wp.kernel
def integrate(x: wp.array(dtype=wp.vec3d), v: wp.array(dtype=wp.vec3d),
              f: wp.array(dtype=wp.vec3d), dt: wp.float64,
              x1: wp.array(dtype=wp.vec3d), v1: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    vn = v[i] + f[i] * dt
    v1[i] = vn
    x1[i] = x[i] + vn * dt


@wp.kernel
def transform_rows(m: wp.array2d(dtype=wp.mat33d), p: wp.array2d(dtype=wp.vec3d),
                   out: wp.array2d(dtype=wp.vec3d)):
    i, j = wp.tid()
    out[i, j] = m[i, j] * p[i, j]


def test_every_vector_and_matrix_array_is_checked():
    forward, adjoint = integrate.source().split("def integrate_adjoint")
    guard = next(line for line in forward.splitlines() if "raise ValueError" in line)
    assert all(f"{a}.shape[1] != 3" in guard for a in ("x", "v", "f", "x1", "v1"))
    guard = next(line for line in adjoint.splitlines() if "raise ValueError" in line)
    assert all(f"adj_{a}.shape[1] != 3" in guard for a in ("x", "v", "f", "x1", "v1"))
    guard = next(line for line in transform_rows.source().splitlines()
                 if "raise ValueError" in line)
    assert "m.shape[2] != 3 or m.shape[3] != 3" in guard and "p.shape[2] != 3" in guard


def test_gradients_with_and_without_every_adjoint():
    rng = np.random.default_rng(0)
    n = 37
    state = {name: rng.standard_normal((n, 3)) for name in ("x", "v", "f")}
    outputs = {"x1": np.zeros((n, 3)), "v1": np.zeros((n, 3))}
    types = dict.fromkeys([*state, *outputs], wp.vec3d)

    def run(a):
        wp.launch(integrate, dim=n, inputs=[a["x"], a["v"], a["f"], 0.01],
                  outputs=[a["x1"], a["v1"]])

    check_tape(run, state, outputs, types)
    # Only f differentiated: x's and v's adjoints are missing (the launcher's stand-ins).
    x = wp.array(state["x"], dtype=wp.vec3d)
    v = wp.array(state["v"], dtype=wp.vec3d)
    f = wp.array(state["f"], dtype=wp.vec3d, requires_grad=True)
    x1 = wp.zeros(n, dtype=wp.vec3d, requires_grad=True)
    v1 = wp.zeros(n, dtype=wp.vec3d, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(integrate, dim=n, inputs=[x, v, f, 0.01], outputs=[x1, v1])
    tape.backward(grads={x1: wp.ones_like(x1), v1: wp.zeros_like(v1)})
    np.testing.assert_allclose(f.grad.numpy(), np.full((n, 3), 0.01 * 0.01))


def test_matrix_rows_match_numpy():
    rng = np.random.default_rng(1)
    ms, ps = rng.standard_normal((4, 5, 3, 3)), rng.standard_normal((4, 5, 3))
    out = wp.zeros((4, 5), dtype=wp.vec3d)
    wp.launch(transform_rows, dim=(4, 5), inputs=[wp.array(ms, dtype=wp.mat33d),
                                                  wp.array(ps, dtype=wp.vec3d)], outputs=[out])
    np.testing.assert_allclose(out.numpy(), np.einsum("ijab,ijb->ija", ms, ps), rtol=1e-12)


_VECTORIZED = IR_OF + textwrap.dedent("""
    import re
    import difftape as wp

    @wp.kernel
    def integrate(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                  f: wp.array(dtype=wp.vec3), dt: float,
                  x1: wp.array(dtype=wp.vec3), v1: wp.array(dtype=wp.vec3)):
        i = wp.tid()
        vn = v[i] + f[i] * dt
        v1[i] = vn
        x1[i] = x[i] + vn * dt

    wp.config.cpu_parallel = "serial"
    arrays = [wp.ones(4096, dtype=wp.vec3, requires_grad=True) for _ in range(5)]
    tape = wp.Tape()
    with tape:
        wp.launch(integrate, dim=4096, inputs=[*arrays[:3], 0.5], outputs=arrays[3:])
    tape.backward(grads={arrays[3]: wp.ones_like(arrays[3]), arrays[4]: wp.ones_like(arrays[4])})
    print(arrays[3].numpy()[0, 0], arrays[2].grad.numpy()[0, 0])
    for adjoint in (False, True):
        print(bool(re.search(r"fmul <\\d+ x float>", ir_of(integrate, adjoint))))
""")


def test_vec3_loops_vectorize(tmp_path):
    """Without the shape test, Numba reads the row length of a vec3 array at run time and
    LLVM kept this loop scalar, forward and adjoint (0.35 ms against 0.22 at 100k)."""
    assert run_fresh(tmp_path, _VECTORIZED) == ["1.75", "0.75", "True", "True"]
