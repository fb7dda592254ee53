"""Launches call compiled entry points directly when every array is plain storage
(``backends/cpu_entry.py``): the signature the launcher builds must be the one Numba's typeof
gives, and anything else must still go through Numba's dispatcher, which types each call."""

import numba
import numpy as np
import pytest

import difftape as wp
from difftape._src import launch
from difftape._src.backends import cpu_entry


@wp.struct
class Body:
    pos: wp.array(dtype=wp.vec3)
    mass: wp.array(dtype=float)
    scale: float
    steps: wp.int32
    on: wp.bool


@pytest.fixture
def resolved(monkeypatch):
    """Every signature the launcher resolves, next to the one ``numba.typeof`` gives."""
    seen = []
    original = cpu_entry.entry_point

    def spy(program, adjoint, call_args):
        seen.append(([cpu_entry.numba_type(v) for v in call_args],
                     [numba.typeof(v) for v in call_args]))
        return original(program, adjoint, call_args)

    monkeypatch.setattr(cpu_entry, "entry_point", spy)
    return seen


def _kernels():
    @wp.kernel
    def mixed(x: wp.array(dtype=wp.vec3), m: wp.array2d(dtype=wp.float64), h: wp.array(dtype=wp.float16),
              s: float, n: wp.int32, u: wp.uint8, flag: wp.bool, offset: wp.vec3,
              y: wp.array(dtype=float)):
        i = wp.tid()
        v = x[i] * s + offset
        if flag:
            v = v * float(n + wp.int32(u))
        y[i] = wp.length(v) + float(m[i, 0]) + float(h[i])

    @wp.kernel
    def bodies(b: Body, out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = wp.length(b.pos[i]) * b.mass[i] * b.scale + float(b.steps)

    @wp.kernel
    def scatter(x: wp.array(dtype=float), idx: wp.array(dtype=wp.int32),
                out: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(out, idx[i], x[i] * x[i])

    @wp.kernel
    def grid(u: wp.array2d(dtype=float), v: wp.array2d(dtype=float)):
        i, j = wp.tid()
        v[i, j] = u[i, j] * u[i, j]

    return mixed, bodies, scatter, grid


@pytest.mark.parametrize("mode", ["serial", "replicate"])
def test_launcher_signatures_equal_numbas_typeof(resolved, mode, monkeypatch):
    monkeypatch.setattr(wp.config, "cpu_parallel", mode)
    mixed, bodies, scatter, grid = _kernels()
    n = 64
    rng = np.random.default_rng(0)
    x = wp.array(rng.standard_normal((n, 3)), dtype=wp.vec3, requires_grad=True)
    m = wp.array(rng.standard_normal((n, 2)), dtype=wp.float64)
    h = wp.array(rng.standard_normal(n).astype(np.float16), dtype=wp.float16)
    y = wp.zeros(n, dtype=float, requires_grad=True)
    b = Body()
    b.pos, b.mass = x, wp.array(rng.uniform(1, 2, n), dtype=float, requires_grad=True)
    b.scale, b.steps, b.on = 0.5, 3, True
    out = wp.zeros(n, dtype=float, requires_grad=True)
    xs = wp.array(rng.standard_normal(n), dtype=float, requires_grad=True)
    idx = wp.array(rng.integers(0, 8, n).astype(np.int32), dtype=wp.int32)
    acc = wp.zeros(8, dtype=float, requires_grad=True)
    u = wp.array(rng.standard_normal((8, 8)), dtype=float, requires_grad=True)
    v = wp.zeros((8, 8), dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(mixed, n, inputs=[x, m, h, 1.5, 2, 1, True, wp.vec3(1.0, 2.0, 3.0)],
                  outputs=[y])
        wp.launch(bodies, n, inputs=[b, out])
        wp.launch(scatter, n, inputs=[xs, idx, acc])
        wp.launch(grid, (8, 8), inputs=[u, v])
    tape.backward(grads={y: wp.ones(n, dtype=float), out: wp.ones(n, dtype=float),
                         acc: wp.ones(8, dtype=float), v: wp.ones((8, 8), dtype=float)})
    # four forwards and four adjoints resolved, each with the signature typeof gives
    assert len(resolved) == 8
    for ours, numbas in resolved:
        assert ours == numbas

    np.testing.assert_allclose(acc.numpy(), np.bincount(idx.numpy(), xs.numpy() ** 2, 8),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xs.grad.numpy(), 2 * xs.numpy(), rtol=1e-6)
    np.testing.assert_allclose(u.grad.numpy(), 2 * u.numpy(), rtol=1e-6)
    pos = x.numpy()
    np.testing.assert_allclose(out.numpy(), np.linalg.norm(pos, axis=1) * b.mass.numpy() * 0.5
                               + 3, rtol=1e-5)
    np.testing.assert_allclose(b.mass.grad.numpy(), np.linalg.norm(pos, axis=1) * 0.5,
                               rtol=1e-5)


def _program(kernel, adjoint=False):
    programs = [p for p in kernel._programs.values() if (p.adjoint if adjoint else p.forward)]
    assert len(programs) == 1
    return programs[0]


def test_arrays_that_are_not_plain_storage_go_through_the_dispatcher(resolved):
    @wp.kernel
    def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * x[i]

    base = np.arange(16, dtype=np.float32)
    strided = wp.array(base[::2], dtype=float, copy=False)  # every other element
    readonly = base[:8].copy()
    readonly.flags.writeable = False
    y = wp.zeros(8, dtype=float)
    for x in (strided, wp.array(readonly, dtype=float, copy=False)):
        assert x._plain_data is None
        wp.launch(square, 8, inputs=[x, y])
        np.testing.assert_array_equal(y.numpy(), x.numpy() ** 2)
    assert resolved == [] and _program(square).entries == [None, None]

    plain = wp.array(base[:8].copy(), dtype=float)
    wp.launch(square, 8, inputs=[plain, y])
    np.testing.assert_array_equal(y.numpy(), base[:8] ** 2)
    assert len(resolved) == 1 and _program(square).entries[0] is not None
    wp.launch(square, 8, inputs=[strided, y])  # the entry point is not used for it
    np.testing.assert_array_equal(y.numpy(), base[::2] ** 2)


def test_an_adjoint_that_is_not_plain_storage_goes_through_the_dispatcher(resolved):
    @wp.kernel
    def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * x[i]

    x = wp.array(np.arange(8, dtype=np.float32), dtype=float)
    y = wp.zeros(8, dtype=float)
    storage = np.zeros(16, dtype=np.float32)
    adj_x = wp.array(storage[::2], dtype=float, copy=False)  # every other element
    wp.launch(square, 8, inputs=[x], outputs=[y], adj_inputs=[adj_x], adj_outputs=[
        wp.ones(8, dtype=float)], adjoint=True)
    np.testing.assert_array_equal(storage[::2], 2 * x.numpy())
    np.testing.assert_array_equal(storage[1::2], 0)
    assert resolved == [] and _program(square, adjoint=True).entries == [None, None]


def test_storage_reshaped_in_place_is_an_error_not_a_crash():
    @wp.kernel
    def copy(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i]

    x, y = wp.zeros(8, dtype=float), wp.zeros(8, dtype=float)
    wp.launch(copy, 8, inputs=[x, y])  # the entry point is resolved with 1-D storage
    x.numpy().shape = (2, 4)  # numpy allows it; the entry point would misread the array
    with pytest.raises(wp.LaunchValueError,
                       match=r"launch\(copy.*argument 'x' \(position 0\).*shape \(2, 4\).*"
                             r"reshaped in place"):
        wp.launch(copy, 8, inputs=[x, y])


def test_launch_plan_marks_a_struct_with_a_strided_array_field_not_plain():
    b = Body()
    b.pos = wp.zeros(4, dtype=wp.vec3)
    b.mass = wp.array(np.ones(8, dtype=np.float32)[::2], dtype=float, copy=False)
    b.scale, b.steps, b.on = 1.0, 0, False

    @wp.kernel
    def total(b: Body, out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = b.mass[i] * b.scale

    out = wp.zeros(4, dtype=float)
    packed, plain = launch.pack_arguments(total, [b, out])
    assert not plain
    b.mass = wp.ones(4, dtype=float)
    packed, plain = launch.pack_arguments(total, [b, out])
    assert plain
    wp.launch(total, 4, inputs=[b, out])
    np.testing.assert_array_equal(out.numpy(), np.ones(4))


def _read_only(values) -> wp.array:
    data = np.array(values, dtype=np.float32)
    data.flags.writeable = False
    return wp.array(data, dtype=float, copy=False)


@wp.kernel
def _copy(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i]


@wp.kernel
def _total(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(y, 0, x[i])


@pytest.mark.parametrize("kernel", [_copy, _total], ids=["store", "atomic"])
def test_writing_read_only_memory_is_a_launch_error(kernel):
    with pytest.raises(wp.LaunchValueError, match=rf"launch\({kernel.key}\): the argument 'y' "
                       r"\(position 1\) wraps read-only numpy memory.*the kernel writes it"):
        wp.launch(kernel, 4, inputs=[wp.ones(4, dtype=float), _read_only(np.zeros(4))])


def test_an_adjoint_into_read_only_memory_is_a_launch_error_a_read_only_seed_is_not():
    x = wp.array(np.arange(4, dtype=np.float32), dtype=float)
    y = wp.zeros(4, dtype=float)
    with pytest.raises(wp.LaunchValueError, match=r"the adjoint of argument 'x' \(position 0\) "
                       r"wraps read-only numpy memory.*adjoint adds into it"):
        wp.launch(_copy, 4, inputs=[x], outputs=[y], adj_inputs=[_read_only(np.zeros(4))],
                  adj_outputs=[wp.ones(4, dtype=float)], adjoint=True)
    adj_x = wp.zeros(4, dtype=float)
    wp.launch(_copy, 4, inputs=[x], outputs=[y], adj_inputs=[adj_x],
              adj_outputs=[_read_only([1.0, 2.0, 3.0, 4.0])], adjoint=True)
    np.testing.assert_array_equal(adj_x.numpy(), [1.0, 2.0, 3.0, 4.0])


def test_writing_a_read_only_struct_field_is_a_launch_error():
    @wp.kernel
    def weigh(b: Body):
        i = wp.tid()
        b.mass[i] = b.scale

    b = Body()
    b.pos, b.mass = wp.zeros(4, dtype=wp.vec3), _read_only(np.ones(4))
    b.scale, b.steps, b.on = 2.0, 0, False
    with pytest.raises(wp.LaunchValueError, match=r"launch\(weigh.*'b\.mass'.*read-only"):
        wp.launch(weigh, 4, inputs=[b])
    b.mass = wp.ones(4, dtype=float)
    wp.launch(weigh, 4, inputs=[b])
    np.testing.assert_array_equal(b.mass.numpy(), [2.0] * 4)
