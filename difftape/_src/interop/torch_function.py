"""A ``torch.autograd.Function`` adapter: a tape-recorded difftape computation as one torch op.

Each call copies its torch inputs into fresh difftape arrays, runs the user's function under a
fresh ``Tape`` and returns copies of the outputs. Its backward seeds the outputs with *copies* of
``grad_output``, so the caller's tensors are never aliased or zeroed (Warp GH-1732), and it
zeroes every gradient first, so backward can run again (``retain_graph=True``) with the same
answer. All state belongs to one call: calls may interleave freely.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence

import numpy as np

from difftape._src import dtypes
from difftape._src import tape as tape_module
from difftape._src.array import array
from difftape._src.errors import TapeError
from difftape._src.interop.torch_bridge import dtype_from_torch, import_torch


class TapeCall:
    """One forward call: its input and output arrays and the tape that recorded ``fn``."""

    def __init__(self, fn: Callable, args: tuple, dtype_hints: Sequence | None):
        torch = import_torch()
        self.lock = threading.Lock()
        self.tensor_positions: list[int] = []
        self.inputs: list[array | None] = []  # per tensor argument; None when it needs no grad
        self.input_dtypes: list = []  # torch dtype of each tensor argument, for its gradient
        call_args = []
        for position, value in enumerate(args):
            if isinstance(value, torch.Tensor):
                hints = dtype_hints or ()
                hint = hints[position] if position < len(hints) else None
                converted = _array_copy(value, hint)
                self.tensor_positions.append(position)
                self.input_dtypes.append(value.dtype)
                self.inputs.append(converted if converted.requires_grad else None)
                call_args.append(converted)
            else:
                call_args.append(value)
        self.tape = tape_module.Tape()
        if tape_module.active_tape() is not None:
            raise TapeError(
                "a difftape.torch.tape_function was called inside `with wp.Tape()`; it records "
                "its own tape, so call it outside the difftape tape (torch tracks its gradient)")
        with self.tape:
            result = fn(*call_args)
        self.single = not isinstance(result, (tuple, list))
        self.outputs: list[array] = [result] if self.single else list(result)
        for out in self.outputs:
            if not isinstance(out, array) or out.is_annotation:
                raise TypeError(f"a tape_function must return difftape arrays, got {out!r}")
            if any(out is a for a in call_args):
                raise TapeError(
                    "a tape_function returned one of its input arrays; write the result into a "
                    "new array (wp.zeros_like(x, requires_grad=True)) so its gradient stays "
                    "separate")

    def output_tensors(self) -> list:
        torch = import_torch()
        return [torch.from_numpy(np.array(out.numpy(), copy=True)) for out in self.outputs]

    def differentiable(self, out: array) -> bool:
        return out.requires_grad and dtypes.is_float(dtypes.scalar_of(out.dtype))

    def backward(self, grad_outputs: Sequence) -> list:
        """Input gradients (fresh tensors, None where not needed) for ``grad_outputs``."""
        torch = import_torch()
        with self.lock:
            self.tape.zero()
            for a in self.inputs + self.outputs:
                if a is not None and a.grad is not None:
                    a.grad.zero_()
            for out, g in zip(self.outputs, grad_outputs):
                if g is not None and out.grad is not None:
                    # np.copyto copies: the seed never aliases the caller's grad_output.
                    np.copyto(out.grad.numpy(), g.detach().cpu().numpy(), casting="same_kind")
            self.tape.backward()
            return [None if a is None else
                    torch.from_numpy(np.array(a.grad.numpy(), copy=True)).to(dtype)
                    for a, dtype in zip(self.inputs, self.input_dtypes)]


def _array_copy(t, dtype_hint) -> array:
    """A new array holding a copy of tensor ``t``, with a zero gradient when ``t`` needs one."""
    values = np.array(t.detach().cpu().numpy(), copy=True)
    dtype = dtype_hint if dtype_hint is not None else dtype_from_torch(t.dtype)
    needs_grad = bool(t.requires_grad) and t.dtype.is_floating_point
    return array(values, dtype=dtype, requires_grad=needs_grad)


@functools.cache
def _autograd_function() -> type:
    """The ``torch.autograd.Function`` subclass, built on first use so torch stays optional."""
    torch = import_torch()
    from torch.autograd.function import once_differentiable

    class DiffTapeFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, fn, dtype_hints, shape, *args):
            call = TapeCall(fn, args, dtype_hints)
            ctx.call = call
            shape["single"] = call.single
            outs = call.output_tensors()
            ctx.mark_non_differentiable(*[t for t, a in zip(outs, call.outputs)
                                          if not call.differentiable(a)])
            return tuple(outs)

        @staticmethod
        @once_differentiable
        def backward(ctx, *grad_outputs):
            call: TapeCall = ctx.call
            grads = call.backward(grad_outputs)
            result: list = [None] * len(ctx.needs_input_grad)  # fn, dtype_hints, shape, *args
            for position, g in zip(call.tensor_positions, grads):
                result[3 + position] = g
            return tuple(result)

    return DiffTapeFunction


def tape_function(fn: Callable | None = None, *, dtypes: Sequence | None = None) -> Callable:
    """Wrap a difftape computation so torch can differentiate through it.

    ``fn`` receives difftape arrays (copies of the torch tensors passed in, with gradients where
    the tensors require them) and any other arguments unchanged; it launches kernels and returns
    one array or a tuple of arrays, which come back as tensors. ``tensor.backward()`` then runs
    the recorded tape. The wrapper is re-entrant and its backward can run repeatedly
    (``retain_graph=True``) without changing its answer; it never writes into torch's
    ``grad_output`` tensors.

    Args:
        fn: The computation; usable as a decorator with or without arguments.
        dtypes: Optional element type per positional argument (``[wp.vec3, None]``): a tensor of
            shape (n, 3) becomes n ``wp.vec3``. None infers the scalar type from the tensor.

    Returns:
        A function of torch tensors (and other arguments) returning torch tensors.

    Example:
        >>> @difftape.torch.tape_function
        ... def squares(x):
        ...     y = wp.zeros_like(x)
        ...     wp.launch(square, dim=len(x), inputs=[x, y])
        ...     return y
        >>> squares(torch.ones(3, requires_grad=True)).sum().backward()
    """
    if fn is None:
        return lambda f: tape_function(f, dtypes=dtypes)
    hints = tuple(dtypes) if dtypes is not None else None

    @functools.wraps(fn)
    def wrapped(*args):
        shape: dict = {}  # filled by this call's forward: did fn return one array or a tuple?
        outs = _autograd_function().apply(fn, hints, shape, *args)
        return outs[0] if shape["single"] else outs

    return wrapped
