"""A thread loop that stores many array elements per thread still vectorizes (``cpu_llvm.py``).

Each element a thread stores costs LLVM's vectorizer one run-time check that its address does
not wrap around; past 16 of them (LLVM's default limit) the loop stayed scalar. The adjoint of a
rigid-transform kernel adds into a mat33, a quat and three vec3 adjoints (22 elements): at 1M
threads it took 120-180 ms scalar and 38 ms vectorized, against its forward's 10 ms.
"""

import platform
import textwrap

import numpy as np
import pytest

import difftape as wp
from difftape._src.backends import cpu_llvm
from tests.fdcheck import check_tape
from tests.fresh_process import IR_OF, run_fresh

_KERNEL = """
@wp.kernel
def xform(q: wp.array(dtype=QUAT), t: wp.array(dtype=VEC3), p: wp.array(dtype=VEC3),
          m: wp.array(dtype=MAT33), out: wp.array(dtype=VEC3)):
    i = wp.tid()
    T = wp.transform(t[i], wp.normalize(q[i]))
    a = wp.transform_point(T, p[i])
    b = wp.quat_rotate_inv(q[i], a)
    out[i] = wp.inverse(m[i]) * (m[i] * b + wp.cross(a, b))
"""



@wp.kernel
def xform64(q: wp.array(dtype=wp.quatd), t: wp.array(dtype=wp.vec3d),
            p: wp.array(dtype=wp.vec3d), m: wp.array(dtype=wp.mat33d),
            out: wp.array(dtype=wp.vec3d)):
    """``_KERNEL`` in float64, for the finite-difference check."""
    i = wp.tid()
    T = wp.transformd(t[i], wp.normalize(q[i]))
    a = wp.transform_point(T, p[i])
    b = wp.quat_rotate_inv(q[i], a)
    out[i] = wp.inverse(m[i]) * (m[i] * b + wp.cross(a, b))


def _inputs(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    m = np.eye(3)[None] * 2.0 + 0.3 * rng.standard_normal((n, 3, 3))
    return {"q": rng.standard_normal((n, 4)), "t": rng.standard_normal((n, 3)),
            "p": rng.standard_normal((n, 3)), "m": m}


def test_transform_gradients_match_finite_differences():
    n = 7
    dtypes_ = {"q": wp.quatd, "t": wp.vec3d, "p": wp.vec3d, "m": wp.mat33d, "out": wp.vec3d}

    def run(arrays):
        wp.launch(xform64, dim=n, inputs=[arrays[k] for k in "qtpm"], outputs=[arrays["out"]])

    check_tape(run, _inputs(n), {"out": np.zeros((n, 3))}, dtypes_, directions=3)


def test_options_are_set_once_per_process(monkeypatch):
    """Importing difftape set them; setting them again (a reloaded difftape) changes nothing."""
    calls = []
    monkeypatch.setattr(cpu_llvm.llvm, "set_option", lambda *args: calls.append(args))
    cpu_llvm.apply()
    assert calls == []
    assert f"-vectorize-scev-check-threshold={cpu_llvm.SCEV_CHECK_THRESHOLD}" in cpu_llvm.stamp()


_SCRIPT = IR_OF + textwrap.dedent("""
    import re
    import numpy as np
    import difftape as wp
""") + textwrap.dedent(_KERNEL).replace("QUAT", "wp.quat").replace(
    "VEC3", "wp.vec3").replace("MAT33", "wp.mat33") + textwrap.dedent("""
    wp.config.cpu_parallel = "serial"
    n = 4096
    rng = np.random.default_rng(0)
    args = [wp.array(rng.standard_normal((n, 4)).astype(np.float32), dtype=wp.quat,
                     requires_grad=True)]
    args += [wp.array(rng.standard_normal((n, 3)).astype(np.float32), dtype=wp.vec3,
                      requires_grad=True) for _ in range(2)]
    m = (np.eye(3)[None] * 2.0 + 0.3 * rng.standard_normal((n, 3, 3))).astype(np.float32)
    args.append(wp.array(m, dtype=wp.mat33, requires_grad=True))
    out = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(xform, dim=n, inputs=args, outputs=[out])
    tape.backward(grads={out: wp.ones_like(out)})
    print(bool(np.isfinite(args[3].grad.numpy()).all()))
    for adjoint in (False, True):
        print(bool(re.search(r"fmul <\\d+ x float>", ir_of(xform, adjoint))))
""")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="vector widths and LLVM's cost model differ on other CPUs")
def test_forward_and_adjoint_of_the_transform_kernel_vectorize(tmp_path):
    assert run_fresh(tmp_path, _SCRIPT) == ["True", "True", "True"]
