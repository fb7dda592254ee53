"""The Tape: records launches and callbacks, then runs their adjoints in reverse (SPEC §1).

It is plain Python: a list of records and scopes. Rendering (``visualize``) lives elsewhere.
"""

from __future__ import annotations

import sys
import warnings

from . import config, overwrite, read_flags
from .array import array
from .device import Device, get_device
from .errors import DiffTapeWarning, TapeError

_active: Tape | None = None


def active_tape() -> Tape | None:
    """The tape currently capturing launches, if any (one per process, as in Warp)."""
    return _active


class Tape:
    """Records kernel launches so ``backward()`` can compute gradients of everything they read.

    Example:
        >>> tape = wp.Tape()
        >>> with tape:
        ...     wp.launch(square, dim=3, inputs=[x, y])
        >>> tape.backward(grads={y: wp.ones(3)})
    """

    def __init__(self):
        self.gradients: dict = {}
        self.launches: list = []
        self.scopes: list = []
        self.loss = None
        self._read_versions: dict = {}  # id(record) → (record, write counts); see overwrite.py

    # ------------------------------------------------------------ capture

    def __enter__(self) -> Tape:
        global _active
        if _active is not None:
            raise TapeError("Warp: Error, entering a tape while one is already active")
        _active = self
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        global _active
        if _active is None:
            raise TapeError("Warp: Error, ended tape capture, but tape not present")
        _active = None
        return False

    def record_launch(self, kernel, dim, max_blocks, inputs, outputs, device, block_dim=0,
                      metadata=None) -> None:
        """Append a launch record ``[kernel, dim, max_blocks, inputs, outputs, device, block_dim,
        metadata]`` without running it (``dim`` is stored as given)."""
        if device.__class__ is not Device:
            device = get_device(device)
        self.launches.append([kernel, dim, max_blocks, inputs, outputs, device, block_dim,
                              metadata or {}])

    def record_func(self, backward, arrays) -> None:
        """Append a Python callback run (with no arguments) at its place in ``backward()``.

        Args:
            backward: callable accumulating into the inputs' ``.grad`` buffers.
            arrays: arrays whose gradients ``zero()`` must clear; each needs a ``.grad``.
        """
        self.launches.append(backward)
        for a in arrays:
            if isinstance(a, array) and a.grad:
                self.gradients[a] = a.grad
            else:
                raise TapeError(
                    f"Array {a} is not of type wp.array or is missing a gradient array. Set "
                    "array parameter requires_grad=True during instantiation.")

    def record_scope_begin(self, scope_name: str, metadata: dict | None = None) -> None:
        """Open a named scope (used by visualization)."""
        self.scopes.append((len(self.launches), scope_name, metadata or {}))

    def record_scope_end(self, remove_scope_if_empty: bool = True) -> None:
        """Close the innermost open scope; an empty scope disappears unless told otherwise."""
        depth = sum(1 if name is not None else -1 for _, name, _ in self.scopes)
        if depth <= 0:
            raise TapeError("Warp: Error, ended tape scope, but scope not present")
        last = self.scopes[-1] if self.scopes else None
        if remove_scope_if_empty and last is not None and last[1] is not None and \
                last[0] == len(self.launches):
            self.scopes.pop()
        else:
            self.scopes.append((len(self.launches), None, None))

    # ------------------------------------------------------------ gradients

    def get_adjoint(self, a):
        """The adjoint passed for kernel argument ``a``: its ``.grad`` for arrays, else None."""
        if a.__class__ is array or isinstance(a, array):
            grad = a._grad
            if grad is not None and grad:
                self.gradients[a] = grad
                return grad
            return None
        struct_adjoint = getattr(a, "_difftape_adjoint", None)  # seam for @wp.struct
        if struct_adjoint is not None:
            return struct_adjoint(self)
        return None

    def backward(self, loss=None, grads: dict | None = None) -> None:
        """Run every recorded adjoint in reverse order, accumulating into ``.grad`` buffers.

        Args:
            loss: a one-element array with ``requires_grad``; its gradient is set to 1.
            grads: ``{array: seed}``; arrays without a ``.grad`` adopt ``seed`` as their gradient
                buffer (Warp aliasing), others get ``seed`` copied in.
        """
        overwrite.check_tape(self)
        if loss:
            if loss.size > 1 or getattr(loss.dtype, "_length", 1) > 1:
                raise TapeError("Can only return gradients for scalar loss functions.")
            if not loss.requires_grad:
                raise TapeError("Scalar loss arrays should have requires_grad=True set before "
                                "calling Tape.backward()")
            loss.grad.fill_(1.0)
        if grads:
            for a, g in grads.items():
                if a.grad is None:
                    a.grad = g
                else:
                    a.grad.assign(g)
        from .launch import run_adjoint

        gradients = self.gradients
        enabled: dict = {}  # kernel → whether its adjoint runs (warned about once if not)
        for record in reversed(self.launches):
            if callable(record):
                record()
                continue
            kernel, dim, _, inputs, outputs, _, _, metadata = record
            runs = enabled.get(kernel)
            if runs is None:
                runs = enabled[kernel] = kernel.enable_backward or self._backward_enabled(kernel)
            if not runs:
                continue
            args = [*inputs, *outputs]
            adjoints = []
            for a in args:  # get_adjoint, with arrays and scalars inline (runs per launch)
                cls = a.__class__
                if cls is array:
                    grad = a._grad
                    if grad is not None and grad._data.size:
                        gradients[a] = grad
                        adjoints.append(grad)
                    else:
                        adjoints.append(None)
                elif cls is float or cls is int:
                    adjoints.append(None)
                else:
                    adjoints.append(self.get_adjoint(a))
            dims = (dim,) if dim.__class__ is int else tuple(dim)
            run_adjoint(kernel, dims, args, adjoints,
                        metadata.get("inplace_snapshots") if metadata else None, checked=True)
        if config.verify_autograd_array_access:
            self._reset_array_read_flags()

    @staticmethod
    def _backward_enabled(kernel) -> bool:
        if kernel.options.get("enable_backward") is False:
            where = "is configured with the option 'enable_backward=False'"
        elif kernel.options.get("enable_backward") is None and not kernel.enable_backward:
            where = "is defined in a module with the option 'enable_backward=False' set"
        else:
            return True
        warnings.warn(f"Running the tape backwards may produce incorrect gradients because "
                      f"recorded kernel {kernel.key} {where}.", DiffTapeWarning, stacklevel=3)
        return False

    def zero(self) -> None:
        """Zero every gradient buffer this tape has seen (after a backward or record_func)."""
        for g in self.gradients.values():
            zero_ = getattr(g, "zero_", None)
            if zero_ is not None:
                zero_()

    def reset(self) -> None:
        """Forget the recorded launches and scopes and zero the gradients (keeps ``gradients``)."""
        if config.verify_autograd_array_access:
            self._reset_array_read_flags()
        self._read_versions = {}
        self.launches = []
        self.scopes = []
        self.zero()

    # ------------------------------------------------------------ tooling

    def _check_kernel_array_access(self, kernel, args) -> None:
        """Warp's launch-time read/write flag check (``verify_autograd_array_access``)."""
        read_flags.check_kernel_array_access(kernel, args)

    def _reset_array_read_flags(self) -> None:
        """Clear the read flags of every array this tape recorded (and of their view parents)."""
        read_flags.reset_tape(self)

    def visualize(self, filename: str | None = None, simplify_graph: bool = True,
                  hide_readonly_arrays: bool = False, array_labels: dict | None = None,
                  choose_longest_node_name: bool = True, ignore_graph_scopes: bool = False,
                  track_inputs: list | None = None, track_outputs: list | None = None,
                  track_input_names: list | None = None, track_output_names: list | None = None,
                  graph_direction: str = "LR") -> str:
        """The recorded launches as GraphViz dot text (kernels, arrays, scopes, repetitions).

        Arrays are named after the caller's variables where one refers to them, else after the
        kernel parameter. ``filename`` ending in ``.dot`` (or with no known image suffix) gets
        the dot text; ``.svg``/``.png``/``.pdf`` are rendered with GraphViz ``dot`` when it is
        installed (otherwise the ``.dot`` is written next to it and a message says how to
        render it). See ``visualize.py`` for every option.

        Example:
            >>> dot = tape.visualize("tape.svg", graph_direction="TB")
        """
        from .visualize import visualize_tape

        return visualize_tape(
            self, filename, simplify_graph=simplify_graph,
            hide_readonly_arrays=hide_readonly_arrays, array_labels=array_labels,
            choose_longest_node_name=choose_longest_node_name,
            ignore_graph_scopes=ignore_graph_scopes, track_inputs=track_inputs,
            track_outputs=track_outputs, track_input_names=track_input_names,
            track_output_names=track_output_names, graph_direction=graph_direction,
            caller=sys._getframe(1))

    # Jupyter shows the SVG graph when GraphViz ``dot`` is installed, else the markdown table.

    def _repr_svg_(self) -> str | None:
        from .visualize import tape_svg

        return tape_svg(self)

    def _repr_markdown_(self) -> str | None:
        import shutil

        from .visualize import tape_markdown

        return None if shutil.which("dot") else tape_markdown(self)

    def __repr__(self) -> str:
        from .visualize import tape_repr

        return tape_repr(self)


from . import copies as _copies  # noqa: E402,F401 (registers the tape's copy observer)
