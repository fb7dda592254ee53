"""Gradient checking and Jacobians (Warp's ``warp.autograd``): ``import difftape.autograd``.

Like Warp, this module is not imported by ``import difftape``; it only re-exports.
"""

from difftape._src.autograd.check import gradcheck as gradcheck
from difftape._src.autograd.check import gradcheck_tape as gradcheck_tape
from difftape._src.autograd.jacobian import FunctionMetadata as FunctionMetadata
from difftape._src.autograd.jacobian import jacobian as jacobian
from difftape._src.autograd.jacobian import jacobian_fd as jacobian_fd
from difftape._src.autograd.plot import jacobian_plot as jacobian_plot

__all__ = ["FunctionMetadata", "gradcheck", "gradcheck_tape", "jacobian", "jacobian_fd",
           "jacobian_plot"]
