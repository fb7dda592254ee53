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
