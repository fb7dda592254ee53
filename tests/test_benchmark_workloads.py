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
