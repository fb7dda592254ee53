"""The writers of a generated function's bodies, and what their code reads: shared by the plain
thread loops (``cpu.py``) and the interchanged ones (``cpu_interchange.py``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..codegen.activity import scatter_sites
from ..codegen.adjoint import AdjointWriter
from ..codegen.forward import ForwardWriter
from ..codegen.offsets import definitions
from ..frontend import ir

if TYPE_CHECKING:
    from .cpu import Variant

_POP = re.compile(r"^[fi]top -= 1; ")
_ASSIGN = re.compile(r"^(\w+) = (.*)$")
NAME = re.compile(r"\b[A-Za-z_]\w*\b")  # an identifier in generated code


def writer_for(kernel: ir.KernelIR, body: list[ir.Stmt], analysis, variant: Variant,
               adjoint: bool) -> ForwardWriter:
    """A writer for ``body``, with its scatter sites replicated unless the variant has atomics."""
    sites = None if variant.parallel else scatter_sites(body, kernel, analysis)
    writer_cls = AdjointWriter if adjoint else ForwardWriter
    writer = writer_cls(kernel, analysis, variant.parallel, variant.debug, sites)
    writer.rank = variant.rank
    writer.thread_defs = definitions(body, analysis.single_assigned)
    return writer


def reverse_reads(lines: list[str]) -> set[str]:
    """Names whose values reverse-sweep code reads (the targets of its pops and loop-variable
    assignments are writes, not reads)."""
    read = set()
    for line in lines:
        code = _POP.sub("", line.strip())
        if code.startswith("#"):
            continue
        assign = _ASSIGN.match(code)
        read.update(NAME.findall(assign.group(2) if assign else code))
    return read
