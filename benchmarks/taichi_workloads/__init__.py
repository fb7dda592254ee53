"""The benchmark workloads written for Taichi (``ti`` is injected by the runner).

Same interface as ``benchmarks/workloads`` (make_inputs/reference come from the Warp-style
module), plus ``backward(state)``: the kernels' ``.grad()`` in reverse order. Taichi's autodiff
forbids overwriting what a kernel reads, so per-step state lives in fields with a step axis.
"""
