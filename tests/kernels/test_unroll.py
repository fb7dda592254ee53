"""Static loops are unrolled (``frontend/unroll.py``, ``max_unroll``): which loops, what values
the code computes, and gradients, each against the same kernel with its loops kept."""

import numpy as np
import pytest

import difftape as wp
from difftape._src.frontend import ir
from difftape._src.frontend.unroll import MAX_UNROLLED_SIZE, unrolled_size

F64 = wp.float64
THREE = wp.constant(3)


def _loops(kernel) -> int:
    return sum(isinstance(s, ir.For) for s in ir.walk_stmts(kernel.ir.body))


def _kept(kernel):
    """The same function as a kernel whose loops stay loops."""
    return wp.kernel(kernel.func, max_unroll=0)


@wp.kernel
def scatter_stencil(x: wp.array(dtype=F64), w: wp.array(dtype=F64), res: int,
                    grid: wp.array(dtype=F64)):
    p = wp.tid()
    cell = int(x[p] * F64(res))
    for dx in range(2):
        for dy in reversed(range(0, 4, 2)):
            wp.atomic_add(grid, (cell + dx) * (res + 4) + dy,
                          w[p] * wp.exp(x[p]) * F64(dx + dy + 1))  # exp: worth deferring


@wp.kernel
def carried_product(x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    i = wp.tid()
    p = F64(1.0)
    for k in range(THREE):
        p = p * x[(i + k) % x.shape[0]] + wp.sin(p)
    for k in range(5, 1, -2):  # 5, 3
        p = p * F64(k)
    out[i] = p + F64(k)  # the loop variable keeps its last value


@wp.func
def clipped(v: F64):
    if v > F64(1.0):
        return F64(1.0)  # leaves the inlined function only: the loop still unrolls
    return v * v


@wp.kernel
def inner_exits(x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    i = wp.tid()
    s = F64(0.0)
    for a in range(3):
        s += clipped(x[i] * F64(a))
        for b in range(i + 2):  # a loop of its own (thread-dependent bounds), left by break
            if b == a:
                break
            s += x[i] * F64(b)
    out[i] = s


@wp.func
def first_step_above(x: F64, limit: F64):
    for k in range(4):
        if x * F64(k + 1) > limit:
            return x * F64(k + 1)  # leaves the function from inside the loop: it stays a loop
    return F64(0.0)


@wp.kernel
def returns_from_loop(x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    i = wp.tid()
    out[i] = first_step_above(x[i], F64(1.0))


@wp.kernel
def own_break(x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    i = wp.tid()
    s = F64(0.0)
    for a in range(4):
        if x[i] * F64(a) > F64(2.0):
            break
        s += x[i] * F64(a + 1)
    out[i] = s


@wp.kernel
def no_trips(x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    i = wp.tid()
    k = int(7)
    for k in range(3, 3):
        out[i] = F64(-1.0)
    out[i] = x[i] * F64(k)


@wp.kernel
def long_and_big(x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    i = wp.tid()
    s = F64(0.0)
    for a in range(17):  # more iterations than max_unroll
        s += x[i] * F64(a)
    for a in range(16):  # at max_unroll, but with its inner loop unrolled, too big to unroll
        for b in range(16):
            t = x[i] * F64(a - b)
            t = wp.sin(t * t) + s
            s = s + t * F64(0.001)
    out[i] = s


@wp.kernel
def component_loops(x: wp.array(dtype=F64), out: wp.array(dtype=F64)):
    i = wp.tid()
    v = wp.vec3d(x[i], x[i] * x[i], wp.sin(x[i]))
    m = wp.mat33d()
    for r in range(3):
        for c in range(3):
            m[r, c] = v[r] * v[c] + F64(r - c)
    w = wp.vec3d()
    for c in range(3):
        w[c] = wp.dot(m[c], v)
    out[i] = w[0] + w[1] * w[2]


def _wheres(kernel) -> int:
    return sum(isinstance(e, ir.Call) and e.builtin.key == "where"
               for s in ir.walk_stmts(kernel.ir.body) for root in ir.statement_exprs(s)
               for e in ir.walk_expr(root))


def test_components_at_the_loop_variable_become_plain_components():
    # m[r, c] at a loop variable is a `where` over every component; unrolled, just the one
    assert _loops(component_loops) == 0 and _wheres(component_loops) == 0
    assert _wheres(_kept(component_loops)) > 0


def test_which_loops_are_unrolled():
    assert _loops(scatter_stencil) == 0 and _loops(_kept(scatter_stencil)) == 2
    assert _loops(carried_product) == 0
    assert _loops(inner_exits) == 3  # three copies of the inner loop, whose bounds vary
    assert _loops(own_break) == 1
    assert _loops(returns_from_loop) == 1
    assert _loops(no_trips) == 0
    assert _loops(long_and_big) == 2
    inner = next(s for s in ir.walk_stmts(long_and_big.ir.body) if isinstance(s, ir.For)
                 and s.stop.value == 16).body  # the outer loop kept: its body, the inner unrolled
    assert unrolled_size(inner) <= MAX_UNROLLED_SIZE < 16 * unrolled_size(inner)


def test_generated_code_of_an_unrolled_kernel():
    source = scatter_stencil.source(dim=1)
    assert "for it_" not in source and "for it_" in _kept(scatter_stencil).source(dim=1)
    # its scattered adds are now once per thread each: deferred to a prefetching flush (strips)
    forward = source.split("def scatter_stencil_adjoint")[0]
    assert forward.count("rt_prefetch(rep_view_grid") == 4


def _run(kernel, arrays: dict, dim: int, outputs: tuple[str, ...], scalars=()):
    """Outputs and input gradients (every float array) after a taped launch and a backward
    seeded with fixed weights on the outputs."""
    args = {name: wp.array(value, dtype=F64, requires_grad=True)
            for name, value in arrays.items()}
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim, inputs=_ordered(kernel, args, scalars))
    seeds = {args[n]: wp.array(np.linspace(0.5, 1.5, args[n].shape[0]), dtype=F64)
             for n in outputs}
    tape.backward(grads=seeds)
    values = {n: args[n].numpy().copy() for n in outputs}
    grads = {n: args[n].grad.numpy().copy() for n in arrays if n not in outputs}
    return values, grads


def _ordered(kernel, args: dict, scalars) -> list:
    scalars = list(scalars)
    return [args[p.name] if p.name in args else scalars.pop(0) for p in kernel.ir.params]


CASES = [
    (scatter_stencil, lambda r: {"x": r.uniform(0.0, 0.99, 40), "w": r.uniform(0.5, 1.5, 40),
                                 "grid": np.zeros(14 * 16)}, 40, ("grid",), (12,)),
    (carried_product, lambda r: {"x": r.uniform(-1.2, 1.2, 9), "out": np.zeros(9)}, 9,
     ("out",), ()),
    (inner_exits, lambda r: {"x": r.uniform(-1.5, 1.5, 7), "out": np.zeros(7)}, 7, ("out",), ()),
    (returns_from_loop, lambda r: {"x": r.uniform(0.1, 1.5, 9), "out": np.zeros(9)}, 9,
     ("out",), ()),
    (own_break, lambda r: {"x": r.uniform(0.1, 1.5, 9), "out": np.zeros(9)}, 9, ("out",), ()),
    (no_trips, lambda r: {"x": r.uniform(-1.0, 1.0, 5), "out": np.zeros(5)}, 5, ("out",), ()),
    (component_loops, lambda r: {"x": r.uniform(-1.0, 1.0, 6), "out": np.zeros(6)}, 6,
     ("out",), ()),
    (long_and_big, lambda r: {"x": r.uniform(-1.0, 1.0, 6), "out": np.zeros(6)}, 6, ("out",),
     ()),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0].key)
def test_unrolled_kernels_compute_what_their_loops_do(case):
    kernel, make, dim, outputs, scalars = case
    data = make(np.random.default_rng(7))
    values, grads = _run(kernel, data, dim, outputs, scalars)
    kept_values, kept_grads = _run(_kept(kernel), data, dim, outputs, scalars)
    for name in outputs:
        np.testing.assert_array_equal(values[name], kept_values[name], err_msg=name)
    for name in grads:
        np.testing.assert_allclose(grads[name], kept_grads[name], rtol=1e-13, atol=1e-13,
                                   err_msg=name)
    # and against central differences of the unrolled kernel's own forward
    eps = 1e-6
    weights = {n: np.linspace(0.5, 1.5, len(data[n])) for n in outputs}
    for name in grads:
        numeric = np.zeros_like(data[name])
        for k in range(len(numeric)):
            sums = []
            for sign in (1.0, -1.0):
                moved = {n: v.copy() for n, v in data.items()}
                moved[name][k] += sign * eps
                out, _ = _run(kernel, moved, dim, outputs, scalars)
                sums.append(sum(float(weights[n] @ out[n]) for n in outputs))
            numeric[k] = (sums[0] - sums[1]) / (2.0 * eps)
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-6, atol=1e-6, err_msg=name)


def test_loop_variable_values():
    x = wp.array(np.ones(2), dtype=F64)
    out = wp.zeros(2, dtype=F64)
    wp.launch(no_trips, 2, inputs=[x, out])  # no iteration: k keeps 7
    np.testing.assert_array_equal(out.numpy(), [7.0, 7.0])
    wp.launch(carried_product, 2, inputs=[wp.array(np.zeros(2), dtype=F64), out])
    p = np.sin(np.sin(np.sin(1.0))) * 5.0 * 3.0
    np.testing.assert_allclose(out.numpy(), [p + 3.0] * 2, rtol=1e-15)  # k ends at 3


def test_max_unroll_options():
    @wp.kernel(max_unroll=2)
    def two(x: wp.array(dtype=F64)):
        i = wp.tid()
        for a in range(2):
            x[i] += F64(a)
        for a in range(3):
            x[i] += F64(a)

    assert _loops(two) == 1
    module = scatter_stencil.module
    saved = wp.get_module_options(module)["max_unroll"]
    try:
        wp.set_module_options({"max_unroll": 0}, module)
        assert _loops(scatter_stencil) == 2
        grid = wp.zeros(14 * 16, dtype=F64)
        wp.launch(scatter_stencil, 3, inputs=[wp.array([0.1, 0.5, 0.9], dtype=F64),
                                              wp.array([1.0, 2.0, 3.0], dtype=F64), 12, grid])
        assert grid.numpy().sum() > 0
        assert "for it_" in scatter_stencil.program(1).source  # what the launch ran
    finally:
        wp.set_module_options({"max_unroll": saved}, module)
    assert _loops(scatter_stencil) == 0
    assert "for it_" not in scatter_stencil.program(1).source
