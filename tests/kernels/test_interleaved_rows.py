"""Rows of 9 to 16 scalars (mat33, mat44) are vectorized with wide loads and shuffles, not gathers
and scatters (``cpu_llvm.py``: ``-max-interleave-group-factor``); wider elements (mat44,
spatial_matrix) two threads at a time with plain loads (``codegen/strides.py``: ``wide_rows``).

LLVM's vectorizer loads the components of consecutive threads' rows as one interleaved group
only for rows of at most 8 elements by default; a mat33 row took AVX-512 gathers, and its
adjoint scatters, which are slow on AMD Zen 4. Over 1M threads of ``sum m[r, c] * v[c] * v[r]``
on one core: forward 11.4 -> 2.6 ms, backward 24 -> 6-8 ms. 1M mat44: 18.8 -> 5.0 ms and 39.9 ->
14.4 ms; 300k spatial matrices: 21 -> 2.5 ms and 44 -> 6.0 ms.
"""

import platform
import textwrap

import numpy as np
import pytest

import difftape as wp
from tests.fdcheck import check_tape
from tests.fresh_process import IR_OF, run_fresh

_KERNEL = """
@wp.kernel
def quadratic_form(m: wp.array(dtype=MAT), v: wp.array(dtype=VEC), out: wp.array(dtype=FLOAT)):
    i = wp.tid()
    out[i] = wp.dot(v[i], m[i] * v[i])
"""

_SCRIPT = IR_OF + textwrap.dedent("""
    import re
    import numpy as np
    import difftape as wp
""") + textwrap.dedent(_KERNEL).replace("FLOAT", "wp.float32") + textwrap.dedent("""
    wp.config.cpu_parallel = "serial"
    n = 4096
    rng = np.random.default_rng(0)
    m = wp.array(rng.standard_normal((n, SIZE, SIZE)).astype(np.float32), dtype=MAT,
                 requires_grad=True)
    v = wp.array(rng.standard_normal((n, SIZE)).astype(np.float32), dtype=VEC,
                 requires_grad=True)
    out = wp.zeros(n, dtype=wp.float32, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(quadratic_form, dim=n, inputs=[m, v], outputs=[out])
    tape.backward(grads={out: wp.ones_like(out)})
    for adjoint in (False, True):
        ir = ir_of(quadratic_form, adjoint)
        print(bool(re.search(r"fmul <\\d+ x float>", ir)), "masked.gather" in ir,
              "masked.scatter" in ir)
""")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="vector widths and LLVM's cost model differ on other CPUs")
@pytest.mark.parametrize("mat, vec, size", [("wp.mat33", "wp.vec3", 3), ("wp.mat44", "wp.vec4", 4),
                                            ("wp.spatial_matrix", "wp.spatial_vector", 6)])
def test_matrix_rows_vectorize_without_gathers_or_scatters(tmp_path, mat, vec, size):
    script = _SCRIPT.replace("MAT", mat).replace("VEC", vec).replace("SIZE", str(size))
    # forward: vectorized, no gather, no scatter; adjoint: the same
    assert run_fresh(tmp_path, script) == ["True", "False", "False"] * 2


@wp.kernel
def quadratic_form64(m: wp.array(dtype=wp.mat33d), v: wp.array(dtype=wp.vec3d),
                     out: wp.array(dtype=wp.float64)):
    """``_KERNEL`` in float64, for the finite-difference check."""
    i = wp.tid()
    out[i] = wp.dot(v[i], m[i] * v[i])


def test_quadratic_form_gradients_match_finite_differences():
    n = 5
    rng = np.random.default_rng(1)
    dtypes_ = {"m": wp.mat33d, "v": wp.vec3d, "out": wp.float64}

    def run(arrays):
        wp.launch(quadratic_form64, dim=n, inputs=[arrays["m"], arrays["v"]],
                  outputs=[arrays["out"]])

    check_tape(run, {"m": rng.standard_normal((n, 3, 3)), "v": rng.standard_normal((n, 3))},
               {"out": np.zeros(n)}, dtypes_, directions=3)


_GUARDED_SCRIPT = IR_OF + textwrap.dedent("""
    import re
    import numpy as np
    import difftape as wp

    @wp.kernel
    def rope(x: wp.array(dtype=wp.vec3), rest: float, out: wp.array(dtype=float)):
        i = wp.tid()
        if i < x.shape[0] - 1:  # rows read under a branch: masked interleaved loads
            d = x[i + 1] - x[i]
            out[i] = wp.length(d) - rest

    wp.config.cpu_parallel = "serial"
    x = wp.array(np.random.default_rng(0).random((4096, 3)).astype(np.float32), dtype=wp.vec3)
    out = wp.zeros(4096, dtype=float)
    wp.launch(rope, dim=4096, inputs=[x, 0.5], outputs=[out])
    ir = ir_of(rope)
    print(bool(re.search(r"f(add|sub|mul) <\\d+ x float>", ir)), "masked.gather" in ir)
    want = np.linalg.norm(x.numpy()[1:] - x.numpy()[:-1], axis=1) - 0.5
    print(bool(np.allclose(out.numpy()[:-1], want, rtol=1e-6)))
""")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="vector widths and LLVM's cost model differ on other CPUs")
def test_rows_read_under_a_branch_vectorize_without_gathers(tmp_path):
    # cpu_llvm.py: -enable-masked-interleaved-mem-accesses (1M rope segments 3.8 -> 0.66 ms)
    assert run_fresh(tmp_path, _GUARDED_SCRIPT) == ["True", "False", "True"]


_STORED_SCRIPT = IR_OF + textwrap.dedent("""
    import re
    import numpy as np
    import difftape as wp

    @wp.kernel
    def gram(m: wp.array(dtype=wp.mat33), out: wp.array(dtype=wp.mat33)):
        i = wp.tid()
        out[i] = wp.transpose(m[i]) * m[i]  # a mat33 row stored per thread

    wp.config.cpu_parallel = "serial"
    m = np.random.default_rng(0).random((4096, 3, 3)).astype(np.float32)
    out = wp.zeros(4096, dtype=wp.mat33)
    wp.launch(gram, dim=4096, inputs=[wp.array(m, dtype=wp.mat33)], outputs=[out])
    widths = {int(w) for w in re.findall(r"<(\\d+) x float>", ir_of(gram))}
    print(max(widths), bool(np.allclose(out.numpy(), m.transpose(0, 2, 1) @ m, rtol=1e-5)))
""")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="vector widths and LLVM's cost model differ on other CPUs")
def test_forwards_storing_mat33_rows_vectorize_four_threads_at_a_time(tmp_path):
    # codegen/strides.stores_interleaved_rows: 4 threads x 9 floats, not 16 x 9 (shuffles)
    assert run_fresh(tmp_path, _STORED_SCRIPT) == ["36", "True"]
