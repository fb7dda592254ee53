"""Kernels whose threads read rows of 2-D arrays (``q[i, k]``) are vectorized with gathers where
they do enough arithmetic per row access, and left scalar where they mostly move rows
(``codegen/strides.py``, ``cpu_llvm.compile_under``).

The benchmark's rigid chain (8 joint angles a thread from ``q[i, k]``) ran its forward in 45 ms
and its backward in 72 ms scalar at 200k robots on one core, 10 and 17.5 ms vectorized.
"""

import os
import platform
import textwrap

import numpy as np
import pytest

import difftape as wp
from difftape._src.codegen import strides
from difftape._src.codegen.structure import structure
from tests.fdcheck import check_tape
from tests.fresh_process import IR_OF, run_fresh

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

@wp.kernel
def chain32(q: wp.array2d(dtype=wp.float32), link: wp.array(dtype=wp.vec3),
            tip: wp.array(dtype=wp.vec3)):
    """Two links of the benchmark's rigid chain."""
    i = wp.tid()
    x = wp.transform(link[0], wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), q[i, 0]))
    x = x * wp.transform(link[1], wp.quat_from_axis_angle(wp.vec3(0.0, 1.0, 0.0), q[i, 1]))
    tip[i] = wp.transform_point(x, link[0])


@wp.kernel
def chain64(q: wp.array2d(dtype=wp.float64), link: wp.array(dtype=wp.vec3d),
            tip: wp.array(dtype=wp.vec3d)):
    """``chain32`` in float64, for the finite-difference check."""
    i = wp.tid()
    z, y = wp.vec3d(0.0, 0.0, 1.0), wp.vec3d(0.0, 1.0, 0.0)
    x = wp.transformd(link[0], wp.quat_from_axis_angle(z, q[i, 0]))
    x = x * wp.transformd(link[1], wp.quat_from_axis_angle(y, q[i, 1]))
    tip[i] = wp.transform_point(x, link[0])


@wp.kernel
def columns(x: wp.array2d(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = x[i, 0] * 2.0 + x[i, 1]


@wp.kernel
def along_rows(x: wp.array2d(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = wp.sin(x[0, i]) * wp.cos(x[1, i]) + wp.sin(x[0, i] * x[1, i])


def _decision(kernel) -> tuple[tuple[int, int], bool]:
    body = structure(kernel.ir)
    return strides.counts(body), strides.gathers_pay(body)


def test_decisions():
    """Two row reads and ~130 operations: gathers pay. Two row reads and two operations: not.
    Rows indexed by constants only step along a row, by 1: nothing to decide."""
    (rows, work), pays = _decision(chain32)
    assert rows == 2 and work >= strides.WORK_PER_ROW_ACCESS * rows and pays
    assert _decision(columns) == ((2, 2), False)
    (rows, _), pays = _decision(along_rows)
    assert rows == 0 and not pays


def test_the_decision_is_in_the_generated_source():
    """The option is part of the module's text, hence of its content hash: a cached module
    compiled without it is not reused."""
    n = 16
    q = wp.array(np.zeros((n, 2), np.float32), dtype=wp.float32)
    link = wp.array(np.ones((2, 3), np.float32), dtype=wp.vec3)
    wp.launch(chain32, dim=n, inputs=[q, link], outputs=[wp.zeros(n, dtype=wp.vec3)])
    x = wp.array(np.zeros((n, 2), np.float32), dtype=wp.float32)
    wp.launch(columns, dim=n, inputs=[x], outputs=[wp.zeros(n, dtype=wp.float32)])
    sources = [next(iter(k._built.values())).source for k in (chain32, columns)]
    assert "LLVM_OPTIONS = ('-enable-mem-access-versioning=false',)" in sources[0]
    assert "LLVM_OPTIONS" not in sources[1]


def _chain_inputs(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"q": rng.uniform(-np.pi, np.pi, (n, 2)), "link": rng.uniform(0.2, 0.6, (2, 3))}


def test_gathered_kernel_gradients_match_finite_differences():
    """Enough robots that the vectorized loop body runs, not only its scalar remainder."""
    n = 37

    def run(arrays):
        wp.launch(chain64, dim=n, inputs=[arrays["q"], arrays["link"]],
                  outputs=[arrays["tip"]])

    check_tape(run, _chain_inputs(n), {"tip": np.zeros((n, 3))},
               {"q": wp.float64, "link": wp.vec3d, "tip": wp.vec3d}, directions=3)


def test_float32_gradients_match_float64():
    n = 3001
    inputs = _chain_inputs(n, seed=1)
    grads = {}
    for kernel, real, vec, np_real in ((chain32, wp.float32, wp.vec3, np.float32),
                                       (chain64, wp.float64, wp.vec3d, np.float64)):
        q = wp.array(inputs["q"].astype(np_real), dtype=real, requires_grad=True)
        link = wp.array(inputs["link"].astype(np_real), dtype=vec, requires_grad=True)
        tip = wp.zeros(n, dtype=vec, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, dim=n, inputs=[q, link], outputs=[tip])
        tape.backward(grads={tip: wp.ones_like(tip)})
        grads[real] = (q.grad.numpy(), link.grad.numpy())
    for single, double in zip(grads[wp.float32], grads[wp.float64]):
        np.testing.assert_allclose(single, double, rtol=1e-4, atol=1e-4 * np.abs(double).max())


_SCRIPT = IR_OF + textwrap.dedent(f"""
    import re
    import sys
    sys.path.insert(0, {ROOT!r})
    import numba
    import numpy as np
    import difftape as wp
    from difftape._src.backends import cpu_llvm
    from tests.kernels.test_strided_vectorize import chain32, columns
""") + textwrap.dedent("""
    wp.config.cpu_parallel = "serial"
    n = 256
    q = wp.array(np.ones((n, 2), np.float32), dtype=wp.float32, requires_grad=True)
    link = wp.array(np.ones((2, 3), np.float32), dtype=wp.vec3, requires_grad=True)
    tip = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(chain32, dim=n, inputs=[q, link], outputs=[tip])
    tape.backward(grads={tip: wp.ones_like(tip)})
    wp.launch(columns, dim=n, inputs=[q], outputs=[wp.zeros(n, dtype=wp.float32)])

    def versioned(ir):
        # Whether the vector body runs only where a row is 1 element long.
        return bool(re.search(r"icmp (ne|eq) i64 %arg\\.\\w+\\.5\\.1, 1\\b", ir))

    for ir in (ir_of(chain32), ir_of(chain32, adjoint=True), ir_of(columns)):
        print(versioned(ir))

    # The option holds for one compilation only: the same loop compiled under it and after it.
    def rows(x, y):
        for i in range(x.shape[0]):
            a = x[i, 0]
            b = x[i, 1]
            s = a * b + a
            s = s * s + b
            s = s * a + s * b
            s = s * s - a * b
            s = s * a + b * s
            s = s * s + a
            s = s * b - a
            y[i] = s * s + s
    under, after = numba.njit(rows), numba.njit(rows)
    cpu_llvm.compile_under(under, (cpu_llvm.NO_STRIDE_VERSIONING,))
    x, y = np.ones((n, 2), np.float32), np.zeros(n, np.float32)
    under(x, y)
    after(x, y)
    for f in (under, after):
        print(versioned(next(iter(f.inspect_llvm().values()))))
""")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="vector widths and LLVM's cost model differ on other CPUs")
def test_heavy_row_kernels_are_not_versioned_on_the_row_length(tmp_path):
    """The chain's forward and adjoint vectorize unconditionally (with gathers); ``columns``
    keeps LLVM's check that ``x.shape[1] == 1``, and so does a plain Numba function compiled
    after a function compiled under the option: the option holds for one compilation.
    (``.5.1`` in Numba's IR: an array argument's ``shape[1]``.)"""
    assert run_fresh(tmp_path, _SCRIPT) == ["False", "False", "True", "False", "True"]


# ---------------------------------------------------------------- strided views of 1-D arrays


@wp.kernel
def sine_times(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = wp.sin(x[i]) * x[i]


@wp.kernel
def sine_times64(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = wp.sin(x[i]) * x[i]


@wp.kernel
def doubled(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = x[i] * 2.0


def test_strided_decisions():
    """A sine per element pays for gathers over strided views; a product does not; a kernel
    with row accesses is left to ``gathers_pay``; vector arrays are not counted."""
    decide = [strides.strided_forward_pays(structure(k.ir))
              for k in (sine_times, doubled, chain32, along_rows)]
    assert decide == [True, False, False, True]
    sources = {}
    for kernel in (sine_times, doubled):
        x = wp.zeros(8, dtype=wp.float32)
        wp.launch(kernel, dim=4, inputs=[x[::2]], outputs=[wp.zeros(4, dtype=wp.float32)])
        sources[kernel] = next(iter(kernel._built.values())).source
    assert "FORWARD_LLVM_OPTIONS = ('-enable-mem-access-versioning=false',)" in sources[sine_times]
    assert "FORWARD_LLVM_OPTIONS" not in sources[doubled]


@pytest.mark.parametrize("step", [2, 3])
def test_strided_view_values_and_gradients(step):
    n = 301  # past the vectorized loop's width, with a remainder
    rng = np.random.default_rng(step)
    base = rng.uniform(-3.0, 3.0, n * step)

    def run(arrays):
        wp.launch(sine_times64, dim=n, inputs=[arrays["x"][::step]], outputs=[arrays["y"]])

    check_tape(run, {"x": base}, {"y": np.zeros(n)}, {"x": wp.float64, "y": wp.float64})
    x = wp.array(base.astype(np.float32), dtype=wp.float32, requires_grad=True)
    y = wp.zeros(n, dtype=wp.float32, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(sine_times, dim=n, inputs=[x[1::step]], outputs=[y])
    tape.backward(grads={y: wp.ones_like(y)})
    xs = base[1::step].astype(np.float32)
    np.testing.assert_allclose(y.numpy(), np.sin(xs) * xs, rtol=1e-6, atol=1e-6)
    grad = np.zeros(n * step, np.float32)
    grad[1::step] = np.cos(xs) * xs + np.sin(xs)
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-5, atol=1e-5)


_STRIDED_SCRIPT = IR_OF + textwrap.dedent(f"""
    import re
    import sys
    sys.path.insert(0, {ROOT!r})
    import numpy as np
    import difftape as wp
    from tests.kernels.test_strided_vectorize import doubled, sine_times
""") + textwrap.dedent("""
    wp.config.cpu_parallel = "serial"
    x = wp.array(np.ones(512, np.float32), dtype=wp.float32)
    for kernel in (sine_times, doubled):
        wp.launch(kernel, dim=256, inputs=[x[::2]], outputs=[wp.zeros(256, dtype=wp.float32)])
        # Whether the vector body runs only where the view's stride is one element.
        print(bool(re.search(r"icmp (ne|eq) i64 %arg\\.x\\.6\\.0, 1\\b", ir_of(kernel))))
""")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="vector widths and LLVM's cost model differ on other CPUs")
def test_heavy_forwards_over_strided_views_are_not_versioned(tmp_path):
    """``sine_times`` over ``x[::2]`` vectorizes (with gathers); ``doubled`` keeps LLVM's check
    that the stride is 1, and runs scalar over the view. (``.6.0`` in Numba's IR: an array
    argument's ``strides[0]``.)"""
    assert run_fresh(tmp_path, _STRIDED_SCRIPT) == ["False", "True"]
