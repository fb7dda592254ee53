"""``@kernel`` and ``@func``: the user-facing objects, module options, and the per-variant compile cache.

A Kernel lowers its Python source to IR once (on first use) and builds one compiled program per
launch variant (rank, serial/parallel, debug). Launching and recording live in ``launch.py``.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
import typing

import numpy as np

from . import config, dtypes
from .backends import cpu
from .codegen import activity
from .codegen.structure import structure
from .frontend import ir
from .frontend.checks import without_checks
from .frontend.lower import lower_kernel
from .frontend.unroll import unroll_static_loops

_module_options: dict[str, dict] = {}
_options_epoch = [0]  # bumped by set_module_options: cached programs re-check their options
_DEFAULT_OPTIONS = ("enable_backward", "max_unroll", "fast_math", "flush_denormals", "mode")


def _caller_module(depth: int = 2) -> str:
    frame = sys._getframe(depth)
    return frame.f_globals.get("__name__", "__main__")


def set_module_options(options: dict, module: object = None) -> None:
    """Set compile options (``enable_backward``, ``fast_math``, ``mode``…) for a module's kernels.

    Args:
        options: option names and values.
        module: the module (or its name); defaults to the caller's module.
    """
    name = module if isinstance(module, str) else getattr(module, "__name__", None)
    name = name or _caller_module()
    module_options(name).update(options)
    _options_epoch[0] += 1


def get_module_options(module: object = None) -> dict:
    """The compile options of a module (defaults to the caller's), as set by set_module_options."""
    name = module if isinstance(module, str) else getattr(module, "__name__", None)
    return dict(module_options(name or _caller_module()))


def module_options(name: str) -> dict:
    """The live options dict of module ``name``; global config values are copied in on creation."""
    if name not in _module_options:
        _module_options[name] = {
            "enable_backward": config.enable_backward,
            "max_unroll": config.max_unroll,
            "fast_math": config.fast_math,
            "flush_denormals": config.flush_denormals,
            "mode": config.mode,
        }
    return _module_options[name]


class Kernel:
    """A ``@wp.kernel``: launched with ``wp.launch``; differentiated by the Tape."""

    def __init__(self, fn, key: str | None = None, options: dict | None = None,
                 module: str | None = None):
        self.func = fn
        self.key = key or fn.__name__
        self.options = dict(options or {})
        self.module = module or fn.__module__
        module_options(self.module)
        self._ir: ir.KernelIR | None = None
        self._lowered: ir.KernelIR | None = None  # before unrolling, debug checks included
        self._debug_ir: ir.KernelIR | None = None  # _ir with its debug checks (_ir if none)
        self._ir_unroll: tuple[int, object] = (-1, None)  # (options epoch, max_unroll) of _ir
        self._programs: dict[tuple, cpu.CpuProgram] = {}  # by launch state (options included)
        self._recent: dict[tuple, cpu.CpuProgram] = {}  # by (launch state, options epoch)
        self._built: dict[tuple, cpu.CpuProgram] = {}  # by compiled variant
        self._lock = threading.Lock()
        self._concrete: dict | None = None  # a specialisation's annotations for generic params
        self._scatters: tuple[dict, dict] | None = None
        self._scatter_adds: tuple[int, int] | None = None
        self._specializations: dict[tuple, Kernel] = {}
        functools.update_wrapper(self, fn)
        self.generic_params = [
            (k, name) for k, (name, ann) in enumerate(
                inspect.get_annotations(fn, eval_str=True).items())
            if ann is typing.Any or getattr(ann, "generic_dtype", False)]

    # ------------------------------------------------------------ generic kernels

    def specialize(self, args: list) -> Kernel:
        """The kernel for these arguments' types (itself unless it has generic parameters).

        ``typing.Any`` and ``wp.array(dtype=Any)`` parameters take the argument's type; each
        combination compiles once, and the Tape records the specialisation (as Warp records the
        resolved overload)."""
        if not self.generic_params:
            return self
        from .array import array as array_type

        specs = []
        for k, name in self.generic_params:
            value = args[k] if k < len(args) else None
            if isinstance(value, array_type):
                specs.append((name, "array", value.dtype, value.ndim))
            else:
                specs.append((name, "value", _value_type(value), 0))
        key = tuple(specs)
        kernel = self._specializations.get(key)
        if kernel is None:
            kernel = Kernel(self.func, key=self.key, options=self.options, module=self.module)
            kernel.generic_params = []
            kernel._concrete = {
                name: (array_type(dtype=dtype, ndim=ndim) if kind == "array" else dtype)
                for name, kind, dtype, ndim in key}
            self._specializations[key] = kernel
        return kernel

    # ------------------------------------------------------------ options

    @property
    def enable_backward(self) -> bool:
        value = self.options.get("enable_backward")
        if value is None:
            options = _module_options.get(self.module) or module_options(self.module)
            value = options.get("enable_backward", True)
        return bool(value)

    def option(self, name: str):
        value = self.options.get(name)
        return module_options(self.module).get(name) if value is None else value

    # ------------------------------------------------------------ compilation

    @property
    def ir(self) -> ir.KernelIR:
        """The kernel's typed IR, static loops unrolled (``max_unroll``); lowered on first
        access, raising KernelError on bad source."""
        epoch = _options_epoch[0]
        if self._ir is not None and self._ir_unroll[0] == epoch:
            return self._ir
        if self._lowered is None:
            if self.generic_params:
                raise RuntimeError(f"kernel '{self.key}' has generic parameters; it is compiled "
                                   "for the argument types of each launch")
            self._lowered = lower_kernel(self.func, self.key, self._concrete)
        unroll = self.option("max_unroll")
        if self._ir is None or self._ir_unroll[1] != unroll:
            released = without_checks(self._lowered)
            self._ir = unroll_static_loops(released, int(unroll or 0))
            # Debug programs share it unless the kernel has checks (built on first need).
            self._debug_ir = self._ir if released is self._lowered else None
            self._scatters = self._scatter_adds = None
        self._ir_unroll = (epoch, unroll)
        return self._ir

    def ir_for(self, debug: bool) -> ir.KernelIR:
        """``ir``, or for debug programs the same with its run-time component index checks."""
        release = self.ir
        if not debug:
            return release
        if self._debug_ir is None:
            self._debug_ir = unroll_static_loops(self._lowered, int(self._ir_unroll[1] or 0))
        return self._debug_ir

    @property
    def params(self) -> list[ir.Param]:
        return self.ir.params

    @property
    def arity(self) -> int:
        return len(inspect.signature(self.func).parameters)

    def scatter_sites(self) -> tuple[dict[str, bool], dict[str, bool]]:
        """Arrays that the forward / the adjoint accumulate into at indices threads can share
        (scatter sites: atomics or per-chunk replicas in parallel code). Each generated array
        parameter maps to whether all of its sites can add into a replica (adds and subtracts
        whose result is unused)."""
        if self._scatters is None:
            self._scatters = self._scatter_analysis(activity.scatter_sites)
        return self._scatters

    def scatter_adds(self) -> tuple[int, int]:
        """Scalar adds one thread of the forward / the adjoint makes at its scatter sites (each
        site counted once: ``activity.scatter_adds``)."""
        if self._scatter_adds is None:
            self._scatter_adds = self._scatter_analysis(activity.scatter_adds)
        return self._scatter_adds

    def _scatter_analysis(self, analysis):
        body = structure(self.ir)
        return analysis(body, self.ir, activity.analyze(body, self.ir))

    def scatters(self) -> tuple[bool, bool]:
        """Whether the forward / the adjoint has any scatter site (see ``scatter_sites``)."""
        forward, adjoint = self.scatter_sites()
        return bool(forward), bool(adjoint)

    def variant(self, rank: int, atomic: bool = False, noalias: bool = True,
                flags: tuple[bool, ...] | None = None) -> cpu.Variant:
        debug = self.option("mode") == "debug" or config.mode == "debug"
        return cpu.Variant(rank=rank, parallel=atomic, debug=debug,
                           fast_math=bool(self.option("fast_math")),
                           flush_denormals=bool(self.option("flush_denormals")),
                           backward=self.enable_backward, noalias=noalias, flags=flags)

    def program(self, rank: int, atomic: bool = False, noalias: bool = True,
                flags: tuple[bool, ...] | None = None) -> cpu.CpuProgram:
        """The compiled program for launches of ``rank`` dimensions (built once, then cached).

        Args:
            rank: number of launch dimensions.
            atomic: the variant whose scatter sites use atomics (chunks may run concurrently
                without per-chunk views).
            noalias: assume no two array arguments overlap (False for launches whose do).
            flags: an adjoint launch's has-adjoint and consume flags, which its adjoint is
                compiled for (None: a forward launch, or flags read at run time).
        """
        fast = (rank, atomic, noalias, config.mode, _options_epoch[0], flags)
        program = self._recent.get(fast)
        if program is not None:
            return program
        module = module_options(self.module)
        state = (rank, atomic, noalias, config.mode, module.get("mode"),
                 module.get("fast_math"), module.get("flush_denormals"),
                 module.get("enable_backward"), module.get("max_unroll"), flags)
        program = self._programs.get(state)
        if program is None:
            with self._lock:
                program = self._programs.get(state)
                if program is None:
                    program = self._build(self.variant(rank, atomic, noalias, flags))
                    self._programs[state] = program
        self._recent[fast] = program
        return program

    def _build(self, variant: cpu.Variant) -> cpu.CpuProgram:
        kernel_ir = self.ir_for(variant.debug)
        key = (variant.rank, variant.parallel, variant.debug, variant.fast_math,
               variant.flush_denormals, variant.noalias, variant.backward, variant.flags,
               self._ir_unroll[1])
        program = self._built.get(key)
        if program is None:
            program = cpu.build_program(kernel_ir, variant, self.origin())
            if config.print_source:
                print(program.source)
            self._built[key] = program
        return program

    def source(self, device: str = "cpu", adjoint: bool = False, dim: int | None = None,
               parallel: bool = False) -> str:
        """The generated Python module for this kernel (forward and adjoint functions).

        Args:
            device: only "cpu" is generated today.
            adjoint: kept for Warp-style calls; the module holds both functions.
            dim: number of launch dimensions to generate for; default: as many as the
                kernel's ``wp.tid()`` unpacks (1 for a flat ``i = wp.tid()``).
            parallel: the variant with atomics at scatter sites (``cpu_parallel="parallel"``);
                the default one serves serial and replicated launches.
        """
        if dim is None:
            dim = max(1, len(self.ir.tid_vars))
        variant = self.variant(dim, parallel)
        return cpu.generate_module(self.ir_for(variant.debug), variant, self.origin())

    def origin(self) -> str:
        """``file:line`` of the kernel's definition, written into its generated module."""
        return f"{inspect.getsourcefile(self.func)}:{self.func.__code__.co_firstlineno}"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"kernel '{self.key}' cannot be called directly; launch it with "
                           f"wp.launch({self.key}, dim, inputs=[...])")

    def __repr__(self) -> str:
        return f"<difftape kernel {self.key}>"


def kernel(f=None, *, enable_backward: bool | None = None, module: object = None, **options):
    """Decorator turning a Python function into a kernel (``@wp.kernel`` or ``@wp.kernel(...)``).

    Args:
        enable_backward: False skips adjoint generation (SPEC §4.4).
        module: module whose options apply; defaults to the function's module.
    """
    if enable_backward is not None:
        options["enable_backward"] = enable_backward

    def wrap(fn):
        mod = module if isinstance(module, str) else getattr(module, "__name__", None)
        return Kernel(fn, options=options, module=mod)

    return wrap(f) if f is not None else wrap


def _value_type(value) -> type:
    """The kernel type a generic scalar/vector argument takes (Python float → float32)."""
    if isinstance(value, np.generic):  # before float: np.float64 is a float subclass
        return dtypes.from_numpy_dtype(value.dtype)
    if isinstance(value, bool):
        return dtypes.bool_
    if isinstance(value, int):
        return dtypes.int32
    if isinstance(value, float):
        return dtypes.float32
    if hasattr(type(value), "_wp_scalar_type_") or hasattr(type(value), "_difftape_struct"):
        return type(value)
    found = dtypes.normalize_dtype(getattr(value, "dtype", None)) if hasattr(value, "dtype") \
        else None
    if found is None:
        raise TypeError(f"cannot infer a kernel type from {type(value).__name__} {value!r}")
    return found
