"""Read a kernel's source, parse it, and map AST positions back to the user's file and line.

This module only reads and locates source; it does not judge or translate it.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from dataclasses import dataclass

from ..errors import KernelSyntaxError, SourceLocation


@dataclass(frozen=True)
class ParsedSource:
    """A function's AST (``ast.FunctionDef``) plus what is needed to locate its nodes in the user's file."""

    tree: ast.FunctionDef
    filename: str
    first_line: int  # file line number of the ``def`` (or of the first decorator)
    indent: int  # columns removed by dedent
    lines: tuple[str, ...]  # the original, non-dedented lines of the function
    name: str

    def locate(self, node: ast.AST | None) -> SourceLocation:
        """The user's file:line:col of ``node``, with the source line for the caret display."""
        if node is None or not hasattr(node, "lineno"):
            return SourceLocation(self.filename, self.first_line, 0, None, "", self.name)
        rel = node.lineno - 1
        line = self.lines[rel] if 0 <= rel < len(self.lines) else ""
        col = getattr(node, "col_offset", 0) + self.indent
        end_col = getattr(node, "end_col_offset", None)
        if end_col is not None and getattr(node, "end_lineno", node.lineno) == node.lineno:
            end_col += self.indent
        else:
            end_col = len(line.rstrip())
        return SourceLocation(self.filename, self.first_line + rel, col, end_col, line, self.name)

    def line_text(self, node: ast.AST) -> str:
        """The stripped source text of ``node``'s first line (for ``# L12:`` comments)."""
        rel = getattr(node, "lineno", 1) - 1
        return self.lines[rel].strip() if 0 <= rel < len(self.lines) else ""

    def file_line(self, node: ast.AST) -> int:
        return self.first_line + getattr(node, "lineno", 1) - 1


def source_block(fn) -> tuple[list[str], int, ast.Module | None]:
    """``inspect.getsourcelines(fn)`` and the parse of those lines, dedented (None if they do
    not parse). Raises OSError or TypeError, as ``inspect`` does, when there is no source.

    The block is found from the code object's first line (the first decorator's) and the
    indentation of the lines after it, not by tokenizing as ``inspect`` does: that, with the
    regular expressions it compiles on first use, cost ~20 ms of a warm process's first launch
    of three kernels. Where the lines found do not parse as the function (a block that ends in
    a string or bracket continued at a lower indentation), ``inspect`` finds them."""
    code = getattr(fn, "__code__", None)
    if code is not None:
        filename = code.co_filename
        linecache.checkcache(filename)
        lines = linecache.getlines(filename, getattr(fn, "__globals__", None))
        start = code.co_firstlineno - 1
        block = _indented_block(lines, start) if 0 <= start < len(lines) else None
        if block is not None:
            module = _parse(block)
            first = module.body[0] if module is not None and len(module.body) == 1 else None
            if isinstance(first, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    first.name == fn.__name__:
                return block, start + 1, module
    lines, first_line = inspect.getsourcelines(fn)
    return lines, first_line, _parse(lines)


def _indented_block(lines: list[str], start: int) -> list[str] | None:
    """The decorators, ``def`` and body starting at ``lines[start]``, up to the next line of
    code indented no deeper than the ``def`` (a closing bracket there continues a decorator or
    the signature), without the blank lines and shallower comments before it (as ``inspect``
    ends a block). None: no ``def`` found."""
    head = lines[start]
    indent = len(head) - len(head.lstrip())
    seen_def = head.lstrip().startswith(("def ", "async def "))
    body_indent = None
    last = start
    for k in range(start + 1, len(lines)):
        text = lines[k]
        stripped = text.strip()
        depth = len(text) - len(text.lstrip())
        if not stripped:
            continue
        if stripped.startswith("#"):
            if body_indent is not None and depth >= body_indent:
                last = k
            continue
        if depth <= indent and not stripped.startswith((")", "]", "}")):  # not a continuation
            if seen_def:
                break
            seen_def = stripped.startswith(("def ", "async def "))
            if not seen_def and not stripped.startswith("@"):
                return None
        elif seen_def and body_indent is None:
            body_indent = depth
        last = k
    return lines[start:last + 1] if seen_def else None


def _parse(lines: list[str]) -> ast.Module | None:
    try:
        return ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None


def parse_function(fn) -> ParsedSource:
    """Parse a Python function's source into a ``ParsedSource``; raise KernelSyntaxError if impossible."""
    try:
        lines, first_line, module = source_block(fn)
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError) as err:
        raise KernelSyntaxError(
            f"cannot read the source of '{fn.__qualname__}': kernels and functions must be defined "
            "in a file (or a notebook cell), not built with exec() or lambda",
            kernel=fn.__name__,
        ) from err
    first_code = next((ln for ln in lines if ln.strip()), "")
    indent = len(first_code) - len(first_code.lstrip())
    if module is None:
        module = ast.parse("")
    tree = next((n for n in module.body
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == fn.__name__),
                None)
    if tree is None:
        raise KernelSyntaxError(
            f"cannot find the source of '{fn.__qualname__}' in {filename}: kernels and functions "
            "must be defined with def in a file or notebook cell (not exec() of a string)",
            kernel=fn.__name__)
    if isinstance(tree, ast.AsyncFunctionDef):
        raise KernelSyntaxError("async functions cannot be kernels", kernel=fn.__name__)
    linecache.checkcache(filename)
    return ParsedSource(tree, filename, first_line, indent, tuple(lines), fn.__name__)
