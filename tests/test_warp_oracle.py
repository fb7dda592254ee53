"""Side-by-side checks against warp-lang, where Warp's gradients are right (no dynamic loops).

The same Python functions are compiled by both libraries; forward values and tape gradients must
agree to float32 precision. Skipped when warp-lang is not installed: finite differences stay
the oracle of the rest of the suite.
"""

import importlib.util
import pathlib

import numpy as np
import pytest

import difftape

warp = pytest.importorskip("warp")
warp.config.quiet = True


def load_kernels(lib):
    """Execute oracle/kernels.py with ``wp`` bound to ``lib``; return the module."""
    path = pathlib.Path(__file__).parent / "oracle" / "kernels.py"
    spec = importlib.util.spec_from_file_location(f"oracle_kernels_{lib.__name__}", path)
    module = importlib.util.module_from_spec(spec)
    module.wp = lib
    spec.loader.exec_module(module)
    return module


def _run(lib, fns, make_inputs, launches, seed_outputs):
    """Record ``launches`` with ``lib`` (difftape or warp); return outputs and input gradients."""
    module = load_kernels(lib)
    kernels = {name: lib.kernel(getattr(module, name)) for name in fns}
    arrays = make_inputs(lib)
    tape = lib.Tape()
    with tape:
        for name, dim, args in launches:
            lib.launch(kernels[name], dim=dim, inputs=[arrays[a] for a in args], device="cpu")
    seeds = {arrays[name]: lib.ones_like(arrays[name]) for name in seed_outputs}
    tape.backward(grads=seeds)
    return {name: (a.numpy().copy(), None if a.grad is None else a.grad.numpy().copy())
            for name, a in arrays.items()}


def _arrays(specs):
    """Arrays of ``specs``: name -> float32 data, or (data, the library's dtype name)."""
    def make(lib):
        return {name: lib.array(spec[0], dtype=getattr(lib, spec[1]), requires_grad=True)
                if isinstance(spec, tuple) else lib.array(spec, dtype=lib.float32,
                                                          requires_grad=True)
                for name, spec in specs.items()}
    return make


rng = np.random.default_rng(7)
CASES = {
    "elementwise+loss": (
        ["elementwise", "reduce_sum"],
        {"x": rng.uniform(-1.5, 1.5, 64).astype(np.float32), "y": np.zeros(64, np.float32),
         "loss": np.zeros(1, np.float32)},
        [("elementwise", 64, ["x", "y"]), ("reduce_sum", 64, ["y", "loss"])], ["loss"]),
    "stencil-2d": (
        ["stencil", "reduce_sum"],
        {"u": rng.uniform(0, 1, (12, 9)).astype(np.float32), "v": np.zeros((12, 9), np.float32),
         "w": np.zeros((12, 9), np.float32)},
        [("stencil", (12, 9), ["u", "v"]), ("stencil", (12, 9), ["v", "w"])], ["w"]),
    "static-loop": (
        ["static_loop"],
        {"x": rng.uniform(-2, 2, 16).astype(np.float32), "y": np.zeros(16, np.float32)},
        [("static_loop", 16, ["x", "y"])], ["y"]),
    "component-loops": (
        ["component_loops"],
        {"m": (rng.uniform(-1, 1, (10, 3, 3)).astype(np.float32), "mat33"),
         "v": (rng.uniform(-1, 1, (10, 3)).astype(np.float32), "vec3"),
         "out": (np.zeros((10, 3), np.float32), "vec3")},
        [("component_loops", 10, ["m", "v", "out"])], ["out"]),
    "negative-components": (
        ["negative_components"],
        {"m": (rng.uniform(-1, 1, (8, 2, 2)).astype(np.float32), "mat22"),
         "v": (rng.uniform(-1, 1, (8, 3)).astype(np.float32), "vec3"),
         "out": (np.zeros((8, 3), np.float32), "vec3")},
        [("negative_components", 8, ["m", "v", "out"])], ["out"]),
    "matrices-from-vectors": (
        ["matrices_from_vectors"],
        {"a": (rng.uniform(-1, 1, (6, 3)).astype(np.float32), "vec3"),
         "b": (rng.uniform(-1, 1, (6, 3)).astype(np.float32), "vec3"),
         "out": (np.zeros((6, 3, 3), np.float32), "mat33")},
        [("matrices_from_vectors", 6, ["a", "b", "out"])], ["out"]),
    "atomic-extrema-ties": (
        ["atomic_extrema"],
        {"x": np.array([1, 5, 3, 5, -2, -2], np.float32), "hi": np.full(1, -10, np.float32),
         "lo": np.full(1, 10, np.float32)},
        [("atomic_extrema", 6, ["x", "hi", "lo"])], ["hi", "lo"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_warp(case):
    fns, specs, launches, seeds = CASES[case]
    ours = _run(difftape, fns, _arrays(specs), launches, seeds)
    theirs = _run(warp, fns, _arrays(specs), launches, seeds)
    for name in specs:
        np.testing.assert_allclose(ours[name][0], theirs[name][0], rtol=2e-5, atol=1e-6,
                                   err_msg=f"forward value of {name}")
        if ours[name][1] is not None:
            np.testing.assert_allclose(ours[name][1], theirs[name][1], rtol=2e-5, atol=1e-6,
                                       err_msg=f"gradient of {name}")


def test_particle_to_grid_workload_matches_warp():
    """The benchmark's particle-to-grid program (a 3 x 3 x 3 stencil of static loops, weights
    picked by ``if`` on the loop variables, atomics into a grid), run by both libraries."""
    from benchmarks import common

    inputs = common.load_numpy_part("particle_grid").make_inputs(3e-4, seed=5)
    results = []
    for lib in (difftape, warp):
        program = common.load_warp_style("particle_grid", lib)
        state = program.setup(inputs)
        program.prepare(state)
        tape = lib.Tape()
        with tape:
            program.forward(state)
        tape.backward(program.loss(state))
        results.append({"loss": program.loss(state).numpy(), "mass": state["mass"].numpy(),
                        "momentum": state["momentum"].numpy(), **program.gradients(state)})
    ours, theirs = results
    for name, want in theirs.items():
        scale = float(np.max(np.abs(want))) or 1.0
        np.testing.assert_allclose(ours[name], want, rtol=2e-5, atol=1e-6 * scale, err_msg=name)


def test_random_draws_match_warp():
    """The same states and integers as warp-lang, bit for bit; floats from sqrt, log, sin, cos,
    acos and pow within a few float32 ulps (the libraries' own functions), uniforms exactly."""
    n = 4096
    results = {}
    for lib in (difftape, warp):
        kernel = lib.kernel(load_kernels(lib).draws)
        arrays = {"f": lib.zeros((n, 3), dtype=lib.float32), "ints": lib.zeros((n, 2), dtype=lib.int32),
                  "uints": lib.zeros((n, 4), dtype=lib.uint32),
                  "v3": lib.zeros((n, 6), dtype=lib.vec3)}
        lib.launch(kernel, dim=n, inputs=[2024, *arrays.values()], device="cpu")
        results[lib.__name__] = {k: a.numpy() for k, a in arrays.items()}
    ours, theirs = results["difftape"], results["warp"]
    np.testing.assert_array_equal(ours["uints"], theirs["uints"])
    np.testing.assert_array_equal(ours["ints"], theirs["ints"])
    np.testing.assert_array_equal(ours["f"][:, :2], theirs["f"][:, :2])
    np.testing.assert_allclose(ours["f"][:, 2], theirs["f"][:, 2], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ours["v3"], theirs["v3"], rtol=0, atol=5e-6)


def test_sample_cdf_poisson_and_lower_bound_match_warp():
    """Kernel-language versions of Warp's loops: the same bins, counts (multiplication and
    transformed-rejection samplers) and states as warp-lang, and its Python-scope poisson."""
    n = 4096
    cdf = np.cumsum([0.1, 0.2, 0.05, 0.25, 0.4]).astype(np.float32)
    lams = np.array([0.0, 3.5, 12.0, 250.0], np.float32)
    results = {}
    for lib in (difftape, warp):
        kernel = lib.kernel(load_kernels(lib).library_draws)
        arrays = {"idx": lib.zeros((n, 3), dtype=lib.int32),
                  "counts": lib.zeros((n, 4), dtype=lib.uint32),
                  "states": lib.zeros(n, dtype=lib.uint32)}
        lib.launch(kernel, dim=n, inputs=[lib.array(cdf, dtype=lib.float32),
                                          lib.array(lams, dtype=lib.float32), *arrays.values()],
                   device="cpu")
        results[lib.__name__] = {k: a.numpy() for k, a in arrays.items()}
        results[lib.__name__]["python"] = [lib.poisson(lib.rand_init(5, k), lam)
                                           for k in range(4) for lam in (7.5, 40.0)]
    for key in ("idx", "counts", "states", "python"):
        np.testing.assert_array_equal(results["difftape"][key], results["warp"][key])
