"""The benchmark's workloads (``benchmarks/workloads``), run on difftape at a small size: each
tape's gradients match the workload's float64 reference within the benchmark's tolerance, so
a benchmark run never times a program that computes something else."""

import pytest

import difftape as wp
from benchmarks import common


@pytest.mark.parametrize("workload", common.WORKLOADS)
def test_gradients_match_the_float64_reference(workload):
    numpy_part = common.load_numpy_part(workload)
    inputs = numpy_part.make_inputs(2e-3, seed=1)
    program = common.load_warp_style(workload, wp)
    state = program.setup(inputs)
    program.prepare(state)
    tape = wp.Tape()
    with tape:
        program.forward(state)
    tape.backward(program.loss(state))
    error = common.max_rel_error(program.gradients(state), numpy_part.reference(inputs))
    assert error <= common.TOLERANCE[workload], error


def test_every_kernel_of_the_zoo_runs_and_renders():
    """``benchmarks/zoo.py`` on difftape alone, tiny: every case records, differentiates and
    lands in section 9 of RESULTS.md (the comparison with warp-lang is the benchmark's)."""
    from benchmarks import run, worker

    result = worker.zoo({"rounds": 1, "scale": 1e-4, "impls": ["difftape"]})
    zoo = common.load_warp_style("zoo", wp, f"{common.HERE}/zoo.py")
    assert list(result["cases"]) == list(zoo.CASES)
    for case, rec in result["cases"].items():
        assert "error" not in rec, (case, rec)
        assert rec["difftape"]["fwd_ms"] > 0 and rec["difftape"]["bwd_ms"] > 0
    fake = {"cases": {case: {**rec, "warp": rec["difftape"], "grad_diff": 0.0}
                      for case, rec in result["cases"].items()}}
    table = run._render_zoo(fake)
    assert sum(line.startswith("| ") for line in table) == len(zoo.CASES) + 1


def test_the_dynamic_loop_in_taichis_fp_mode_renders_and_counts_as_targets():
    """The dynamic loop rerun with difftape flushing denormals (``results["flushed"]``) gets
    its table under section 1 and target rows of its own; results without it render none."""
    from benchmarks import run

    ours = {"fwd_ms": 10.0, "bwd_ms": 40.0, "grad": {"status": "ok", "max_rel_error": 5e-7}}
    flushed = {"dynamic_loop@1": {"impls": {"difftape": ours,
                                            "taichi": {"fwd_ms": 60.0, "bwd_ms": 20.0}}}}
    table = run._render_flushed(flushed)
    assert "| 1 | 10.0 | 40.0 | 60.0 | 20.0 | 6.00 | 0.50 | 5.0e-07 |" in table
    assert run._render_flushed({}) == []
    results = {"main": {}, "flushed": flushed, "config": {"threads": [1]}}
    main = {"warp": {"fwd_ms": 200.0, "bwd_ms": 300.0},
            "difftape": {"fwd_ms": 100.0, "bwd_ms": 150.0},
            "taichi": {"fwd_ms": 60.0, "bwd_ms": 800.0}}
    results["main"]["dynamic_loop@1"] = {"impls": main}

