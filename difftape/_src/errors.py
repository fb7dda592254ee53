"""The difftape exception hierarchy and the formatting of located messages.

Every error is also an instance of the Python class that fits it (``SyntaxError``, ``TypeError``…)
and of the class warp-lang raises for the same condition (mostly ``RuntimeError``), so ``except``
clauses written for Warp keep working. This module formats; it never decides what is an error.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLocation:
    """A position in the user's source: file, 1-based line, 0-based column, and the line's text."""

    filename: str
    lineno: int
    col: int = 0
    end_col: int | None = None
    line: str = ""
    function: str = ""

    def render(self) -> str:
        """Python-traceback style block: the file line, the source line and a caret under the span."""
        head = f'  File "{self.filename}", line {self.lineno}'
        if self.function:
            head += f", in {self.function}"
        if not self.line:
            return head
        stripped = self.line.lstrip()
        indent = len(self.line) - len(stripped)
        start = max(self.col - indent, 0)
        end = self.end_col - indent if self.end_col is not None else start + 1
        width = max(end - start, 1)
        return f"{head}\n    {stripped.rstrip()}\n    {' ' * start}{'^' * width}"


class DiffTapeError(Exception):
    """Base class of every error difftape raises on purpose."""


class KernelError(DiffTapeError):
    """A problem in a kernel's or function's source, found at compile time."""

    def __init__(self, message: str, kernel: str = "", location: SourceLocation | None = None,
                 callers: tuple[SourceLocation, ...] = ()):
        self.kernel = kernel
        self.location = location
        self.message = message
        self.callers = callers
        text = f"in kernel '{kernel}': {message}" if kernel else message
        if location is not None:
            text += "\n" + location.render()
        for caller in callers:  # innermost call first, like a traceback read upwards
            text += "\n  called from\n" + caller.render()
        self.text = text
        Exception.__init__(self, text)
        if isinstance(self, SyntaxError) and location is not None:
            # Fill SyntaxError's fields so IDEs and tracebacks point at the user's line.
            self.msg = text
            self.filename = location.filename
            self.lineno = location.lineno
            self.offset = location.col + 1
            self.text = location.line
            self.end_lineno = location.lineno
            self.end_offset = (location.end_col or location.col) + 1

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


class KernelSyntaxError(KernelError, SyntaxError):
    """Python syntax that kernels do not support."""


class KernelNameError(KernelError, NameError):
    """A name in a kernel that resolves to nothing difftape knows."""


class KernelTypeError(KernelError, TypeError):
    """A type mismatch in a kernel: no matching overload, or a bad assignment."""


class LaunchError(DiffTapeError, RuntimeError):
    """A launch that cannot run: wrong argument count, device, missing adjoint…"""


class LaunchTypeError(DiffTapeError, TypeError, RuntimeError):
    """A launch argument of the wrong type, dtype or dimensionality."""


class LaunchValueError(LaunchError, ValueError):
    """A launch argument with a bad value (shape, dim)."""


class ArrayIndexError(DiffTapeError, IndexError):
    """An out-of-bounds array index, or vector or matrix component index, inside a kernel,
    caught in debug mode."""


class TapeError(DiffTapeError, RuntimeError):
    """Misuse of a Tape: nested capture, non-scalar loss, missing gradients."""


class ArrayOverwriteError(TapeError):
    """An array a recorded launch read was changed before ``backward()`` (overwrite_check="error")."""


class ArrayError(DiffTapeError, ValueError):
    """Bad array construction or gradient buffer (Warp raises ValueError for these)."""


class InternalError(DiffTapeError, RuntimeError):
    """A bug in difftape: names the pipeline stage and the generated pseudo-file."""


class DiffTapeWarning(UserWarning):
    """Warnings about gradients that may be wrong or cut."""


class ArrayOverwriteWarning(DiffTapeWarning):
    """An array a recorded launch read was changed before ``backward()``: gradients are wrong."""


def warn(message: str, stacklevel: int = 3) -> None:
    """Emit a DiffTapeWarning pointing at the user's code."""
    warnings.warn(message, DiffTapeWarning, stacklevel=stacklevel)
