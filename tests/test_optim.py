"""difftape.optim: Adam and SGD against numpy references, convergence on a quadratic, Warp's API.

The references re-implement Warp's (and PyTorch's) update rules in float64 numpy; float32
parameters are compared with float32 tolerances, float64 ones almost exactly. Parameters of
vector and matrix dtypes are updated per scalar component, so they are checked the same way.
"""

from __future__ import annotations

import numpy as np
import pytest

import difftape as wp
import difftape.optim
from difftape._src.dtypes import scalar_of
from difftape._src.errors import ArrayOverwriteWarning

STEPS = 6
TOLERANCE = {wp.float16: 2e-3, wp.float32: 2e-6, wp.float64: 1e-13}


def adam_reference(p, grads, lr, betas, eps):
    """Warp's Adam on float64 numpy arrays: the parameter after each step, and the moments."""
    b1, b2 = betas
    m, v, history = np.zeros_like(p), np.zeros_like(p), []
    for t, g in enumerate(grads):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1 ** (t + 1)), v / (1 - b2 ** (t + 1))
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
        history.append(p)
    return history, m, v


def sgd_reference(p, grads, lr, momentum, dampening, weight_decay, nesterov):
    """Warp's (PyTorch's) SGD on float64 numpy arrays: the parameter after each step."""
    b, history = np.zeros_like(p), []
    for t, g in enumerate(grads):
        g = g + weight_decay * p
        if momentum != 0.0:
            b = g if t == 0 else momentum * b + (1 - dampening) * g
            g = g + momentum * b if nesterov else b
        p = p - lr * g
        history.append(p)
    return history


def problem(dtype, n=5, seed=0):
    """A parameter array of ``dtype`` and STEPS gradient arrays, with their float64 values."""
    rng = np.random.default_rng(seed)
    shape = (n, *getattr(dtype, "_shape", ()))
    p0 = rng.uniform(-2.0, 2.0, shape)
    grads = [rng.normal(0.0, 1.0 + t, shape) for t in range(STEPS)]
    param = wp.array(p0, dtype=dtype, requires_grad=True)
    # Round the inputs to the parameter's precision so the reference starts where difftape does.
    p0 = param.numpy().astype(np.float64)
    grad_arrays = [wp.array(g, dtype=dtype) for g in grads]
    grads = [g.numpy().astype(np.float64) for g in grad_arrays]
    return param, p0, grad_arrays, grads


DTYPES = [wp.float32, wp.float64, wp.float16, wp.vec3, wp.vec3d, wp.mat22, wp.quat]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: t.__name__)
def test_adam_matches_numpy_reference_over_several_steps(dtype):
    param, p0, grad_arrays, grads = problem(dtype)
    opt = difftape.optim.Adam([param], lr=0.05, betas=(0.8, 0.99), eps=1e-6)
    expected, m, v = adam_reference(p0, grads, 0.05, (0.8, 0.99), 1e-6)
    tol = TOLERANCE[scalar_of(dtype)]
    for step, g in enumerate(grad_arrays):
        opt.step([g])
        np.testing.assert_allclose(param.numpy(), expected[step], rtol=tol, atol=tol)
    assert opt.t == STEPS
    np.testing.assert_allclose(opt.m[0].numpy().reshape(m.shape), m, rtol=tol, atol=tol)
    np.testing.assert_allclose(opt.v[0].numpy().reshape(v.shape), v, rtol=tol, atol=tol)


SGD_SETTINGS = {
    "plain": dict(momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False),
    "momentum": dict(momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=False),
    "dampening": dict(momentum=0.8, dampening=0.3, weight_decay=0.0, nesterov=False),
    "nesterov": dict(momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=True),
    "weight_decay": dict(momentum=0.5, dampening=0.0, weight_decay=0.1, nesterov=False),
}


# Every setting on the scalar types and vec3; the other composites once, with Nesterov momentum.
SGD_CASES = [(t, s) for t in DTYPES for s in SGD_SETTINGS
             if t in (wp.float32, wp.float64, wp.float16, wp.vec3) or s == "nesterov"]


@pytest.mark.parametrize("dtype, setting", SGD_CASES,
                         ids=[f"{t.__name__}-{s}" for t, s in SGD_CASES])
def test_sgd_matches_numpy_reference_over_several_steps(dtype, setting):
    param, p0, grad_arrays, grads = problem(dtype, seed=1)
    kwargs = SGD_SETTINGS[setting]
    opt = difftape.optim.SGD([param], lr=0.05, **kwargs)
    expected = sgd_reference(p0, grads, 0.05, **kwargs)
    tol = TOLERANCE[scalar_of(dtype)]
    for step, g in enumerate(grad_arrays):
        opt.step([g])
        np.testing.assert_allclose(param.numpy(), expected[step], rtol=tol, atol=tol)


@wp.kernel
def quadratic(x: wp.array(dtype=wp.vec3), centre: wp.array(dtype=wp.vec3),
              scale: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - centre[i]
    wp.atomic_add(loss, 0, scale[i] * wp.dot(d, d))


def minimize_quadratic(opt, x, iterations):
    """Minimize Σ s_i |x_i - c_i|² through the tape; returns the first and last loss."""
    rng = np.random.default_rng(3)
    centre = wp.array(rng.uniform(-1.0, 1.0, (len(x), 3)), dtype=wp.vec3)
    scale = wp.array(rng.uniform(0.5, 2.0, len(x)), dtype=float)
    losses = []
    for _ in range(iterations):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(quadratic, dim=len(x), inputs=[x, centre, scale, loss])
        tape.backward(loss)
        losses.append(float(loss.numpy()[0]))
        opt.step([x.grad])
        tape.zero()
    return losses[0], losses[-1]


@pytest.mark.parametrize("make", [
    lambda x: difftape.optim.Adam([x], lr=0.05),
    lambda x: difftape.optim.SGD([x], lr=0.05, momentum=0.5),
    lambda x: difftape.optim.SGD([x], lr=0.1),
], ids=["adam", "sgd_momentum", "sgd"])
def test_minimizing_a_quadratic_converges(make):
    x = wp.array(np.zeros((8, 3)), dtype=wp.vec3, requires_grad=True)
    first, last = minimize_quadratic(make(x), x, iterations=150)
    assert first > 1.0
    assert last < 1e-4 * first


def test_params_can_be_set_later_and_state_resets():
    opt = difftape.optim.Adam(lr=0.1)
    with pytest.raises(RuntimeError, match="parameters must be set before calling step"):
        opt.step([])
    x = wp.array([1.0, 2.0], dtype=float)
    g = wp.array([1.0, -1.0], dtype=float)
    opt.set_params([x])
    opt.step([g])
    assert opt.t == 1 and opt.m[0].numpy().any()
    opt.reset_internal_state()
    assert opt.t == 0 and not opt.m[0].numpy().any() and not opt.v[0].numpy().any()
    moments = opt.m[0]
    opt.set_params([x])  # same shape: the buffers are kept
    assert opt.m[0] is moments
    opt.set_params([wp.zeros(3, dtype=float)])  # new shape: new buffers
    assert opt.m[0].shape == (3,)


def test_sgd_keeps_a_momentum_buffer_per_parameter_with_its_dtype():
    x, y = wp.zeros(4, dtype=wp.vec3), wp.zeros(2, dtype=wp.float64)
    opt = difftape.optim.SGD([x, y], lr=1.0, momentum=0.9)
    assert [b.dtype for b in opt.b] == [wp.vec3, wp.float64]
    opt.step([wp.array(np.ones((4, 3)), dtype=wp.vec3), wp.array([1.0, 1.0], dtype=wp.float64)])
    np.testing.assert_array_equal(x.numpy(), -np.ones((4, 3)))
    opt.reset_internal_state()
    assert opt.t == 0 and not opt.b[0].numpy().any()


def test_mismatched_gradients_and_unsupported_dtypes_are_errors():
    x = wp.zeros(3, dtype=float)
    opt = difftape.optim.Adam([x])
    with pytest.raises(TypeError, match="gradient dtype must match parameter dtype float32, "
                                        "got float64"):
        opt.step([wp.zeros(3, dtype=wp.float64)])
    with pytest.raises(ValueError, match=r"gradient shape must match parameter shape \(3,\), "
                                         r"got \(4,\)"):
        opt.step([wp.zeros(4, dtype=float)])
    with pytest.raises(RuntimeError, match="Unsupported dtype for difftape SGD optimizer: int32"):
        difftape.optim.SGD([wp.zeros(3, dtype=wp.int32)])
    strided = wp.zeros((4, 4), dtype=float).transpose()
    with pytest.raises(RuntimeError, match="needs contiguous parameter arrays"):
        difftape.optim.Adam([strided])


def test_a_step_between_recording_and_backward_is_seen_by_the_overwrite_check():
    x = wp.array([1.0, 2.0], dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(quadratic_1d, dim=2, inputs=[x, loss])
    difftape.optim.SGD([x], lr=0.1).step([wp.ones(2, dtype=float)])
    with pytest.warns(ArrayOverwriteWarning, match="Array 'x' was changed"):
        tape.backward(loss)


@wp.kernel
def quadratic_1d(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def test_optim_is_a_submodule_like_warp_optim():
    assert wp.optim is difftape.optim
    assert difftape.optim.Adam.__init__.__defaults__ == (None, 0.001, (0.9, 0.999), 1e-08)
    assert difftape.optim.SGD.__init__.__defaults__ == (None, 0.001, 0.0, 0.0, 0.0, False)
