"""Conformance tests for control flow under reverse mode (SPEC §5.4, §6 items 32 and 34).

difftape reverses dynamic loops exactly, so every expected value here is the TRUE derivative
(SPEC lists Warp's wrong numbers: `[32,8,2]`, `[inf,inf,inf]`, `[0,0,0]`, `[0,2,2]`, `b.grad=20`,
`[2,8,18]`; these scenarios are Warp-divergent by design). Every kernel is also checked against a
float64 central-difference reference obtained by re-launching the same kernel with perturbed
inputs (``fd_gradient``).
"""

from __future__ import annotations

import numpy as np
import pytest

import difftape as wp

F64 = wp.float64

# --------------------------------------------------------------------------- helpers


def fd_gradient(launch_fn, x, eps=1e-6) -> np.ndarray:
    """Central differences of the scalar ``launch_fn(x)`` (which re-runs a float64 kernel)."""
    x = np.asarray(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp = x.copy()
        xm = x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        grad[idx] = (launch_fn(xp) - launch_fn(xm)) / (2.0 * eps)
    return grad


def _to_arrays(args, requires_grad: bool) -> list:
    return [wp.array(a, dtype=F64, requires_grad=requires_grad) if isinstance(a, np.ndarray) else a
            for a in args]


def run_scalar(kernel, args, dim=1) -> float:
    """Launch ``kernel(*args, out)`` untaped; numpy arguments become float64 arrays."""
    out = wp.zeros(1, dtype=F64)
    wp.launch(kernel, dim, inputs=_to_arrays(args, False) + [out])
    return float(out.numpy()[0])


def tape_gradients(kernel, args, dim=1):
    """(value, [grad per argument or None]) of ``out[0]`` after ``kernel(*args, out)`` on a Tape."""
    arrays = _to_arrays(args, True)
    out = wp.zeros(1, dtype=F64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim, inputs=arrays + [out])
    tape.backward(loss=out)
    grads = [b.grad.numpy() if isinstance(a, np.ndarray) else None for a, b in zip(args, arrays)]
    return float(out.numpy()[0]), grads


def check(kernel, args, expected=None, value=None, dim=1, rtol=1e-9, fd_rtol=1e-6, fd_atol=1e-6):
    """Tape gradients of ``out[0]``: equal to ``expected`` ({arg index: grad}) and to central
    differences for every array argument. Returns the tape gradients."""
    args = [np.asarray(a, dtype=np.float64) if isinstance(a, (list, np.ndarray)) else a
            for a in args]
    val, grads = tape_gradients(kernel, args, dim)
    if value is not None:
        np.testing.assert_allclose(val, value, rtol=1e-12, atol=1e-12)
    for k, exp in (expected or {}).items():
        np.testing.assert_allclose(grads[k], exp, rtol=rtol, atol=1e-12,
                                   err_msg=f"tape gradient of argument {k}")
    for k, a in enumerate(args):
        if not isinstance(a, np.ndarray):
            continue

        def f(xk, k=k):
            trial = list(args)
            trial[k] = xk
            return run_scalar(kernel, trial, dim)

        np.testing.assert_allclose(grads[k], fd_gradient(f, a), rtol=fd_rtol, atol=fd_atol,
                                   err_msg=f"tape vs finite differences, argument {k}")
    return grads


# --------------------------------------------------------------------------- kernels


@wp.kernel
def for_loop_grad(n: int, x: wp.array(dtype=F64), s: wp.array(dtype=F64)):
    sum = F64(0.0)
    for i in range(n):
        sum = sum + x[i] * 2.0
    s[0] = sum


@wp.kernel
def for_loop_nested_if_grad(n: int, x: wp.array(dtype=F64), s: wp.array(dtype=F64)):
    sum = F64(0.0)
    for i in range(n):
        if i < 16:
            if i < 8:
                sum = sum + x[i] * 2.0
            else:
                sum = sum + x[i] * 4.0
        else:
            if i < 24:
                sum = sum + x[i] * 6.0
            else:
                sum = sum + x[i] * 8.0
    s[0] = sum


@wp.kernel
def for_loop_grad_nested(n: int, x: wp.array(dtype=F64), s: wp.array(dtype=F64)):
    sum = F64(0.0)
    for i in range(n):
        for j in range(n):
            sum = sum + x[i * n + j] * F64(i * n + j) + 1.0
    s[0] = sum


@wp.kernel
def sibling_loops(n: int, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    v = F64(0.0)
    for i in range(n):
        v = v + x[0] * 2.0
    for i in range(n):
        v = v + x[0] * 3.0
    out[0] = v


@wp.kernel
def strided_ranges(n: int, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    s = F64(0.0)
    for i in range(1, n, 2):
        s = s + x[i] * F64(i)
    for i in range(n - 1, -1, -2):
        s = s * 0.5 + x[i]
    out[0] = s


@wp.kernel
def reversed_range(n: int, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    s = F64(0.0)
    for i in reversed(range(n)):
        s = s * 0.25 + x[i] * x[i]
    out[0] = s


@wp.kernel
def prod_dynamic(iters: int, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    prod = F64(1.0)
    for i in range(iters):
        prod *= x[i]
    out[0] = prod


@wp.kernel
def prod_static(x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    prod = F64(1.0)
    for i in range(3):
        prod *= x[i]
    out[0] = prod


@wp.kernel
def prod_mod(x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    prod = F64(1.0)
    for i in range(20):
        prod *= x[i % 3]
    out[0] = prod


@wp.kernel
def weighted_mean(n: int, x: wp.array(dtype=F64), w: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    sum = F64(0.0)
    norm = F64(0.0)
    for i in range(n):
        sum += w[i] * x[i]
        norm += w[i]
    out[0] = sum / norm


@wp.kernel
def loop_break(x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    s = F64(0.0)
    for i in range(3):
        if i == 2:
            break
        s += x[i] * F64(i + 1)
    out[0] = s


@wp.kernel
def loop_while(n: int, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    s = F64(0.0)
    i = int(0)
    while i < n:
        s += 2.0 * x[i]
        i += 1
    out[0] = s


@wp.kernel
def argmax_continue(n: int, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    best = x[0]
    idx = int(0)
    for i in range(1, n):
        if x[i] <= best:
            continue
        best = x[i]
        idx = i
    out[0] = best * best + 3.0 * x[idx] * x[0]


@wp.kernel
def pre_loop_value_used_after(n: int, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    a = x[0] * 3.0
    acc = x[1]
    for i in range(n):
        acc = acc * 0.5 + x[i + 2] * a
    out[0] = acc * acc + a * acc


@wp.kernel
def loop_carried_nonlinear(n: int, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    s = x[1]
    for i in range(n):
        s = s * x[0] + wp.sin(s)
    out[0] = s


@wp.kernel
def nested_inner_break(n: int, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    s = F64(0.0)
    for i in range(n):
        for j in range(n):
            if j > i:
                break
            s += x[i] * x[j]
    out[0] = s


@wp.func
def grow_until(v: F64, limit: F64, n: int) -> F64:
    s = v
    for i in range(n):
        s = s * 1.5
        if s > limit:
            return s * v
    return s


@wp.kernel
def func_return_in_loop(n: int, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    out[0] = grow_until(x[0], F64(3.0), n)


@wp.func
def squared_sum(x: wp.array(dtype=F64), n: int) -> F64:
    s = F64(0.0)
    for i in range(n):
        s = s + x[i]
    return s * s  # nonlinear op on the accumulator inside the function (GH-1740)


@wp.kernel
def func_loop_nonlinear(n: int, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    out[0] = squared_sum(x, n)


@wp.kernel
def mul_inplace(a: wp.array(dtype=F64), b: wp.array(dtype=F64)):
    i = wp.tid()
    a[i] *= b[i]


@wp.kernel
def mul_inplace_f32(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    a[i] *= b[i]


@wp.kernel
def square_inplace(a: wp.array(dtype=F64)):
    i = wp.tid()
    a[i] = a[i] * a[i]


# --------------------------------------------------------------------------- item 32


def test_for_loop_grad_n32():
    n = 32
    grads = check(for_loop_grad, [n, np.ones(n)], expected={1: np.full(n, 2.0)}, value=2.0 * n)
    assert grads[1].shape == (n,)


def test_for_loop_grad_keeps_outputs():
    n = 32
    x = wp.array(np.ones(n), dtype=F64, requires_grad=True)
    s = wp.zeros(1, dtype=F64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(for_loop_grad, dim=1, inputs=[n, x, s])
    tape.backward(loss=s)
    np.testing.assert_allclose(s.numpy(), [64.0])
    np.testing.assert_allclose(tape.gradients[x].numpy(), np.full(n, 2.0))


def test_for_loop_nested_if():
    n = 32
    expected = np.repeat([2.0, 4.0, 6.0, 8.0], 8)
    check(for_loop_nested_if_grad, [n, np.ones(n)], expected={1: expected}, value=expected.sum())


def test_nested_dynamic_loops():
    # sum_k x_k * k + n*n: d/dx_k = k
    check(for_loop_grad_nested, [3, np.zeros(9)], expected={1: np.arange(9.0)}, value=9.0)
    check(for_loop_grad_nested, [3, np.linspace(-1.0, 1.0, 9)], expected={1: np.arange(9.0)})


def test_sibling_loops_reassigning_v():
    n = 4
    check(sibling_loops, [n, np.array([0.5])], expected={1: [5.0 * n]}, value=2.5 * n)


def test_strided_ranges():
    n = 7
    x = np.linspace(0.2, 1.4, n)
    s = sum(x[i] * i for i in range(1, n, 2))
    for i in range(n - 1, -1, -2):
        s = s * 0.5 + x[i]
    check(strided_ranges, [n, x], value=s)


def test_reversed_range():
    n = 7
    x = np.linspace(0.2, 1.4, n)
    s = 0.0
    for i in reversed(range(n)):
        s = s * 0.25 + x[i] * x[i]
    # s = sum_i x_i^2 * 0.25^i, so ds/dx_i = 2 x_i 0.25^i
    check(reversed_range, [n, x], expected={1: 2.0 * x * 0.25 ** np.arange(n)}, value=s)


# --------------------------------------------------------------------------- item 34


def test_dynamic_product_is_exact():
    check(prod_dynamic, [3, np.full(3, 2.0)], expected={1: [4.0, 4.0, 4.0]}, value=8.0)
    x = np.array([1.5, -0.5, 3.0])
    p = np.prod(x)
    check(prod_dynamic, [3, x], expected={1: p / x})


def test_static_product():
    check(prod_static, [np.full(3, 2.0)], expected={0: [4.0, 4.0, 4.0]}, value=8.0)


def test_product_over_range_20_with_modulo():
    x = np.array([1.1, 0.9, 1.05])
    counts = np.array([7, 7, 6])  # i % 3 over range(20)
    p = np.prod(x ** counts)
    check(prod_mod, [x], expected={0: counts * p / x}, value=p)
    check(prod_mod, [np.full(3, 2.0)], expected={0: counts * 2.0**19}, value=2.0**20)


def test_weighted_mean_after_dynamic_loop():
    x = np.array([1.0, 2.0, 4.0])
    w = np.ones(3)
    mean = (w @ x) / w.sum()
    check(weighted_mean, [3, x, w],
          expected={1: [1.0 / 3.0] * 3, 2: (x - mean) / w.sum()}, value=mean)
    x = np.array([1.0, 1.0, 1.0])
    check(weighted_mean, [3, x, np.array([0.5, 2.0, 1.5])],
          expected={1: np.array([0.5, 2.0, 1.5]) / 4.0, 2: [0.0, 0.0, 0.0]}, value=1.0)


def test_break_in_loop():
    check(loop_break, [np.array([1.0, 2.0, 3.0])], expected={0: [1.0, 2.0, 0.0]}, value=5.0)


def test_while_loop():
    check(loop_while, [3, np.array([1.0, 2.0, 3.0])], expected={1: [2.0, 2.0, 2.0]}, value=12.0)


def test_continue_argmax():
    x = np.array([1.0, 5.0, 3.0, 2.0, 4.0])
    # best = 5 at idx 1: out = best^2 + 3 * x[1] * x[0] = 25 + 15
    check(argmax_continue, [5, x], expected={1: [15.0, 13.0, 0.0, 0.0, 0.0]}, value=40.0)
    x = np.array([6.0, 5.0, 3.0, 7.5, 4.0])
    # best = 7.5 at idx 3: out = 56.25 + 3 * 7.5 * 6
    check(argmax_continue, [5, x], expected={1: [22.5, 0.0, 0.0, 15.0 + 18.0, 0.0]},
          value=56.25 + 135.0)


def test_pre_loop_variable_used_after_loop_gh1694():
    n = 3
    x = np.array([0.5, 1.0, 2.0, -1.0, 0.7])
    a = 3.0 * x[0]
    acc = x[1]
    for i in range(n):
        acc = acc * 0.5 + x[i + 2] * a
    check(pre_loop_value_used_after, [n, x], value=acc * acc + a * acc)


def test_loop_carried_nonlinear():
    n = 5
    x = np.array([0.7, 0.3])
    s = x[1]
    for _ in range(n):
        s = s * x[0] + np.sin(s)
    check(loop_carried_nonlinear, [n, x], value=s)


def test_nested_loops_with_inner_break():
    x = np.array([1.0, 2.0, 3.0])
    # s = sum_{j <= i} x_i x_j, so ds/dx_k = sum(x) + x_k
    check(nested_inner_break, [3, x], expected={1: x.sum() + x}, value=25.0)


def test_early_return_inside_loop_in_func():
    # 1.0 -> 1.5, 2.25, 3.375 > 3: returns 3.375 * v = 1.5**3 * v**2
    check(func_return_in_loop, [10, np.array([1.0])], expected={1: [6.75]}, value=3.375)
    # never exceeds the limit: returns 1.5**3 * v
    check(func_return_in_loop, [3, np.array([0.1])], expected={1: [3.375]}, value=0.3375)


def test_func_with_loop_and_nonlinear_accumulator_gh1740():
    check(func_loop_nonlinear, [3, np.array([1.0, 2.0, 3.0])], expected={1: [12.0] * 3}, value=36.0)


# --------------------------------------------------------------------------- in-place updates


def _inplace_grads(kernel, a_np, b_np=None, dtype=F64):
    a = wp.array(a_np, dtype=dtype, requires_grad=True)
    inputs = [a]
    if b_np is not None:
        b = wp.array(b_np, dtype=dtype, requires_grad=True)
        inputs.append(b)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=len(a_np), inputs=inputs)
    tape.backward(grads={a: wp.ones(len(a_np), dtype=dtype)})
    return a.numpy(), [arr.grad.numpy() for arr in inputs]


def _inplace_value(kernel, a_np, b_np=None) -> float:
    a = wp.array(a_np, dtype=F64)
    inputs = [a] if b_np is None else [a, wp.array(b_np, dtype=F64)]
    wp.launch(kernel, dim=len(a_np), inputs=inputs)
    return float(a.numpy().sum())


def test_inplace_multiply_f32_spec_numbers():
    a_val, (a_grad, b_grad) = _inplace_grads(mul_inplace_f32, np.array([10.0], np.float32),
                                             np.array([2.0], np.float32), dtype=float)
    np.testing.assert_allclose(a_val, [20.0])
    np.testing.assert_allclose(a_grad, [2.0])
    np.testing.assert_allclose(b_grad, [10.0])  # Warp gives 20 (uses the overwritten a)


def test_inplace_multiply_f64_vs_finite_differences():
    a0 = np.array([10.0, -3.0, 0.5])
    b0 = np.array([2.0, 4.0, -1.5])
    a_val, (a_grad, b_grad) = _inplace_grads(mul_inplace, a0, b0)
    np.testing.assert_allclose(a_val, a0 * b0)
    np.testing.assert_allclose(a_grad, b0)
    np.testing.assert_allclose(b_grad, a0)
    np.testing.assert_allclose(a_grad, fd_gradient(lambda a: _inplace_value(mul_inplace, a, b0), a0),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(b_grad, fd_gradient(lambda b: _inplace_value(mul_inplace, a0, b), b0),
                               rtol=1e-6, atol=1e-6)


def test_inplace_square():
    a0 = np.array([1.0, 2.0, 3.0])
    a_val, (a_grad,) = _inplace_grads(square_inplace, a0)
    np.testing.assert_allclose(a_val, [1.0, 4.0, 9.0])
    np.testing.assert_allclose(a_grad, [2.0, 4.0, 6.0])  # Warp gives [2, 8, 18]
    np.testing.assert_allclose(a_grad, fd_gradient(lambda a: _inplace_value(square_inplace, a), a0),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("iters", [0, 1, 5])
def test_dynamic_product_trip_counts(iters):
    x = np.array([1.5, -0.5, 3.0, 2.0, 0.25])
    p = np.prod(x[:iters])
    expected = np.zeros(5)
    for k in range(iters):
        expected[k] = np.prod(np.delete(x[:iters], k))
    check(prod_dynamic, [iters, x], expected={1: expected}, value=p)


@wp.kernel
def long_recurrence(n: int, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    s = F64(0.0)
    for outer in range(3):  # each inner loop reserves stack room while earlier values sit on it
        for k in range(n):
            s = s * x[0] + x[1]
    out[0] = s


def test_long_loops_grow_the_stack_and_keep_its_values():
    """900 saved values per thread: the stack grows (rt_reserve) twice mid-kernel, and every
    saved value counts (d out / d x0 sums s_k over all 900 steps, with |x0| ~ 1)."""
    check(long_recurrence, [300, np.array([1.0005, 0.3])], rtol=1e-9, fd_rtol=1e-5,
          fd_atol=1e-6)


@wp.kernel
def skipped_inner_loops(n: int, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    a = x[0]
    s = x[1]
    for k in range(n):
        if k < 2:  # the loop inside runs in the first iterations only
            for j in range(n):
                s = s * F64(0.9) + a * F64(0.1)
        s = s * a * F64(0.5) + F64(0.1)
        a = a * F64(0.9) + s * F64(0.1)
    out[0] = s


@pytest.mark.parametrize("mode", ["release", "debug"])
def test_later_iterations_that_skip_an_inner_loop(mode):
    """The inner loop's pushes take the room the outer loop reserved for its later iterations,
    which then skip it: each iteration of a loop holding loops reserves its own room (the
    later iterations pushed past the stack's end: out of bounds in debug mode, memory after
    the stack in release)."""
    saved = wp.config.mode
    wp.config.mode = mode
    try:
        check(skipped_inner_loops, [40, np.array([0.97, 0.4])], rtol=1e-9, fd_rtol=1e-5,
              fd_atol=1e-7)
    finally:
        wp.config.mode = saved


@wp.func
def still_above(x: F64, floor: F64) -> bool:
    return x * x > floor


@wp.kernel
def halve_while_func(floor: F64, x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    i = wp.tid()
    v = x[i]
    while still_above(v, floor) if floor > F64(0.0) else False:  # statements of its own
        v = v * F64(0.5) + F64(0.01) * x[i]
    out[0] += v


@pytest.mark.parametrize("mode", ["release", "debug"])
def test_while_condition_with_a_function_call_and_a_conditional(mode):
    """A while-condition that computes first (a @wp.func call, a conditional expression) runs
    at the top of every iteration: v = 3.0 halves (plus 1% of x) while v^2 > 0.5, 3 times."""
    saved = wp.config.mode
    wp.config.mode = mode
    try:
        check(halve_while_func, [0.5, np.array([3.0])], expected={1: [1.0 / 8.0 + 0.01 * 1.75]},
              value=3.0 / 8.0 + 0.01 * 3.0 * 1.75)
    finally:
        wp.config.mode = saved


@wp.kernel
def add_then_read(x: wp.array(dtype=F64), e: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    i = wp.tid()
    e[i] += x[i]
    t = e[i] * e[i]  # sees the first add, not the second
    e[i] += x[i] * F64(3.0)
    out[0] += t


@wp.kernel
def energy_steps(x: wp.array(dtype=F64), e: wp.array(dtype=F64), n: int,
                 out: wp.array(dtype=F64)):
    i = wp.tid()
    s = F64(0.0)
    for k in range(n):
        e[i] += x[i] * F64(0.5)  # an add into an array the loop reads back
        s = s + wp.sin(e[i]) * F64(k + 1)
        if e[i] > F64(2.0):
            e[i] -= F64(1.5)
    out[0] += s + e[i] * e[i]


@pytest.mark.parametrize("mode", ["release", "debug"])
def test_reads_after_an_atomic_add_see_it_in_the_adjoint_too(mode):
    """The adjoint's replay adds into the launch's copy of e as the forward did, so a read
    between two adds sees the first only (Warp's replay skips atomics: its read sees the
    final element, x.grad 12 here instead of 6). In a loop too, interchanged or not."""
    saved = wp.config.mode
    wp.config.mode = mode
    try:
        check(add_then_read, [np.array([1.0]), np.array([2.0])], expected={0: [6.0], 1: [6.0]},
              value=9.0)
        check(energy_steps, [np.array([0.3, 0.45, 0.7]), np.array([0.1, -0.2, 1.0]), 12],
              dim=3, fd_rtol=1e-6, fd_atol=1e-7)
    finally:
        wp.config.mode = saved
