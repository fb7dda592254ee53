"""``difftape.autograd`` (SPEC §4.6, §6 item 42): Jacobians, gradcheck, gradcheck_tape, plots.

Layouts and error texts are Warp 1.19's. Beyond Warp: gradcheck_tape names the first launch whose
adjoint disagrees with finite differences, and probing never disturbs a pending tape.
"""

from __future__ import annotations

import inspect
import subprocess
import sys

import numpy as np
import pytest

import difftape as wp
import difftape.autograd as ag


@wp.kernel
def my_kernel(a: wp.array(dtype=float), b: wp.array(dtype=float),
              out1: wp.array(dtype=float), out2: wp.array(dtype=float)):
    tid = wp.tid()
    ai = a[tid]
    bi = b[tid]
    out1[tid] = ai * bi + wp.sin(ai)
    out2[tid] = bi * bi / (ai + 2.0)


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def stepped(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    """A jump the adjoint cannot see: floor() has zero derivative, finite differences do not."""
    i = wp.tid()
    y[i] = 2.0 * x[i] + wp.floor(x[i] * 1000.0) / 1000.0


@wp.kernel(enable_backward=False)
def no_backward(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i]


@wp.kernel
def sum_3d(x: wp.array3d(dtype=float), y: wp.array(dtype=float)):
    i, j, k = wp.tid()
    y[i * 6 + j * 2 + k] = x[i, j, k] * 3.0


def arr(values, dtype=float):
    return wp.array(np.asarray(values, np.float32), dtype=dtype, requires_grad=True)


def my_kernel_args():
    return ([arr([2.0, -1.1]), arr([0.5, 3.0])],
            [wp.zeros(2, dtype=float, requires_grad=True),
             wp.zeros(2, dtype=float, requires_grad=True)])


# --------------------------------------------------------------------------- module


def test_autograd_is_an_explicit_submodule():
    code = "import difftape; print(hasattr(difftape, 'autograd')); import difftape.autograd; " \
           "print(sorted(difftape.autograd.__all__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0] == "False"
    assert out[1] == str(["FunctionMetadata", "gradcheck", "gradcheck_tape", "jacobian",
                          "jacobian_fd", "jacobian_plot"])


# --------------------------------------------------------------------------- jacobians


def test_kernel_jacobian_values_layout_and_metadata():
    inputs, outputs = my_kernel_args()
    meta = ag.FunctionMetadata()
    jacs = ag.jacobian(my_kernel, dim=2, inputs=inputs, outputs=outputs, metadata=meta)
    assert sorted(jacs) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    a, b = inputs[0].numpy().astype(np.float64), inputs[1].numpy().astype(np.float64)
    np.testing.assert_allclose(jacs[0, 0].numpy(), np.diag(b + np.cos(a)), rtol=1e-5)
    np.testing.assert_allclose(jacs[1, 1].numpy(), np.diag(2 * b / (a + 2)), rtol=1e-5)
    assert jacs[0, 0].shape == (2, 2) and jacs[0, 0].dtype is wp.float32
    assert (meta.key, meta.input_labels, meta.output_labels) == ("my_kernel", ["a", "b"],
                                                                 ["out1", "out2"])
    assert meta.input_is_array(0) and meta.output_dtypes == [wp.float32, wp.float32]
    fd = ag.jacobian_fd(my_kernel, dim=2, inputs=inputs, outputs=outputs, eps=1e-3)
    for key in jacs:
        np.testing.assert_allclose(fd[key].numpy(), jacs[key].numpy(), atol=2e-2)


def test_nan_outside_max_outputs_and_max_inputs():
    inputs, outputs = my_kernel_args()
    ad = ag.jacobian(my_kernel, dim=2, inputs=inputs, outputs=outputs, max_outputs_per_var=1)
    assert not np.isnan(ad[0, 0].numpy()[0]).any() and np.isnan(ad[0, 0].numpy()[1]).all()
    fd = ag.jacobian_fd(my_kernel, dim=2, inputs=inputs, outputs=outputs, max_inputs_per_var=1)
    assert not np.isnan(fd[0, 0].numpy()[:, 0]).any() and np.isnan(fd[0, 0].numpy()[:, 1]).all()


@pytest.mark.parametrize("mask", [[("a", "out2")], [(0, 1)], [("a", 1)]])
def test_masks_by_name_and_index(mask):
    inputs, outputs = my_kernel_args()
    assert list(ag.jacobian(my_kernel, dim=2, inputs=inputs, outputs=outputs,
                            input_output_mask=mask)) == [(0, 1)]
    assert list(ag.jacobian_fd(my_kernel, dim=2, inputs=inputs, outputs=outputs,
                               input_output_mask=mask)) == [(0, 1)]


def test_three_dimensional_input_gives_6x6():
    x = wp.array(np.arange(6, dtype=np.float32).reshape(1, 3, 2), dtype=float,
                 requires_grad=True)
    y = wp.zeros(6, dtype=float, requires_grad=True)
    jac = ag.jacobian(sum_3d, dim=(1, 3, 2), inputs=[x], outputs=[y])[0, 0]
    assert jac.shape == (6, 6)
    np.testing.assert_array_equal(jac.numpy(), 3.0 * np.eye(6))


def test_python_function_jacobian_of_square_is_diag():
    def fn(x):
        y = wp.zeros_like(x)
        wp.launch(square, 3, inputs=[x], outputs=[y])
        return y

    x = arr([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(ag.jacobian(fn, inputs=[x])[0, 0].numpy(), np.diag([2, 4, 6]))
    np.testing.assert_allclose(ag.jacobian_fd(fn, inputs=[x])[0, 0].numpy(),
                               np.diag([2, 4, 6]), atol=1e-2)
    assert x.numpy().tolist() == [1.0, 2.0, 3.0]


@pytest.mark.skipif(not (hasattr(wp, "vec3") and hasattr(wp, "quat")),
                    reason="vector types arrive with issue 3")
def test_vector_layouts_pack_input_components():
    @wp.kernel
    def mixed(a: wp.array(dtype=float), b: wp.array(dtype=wp.vec3),
              out1: wp.array(dtype=wp.vec2), out2: wp.array(dtype=wp.quat)):
        i = wp.tid()
        v = b[i]
        out1[i] = wp.vec2(a[i] * v[0], v[1])
        out2[i] = wp.quat(v[0], v[1], v[2], a[i])

    a = arr([1.0, 2.0])
    b = wp.array(np.arange(6, dtype=np.float32).reshape(2, 3), dtype=wp.vec3, requires_grad=True)
    out1 = wp.zeros(2, dtype=wp.vec2, requires_grad=True)
    out2 = wp.zeros(2, dtype=wp.quat, requires_grad=True)
    jacs = ag.jacobian(mixed, dim=2, inputs=[a, b], outputs=[out1, out2])
    shapes = {key: (j.shape, j.dtype) for key, j in jacs.items()}
    assert shapes == {(0, 0): ((4, 2), wp.float32), (0, 1): ((8, 2), wp.float32),
                      (1, 0): ((4, 2), wp.vec3), (1, 1): ((8, 2), wp.vec3)}
    assert ag.gradcheck(mixed, dim=2, inputs=[a, b], outputs=[out1, out2], show_summary=False)


def test_jacobian_errors():
    x, y = arr([1.0]), wp.zeros(1, dtype=float, requires_grad=True)
    with pytest.raises(ValueError, match="Kernel must have backward pass enabled"):
        ag.jacobian(no_backward, dim=1, inputs=[x], outputs=[y])
    with pytest.raises(ValueError, match="A list of output arguments must be provided"):
        ag.jacobian(square, dim=1, inputs=[x])
    with pytest.raises(ValueError, match="The inputs argument must be provided"):
        ag.gradcheck(square, dim=1, outputs=[y])
    fd = ag.jacobian_fd(no_backward, dim=1, inputs=[x], outputs=[y])  # allowed
    np.testing.assert_allclose(fd[0, 0].numpy(), [[1.0]], atol=1e-2)


# --------------------------------------------------------------------------- gradcheck


def test_gradcheck_passes_and_prints_warps_table(capsys):
    inputs, outputs = my_kernel_args()
    assert ag.gradcheck(my_kernel, dim=2, inputs=inputs, outputs=outputs) is True
    out = capsys.readouterr().out.splitlines()
    assert out[0].split(" | ")[:7] == ["Input", "Output", "Max Abs Error      ", "AD at MAE ",
                                       "FD at MAE ", "Max Rel Error", "Pass"]
    assert len(out) == 7 and "PASS" in out[2] and out[-1].endswith(
        "Gradient check for kernel my_kernel passed\033[0m")


def test_gradcheck_fails_on_a_gradient_the_adjoint_cannot_see(capsys):
    x, y = arr([0.5, 1.5]), wp.zeros(2, dtype=float, requires_grad=True)
    assert not ag.gradcheck(stepped, dim=2, inputs=[x], outputs=[y], raise_exception=False)
    assert "FAIL" in capsys.readouterr().out
    with pytest.raises(ValueError, match="Gradient check failed for kernel stepped, input 0, "
                       "output 0: finite difference and autodiff gradients do not match"):
        ag.gradcheck(stepped, dim=2, inputs=[x], outputs=[y], show_summary=False)


def test_gradcheck_of_a_function_restores_inputs_and_flags():
    def in_place(x):
        wp.launch(square, 3, inputs=[x], outputs=[x])  # overwrites its own input
        return x

    x = arr([1.0, 2.0, 3.0])
    count = x._write_count
    ag.gradcheck(in_place, inputs=[x], raise_exception=False, show_summary=False)
    assert x.numpy().tolist() == [1.0, 2.0, 3.0] and x._write_count == count


# --------------------------------------------------------------------------- gradcheck_tape


def record_chain():
    x = arr([0.3, 0.7, 1.5])
    y, z = (wp.zeros(3, dtype=float, requires_grad=True) for _ in range(2))
    tape = wp.Tape()
    with tape:
        wp.launch(square, 3, inputs=[x], outputs=[y])
        tape.record_func(lambda: None, [x])
        line = inspect.currentframe().f_lineno + 1
        wp.launch(stepped, 3, inputs=[y], outputs=[z])
    return tape, x, y, z, line


def test_gradcheck_tape_names_the_first_disagreeing_launch():
    tape, x, y, z, line = record_chain()
    y.assign(np.array([0.5, 1.5, 2.5], np.float32))  # values on the steps
    with pytest.raises(ValueError) as info:
        ag.gradcheck_tape(tape, show_summary=False)
    text = str(info.value)
    assert text.startswith("Gradient check failed for kernel stepped, input 0, output 0")
    assert (f"First launch whose adjoint disagrees with finite differences: launch 2 of the "
            f"tape, kernel 'stepped' launched at {__file__}:{line}; worst pair: input 'x' -> "
            "output 'y': max abs error") in text


def test_gradcheck_tape_reports_without_raising(capsys):
    tape, x, y, z, _ = record_chain()
    y.assign(np.array([0.5, 1.5, 2.5], np.float32))
    assert ag.gradcheck_tape(tape, raise_exception=False, show_summary=False) is False
    assert "launch 2 of the tape, kernel 'stepped'" in capsys.readouterr().out
    assert ag.gradcheck_tape(tape, blacklist_kernels=["stepped"], show_summary=False)
    assert ag.gradcheck_tape(tape, whitelist_kernels=["square"], show_summary=False)


def test_gradcheck_tape_passes_and_leaves_the_tape_usable():
    x, y = arr([0.3, 0.7]), wp.zeros(2, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)

    @wp.kernel
    def total(v: wp.array(dtype=float), out: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(out, 0, v[i] * v[i])

    tape = wp.Tape()
    with tape:
        wp.launch(square, 2, inputs=[x], outputs=[y])
        wp.launch(total, 2, inputs=[y], outputs=[loss])
        wp.launch(no_backward, 2, inputs=[x], outputs=[wp.zeros(2)])  # skipped
    assert ag.gradcheck_tape(tape, show_summary=False)
    # only the enable_backward warning: probing never bumped the arrays' write counts
    with pytest.warns(wp.DiffTapeWarning, match="enable_backward=False") as caught:
        tape.backward(loss)
    assert len(caught) == 1
    np.testing.assert_allclose(x.grad.numpy(), 4 * x.numpy() ** 3, rtol=1e-5)


@pytest.mark.skipif(not hasattr(wp, "func_grad"), reason="func_grad lands with issue 3")
def test_gradcheck_tape_catches_a_wrong_custom_gradient():
    @wp.func
    def cube(x: float):
        return x * x * x

    @wp.func_grad(cube)
    def adj_cube(x: float, adj_ret: float):
        wp.adjoint[x] += 2.0 * x * adj_ret  # deliberately wrong: should be 3 x²

    @wp.kernel
    def apply(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = cube(x[i])

    x, y = arr([1.0, 2.0]), wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        line = inspect.currentframe().f_lineno + 1
        wp.launch(apply, 2, inputs=[x], outputs=[y])
    with pytest.raises(ValueError, match=f"kernel 'apply' launched at {__file__}:{line}"):
        ag.gradcheck_tape(tape, show_summary=False)


# --------------------------------------------------------------------------- plots


def test_jacobian_plot_draws_one_block_per_pair():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    inputs, outputs = my_kernel_args()
    jacs = ag.jacobian(my_kernel, dim=2, inputs=inputs, outputs=outputs)
    fig = ag.jacobian_plot(jacs, my_kernel, inputs=inputs, show_plot=False)
    images = [ax for ax in fig.axes if ax.images]
    assert len(images) == 4 and fig._suptitle.get_text() == "my_kernel kernel Jacobian"
    with pytest.raises(ValueError, match="inputs must be provided"):
        ag.jacobian_plot(jacs, my_kernel)


def test_jacobian_plot_without_matplotlib_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    meta = ag.FunctionMetadata("k", ["a"], ["b"], input_dtypes=[wp.float32])
    with pytest.raises(ImportError, match="jacobian_plot needs matplotlib: pip install"):
        ag.jacobian_plot({(0, 0): wp.zeros((1, 1))}, meta, show_plot=False)
