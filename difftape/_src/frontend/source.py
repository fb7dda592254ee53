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


def parse_function(fn) -> ParsedSource:
    """Parse a Python function's source into a ``ParsedSource``; raise KernelSyntaxError if impossible."""
    try:
        lines, first_line = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError) as err:
        raise KernelSyntaxError(
            f"cannot read the source of '{fn.__qualname__}': kernels and functions must be defined "
            "in a file (or a notebook cell), not built with exec() or lambda",
            kernel=fn.__name__,
        ) from err
    raw = "".join(lines)
    dedented = textwrap.dedent(raw)
    first_code = next((ln for ln in lines if ln.strip()), "")
    indent = len(first_code) - len(first_code.lstrip())
    try:
        module = ast.parse(dedented)
    except SyntaxError:
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
