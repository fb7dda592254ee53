"""``wp.ScopedTimer``: time a block, print it indented by nesting, and mark it as a tape scope.

Warp-compatible signature. On entry it opens a scope named after the timer on the active tape
(unless ``skip_tape``), on exit it closes it, so ``Tape.visualize`` draws the block as a cluster.
It measures wall time only: difftape runs on the CPU, so ``synchronize`` and ``cuda_filter``
have nothing to wait for or collect.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from . import tape as tape_module


class ScopedTimer:
    """Context manager timing its block in milliseconds (``.elapsed``), as ``warp.ScopedTimer``.

    Args:
        name: Label printed and used as the tape scope name.
        active: False makes the timer do nothing but the tape scope.
        print: Print ``"{name} took {ms:.2f} ms"`` on exit, indented by nesting depth.
        detailed: Profile the block with cProfile and print the statistics on exit.
        dict: A dict of lists; the elapsed time is appended under ``name``.
        use_nvtx: Mark an NVTX range instead (needs the ``nvtx`` package).
        color: NVTX range color.
        synchronize: Accepted for compatibility (nothing runs asynchronously on the CPU).
        cuda_filter: Accepted for compatibility; ``timing_results`` stays empty.
        report_func: Called as ``report_func(timing_results, indent)`` when there are results.
        skip_tape: Do not record a scope on the active tape.

    Example:
        >>> with wp.ScopedTimer("step", print=False) as t:
        ...     wp.launch(step, dim=n, inputs=[x])
        >>> t.elapsed  # milliseconds
    """

    _thread_local = threading.local()
    enabled = True

    def __init__(self, name: str, active: bool = True, print: bool = True,  # noqa: A002
                 detailed: bool = False, dict: dict | None = None,  # noqa: A002
                 use_nvtx: bool = False, color: int | str = "rapids", synchronize: bool = False,
                 cuda_filter: int = 0, report_func: Callable | None = None,
                 skip_tape: bool = False):
        self.name = name
        self.active = active and self.enabled
        self.print = print
        self.detailed = detailed
        self.dict = dict
        self.use_nvtx = use_nvtx
        self.color = color
        self.synchronize = synchronize
        self.cuda_filter = cuda_filter
        self.report_func = report_func
        self.skip_tape = skip_tape
        self.elapsed = 0.0
        self.extra_msg = ""
        self.timing_results: list = []
        if dict is not None:
            dict.setdefault(name, [])
        if not hasattr(ScopedTimer._thread_local, "indent"):
            ScopedTimer._thread_local.indent = -1

    def __enter__(self) -> ScopedTimer:
        if self.active:
            if self.detailed:
                import cProfile

                self._profile = cProfile.Profile()
                self._profile.enable()
            if self.use_nvtx:
                self._nvtx_range = _nvtx().start_range(self.name, color=self.color)
            if self.print:
                ScopedTimer._thread_local.indent += 1
            self._start = time.perf_counter_ns()
        tape = None if self.skip_tape else tape_module.active_tape()
        if tape is not None:  # last, so a failed entry never leaves a scope open
            tape.record_scope_begin(self.name)
        self._tape = tape
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self._tape is not None:
            self._tape.record_scope_end()
        if not self.active:
            return False
        self.elapsed = (time.perf_counter_ns() - self._start) / 1e6
        if self.use_nvtx:
            _nvtx().end_range(self._nvtx_range)
        if self.detailed:
            self._profile.disable()
            self._profile.print_stats(sort="tottime")
        if self.dict is not None:
            self.dict[self.name].append(self.elapsed)
        if self.print:
            indent = "    " * ScopedTimer._thread_local.indent
            if self.timing_results and self.report_func is not None:
                self.report_func(self.timing_results, indent=indent)
            extra = f" {self.extra_msg}" if self.extra_msg else ""
            print(f"{indent}{self.name} took {self.elapsed:.2f} ms{extra}")
            ScopedTimer._thread_local.indent -= 1
        return False


def _nvtx():
    try:
        import nvtx
    except ImportError as err:
        raise ImportError("ScopedTimer(use_nvtx=True) needs the 'nvtx' package: "
                          "pip install nvtx") from err
    return nvtx
