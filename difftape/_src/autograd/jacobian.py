"""Jacobians of a kernel or a Python function: one backward pass per output component, or central differences.

Layouts follow Warp (SPEC §4.6): ``jac[(i, o)]`` has shape
``(output.size × components(output.dtype), input.size)``, dtype ``input.dtype``, pre-filled with
NaN. Probing never bumps the caller's arrays' write counts or read flags (they are written
through their storage and restored exactly), so a pending tape sees no false overwrite.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Sequence

import numpy as np

from ..array import array
from ..array_ops import empty
from ..kernel import Kernel
from ..launch import launch
from ..tape import Tape


def components(dtype: type) -> int:
    """Scalars per element: 1 for scalars, 3 for vec3, 9 for mat33…"""
    return getattr(dtype, "_length", 1)


def flat(a: array) -> np.ndarray:
    """The scalar components of ``a`` as one flat axis (a view for contiguous arrays)."""
    return a._data.reshape(-1)


def shift(a: array, component: int, delta: float) -> None:
    """Add ``delta`` to one scalar component of ``a`` in place, in ``a``'s precision."""
    at = np.unravel_index(component, a._data.shape)
    value = a._data[at]
    a._data[at] = value.dtype.type(value + value.dtype.type(delta))


class FunctionMetadata:
    """Labels, strides and dtypes of a kernel's or function's inputs and outputs (Warp's helper)."""

    def __init__(self, key: str | None = None, input_labels: list | None = None,
                 output_labels: list | None = None, input_strides: list | None = None,
                 output_strides: list | None = None, input_dtypes: list | None = None,
                 output_dtypes: list | None = None):
        self.key = key
        self.input_labels = input_labels
        self.output_labels = output_labels
        self.input_strides = input_strides
        self.output_strides = output_strides
        self.input_dtypes = input_dtypes
        self.output_dtypes = output_dtypes

    @property
    def is_empty(self) -> bool:
        return self.key is None

    def input_is_array(self, i: int) -> bool:
        return self.input_dtypes[i] is not None

    def output_is_array(self, i: int) -> bool:
        return self.output_dtypes[i] is not None

    def update_from_kernel(self, kernel: Kernel, inputs: Sequence) -> None:
        """Labels from the kernel's parameters; dtypes/strides from the inputs and annotations."""
        params = kernel.ir.params
        self.key = kernel.key
        self.input_labels = [p.name for p in params[:len(inputs)]]
        self.output_labels = [p.name for p in params[len(inputs):]]
        self.input_strides = [getattr(v, "strides", None) if p.is_array else None
                              for p, v in zip(params, inputs)]
        self.input_dtypes = [getattr(v, "dtype", p.dtype) if p.is_array else None
                             for p, v in zip(params, inputs)]
        self.output_strides = [None for _ in params[len(inputs):]]
        self.output_dtypes = [p.dtype if p.is_array else None for p in params[len(inputs):]]

    def update_from_function(self, function: Callable, inputs: Sequence,
                             outputs: Sequence | None = None) -> None:
        """Labels from the function's parameters; outputs are ``output_{i}``."""
        self.key = function.__name__
        self.input_labels = list(inspect.signature(function).parameters)
        if outputs is None:
            outputs = function(*inputs)
        outputs = [outputs] if isinstance(outputs, array) else list(outputs)
        self.output_labels = [f"output_{i}" for i in range(len(outputs))]
        self.input_strides = [x.strides if isinstance(x, array) else None for x in inputs]
        self.input_dtypes = [x.dtype if isinstance(x, array) else None for x in inputs]
        self.output_strides = [x.strides if isinstance(x, array) else None for x in outputs]
        self.output_dtypes = [x.dtype if isinstance(x, array) else None for x in outputs]


# ------------------------------------------------------------ shared plumbing


def backward_enabled(kernel: Kernel) -> bool:
    return kernel.enable_backward


def resolve_mask(mask, metadata: FunctionMetadata, n_inputs: int) -> set[tuple[int, int]]:
    """``(input, output)`` index pairs from pairs of indices or parameter names."""
    names = metadata.input_labels + metadata.output_labels

    def index(name, offset: int = 0) -> int:
        if isinstance(name, int):
            return name
        if name not in names:
            raise ValueError(f"input_output_mask names '{name}', which is none of the "
                             f"arguments {names}")
        return names.index(name) + offset

    return {(index(i), index(o, -n_inputs)) for i, o in (mask or [])}


def pairs(inputs: Sequence, outputs: Sequence, mask: set):
    """The (input, output) index pairs to differentiate: differentiable arrays, in mask."""
    for i, o in itertools.product(range(len(inputs)), range(len(outputs))):
        if mask and (i, o) not in mask:
            continue
        x, y = inputs[i], outputs[o]
        if isinstance(x, array) and x.requires_grad and isinstance(y, array) and y.requires_grad:
            yield i, o


def nan_jacobian(rows: int, x: array) -> array:
    jac = empty((rows, x.size), dtype=x.dtype, device=x.device)
    jac._data[...] = np.nan
    return jac


def snapshot(inputs: Sequence) -> list:
    """Data, read flag and write count of each top-level array input (None for others)."""
    return [(x._data.copy(), x._is_read, x._write_count) if isinstance(x, array) else None
            for x in inputs]


def restore(inputs: Sequence, saved: list | None) -> None:
    """Put back what ``snapshot`` saved: the values, and so the flags and counts that go with them."""
    for x, s in zip(inputs, saved or []):
        if s is not None:
            x._data[...] = s[0]
            x._is_read, x._write_count = s[1], s[2]


def evaluate(function: Callable, inputs: Sequence, saved: list | None) -> list:
    try:
        outputs = function(*inputs)
    except BaseException:
        restore(inputs, saved)
        raise
    return [outputs] if isinstance(outputs, array) else list(outputs)


def zero_grads(arrays: Sequence) -> None:
    for a in arrays:
        if isinstance(a, array) and a.requires_grad:
            a.grad.zero_()


# ------------------------------------------------------------ by the tape


def jacobian(function: Kernel | Callable, dim=None, inputs: Sequence | None = None,
             outputs: Sequence | None = None, input_output_mask: list | None = None,
             device=None, max_blocks: int = 0, block_dim: int | None = None,
             max_outputs_per_var: int = -1, plot_jacobians: bool = False,
             metadata: FunctionMetadata | None = None,
             restore_inputs: bool = True) -> dict[tuple[int, int], array]:
    """Jacobians of a kernel or function from one backward pass per output component.

    Args:
        function: A ``@wp.kernel`` (inputs precede outputs), or a Python function of ``inputs``
            returning an array or a list of arrays.
        dim, max_blocks, block_dim, device: The kernel launch (kernels only).
        inputs: The arguments; only arrays with ``requires_grad`` are differentiated.
        outputs: The kernel's output arguments (required for kernels).
        input_output_mask: ``(input, output)`` pairs by index or name; all pairs when empty.
        max_outputs_per_var: Rows computed per pair (all when <= 0); the rest stay NaN.
        plot_jacobians: Plot them with ``jacobian_plot`` (needs matplotlib).
        metadata: Filled in when empty.
        restore_inputs: For functions, put the inputs' values back afterwards.

    Returns:
        ``{(input index, output index): array of shape (output components, input.size)}``.

    Raises:
        ValueError: backward disabled, or no outputs for a kernel.

    Example:
        >>> jac = jacobian(square, dim=3, inputs=[x], outputs=[y])[0, 0]
    """
    if inputs is None:
        raise ValueError("The inputs argument must be provided")
    metadata = FunctionMetadata() if metadata is None else metadata
    saved = None
    tape = Tape()
    if isinstance(function, Kernel):
        if not backward_enabled(function):
            raise ValueError("Kernel must have backward pass enabled to compute Jacobians")
        if not outputs:
            raise ValueError("A list of output arguments must be provided to compute kernel "
                             "Jacobians")
        if metadata.is_empty:
            metadata.update_from_kernel(function, inputs)
        tape.record_launch(function, dim, max_blocks, inputs, outputs, device, block_dim or 1)
    else:
        saved = snapshot(inputs) if restore_inputs else None
        with tape:
            outputs = evaluate(function, inputs, saved)
    try:
        for record in tape.launches:
            if not callable(record) and not backward_enabled(record[0]):
                raise ValueError("Kernel must have backward pass enabled to compute Jacobians")
        if metadata.is_empty:
            metadata.update_from_function(function, inputs, outputs)
        mask = resolve_mask(input_output_mask, metadata, len(inputs))
        jacobians = {}
        zero_grads(inputs)
        zero_grads(outputs)
        for i, o in pairs(inputs, outputs, mask):
            x, y = inputs[i], outputs[o]
            seed = flat(y.grad)
            jac = nan_jacobian(seed.size, x)
            rows = seed.size if max_outputs_per_var <= 0 else min(seed.size, max_outputs_per_var)
            for r in range(rows):
                y.grad.zero_()
                seed[r] = 1.0
                tape.backward()
                jac._data[r] = x.grad._data.reshape(jac._data[r].shape)
                zero_grads(inputs)
                zero_grads(outputs)
            jacobians[i, o] = jac
    finally:
        if saved is not None:
            restore(inputs, saved)
    if plot_jacobians:
        from .plot import jacobian_plot

        jacobian_plot(jacobians, metadata)
    return jacobians


# ------------------------------------------------------------ by finite differences


def jacobian_fd(function: Kernel | Callable, dim=None, inputs: Sequence | None = None,
                outputs: Sequence | None = None, input_output_mask: list | None = None,
                device=None, max_blocks: int = 0, block_dim: int | None = None,
                max_inputs_per_var: int = -1, eps: float = 1e-4, plot_jacobians: bool = False,
                metadata: FunctionMetadata | None = None,
                restore_inputs: bool = True) -> dict[tuple[int, int], array]:
    """Jacobians by central differences ``(f(x + eps) - f(x - eps)) / 2 eps``, per input component.

    Arguments as for ``jacobian``; ``max_inputs_per_var`` limits the columns (the rest stay NaN).
    Kernels run on private copies of every array argument, so the caller's arrays are never
    written. Functions see their real inputs, perturbed in place and restored.

    Returns:
        ``{(input index, output index): array of shape (output components, input.size)}``.
    """
    if inputs is None:
        raise ValueError("The inputs argument must be provided")
    metadata = FunctionMetadata() if metadata is None else metadata
    if isinstance(function, Kernel):
        if not outputs:
            raise ValueError("A list of output arguments must be provided to compute kernel "
                             "Jacobians")
        if metadata.is_empty:
            metadata.update_from_kernel(function, inputs)
        probe = _KernelProbe(function, dim, inputs, outputs, max_blocks, block_dim)
    else:
        saved = snapshot(inputs)
        outputs = evaluate(function, inputs, saved)
        if metadata.is_empty:
            metadata.update_from_function(function, inputs, outputs)
        restore(inputs, saved)
        probe = _FunctionProbe(function, inputs, saved)
    mask = resolve_mask(input_output_mask, metadata, len(inputs))
    jacobians = {}
    try:
        for i, o in pairs(inputs, outputs, mask):
            x, y = inputs[i], outputs[o]
            out_dtype = flat(y).dtype.type
            jac = nan_jacobian(flat(y).size, x)
            columns = jac._data.reshape(jac.shape[0], -1)  # (rows, input components)
            n = columns.shape[1] if max_inputs_per_var <= 0 else \
                min(columns.shape[1], max_inputs_per_var)
            for c in range(n):
                left = probe.evaluate(i, c, -eps, o)
                right = probe.evaluate(i, c, eps, o)
                step = out_dtype(2.0) * out_dtype(eps)
                columns[:, c] = ((right - left) / step).astype(columns.dtype)
            jacobians[i, o] = jac
    finally:
        probe.close()
    if plot_jacobians:
        from .plot import jacobian_plot

        jacobian_plot(jacobians, metadata)
    return jacobians


class _KernelProbe:
    """Runs the kernel on copies of its arguments with one input component shifted."""

    def __init__(self, kernel: Kernel, dim, inputs, outputs, max_blocks, block_dim):
        self.kernel, self.dim, self.n_inputs = kernel, dim, len(inputs)
        self.max_blocks, self.block_dim = max_blocks, block_dim
        self.originals = [a._data.copy() if isinstance(a, array) else None
                          for a in list(inputs) + list(outputs)]
        self.work = [array(data=d.copy(), dtype=a.dtype) if d is not None else a
                     for a, d in zip(list(inputs) + list(outputs), self.originals)]

    def evaluate(self, i: int, component: int, delta: float, o: int) -> np.ndarray:
        for w, original in zip(self.work, self.originals):
            if original is not None:
                w._data[...] = original
        shift(self.work[i], component, delta)
        launch(self.kernel, self.dim, inputs=self.work[:self.n_inputs],
               outputs=self.work[self.n_inputs:], max_blocks=self.max_blocks,
               block_dim=self.block_dim, record_tape=False)
        return flat(self.work[self.n_inputs + o]).copy()

    def close(self) -> None:
        pass


class _FunctionProbe:
    """Calls the function with one component of a real input shifted, then restores it."""

    def __init__(self, function: Callable, inputs, saved):
        self.function, self.inputs, self.saved = function, inputs, saved

    def evaluate(self, i: int, component: int, delta: float, o: int) -> np.ndarray:
        shift(self.inputs[i], component, delta)
        outputs = evaluate(self.function, self.inputs, self.saved)
        result = flat(outputs[o]).copy()
        restore(self.inputs, self.saved)
        return result

    def close(self) -> None:
        restore(self.inputs, self.saved)
