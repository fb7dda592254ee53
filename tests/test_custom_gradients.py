"""User functions: overloads, generics, @wp.func_grad, @wp.func_replay and wp.grad (SPEC §4)."""

import math
import typing

import numpy as np
import pytest

import difftape as wp


def run(kernel, inputs, seed_name, n):
    arrays = {k: wp.array(v, dtype=float, requires_grad=True) if isinstance(v, np.ndarray)
              else v for k, v in inputs.items()}
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, n, inputs=list(arrays.values()))
    tape.backward(grads={arrays[seed_name]: wp.ones(n, dtype=float)})
    return arrays


# ------------------------------------------------------------------ func_grad


@wp.func
def safe_sqrt(x: float):
    return wp.sqrt(x)


@wp.func_grad(safe_sqrt)
def adj_safe_sqrt(x: float, adj_ret: float):
    if x > 0.0:
        wp.adjoint[x] += 1.0 / (2.0 * wp.sqrt(x)) * adj_ret


@wp.kernel
def use_safe_sqrt(xs: wp.array(dtype=float), ys: wp.array(dtype=float)):
    i = wp.tid()
    ys[i] = safe_sqrt(xs[i])


@wp.kernel
def use_plain_sqrt(xs: wp.array(dtype=float), ys: wp.array(dtype=float)):
    i = wp.tid()
    ys[i] = wp.sqrt(xs[i])


def test_custom_grad_replaces_the_generated_adjoint():  # SPEC 35
    a = run(use_safe_sqrt, {"xs": np.array([1.0, 2.0, 0.0]), "ys": np.zeros(3)}, "ys", 3)
    np.testing.assert_allclose(a["xs"].grad.numpy(), [0.5, 0.35355338, 0.0], rtol=1e-6)
    b = run(use_plain_sqrt, {"xs": np.array([1.0, 2.0, 0.0]), "ys": np.zeros(3)}, "ys", 3)
    assert math.isinf(b["xs"].grad.numpy()[2])


@wp.func
def wrapper(x: float):
    return safe_sqrt(x) * 2.0


@wp.kernel
def use_wrapper(xs: wp.array(dtype=float), ys: wp.array(dtype=float)):
    i = wp.tid()
    ys[i] = wrapper(xs[i])


def test_custom_grad_applies_when_called_through_another_function():
    a = run(use_wrapper, {"xs": np.array([4.0, 0.0]), "ys": np.zeros(2)}, "ys", 2)
    np.testing.assert_allclose(a["xs"].grad.numpy(), [0.5, 0.0])


@wp.func
def scaled(x: float, y: float):
    return x * y


@wp.func
def scaled(x: wp.vec3, y: float):  # noqa: F811 - an overload
    return x * y


@wp.func_grad(scaled)
def adj_scaled(x: float, y: float, adj_ret: float):
    wp.adjoint[x] += 10.0 * adj_ret  # deliberately not the true derivative
    wp.adjoint[y] += 100.0 * adj_ret


@wp.func_grad(scaled)
def adj_scaled_vec(x: wp.vec3, y: float, adj_ret: wp.vec3):
    wp.adjoint[x] += adj_ret * 2.0
    wp.adjoint[y] += wp.dot(x, adj_ret)


@wp.kernel
def use_overloads(xs: wp.array(dtype=float), ys: wp.array(dtype=float),
                  out: wp.array(dtype=float)):
    i = wp.tid()
    v = scaled(wp.vec3(xs[i], 1.0, 0.0), ys[i])
    out[i] = scaled(xs[i], ys[i]) + v[0] + v[1]


def test_each_overload_gets_its_own_custom_grad():
    a = run(use_overloads, {"xs": np.array([1.0, 2.0]), "ys": np.array([10.0, 11.0]),
                            "out": np.zeros(2)}, "out", 2)
    xs, ys = np.array([1.0, 2.0]), np.array([10.0, 11.0])
    np.testing.assert_allclose(a["out"].numpy(), xs * ys + xs * ys + ys)
    np.testing.assert_allclose(a["xs"].grad.numpy(), 10.0 + 2.0)
    np.testing.assert_allclose(a["ys"].grad.numpy(), 100.0 + xs + 1.0)


@wp.func
def sigmoid_no_return(i: int, xs: wp.array(dtype=float), ys: wp.array(dtype=float)):
    ys[i] = 1.0 / (1.0 + wp.exp(-xs[i]))


@wp.func_grad(sigmoid_no_return)
def adj_sigmoid_no_return(i: int, xs: wp.array(dtype=float), ys: wp.array(dtype=float)):
    wp.adjoint[xs][i] += ys[i] * (1.0 - ys[i]) * wp.adjoint[ys][i]


@wp.kernel
def use_sigmoid(xs: wp.array(dtype=float), ys: wp.array(dtype=float)):
    i = wp.tid()
    sigmoid_no_return(i, xs, ys)


def test_custom_grad_of_a_function_without_return_value():  # SPEC 37
    xs = np.array([-1.0, 0.0, 2.0])
    a = run(use_sigmoid, {"xs": xs, "ys": np.zeros(3)}, "ys", 3)
    s = 1 / (1 + np.exp(-xs))
    np.testing.assert_allclose(a["ys"].numpy(), s, rtol=1e-6)
    np.testing.assert_allclose(a["xs"].grad.numpy(), s * (1 - s), rtol=1e-6)


def test_custom_grad_signature_errors():
    with pytest.raises(RuntimeError, match="has an incorrect signature"):
        @wp.func_grad(safe_sqrt)
        def wrong(x: wp.float64, adj_ret: float):
            pass

    @wp.func
    def generic(x: typing.Any):
        return x

    with pytest.raises(RuntimeError, match="Cannot define custom grad definition for generic "
                                           "since functions with generic input arguments"):
        @wp.func_grad(generic)
        def adj_generic(x: float, adj_ret: float):
            pass

    with pytest.raises(RuntimeError, match="No function overload found for gradient function"):
        @wp.func_grad(scaled)
        def adj_none(x: wp.int32, y: float, adj_ret: float):
            pass


# ------------------------------------------------------------------ func_replay


@wp.func
def reversible_increment(counter: wp.array(dtype=int), counter_index: int, value: int,
                         thread_values: wp.array(dtype=int), tid: int):
    next_index = wp.atomic_add(counter, counter_index, value)
    thread_values[tid] = next_index
    return next_index


@wp.func_replay(reversible_increment)
def replay_reversible_increment(counter: wp.array(dtype=int), counter_index: int, value: int,
                                thread_values: wp.array(dtype=int), tid: int):
    return thread_values[tid]


@wp.kernel
def use_increment(inputs: wp.array(dtype=float), counter: wp.array(dtype=int),
                  thread_values: wp.array(dtype=int), outputs: wp.array(dtype=float)):
    tid = wp.tid()
    idx = reversible_increment(counter, 0, 1, thread_values, tid)
    outputs[idx] = wp.sqrt(inputs[idx])


def test_func_replay_reversible_increment():  # SPEC 38
    inputs = wp.array(np.arange(1, 9, dtype=np.float32), dtype=float, requires_grad=True)
    counter = wp.zeros(1, dtype=int)
    thread_values = wp.zeros(8, dtype=int)
    outputs = wp.zeros(8, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(use_increment, 8, inputs=[inputs, counter, thread_values, outputs])
    tape.backward(grads={outputs: wp.ones(8, dtype=float)})
    np.testing.assert_allclose(inputs.grad.numpy(), 0.5 / np.sqrt(np.arange(1, 9)), rtol=1e-6)
    assert counter.numpy()[0] == 8  # the adjoint did not run the atomic again


def test_func_replay_signature_error():
    with pytest.raises(RuntimeError, match="Could not find forward definition of function "
                                           "safe_sqrt that matches custom replay definition"):
        @wp.func_replay(safe_sqrt)
        def replay_wrong(x: int):
            return x


# ------------------------------------------------------------------ wp.grad, generics


@wp.func
def square(x: float):
    return x * x


@wp.kernel
def grad_in_forward(xs: wp.array(dtype=float), ys: wp.array(dtype=float),
                    zs: wp.array(dtype=float)):
    i = wp.tid()
    ys[i] = wp.grad(square)(xs[i])
    dy, dx = wp.grad(wp.atan2)(xs[i], 2.0)
    zs[i] = dy + dx


def test_wp_grad_of_functions_and_builtins():  # SPEC 40
    xs = wp.array([0.0, 1.0, 2.0], dtype=float)
    ys, zs = wp.zeros(3, dtype=float), wp.zeros(3, dtype=float)
    wp.launch(grad_in_forward, 3, inputs=[xs, ys, zs])
    np.testing.assert_allclose(ys.numpy(), [0.0, 2.0, 4.0])
    x = np.array([0.0, 1.0, 2.0])
    np.testing.assert_allclose(zs.numpy(), (2 - x) / (x * x + 4), rtol=1e-6)
    with pytest.raises(RuntimeError, match="grad\\(\\) wrapper can only be called inside"):
        wp.grad(square)


@wp.func
def twice(x: typing.Any):
    return x + x


@wp.kernel
def use_generic(xs: wp.array(dtype=wp.float64), vs: wp.array(dtype=wp.vec3d),
                out: wp.array(dtype=wp.float64)):
    i = wp.tid()
    v = twice(vs[i])
    out[i] = twice(xs[i]) + v[2]


def test_generic_function_takes_the_argument_types():
    xs = wp.array([1.0, 2.0], dtype=wp.float64, requires_grad=True)
    vs = wp.array([[0, 0, 1.0], [0, 0, 3.0]], dtype=wp.vec3d, requires_grad=True)
    out = wp.zeros(2, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(use_generic, 2, inputs=[xs, vs, out])
    np.testing.assert_allclose(out.numpy(), [4.0, 10.0])
    tape.backward(grads={out: wp.ones(2, dtype=wp.float64)})
    np.testing.assert_allclose(xs.grad.numpy(), [2.0, 2.0])
    np.testing.assert_allclose(vs.grad.numpy(), [[0, 0, 2.0], [0, 0, 2.0]])
