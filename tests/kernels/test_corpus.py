"""Kernel corpus checks (STYLE §7.8): each corpus kernel's tape gradient vs central differences.

For each kernel: launch it on a ``wp.Tape``, seed every output's gradient with a fixed random
vector ``u`` (``tape.backward(grads={out: u})``), read the input gradients ``g``, and check
``⟨g, v⟩ ≈ ⟨u, (f(x+εv) − f(x−εv)) / 2ε⟩`` for random directions ``v``, where ``f`` launches the
kernel again (without a tape) on fresh copies of every argument. Tolerances come from the case.
Also: forward values against numpy references, and serial vs parallel CPU launches.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect

import numpy as np
import pytest

import difftape as wp
from difftape._src import launch as launch_module
from difftape._src.frontend import ir

from .corpus import CASES, CORPUS, Case, closure_other_value

DIRECTIONS = 3  # random directions v per kernel
NP_TO_WP = {np.dtype(np.float64): wp.float64, np.dtype(np.int32): wp.int32}


def param_names(case: Case) -> list[str]:
    return list(inspect.signature(case.kernel.func).parameters)


def build_args(case: Case, data: dict[str, object], grad: bool) -> dict[str, object]:
    """Fresh difftape arrays (copies) for every array argument; scalars pass through."""
    args = {}
    for name in param_names(case):
        value = data[name]
        if isinstance(value, np.ndarray):
            needs_grad = grad and value.dtype == np.float64 and (
                name in case.inputs or name in case.outputs)
            args[name] = wp.array(value.copy(), dtype=NP_TO_WP[value.dtype],
                                  requires_grad=needs_grad)
        else:
            args[name] = value
    return args


def launch(case: Case, args: dict[str, object]) -> None:
    wp.launch(case.kernel, case.dim, inputs=[args[n] for n in param_names(case)])


def evaluate(case: Case, data: dict[str, object]) -> dict[str, np.ndarray]:
    """f(x): the outputs of one untaped launch on fresh copies of ``data``."""
    args = build_args(case, data, grad=False)
    launch(case, args)
    return {name: args[name].numpy().copy() for name in case.outputs}


def tape_gradients(case: Case, data: dict[str, object], seeds: dict[str, np.ndarray]):
    """The input gradients after one taped launch and ``backward(grads=seeds)``."""
    args = build_args(case, data, grad=True)
    tape = wp.Tape()
    with tape:
        launch(case, args)
    tape.backward(grads={args[name]: wp.array(seeds[name], dtype=wp.float64)
                         for name in case.outputs})
    grads = {}
    for name in case.inputs:
        g = args[name].grad
        assert g is not None, f"kernel '{case.name}': input '{name}' has no gradient after backward"
        grads[name] = g.numpy().copy()
    return grads


def draw_seeds(case: Case, data: dict[str, object]) -> tuple[np.random.Generator, dict]:
    rng = np.random.default_rng(1234 + len(case.name))
    seeds = {name: rng.standard_normal(np.shape(data[name])) for name in case.outputs}
    return rng, seeds


def dot_product_mismatches(case: Case, data: dict, seeds: dict, grads: dict,
                           rng: np.random.Generator) -> list[str]:
    """Directions v for which ⟨grads, v⟩ and the central difference disagree (empty: all agree)."""
    failures = []
    for d in range(DIRECTIONS):
        v = {name: rng.standard_normal(np.shape(data[name])) for name in case.inputs}
        plus = dict(data, **{n: data[n] + case.eps * v[n] for n in case.inputs})
        minus = dict(data, **{n: data[n] - case.eps * v[n] for n in case.inputs})
        f_plus, f_minus = evaluate(case, plus), evaluate(case, minus)
        numeric = sum(float(np.sum(seeds[n] * (f_plus[n] - f_minus[n]))) for n in case.outputs)
        numeric /= 2.0 * case.eps
        analytic = sum(float(np.sum(grads[n] * v[n])) for n in case.inputs)
        if not np.isclose(analytic, numeric, rtol=case.rtol, atol=case.atol):
            failures.append(f"direction {d}: <grad, v> = {analytic!r}, finite difference = "
                            f"{numeric!r}, difference {analytic - numeric:.3e}")
    return failures


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_gradient_matches_central_differences(case: Case):
    data = case.make(case.rng())
    rng, seeds = draw_seeds(case, data)
    grads = tape_gradients(case, data, seeds)
    failures = dot_product_mismatches(case, data, seeds, grads, rng)
    assert not failures, (
        f"kernel '{case.name}': tape gradient disagrees with central differences:\n  "
        + "\n  ".join(failures) + f"\ngradients: {grads}")


@pytest.mark.parametrize("name", ["loop_static_literal", "constants_module"])
def test_gradient_with_static_loops_kept(name):
    # These kernels' loops are unrolled (max_unroll); kept as loops they take the loop adjoint.
    case = CASES[name]
    kept = dataclasses.replace(case, kernel=wp.kernel(case.kernel.func, max_unroll=0))
    assert _loops(case.kernel) == 0 < _loops(kept.kernel)
    test_gradient_matches_central_differences(kept)


def _loops(kernel) -> int:
    return sum(isinstance(s, ir.For) for s in ir.walk_stmts(kernel.ir.body))


@pytest.mark.parametrize("name", ["arith_basic", "loop_negative_step", "atomic_min_max"])
def test_checker_rejects_a_wrong_gradient(name):
    # The check must be sharp enough to notice a small error (autograd's test_tests.py).
    case = CASES[name]
    data = case.make(case.rng())
    rng, seeds = draw_seeds(case, data)
    grads = tape_gradients(case, data, seeds)
    assert not dot_product_mismatches(case, data, seeds, grads, draw_seeds(case, data)[0])
    wrong = {n: g * (1.0 + 1e-4) for n, g in grads.items()}
    assert dot_product_mismatches(case, data, seeds, wrong, rng)


REFERENCE_CASES = [c for c in CORPUS if c.reference is not None]


@pytest.mark.parametrize("case", REFERENCE_CASES, ids=lambda c: c.name)
def test_forward_matches_numpy_reference(case: Case):
    data = case.make(case.rng())
    got = evaluate(case, data)
    want = case.reference(data)
    for name in case.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-12,
                                   err_msg=f"kernel '{case.name}': output '{name}' differs from "
                                           "the numpy reference")


def test_corpus_has_enough_reference_checks():
    assert len(REFERENCE_CASES) >= 8
    assert 35 <= len(CORPUS) <= 60


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_taped_forward_equals_untaped_forward(case: Case):
    # Recording must not change forward values, nor must running backward.
    data = case.make(case.rng())
    args = build_args(case, data, grad=True)
    tape = wp.Tape()
    with tape:
        launch(case, args)
    plain = evaluate(case, data)
    for name in case.outputs:
        np.testing.assert_array_equal(args[name].numpy(), plain[name],
                                      err_msg=f"kernel '{case.name}', output '{name}'")


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_fast_launches_equal_the_general_path(case: Case, monkeypatch):
    # A kernel's first launches take the general path, which finds the compiled entry points;
    # later ones its generated fast path (launch_fast.py), where its parameters allow one.
    data = case.make(case.rng())
    _, seeds = draw_seeds(case, data)
    general = evaluate(case, data), tape_gradients(case, data, seeds)
    plan = launch_module.plan_of(case.kernel)
    ran = []
    for direction in ("fast_forward", "fast_adjoint"):
        fast = getattr(plan, direction)
        if fast is not None:
            def counted(*args, _fast=fast, _direction=direction):
                if _fast(*args):
                    ran.append(_direction)
                    return True
                return False
            monkeypatch.setattr(plan, direction, counted)
    fast = evaluate(case, data), tape_gradients(case, data, seeds)
    for want, got in zip(general, fast):
        for name in want:
            np.testing.assert_array_equal(got[name], want[name],
                                          err_msg=f"kernel '{case.name}', '{name}'")
    if plan.fast_forward is not None:
        assert "fast_forward" in ran
    if plan.fast_adjoint is not None:
        assert "fast_adjoint" in ran


def test_closures_with_different_values_are_different_kernels():
    # Two kernels from one factory share their source text and name but not their closure.
    x = np.linspace(-1.0, 1.0, 5)
    results = []
    for kernel, alpha in [(CASES["closure_constant"].kernel, 1.5), (closure_other_value, -0.5)]:
        y = wp.zeros(5, dtype=wp.float64)
        wp.launch(kernel, 5, inputs=[wp.array(x, dtype=wp.float64), y])
        results.append(y.numpy())
        np.testing.assert_allclose(y.numpy(), alpha * x * x + 2 * alpha * x, rtol=1e-14,
                                   err_msg=f"closure with alpha={alpha}")
    assert not np.allclose(results[0], results[1])


def test_bool_guard_kernel_really_is_bounds_checked():
    # branch_bool_ops_guard relies on mode="debug" to turn a missed short-circuit into an error.
    # Without this check, a broken `and` would read past the end of x and pass silently.
    @wp.kernel(mode="debug")
    def unguarded_read(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
        i = wp.tid()
        y[i] = x[i]

    x = wp.zeros(3, dtype=wp.float64)
    y = wp.zeros(5, dtype=wp.float64)
    with pytest.raises(IndexError):
        wp.launch(unguarded_read, 5, inputs=[x, y])


SCATTER_CASES = [c for c in CORPUS if c.scatter]


THREADING = ["parallel", "replicate"]  # atomics, or per-chunk replicas, at scatter sites


@contextlib.contextmanager
def cpu_threading(mode: str):
    saved = wp.config.cpu_parallel
    wp.config.cpu_parallel = mode
    try:
        yield
    finally:
        wp.config.cpu_parallel = saved


@pytest.fixture(params=THREADING)
def parallel_cpu(request):
    with cpu_threading(request.param):
        yield


def serial_then_parallel(case: Case, mode: str) -> tuple[tuple[dict, dict], tuple[dict, dict]]:
    data = case.make(case.rng())
    _, seeds = draw_seeds(case, data)
    assert wp.config.cpu_parallel not in THREADING
    serial = (evaluate(case, data), tape_gradients(case, data, seeds))
    with cpu_threading(mode):
        parallel = (evaluate(case, data), tape_gradients(case, data, seeds))
    return serial, parallel


@pytest.mark.parametrize("mode", THREADING)
@pytest.mark.parametrize("case", SCATTER_CASES, ids=lambda c: c.name)
def test_parallel_cpu_matches_serial(case: Case, mode: str):
    (fwd_s, grad_s), (fwd_p, grad_p) = serial_then_parallel(case, mode)
    for name in case.outputs:
        np.testing.assert_allclose(fwd_p[name], fwd_s[name], rtol=1e-12, atol=1e-15,
                                   err_msg=f"kernel '{case.name}': {mode} forward, '{name}'")
    for name in case.inputs:
        np.testing.assert_allclose(grad_p[name], grad_s[name], rtol=1e-12, atol=1e-15,
                                   err_msg=f"kernel '{case.name}': {mode} gradient, '{name}'")


def test_parallel_launch_uses_the_parallel_variant(parallel_cpu):
    case = CASES["atomic_add_sub"]
    source = case.kernel.source(parallel=wp.config.cpu_parallel == "parallel")
    assert "nogil=True" in source  # chunks run on several threads at once
    assert ("rep_view_y" in source) == (wp.config.cpu_parallel == "replicate")
    # Large enough that several chunks hit the same three elements at once.
    n = 20000
    x = np.random.default_rng(0).uniform(-1, 1, n)
    xa = wp.array(x, dtype=wp.float64, requires_grad=True)
    y = wp.zeros(3, dtype=wp.float64, requires_grad=True)
    z = wp.zeros(1, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(case.kernel, n, inputs=[xa, y, z])
    want = np.zeros(3)
    np.add.at(want, np.arange(n) % 3, x * x)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-10)
    np.testing.assert_allclose(z.numpy(), [-np.sin(x).sum()], rtol=1e-10)
    tape.backward(grads={y: wp.array([1.0, 2.0, 3.0], dtype=wp.float64),
                         z: wp.array([0.5], dtype=wp.float64)})
    expected = 2.0 * x * (1.0 + np.arange(n) % 3) - 0.5 * np.cos(x)
    np.testing.assert_allclose(xa.grad.numpy(), expected, rtol=1e-12)
