"""The Adam optimizer (Warp's ``warp.optim.Adam``), with its update written as difftape kernels.

One generic kernel (compiled per scalar type) updates a flat scalar view of each parameter (``flat.py``), so arrays
of any float element type, vectors and matrices included, share it. Moments are kept in the
parameter's dtype, float32 for float16 parameters (as in Warp).
"""

from __future__ import annotations

from typing import Any

import difftape as wp
from difftape._src import dtypes
from difftape._src.array import array

from .flat import check_grad, components, float_scalar, scalar_view, state_like


@wp.kernel
def adam_step(g: wp.array(dtype=Any), m: wp.array(dtype=Any), v: wp.array(dtype=Any),
              lr: Any, beta1: Any, beta2: Any, t: Any, eps: Any,
              params: wp.array(dtype=Any)):
    # One generic kernel: it compiles once per parameter scalar type (float16 parameters are
    # read and stored through float32, the moments' type).
    i = wp.tid()
    gi = g[i]
    m[i] = beta1 * m[i] + (1.0 - beta1) * gi
    v[i] = beta2 * v[i] + (1.0 - beta2) * gi * gi
    mhat = m[i] / (1.0 - wp.pow(beta1, t + 1.0))
    vhat = v[i] / (1.0 - wp.pow(beta2, t + 1.0))
    params[i] = params[i] - lr * mhat / (wp.sqrt(vhat) + eps)


_STATE_SCALAR = {dtypes.float16: dtypes.float32, dtypes.float32: dtypes.float32,
                 dtypes.float64: dtypes.float64}


class Adam:
    """Adaptive Moment Estimation (Adam), as ``warp.optim.Adam``.

    Keeps running averages of each gradient (first moment ``m``) and of its square (second
    moment ``v``), corrects their bias towards zero, and steps every scalar by
    ``lr * m_hat / (sqrt(v_hat) + eps)``. Parameters may be arrays of any shape whose elements
    are float16, float32 or float64 scalars, or vectors, matrices, quaternions or transforms of
    them.

    Args:
        params: The arrays to optimize, or None to set them later with ``set_params``.
        lr: Learning rate (step size).
        betas: ``(beta1, beta2)``, the decay rates of the first and second moments.
        eps: Added to the denominator for numerical stability.

    Example:
        >>> opt = difftape.optim.Adam([x], lr=0.01)
        >>> tape.backward(loss); opt.step([x.grad]); tape.zero()
    """

    def __init__(self, params: list[array] | None = None, lr: float = 0.001,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08):
        self.m: list[array | None] = []
        self.v: list[array | None] = []
        self.set_params(params)
        self.lr = lr
        self.beta1 = betas[0]
        self.beta2 = betas[1]
        self.eps = eps
        self.t = 0

    def set_params(self, params: list[array] | None) -> None:
        """Set the arrays to optimize; moment buffers that no longer fit are reallocated as zeros.

        Raises:
            RuntimeError: for a parameter with an integer, bool or struct dtype, or not contiguous.
        """
        self.params = params
        if params is None or not isinstance(params, list) or not params:
            return
        if len(self.m) != len(params):
            self.m = [None] * len(params)
            self.v = [None] * len(params)
        for i, param in enumerate(params):
            scalar = _STATE_SCALAR[float_scalar(param, "Adam")]
            for state in (self.m, self.v):
                old = state[i]
                if old is None or dtypes.scalar_of(old.dtype) is not scalar or \
                        components(old) != components(param):
                    state[i] = state_like(param, scalar)

    def reset_internal_state(self) -> None:
        """Zero the moment buffers and the step count."""
        for buffer in self.m + self.v:
            if buffer is not None:
                buffer.zero_()
        self.t = 0

    def step(self, grad: list[array]) -> None:
        """Apply one Adam step to every parameter.

        Args:
            grad: Gradient arrays matching ``params`` in order, dtype and shape.

        Raises:
            RuntimeError: when no parameters are set.
            TypeError, ValueError: for a gradient whose dtype or shape differs from its parameter.
        """
        if self.params is None:
            raise RuntimeError("Adam parameters must be set before calling step(), got None")
        for i, param in enumerate(self.params):
            Adam.step_detail(grad[i], self.m[i], self.v[i], self.lr, self.beta1, self.beta2,
                             self.t, self.eps, param)
        self.t = self.t + 1

    @staticmethod
    def step_detail(g: array, m: array, v: array, lr: float, beta1: float, beta2: float,
                    t: int, eps: float, params: array) -> None:
        """Apply the Adam update of step ``t`` (counted from 0) to one parameter array in place."""
        check_grad("Adam", params, g)
        scalar = _STATE_SCALAR[float_scalar(params, "Adam")]
        n = components(params)
        if n == 0:
            return
        wp.launch(adam_step, dim=n, inputs=[scalar_view(g), scalar_view(m), scalar_view(v),
                                            scalar(lr), scalar(beta1), scalar(beta2),
                                            scalar(float(t)), scalar(eps), scalar_view(params)],
                  device=params.device)
