"""Random draws inside kernels: in loops and branches, in while-conditions, in @wp.func, and the
errors for a state that is not a uint32 local.

A draw changes its state, a local every later draw reads: the adjoint's replay must draw the same
numbers the forward drew, in loops whose iterations run interchanged across threads too. Every
kernel is checked against the per-thread code of debug mode and its gradients against central
differences.
"""

import numpy as np
import pytest

import difftape as wp
from difftape._src.errors import KernelTypeError

from .modes import debug_reference


@wp.kernel
def noisy_loop(w: wp.array(dtype=float), bounds: wp.array(dtype=float), n: int,
               out: wp.array(dtype=float)):
    i = wp.tid()
    state = wp.rand_init(7, i)
    acc = float(0.0)
    for k in range(n):
        u = wp.randf(state, bounds[0], bounds[1])
        if wp.randf(state) < 0.5:
            acc = acc * w[k] + u
        else:
            acc = acc + wp.sin(u * w[k])
    out[i] = acc


@wp.func
def coin(state: wp.uint32, p: float):
    return wp.randf(state) < p  # the caller's state is not changed (arguments are values)


@wp.kernel
def random_walk(w: wp.array(dtype=float), out: wp.array(dtype=float), steps: wp.array(dtype=int)):
    i = wp.tid()
    state = wp.rand_init(3, i)
    acc = float(0.0)
    k = int(0)
    while wp.randf(state) < 0.8 and k < 40:  # a draw in the condition, every iteration
        acc = acc + w[k % 4] * wp.randn(state)
        if coin(state, 0.5):
            acc = acc * w[(k + 1) % 4]
        k += 1
    out[i] = acc * acc
    steps[i] = k


def _loss(kernel, arrays: dict, order: list, n: int, extra=()) -> float:
    out = wp.zeros(n, dtype=float)
    inputs = [arrays[name] for name in order] + list(extra)
    wp.launch(kernel, dim=n, inputs=inputs + [out] + ([wp.zeros(n, dtype=int)]
                                                      if kernel is random_walk else []))
    return out.numpy().astype(np.float64)


def _gradients(kernel, data: dict, order: list, n: int, weights, extra=()):
    arrays = {name: wp.array(value, dtype=float, requires_grad=True) for name, value in data.items()}
    out = wp.zeros(n, dtype=float, requires_grad=True)
    steps = [wp.zeros(n, dtype=int)] if kernel is random_walk else []
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=n, inputs=[arrays[name] for name in order] + list(extra) + [out]
                  + steps)
    tape.backward(grads={out: wp.array(weights, dtype=float)})
    return out.numpy().copy(), {name: a.grad.numpy().copy() for name, a in arrays.items()}


CASES = {
    "for loop with a branch on a draw": (
        noisy_loop, {"w": np.linspace(0.5, 1.0, 16, dtype=np.float32),
                     "bounds": np.array([0.2, 1.3], np.float32)}, ["w", "bounds"], (16,)),
    "while loop drawing in its condition": (
        random_walk, {"w": np.array([0.9, 1.1, 0.7, 1.05], np.float32)}, ["w"], ()),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("parallel", ["serial", "auto"])
def test_draws_in_loops_replay_the_forwards_numbers(case, parallel, monkeypatch):
    kernel, data, order, extra = CASES[case]
    monkeypatch.setattr(wp.config, "cpu_parallel", parallel)
    n = 1000
    weights = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    out, grads = _gradients(kernel, data, order, n, weights, extra)
    want_out, want_grads = debug_reference(lambda: _gradients(kernel, data, order, n, weights,
                                                              extra))
    np.testing.assert_array_equal(out, want_out)
    for name in data:
        np.testing.assert_allclose(grads[name], want_grads[name], rtol=1e-5, atol=1e-5)
    eps = 1e-3
    rng = np.random.default_rng(2)
    for name in data:
        direction = rng.uniform(-1.0, 1.0, data[name].shape).astype(np.float32)
        plus = {**data, name: data[name] + eps * direction}
        minus = {**data, name: data[name] - eps * direction}
        fd = np.dot(_loss(kernel, {k: wp.array(v, dtype=float) for k, v in plus.items()}, order,
                          n, extra) - _loss(kernel, {k: wp.array(v, dtype=float)
                                                     for k, v in minus.items()}, order, n, extra),
                    weights) / (2 * eps)
        assert np.dot(grads[name], direction) == pytest.approx(fd, rel=2e-3), name


def test_a_while_condition_with_a_draw_runs_every_iteration():
    n = 2000
    out, steps = wp.zeros(n, dtype=float), wp.zeros(n, dtype=int)
    wp.launch(random_walk, dim=n, inputs=[wp.array([1.0, 1.0, 1.0, 1.0], dtype=float), out, steps])
    k = steps.numpy()
    assert k.max() <= 40 and (k == 0).any() and (k > 5).any()
    assert k.mean() == pytest.approx(0.8 / 0.2, rel=0.15)  # geometric: p / (1 - p) steps


@pytest.mark.parametrize("source, message", [
    ("wp.randf(5)", "pass a uint32 local variable"),
    ("wp.randf(seeds[i])", "pass a uint32 local variable"),
    ("wp.randf(i)", "pass a uint32 local variable"),
    ("float(wp.poisson(seeds[i], 2.0))", "poisson.. advances the random state"),
])
def test_a_state_that_is_not_a_uint32_local_is_an_error(source, message, tmp_path):
    import importlib.util
    import textwrap

    path = tmp_path / "bad_state.py"
    path.write_text(textwrap.dedent(f"""
        import difftape as wp

        @wp.kernel
        def bad(seeds: wp.array(dtype=wp.uint32), out: wp.array(dtype=float)):
            i = wp.tid()
            out[i] = {source}
    """))
    spec = importlib.util.spec_from_file_location("bad_state", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(KernelTypeError, match=message) as err:
        wp.launch(module.bad, dim=1, inputs=[wp.zeros(1, dtype=wp.uint32), wp.zeros(1)])
    text = str(err.value)
    assert "'bad'" in text and 'bad_state.py", line 7' in text and source in text


@wp.kernel
def read_beside_a_draw(out: wp.array2d(dtype=wp.uint32)):
    i = wp.tid()
    state = wp.rand_init(1, i)
    x = state % wp.uint32(1000) + wp.uint32(wp.randf(state) * 0.0)  # read before the draw
    y = wp.uint32(wp.randf(state) * 0.0) + state % wp.uint32(1000)  # read after it
    out[i, 0] = x
    out[i, 1] = y


def test_a_read_beside_a_draw_sees_the_state_of_its_place_left_to_right():
    """As in Warp, operands are evaluated left to right: a read of the state left of a draw
    sees it before the draw (it saw it after, a value Warp never gives)."""
    from tests.ops.test_random_rules import pcg

    out = wp.zeros((2, 2), dtype=wp.uint32)
    wp.launch(read_beside_a_draw, 2, inputs=[out])
    s0 = pcg(np.uint32(1) + pcg(np.arange(2, dtype=np.uint32)))
    np.testing.assert_array_equal(out.numpy()[:, 0], s0 % 1000)
    np.testing.assert_array_equal(out.numpy()[:, 1], pcg(pcg(s0)) % 1000)


@wp.func
def draw_from_copy(state: wp.uint32) -> float:
    return wp.randf(state)


@wp.kernel
def copies_of_the_state(out: wp.array2d(dtype=float)):
    i = wp.tid()
    state = wp.rand_init(1, i)
    out[i, 0] = draw_from_copy(state)
    out[i, 1] = draw_from_copy(state)  # the same: the function drew from a copy, as in Warp
    out[i, 2] = wp.randf(state)


def test_a_function_draws_from_a_copy_of_the_state():
    out = wp.zeros((3, 3), dtype=float)
    wp.launch(copies_of_the_state, 3, inputs=[out])
    values = out.numpy()
    np.testing.assert_array_equal(values[:, 0], values[:, 1])
    np.testing.assert_array_equal(values[:, 0], values[:, 2])
