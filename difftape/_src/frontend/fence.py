"""The language fence: reject Python syntax that kernels do not support, before any translation.

One entry per rejected node kind, each with a message that says what to do instead. The allowed
subset is everything not listed here (and the type checker rejects remaining misuse with a location).
"""

from __future__ import annotations

import ast

from ..errors import KernelSyntaxError
from .source import ParsedSource

_REJECTED: dict[type, str] = {
    ast.Lambda: "lambda expressions are not supported in kernels; define a @wp.func instead",
    ast.ListComp: "list comprehensions are not supported in kernels; use a for loop",
    ast.SetComp: "set comprehensions are not supported in kernels; use a for loop",
    ast.DictComp: "dict comprehensions are not supported in kernels; use a for loop",
    ast.GeneratorExp: "generator expressions are not supported in kernels; use a for loop",
    ast.List: "lists are not supported in kernels; use separate variables or an array",
    ast.Dict: "dicts are not supported in kernels",
    ast.Set: "sets are not supported in kernels",
    ast.Yield: "yield is not supported in kernels",
    ast.YieldFrom: "yield is not supported in kernels",
    ast.Await: "await is not supported in kernels",
    ast.With: "with-blocks are not supported in kernels",
    ast.Try: "try/except is not supported in kernels: kernels cannot raise exceptions",
    ast.Raise: "raise is not supported in kernels: kernels cannot raise exceptions",
    ast.Global: "global declarations are not supported in kernels; pass the value as a parameter",
    ast.Nonlocal: "nonlocal declarations are not supported in kernels",
    ast.Import: "imports are not supported inside kernels; import at module level",
    ast.ImportFrom: "imports are not supported inside kernels; import at module level",
    ast.ClassDef: "class definitions are not supported inside kernels; use @wp.struct at module level",
    ast.FunctionDef: "nested function definitions are not supported; define a @wp.func at module level",
    ast.AsyncFunctionDef: "async functions are not supported in kernels",
    ast.Delete: "del is not supported in kernels",
    ast.Starred: "star-expressions (*args) are not supported in kernels",
    ast.JoinedStr: "f-strings are not supported in kernels; print values with print(a, b)",
    ast.NamedExpr: "assignment expressions (:=) are not supported in kernels; assign on its own line",
    ast.Slice: "slicing is not supported inside kernels; index element by element",
    ast.AsyncFor: "async for is not supported in kernels",
    ast.AsyncWith: "async with is not supported in kernels",
    ast.Assert: "assert is not supported in kernels; use an if statement",
}
if hasattr(ast, "Match"):
    _REJECTED[ast.Match] = "match statements are not supported in kernels; use if/elif"
if hasattr(ast, "TryStar"):
    _REJECTED[ast.TryStar] = "try/except* is not supported in kernels"


class LanguageFence(ast.NodeVisitor):
    """Walks a function body and raises KernelSyntaxError at the first unsupported construct."""

    def __init__(self, parsed: ParsedSource, kernel: str):
        self.parsed = parsed
        self.kernel = kernel

    def fail(self, node: ast.AST, message: str) -> None:
        raise KernelSyntaxError(message, kernel=self.kernel, location=self.parsed.locate(node))

    def generic_visit(self, node: ast.AST) -> None:
        message = _REJECTED.get(type(node))
        if message is not None:
            self.fail(node, message)
        super().generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            self.fail(node, "for/else is not supported in kernels; use a flag variable")
        self.generic_visit(node)

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            self.fail(node, "while/else is not supported in kernels; use a flag variable")
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg is None:
            self.fail(node.value, "**kwargs are not supported in kernels")
        self.generic_visit(node)


def check_syntax(parsed: ParsedSource, kernel: str) -> None:
    """Raise KernelSyntaxError, located at the node, for the first construct kernels do not support."""
    fence = LanguageFence(parsed, kernel)
    for stmt in parsed.tree.body:
        fence.visit(stmt)
