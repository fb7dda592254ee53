"""Every random draw of the registry (``randf``, ``sample_unit_sphere``…), checked from its record.

* The generator: states, integers and uniform floats equal an independent numpy version of
  Warp's PCG hash bit for bit, and values measured on warp-lang 1.19.
* Each draw's gradient to its float inputs (``randf(state, low, high)``) against central
  differences, in a kernel generated from the record's signature.
* The shapes: every ``sample_*`` lands where it should, with the right mean.
"""

from __future__ import annotations

import importlib.util
import textwrap

import numpy as np
import pytest

import difftape as wp
from difftape._src import dtypes
from difftape._src.ops import registry

DRAWS = [r for r in registry.all_builtins() if r.impl == "random"]
N = 4096


def draw_id(record) -> str:
    return f"{record.key}({', '.join(n for n, _ in record.overloads[0].inputs)})"


# --- An independent numpy version of Warp's generator ----------------------------------------------


def pcg(state: np.ndarray) -> np.ndarray:
    """Jarzynski and Olano's PCG hash on uint32 arrays (numpy wraps uint32 arithmetic)."""
    with np.errstate(over="ignore"):
        b = state * np.uint32(747796405) + np.uint32(2891336453)
        c = ((b >> ((b >> np.uint32(28)) + np.uint32(4))) ^ b) * np.uint32(277803737)
    return (c >> np.uint32(22)) ^ c


def uniform(state: np.ndarray) -> np.ndarray:
    return (state >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)


@wp.kernel
def sequence(seed: int, lo: int, hi: int, states: wp.array2d(dtype=wp.uint32),
             floats: wp.array2d(dtype=float), ints: wp.array2d(dtype=int),
             uints: wp.array(dtype=wp.uint32)):
    i = wp.tid()
    states[i, 0] = wp.rand_init(seed)
    state = wp.rand_init(seed, i)
    states[i, 1] = state
    floats[i, 0] = wp.randf(state)
    states[i, 2] = state
    ints[i, 0] = wp.randi(state)
    ints[i, 1] = wp.randi(state, lo, hi)
    uints[i] = wp.randu(state, wp.uint32(3), wp.uint32(4000000000))
    floats[i, 1] = wp.randf(state, -2.5, 7.0)
    states[i, 3] = state


def test_states_and_values_match_a_numpy_version_of_warps_generator():
    seed, lo, hi = 12345, -7, 1000
    states = wp.zeros((N, 4), dtype=wp.uint32)
    floats = wp.zeros((N, 2), dtype=float)
    ints = wp.zeros((N, 2), dtype=int)
    uints = wp.zeros(N, dtype=wp.uint32)
    wp.launch(sequence, dim=N, inputs=[seed, lo, hi, states, floats, ints, uints])

    i = np.arange(N, dtype=np.uint32)
    s = pcg(np.uint32(seed) + pcg(i))
    np.testing.assert_array_equal(states.numpy()[:, 0], pcg(np.full(N, seed, np.uint32)))
    np.testing.assert_array_equal(states.numpy()[:, 1], s)
    s = pcg(s)
    np.testing.assert_array_equal(floats.numpy()[:, 0], uniform(s))
    np.testing.assert_array_equal(states.numpy()[:, 2], s)
    s = pcg(s)
    np.testing.assert_array_equal(ints.numpy()[:, 0], s.view(np.int32))
    s = pcg(s)
    np.testing.assert_array_equal(ints.numpy()[:, 1], (s % np.uint32(hi - lo)).astype(np.int64) + lo)
    s = pcg(s)
    np.testing.assert_array_equal(uints.numpy(), s % np.uint32(4000000000 - 3) + np.uint32(3))
    s = pcg(s)
    want = np.float32(7.0 + 2.5) * uniform(s) + np.float32(-2.5)
    np.testing.assert_array_equal(floats.numpy()[:, 1], want)
    np.testing.assert_array_equal(states.numpy()[:, 3], s)


def test_values_measured_on_warp():
    # warp-lang 1.19, Python scope: wp.rand_init(12345, 3) and the first draw of each function
    state = wp.rand_init(12345, 3)
    assert state == 2940930219 and wp.rand_init(7) == 2120684060
    assert wp.randf(state) == 0.2830161452293396
    assert wp.randf(state, -2.5, 7.0) == 0.18865346908569336
    assert wp.randi(state, -7, 1000) == 501 and wp.randu(state) == 1215545173
    assert wp.randn(state) == pytest.approx(-1.5867936611175537, abs=3e-7)
    np.testing.assert_allclose(wp.sample_unit_sphere(state),
                               [-0.8814043998718262, 0.04508547484874725, 0.4251182973384857],
                               atol=3e-7)


def test_python_scope_leaves_the_state_and_draws_what_a_kernel_draws_first():
    state = wp.rand_init(99, 5)
    first = wp.randn(state)
    assert wp.randn(state) == first and wp.rand_init(99, 5) == state
    with pytest.raises(TypeError, match=r"randf\(\) does not take 2 arguments"):
        wp.randf(state, 1.0)


# --- Records ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("record", DRAWS, ids=draw_id)
def test_every_draw_is_complete(record):
    assert record.doc and "\n" not in record.doc
    assert record.draws >= 1
    (first, state_type), *rest = record.overloads[0].inputs
    assert (first, state_type) == ("state", dtypes.uint32)
    for name, t in rest:
        assert not record.differentiable[name] or dtypes.is_float(t), name
    if not record.is_differentiable:
        assert record.reason.strip()


def _load(tmp_path, name: str, source: str):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DIFFERENTIABLE = [r for r in DRAWS if r.is_differentiable]


@pytest.mark.parametrize("record", DIFFERENTIABLE, ids=draw_id)
def test_draw_gradients_match_central_differences(record, tmp_path):
    """A kernel ``out[i] = wp.<key>(state, a[i], b[i], ...)`` from the record's signature; the
    tape's gradient of ``sum(w * out)`` to each input against central differences."""
    params = record.overloads[0].inputs[1:]
    output = record.overloads[0].output
    spell = dtypes.type_name
    source = f"""
        import difftape as wp

        @wp.kernel
        def draw({', '.join(f'{n}: wp.array(dtype=wp.{spell(t)})' for n, t in params)},
                 out: wp.array(dtype=wp.{spell(output)})):
            i = wp.tid()
            state = wp.rand_init(21, i)
            out[i] = wp.{record.key}(state, {', '.join(f'{n}[i]' for n, _ in params)})
    """
    kernel = _load(tmp_path, f"draw_{record.key}", source).draw
    rng = np.random.default_rng(3)
    n = 64
    data = {name: rng.uniform(-2.0, 2.0, n).astype(np.float32) + (3.0 if k else 0.0)
            for k, (name, _) in enumerate(params)}
    weights = rng.standard_normal(n).astype(np.float32)

    def loss(values: dict) -> float:
        out = wp.zeros(n, dtype=float)
        wp.launch(kernel, dim=n, inputs=[wp.array(values[name], dtype=float) for name, _ in params]
                  + [out])
        return float(np.dot(out.numpy().astype(np.float64), weights))

    arrays = {name: wp.array(value, dtype=float, requires_grad=True) for name, value in data.items()}
    out = wp.zeros(n, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=n, inputs=[arrays[name] for name, _ in params] + [out])
    tape.backward(grads={out: wp.array(weights, dtype=float)})
    eps = 1e-2  # the draws are linear in their float inputs: float32 differences stay exact
    for name, _ in params:
        grad = arrays[name].grad.numpy()
        if not record.differentiable[name]:
            assert not grad.any(), name
            continue
        direction = rng.uniform(-1.0, 1.0, n).astype(np.float32)
        plus = {**data, name: data[name] + eps * direction}
        minus = {**data, name: data[name] - eps * direction}
        fd = (loss(plus) - loss(minus)) / (2 * eps)
        assert np.dot(grad, direction) == pytest.approx(fd, rel=2e-3, abs=1e-3), name


# --- Shapes -----------------------------------------------------------------------------------------


@wp.kernel
def shapes(v2: wp.array2d(dtype=wp.vec2), v3: wp.array2d(dtype=wp.vec3), f: wp.array(dtype=float)):
    i = wp.tid()
    state = wp.rand_init(5, i)
    v2[i, 0] = wp.sample_triangle(state)
    v2[i, 1] = wp.sample_unit_ring(state)
    v2[i, 2] = wp.sample_unit_disk(state)
    v2[i, 3] = wp.sample_unit_square(state)
    v3[i, 0] = wp.sample_unit_sphere_surface(state)
    v3[i, 1] = wp.sample_unit_sphere(state)
    v3[i, 2] = wp.sample_unit_hemisphere_surface(state)
    v3[i, 3] = wp.sample_unit_hemisphere(state)
    v3[i, 4] = wp.sample_unit_cube(state)
    f[i] = wp.randn(state)


def test_every_shape_lands_where_it_should():
    n = 1 << 16
    v2, v3, f = wp.zeros((n, 4), dtype=wp.vec2), wp.zeros((n, 5), dtype=wp.vec3), wp.zeros(n)
    wp.launch(shapes, dim=n, inputs=[v2, v3, f])
    v2, v3, f = v2.numpy().astype(np.float64), v3.numpy().astype(np.float64), f.numpy()
    tri, ring, disk, square = (v2[:, k] for k in range(4))
    sphere, ball, hemi, half_ball, cube = (v3[:, k] for k in range(5))
    tol = 4.0 / np.sqrt(n)  # about 7 standard errors of a mean of values in [-1, 1]
    assert (tri >= 0).all() and (tri.sum(axis=1) <= 1 + 1e-6).all()
    np.testing.assert_allclose(tri.mean(axis=0), [1 / 3, 1 / 3], atol=tol)
    for unit in (ring, sphere, hemi):
        np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-6)
    for inside in (disk, ball, half_ball):
        assert (np.linalg.norm(inside, axis=1) <= 1 + 1e-6).all()
    assert (hemi[:, 2] >= 0).all() and (half_ball[:, 2] >= 0).all()
    assert (square >= -0.5).all() and (square < 0.5).all() and (cube >= -0.5).all() \
        and (cube < 0.5).all()
    for centred in (ring, disk, square, sphere, ball, cube):
        np.testing.assert_allclose(centred.mean(axis=0), 0.0, atol=tol)
    np.testing.assert_allclose(hemi[:, 2].mean(), 0.5, atol=tol)  # E[cos phi] on a hemisphere
    # in the ball, |p|^3 is uniform: mean 1/2; on the disk |p|^2 is
    np.testing.assert_allclose((np.linalg.norm(ball, axis=1) ** 3).mean(), 0.5, atol=tol)
    np.testing.assert_allclose((np.linalg.norm(disk, axis=1) ** 2).mean(), 0.5, atol=tol)
    assert abs(f.mean()) < tol and abs(f.std() - 1.0) < 2 * tol


# --- The draws that loop: sample_cdf, poisson; lower_bound ---------------------------------------


@wp.kernel
def searches(cdf: wp.array(dtype=float), values: wp.array(dtype=float), lams: wp.array(dtype=float),
             bins: wp.array2d(dtype=int), counts: wp.array2d(dtype=wp.uint32)):
    i = wp.tid()
    bins[i, 0] = wp.lower_bound(cdf, values[i])
    bins[i, 1] = wp.lower_bound(cdf, 1, 3, values[i])
    state = wp.rand_init(9, i)
    bins[i, 2] = wp.sample_cdf(state, cdf)
    for k in range(lams.shape[0]):
        counts[i, k] = wp.poisson(state, lams[k])
    bins[i, 3] = wp.randi(state)  # after the draws above: they advanced the state


def test_lower_bound_sample_cdf_and_poisson():
    n = 1 << 15
    weights = np.array([0.1, 0.2, 0.05, 0.25, 0.4])
    cdf = np.cumsum(weights).astype(np.float32)
    values = np.random.default_rng(0).uniform(-0.1, 1.1, n).astype(np.float32)
    lams = np.array([0.0, 0.7, 3.5, 9.99, 10.0, 60.0, 1000.0], np.float32)
    bins = wp.zeros((n, 4), dtype=int)
    counts = wp.zeros((n, lams.size), dtype=wp.uint32)
    wp.launch(searches, n, inputs=[wp.array(cdf, dtype=float), wp.array(values, dtype=float),
                                   wp.array(lams, dtype=float), bins, counts])
    bins, counts = bins.numpy(), counts.numpy().astype(np.float64)
    # Warp's lower_bound: the first element not below the value, the last index if none is
    np.testing.assert_array_equal(bins[:, 0], np.minimum(np.searchsorted(cdf, values), 4))
    np.testing.assert_array_equal(bins[:, 1], np.clip(np.searchsorted(cdf, values), 1, 2))
    frequencies = np.bincount(bins[:, 2], minlength=5) / n
    np.testing.assert_allclose(frequencies, weights, atol=4 * np.sqrt(0.25 / n))
    assert not counts[:, 0].any()
    for k, lam in enumerate(lams[1:], start=1):
        tolerance = 5 * np.sqrt(lam / n)  # standard errors of the mean
        assert abs(counts[:, k].mean() - lam) < tolerance, lam
        assert abs(counts[:, k].var() / lam - 1.0) < 0.05, lam
    # the states the draws left differ from thread to thread and from a fresh stream's
    state = pcg(np.uint32(9) + pcg(np.arange(n, dtype=np.uint32)))
    assert len(np.unique(bins[:, 3])) > n - 4 and (bins[:, 3] != pcg(state).view(np.int32)).all()


def test_poisson_in_python_scope_is_a_kernels_first_draw():
    assert wp.poisson(wp.rand_init(5, 2), 7.5) == 4 and wp.poisson(wp.rand_init(5, 2), 40.0) == 42
    with pytest.raises(RuntimeError, match="sample_cdf.. can only be called inside kernels"):
        wp.sample_cdf(wp.rand_init(1), None)
