"""The SGD optimizer (Warp's ``warp.optim.SGD``), with its update written as difftape kernels.

Momentum, dampening, Nesterov momentum and weight decay follow Warp (and PyTorch). One generic kernel
(compiled per scalar type) updates a flat scalar view of each parameter (``flat.py``); the momentum buffer
has the parameter's dtype, as in Warp.
"""

from __future__ import annotations

from typing import Any

import difftape as wp
from difftape._src import dtypes
from difftape._src.array import array

from .flat import check_grad, components, float_scalar, scalar_view, state_like


@wp.kernel
def sgd_step(g: wp.array(dtype=Any), b: wp.array(dtype=Any), lr: Any, momentum: Any,
             dampening: Any, weight_decay: Any, nesterov: int, t: int,
             params: wp.array(dtype=Any)):
    # One generic kernel: it compiles once per parameter scalar type (float16 parameters are
    # read and stored through float32).
    i = wp.tid()
    gt = g[i]
    if weight_decay != 0.0:
        gt += weight_decay * params[i]
    if momentum != 0.0:
        bt = gt
        if t > 0:
            bt = momentum * b[i] + (1.0 - dampening) * gt
        if nesterov == 1:
            gt += momentum * bt
        else:
            gt = bt
        b[i] = bt
    params[i] = params[i] - lr * gt


_COMPUTE = {dtypes.float16: dtypes.float32, dtypes.float32: dtypes.float32,
            dtypes.float64: dtypes.float64}


class SGD:
    """Stochastic gradient descent with optional momentum, as ``warp.optim.SGD``.

    Each step sets ``g = grad + weight_decay * param``; with momentum, ``b = g`` on the first
    step and ``b = momentum * b + (1 - dampening) * g`` after, and ``g = b`` (or
    ``g + momentum * b`` with Nesterov); then ``param -= lr * g``. Parameters may be arrays of
    any shape of float16/32/64 scalars, or vectors, matrices, quaternions or transforms of them.

    Args:
        params: The arrays to optimize, or None to set them later with ``set_params``.
        lr: Learning rate (step size).
        momentum: Momentum factor (0 for plain gradient descent).
        dampening: Dampening of the gradient added to the momentum buffer.
        weight_decay: L2 penalty coefficient.
        nesterov: Use Nesterov momentum (needs ``momentum > 0``).

    Example:
        >>> opt = difftape.optim.SGD([x], lr=0.1, momentum=0.9)
        >>> tape.backward(loss); opt.step([x.grad]); tape.zero()
    """

    def __init__(self, params: list[array] | None = None, lr: float = 0.001,
                 momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False):
        self.b: list[array | None] = []
        self.set_params(params)
        self.lr = lr
        self.momentum = momentum
        self.dampening = dampening
        self.weight_decay = weight_decay
        self.nesterov = nesterov
        self.t = 0

    def set_params(self, params: list[array] | None) -> None:
        """Set the arrays to optimize; momentum buffers that no longer fit are reallocated as zeros.

        Raises:
            RuntimeError: for a parameter with an integer, bool or struct dtype, or not contiguous.
        """
        self.params = params
        if params is None or not isinstance(params, list) or not params:
            return
        if len(self.b) != len(params):
            self.b = [None] * len(params)
        for i, param in enumerate(params):
            scalar = float_scalar(param, "SGD")
            old = self.b[i]
            if old is None or old.dtype != param.dtype or old.shape != param.shape:
                self.b[i] = state_like(param, scalar)

    def reset_internal_state(self) -> None:
        """Zero the momentum buffers and the step count."""
        for buffer in self.b:
            if buffer is not None:
                buffer.zero_()
        self.t = 0

    def step(self, grad: list[array]) -> None:
        """Apply one SGD step to every parameter.

        Args:
            grad: Gradient arrays matching ``params`` in order, dtype and shape.

        Raises:
            RuntimeError: when no parameters are set.
            TypeError, ValueError: for a gradient whose dtype or shape differs from its parameter.
        """
        if self.params is None:
            raise RuntimeError("SGD parameters must be set before calling step(), got None")
        for i, param in enumerate(self.params):
            SGD.step_detail(grad[i], self.b[i], self.lr, self.momentum, self.dampening,
                            self.weight_decay, self.nesterov, self.t, param)
        self.t = self.t + 1

    @staticmethod
    def step_detail(g: array, b: array, lr: float, momentum: float, dampening: float,
                    weight_decay: float, nesterov: bool, t: int, params: array) -> None:
        """Apply the SGD update of step ``t`` (counted from 0) to one parameter array in place."""
        check_grad("SGD", params, g)
        scalar = _COMPUTE[float_scalar(params, "SGD")]
        n = components(params)
        if n == 0:
            return
        wp.launch(sgd_step, dim=n, inputs=[scalar_view(g), scalar_view(b), scalar(lr),
                                           scalar(momentum), scalar(dampening),
                                           scalar(weight_decay), int(bool(nesterov)), int(t),
                                           scalar_view(params)],
                  device=params.device)
