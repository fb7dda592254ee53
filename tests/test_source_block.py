"""``frontend.source.source_block`` finds a function's lines as ``inspect.getsourcelines`` does,
without tokenizing; where its indentation scan could cut a block wrongly, ``inspect`` decides."""

import functools
import inspect

import pytest

import difftape as wp
from difftape._src.frontend import source
from difftape._src.frontend.source import source_block


def decorated_over_lines(x):
    return x


@functools.lru_cache(
    maxsize=None,
)
def multi_line_decorator(x):
    y = x + 1
    # a comment at the body's depth belongs to the block
    return y
# a comment at the def's depth does not


def one_liner(x): return x * 2


def black_style_signature(
    a,
    b=1,
):
    return a + b


def string_at_column_zero(x):
    text = """first
second line starts at column 0
"""
    return text, x


def bracket_at_column_zero(x):
    y = max(x,
0)
    return y


def signature_at_column_zero(a,
b=1):
    return a + b


def blank_lines_then_comment(x):
    y = x

        # deeper comment after a blank line

    return y


def outer():
    def inner(v):
        if v:
            return 1
        return 0
    return inner


CASES = [decorated_over_lines, multi_line_decorator.__wrapped__, one_liner, black_style_signature,
         string_at_column_zero, bracket_at_column_zero, signature_at_column_zero,
         blank_lines_then_comment, outer, outer()]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__qualname__)
def test_source_block_equals_inspects_lines(fn):
    lines, first_line, module = source_block(fn)
    assert (lines, first_line) == tuple(inspect.getsourcelines(fn))
    assert module.body[0].name == fn.__name__


@pytest.mark.parametrize("fn", [string_at_column_zero, bracket_at_column_zero,
                                signature_at_column_zero])
def test_a_block_the_scan_cuts_wrongly_is_found_by_inspect(fn, monkeypatch):
    calls = []
    original = inspect.getsourcelines
    monkeypatch.setattr(source.inspect, "getsourcelines",
                        lambda f: calls.append(f) or original(f))
    source_block(fn)
    assert calls == [fn]


def test_plain_functions_are_found_without_inspect(monkeypatch):
    def fail(f):
        raise AssertionError("inspect.getsourcelines was called")

    monkeypatch.setattr(source.inspect, "getsourcelines", fail)
    for fn in (decorated_over_lines, multi_line_decorator.__wrapped__, one_liner,
               black_style_signature, blank_lines_then_comment, outer()):
        source_block(fn)


@wp.kernel
def labelled(x: wp.array(dtype=float)):
    """A docstring whose second line
starts at column 0."""
    i = wp.tid()
    x[i] = undefined_name  # noqa: F821


def test_kernel_errors_point_at_the_users_line_after_a_docstring_at_column_zero():
    with pytest.raises(wp.KernelError, match="undefined_name") as info:
        wp.launch(labelled, 1, inputs=[wp.zeros(1, dtype=float)])
    line = inspect.getsourcelines(labelled.func)[1] + 5
    assert f'test_source_block.py", line {line}, in labelled' in str(info.value)
