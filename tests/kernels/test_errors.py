"""Bad kernels and bad launches give clear errors (STYLE §7.7, §7.8 error-message tests).

For every class of user error: the exception class (the difftape class and the Python base),
the kernel name, ``file:line`` of the offending source (this file, computed from the source,
never hard-coded), the offending source text, and the caret span under it. Launch errors name
the kernel, the parameter (name and position), what was expected and what was given. A few
golden full messages keep the tone reviewable.
"""

from __future__ import annotations

import inspect
import os
import re

import numpy as np
import pytest

import difftape as wp

HERE = os.path.abspath(__file__)


# --- helpers ------------------------------------------------------------------------------------


def source_line(fn, snippet: str) -> tuple[int, str]:
    """File line number and text of the one line of ``fn``'s source that contains ``snippet``."""
    fn = getattr(fn, "func", fn)
    lines, first = inspect.getsourcelines(fn)
    hits = [k for k, line in enumerate(lines) if snippet in line]
    assert len(hits) == 1, f"snippet {snippet!r} must occur once in {fn.__name__}'s source"
    return first + hits[0], lines[hits[0]].rstrip("\n")


def compile_error(kernel: wp.Kernel, cls: type) -> Exception:
    """The error raised by the first launch of ``kernel`` (compile errors surface there)."""
    try:
        wp.launch(kernel, 1, inputs=[])  # no arguments: compilation comes before the count check
    except cls as err:
        first = err
    except Exception as err:  # noqa: BLE001 - report what happened instead
        pytest.fail(f"kernel '{kernel.key}' did not raise {cls.__name__} when compiled; the "
                    f"launch raised {type(err).__name__}: {err}")
    else:
        pytest.fail(f"kernel '{kernel.key}' compiled and launched without an error")
    # Accessing the IR raises the same error class again (failures are not cached as success).
    with pytest.raises(cls):
        kernel.ir  # noqa: B018
    return first


def span_start(line: str, span: str | tuple[str, int]) -> tuple[int, str]:
    """Column of ``span`` in ``line``: its first occurrence, or ``(text, k)`` for the k-th.

    Identifiers match whole words only (``n`` is not found inside ``annotation``).
    """
    text, k = (span, 0) if isinstance(span, str) else span
    pattern = re.escape(text)
    if text.isidentifier():
        pattern = rf"(?<!\w){pattern}(?!\w)"
    starts = [m.start() for m in re.finditer(pattern, line)]
    assert len(starts) > k, f"{text!r} occurs {len(starts)} time(s) in {line!r}"
    return starts[k], text


def check_location(err: Exception, fn, snippet: str, span: str | tuple[str, int] | None = None,
                   function: str | None = None) -> None:
    """``err`` points at the line of ``fn`` holding ``snippet`` with carets exactly under ``span``.

    ``span`` defaults to ``snippet``; it is the source text the error is about (``(text, k)``
    for its k-th occurrence on the line).
    """
    text = str(err)
    lineno, line = source_line(fn, snippet)
    name = function or getattr(fn, "key", None) or fn.__name__
    assert f'File "{HERE}", line {lineno}, in {name}' in text, text
    shown = line.strip()
    lines = text.splitlines()
    assert f"    {shown}" in lines, f"source line {shown!r} missing from:\n{text}"
    at = lines.index(f"    {shown}")
    assert at + 1 < len(lines), f"no caret line under the source in:\n{text}"
    start, span = span_start(shown, span or snippet)
    expected = "    " + " " * start + "^" * len(span)
    assert lines[at + 1] == expected, (
        f"caret should underline {span!r}:\n{lines[at]}\n{expected}\ngot:\n{lines[at + 1]}")
    location = getattr(err, "location", None)
    assert location is not None and location.lineno == lineno and \
        os.path.abspath(location.filename) == HERE


def check_kernel_error(err: Exception, kernel: wp.Kernel, base: type, *fragments: str) -> None:
    assert isinstance(err, wp.KernelError) and isinstance(err, wp.DiffTapeError)
    assert isinstance(err, base), f"{type(err).__mro__} is not a {base.__name__}"
    text = str(err)
    assert text.startswith(f"in kernel '{kernel.key}': "), text
    assert err.kernel == kernel.key
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} missing from:\n{text}"


def normalized(err: Exception) -> str:
    return str(err).replace(HERE, "<file>")


def python_helper(a):
    return a * 2.0


@wp.func
def two_args(a: wp.float64, b: wp.float64):
    return a * b


@wp.func
def uses_tid(a: wp.float64):
    j = wp.tid()
    return a * wp.float64(j)


@wp.func
def calls_uses_tid(a: wp.float64):
    return uses_tid(a) + 1.0


@wp.func
def bad_inner_type(a: wp.float64, n: int):
    return wp.sin(a) + n


# --- unsupported syntax ---------------------------------------------------------------------------


@wp.kernel
def err_list_comprehension(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = [v for v in range(3)]
    x[i] = 0.0


@wp.kernel
def err_lambda(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    f = lambda a: a * 2.0  # noqa: E731
    x[i] = 0.0


@wp.kernel
def err_try(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    try:
        x[i] = 1.0
    except Exception:
        x[i] = 0.0


@wp.kernel
def err_with(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    with wp.ScopedDevice("cpu"):
        x[i] = 1.0


@wp.kernel
def err_fstring(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    print(f"value {x[i]}")


@wp.kernel
def err_slice(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = x[1:3]


@wp.kernel
def err_while_else(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    j = int(0)
    while j < 3:
        j += 1
    else:
        x[i] = 1.0


@wp.kernel
def err_chained_assignment(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = b = x[i]
    x[i] = a + b


SYNTAX_CASES = [
    # kernel, line snippet, caret span, message fragment
    (err_list_comprehension, "s = [v for v in range(3)]", "[v for v in range(3)]",
     "list comprehensions are not supported"),
    (err_lambda, "f = lambda a: a * 2.0", "lambda a: a * 2.0",
     "lambda expressions are not supported"),
    (err_try, "try:", "try:", "try/except is not supported"),
    (err_with, 'with wp.ScopedDevice("cpu"):', 'with wp.ScopedDevice("cpu"):',
     "with-blocks are not supported"),
    (err_fstring, 'print(f"value {x[i]}")', 'f"value {x[i]}"', "f-strings are not supported"),
    (err_slice, "y[i] = x[1:3]", "1:3", "slicing is not supported"),
    (err_while_else, "while j < 3:", "while j < 3:", "while/else is not supported"),
    (err_chained_assignment, "a = b = x[i]", "a = b = x[i]", "chained assignment"),
]


@pytest.mark.parametrize("kernel, snippet, span, fragment", SYNTAX_CASES,
                         ids=[c[0].key for c in SYNTAX_CASES])
def test_unsupported_syntax(kernel, snippet, span, fragment):
    err = compile_error(kernel, wp.KernelSyntaxError)
    check_kernel_error(err, kernel, SyntaxError, fragment)
    check_location(err, kernel, snippet, span)
    # SyntaxError's own fields point at the user's file, line and column too.
    lineno, line = source_line(kernel, snippet)
    assert os.path.abspath(err.filename) == HERE
    assert err.lineno == lineno
    assert err.offset == span_start(line, span)[0] + 1


# --- names, calls and types -----------------------------------------------------------------------


@wp.kernel
def err_unknown_name(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = x[i] * undefined_scale  # noqa: F821


@wp.kernel
def err_python_function(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = python_helper(x[i])


@wp.kernel
def err_select_removed(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = wp.select(x[i] > 0.0, x[i], 0.0)


@wp.kernel
def err_sin_of_int(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = wp.float64(wp.sin(i))


@wp.kernel
def err_sqrt_of_bool(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = wp.sqrt(True)


@wp.kernel
def err_mixed_float_types(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = x[i]
    b = wp.float32(2.0)
    x[i] = a + b


@wp.kernel
def err_float_into_int_variable(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    k = 0
    k = x[i]
    x[i] = 0.0


@wp.kernel
def err_return_value(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    return x[i]


@wp.kernel
def err_tid_in_func(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = uses_tid(x[i])


@wp.kernel
def err_tid_in_nested_func(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = calls_uses_tid(x[i])


@wp.kernel
def err_type_in_func(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = bad_inner_type(x[i], 3)


@wp.kernel
def err_too_many_indices(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = x[i, 0]


@wp.kernel
def err_index_scalar(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[i]
    x[i] = s[0]


@wp.kernel
def err_missing_annotation(x: wp.array(dtype=wp.float64), n):
    i = wp.tid()
    x[i] = 0.0


@wp.kernel
def err_func_arg_count(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = two_args(x[i])


@wp.kernel
def err_float_index(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = x[x[i]]


@wp.kernel
def err_store_float32_into_float64(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = wp.float32(1.0)


@wp.kernel
def err_add_cast_float32_literal(x: wp.array(dtype=wp.float64)):
    # wp.float32(2.0) is an explicit cast: a strong float32, not a weak literal.
    i = wp.tid()
    x[i] = x[i] + wp.float32(2.0)


SEMANTIC_CASES = [
    # kernel, (difftape class, python base), line snippet, caret span, message fragments
    (err_unknown_name, (wp.KernelNameError, NameError), "x[i] * undefined_scale",
     "undefined_scale", ["name 'undefined_scale' is not defined"]),
    (err_python_function, (wp.KernelNameError, NameError), "x[i] = python_helper(x[i])",
     "python_helper(x[i])", ["'python_helper'", "@wp.func"]),
    (err_select_removed, (wp.KernelNameError, NameError), "wp.select(",
     "wp.select(x[i] > 0.0, x[i], 0.0)",
     ["wp.select() has been removed", "wp.where"]),
    (err_sin_of_int, (wp.KernelTypeError, TypeError), "wp.sin(i)", "wp.sin(i)",
     ["sin()", "int32"]),
    (err_sqrt_of_bool, (wp.KernelTypeError, TypeError), "wp.sqrt(True)", "wp.sqrt(True)",
     ["sqrt()", "bool"]),
    (err_mixed_float_types, (wp.KernelTypeError, TypeError), "x[i] = a + b", "a + b",
     ["float64", "float32", "cast"]),
    (err_float_into_int_variable, (wp.KernelTypeError, TypeError), "k = x[i]", "k",
     ["variable 'k'", "int32", "float64"]),
    (err_return_value, (wp.KernelSyntaxError, SyntaxError), "return x[i]", "return x[i]",
     ["kernels cannot return a value"]),
    (err_too_many_indices, (wp.KernelTypeError, TypeError), "x[i] = x[i, 0]", "x[i, 0]",
     ["too many indices", "1 dimension", "2 given"]),
    (err_index_scalar, (wp.KernelTypeError, TypeError), "x[i] = s[0]", "s[0]",
     ["'s' is a float64 scalar", "only arrays can be indexed"]),
    (err_missing_annotation, (wp.KernelTypeError, TypeError), "def err_missing_annotation", "n",
     ["parameter 'n' has no type annotation"]),
    (err_func_arg_count, (wp.KernelTypeError, TypeError), "two_args(x[i])", "two_args(x[i])",
     ["function 'two_args' takes 2 argument(s), 1 given"]),
    (err_float_index, (wp.KernelTypeError, TypeError), "x[x[i]]", ("x[i]", 1),
     ["array indices must be integers", "float64"]),
    (err_store_float32_into_float64, (wp.KernelTypeError, TypeError), "x[i] = wp.float32(1.0)",
     "x[i]", ["float64", "float32"]),
    (err_add_cast_float32_literal, (wp.KernelTypeError, TypeError), "x[i] + wp.float32(2.0)",
     "x[i] + wp.float32(2.0)", ["float64", "float32"]),
]


@pytest.mark.parametrize("kernel, classes, snippet, span, fragments", SEMANTIC_CASES,
                         ids=[c[0].key for c in SEMANTIC_CASES])
def test_semantic_error(kernel, classes, snippet, span, fragments):
    cls, base = classes
    err = compile_error(kernel, cls)
    check_kernel_error(err, kernel, base, *fragments)
    check_location(err, kernel, snippet, span)


def test_tid_inside_func_points_into_the_func():
    err = compile_error(err_tid_in_func, wp.KernelSyntaxError)
    check_kernel_error(err, err_tid_in_func, SyntaxError, "in function 'uses_tid'",
                       "wp.tid() cannot be called inside a @wp.func")
    check_location(err, uses_tid, "j = wp.tid()", function="uses_tid")


def test_tid_inside_nested_func_names_the_innermost_func():
    err = compile_error(err_tid_in_nested_func, wp.KernelSyntaxError)
    check_kernel_error(err, err_tid_in_nested_func, SyntaxError, "in function 'uses_tid'")
    check_location(err, uses_tid, "j = wp.tid()", function="uses_tid")


def test_type_error_inside_func_points_into_the_func():
    err = compile_error(err_type_in_func, wp.KernelTypeError)
    check_kernel_error(err, err_type_in_func, TypeError, "in function 'bad_inner_type'",
                       "float64", "int32")
    check_location(err, bad_inner_type, "return wp.sin(a) + n", "wp.sin(a) + n",
                   function="bad_inner_type")


def test_error_is_attached_once():
    # STYLE §7.7: the location is attached once, at the innermost node; messages are not joined.
    err = compile_error(err_mixed_float_types, wp.KernelTypeError)
    text = str(err)
    assert text.count('File "') == 1
    assert text.count("in kernel") == 1
    assert "; " not in text.splitlines()[0].split(". It accepts")[0]


def test_kernel_cannot_be_called_directly():
    with pytest.raises(RuntimeError, match="err_unknown_name.*cannot be called directly"):
        err_unknown_name(wp.zeros(1, dtype=wp.float64))


# --- golden messages ------------------------------------------------------------------------------


def test_golden_unknown_name():
    err = compile_error(err_unknown_name, wp.KernelNameError)
    lineno, _ = source_line(err_unknown_name, "undefined_scale")
    assert normalized(err) == (
        "in kernel 'err_unknown_name': name 'undefined_scale' is not defined: it is neither a "
        "local variable, a parameter, a module-level constant nor a builtin\n"
        f'  File "<file>", line {lineno}, in err_unknown_name\n'
        "    x[i] = x[i] * undefined_scale  # noqa: F821\n"
        "                  ^^^^^^^^^^^^^^^")


def test_golden_list_comprehension():
    err = compile_error(err_list_comprehension, wp.KernelSyntaxError)
    lineno, _ = source_line(err_list_comprehension, "[v for v in range(3)]")
    assert normalized(err) == (
        "in kernel 'err_list_comprehension': list comprehensions are not supported in kernels; "
        "use a for loop\n"
        f'  File "<file>", line {lineno}, in err_list_comprehension\n'
        "    s = [v for v in range(3)]\n"
        "        ^^^^^^^^^^^^^^^^^^^^^")


def test_golden_float_into_int_variable():
    err = compile_error(err_float_into_int_variable, wp.KernelTypeError)
    lineno, _ = source_line(err_float_into_int_variable, "k = x[i]")
    assert normalized(err) == (
        "in kernel 'err_float_into_int_variable': variable 'k' has type int32 but the value has "
        "type float64; cast explicitly, e.g. wp.int32(...)\n"
        f'  File "<file>", line {lineno}, in err_float_into_int_variable\n'
        "    k = x[i]\n"
        "    ^")


# --- launch errors --------------------------------------------------------------------------------


@wp.kernel
def scale_f32(x: wp.array(dtype=wp.float32), n: int, y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = x[i] * wp.float32(n)


@wp.kernel
def grid_2d(a: wp.array2d(dtype=wp.float64)):
    i, j = wp.tid()
    a[i, j] = 1.0


def f32(n=4):
    return wp.zeros(n, dtype=wp.float32)


def check_launch_error(err: Exception, *fragments: str) -> None:
    assert isinstance(err, wp.DiffTapeError) and isinstance(err, RuntimeError)
    text = str(err)
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} missing from:\n{text}"


def test_launch_wrong_number_of_arguments_uses_warp_text():
    with pytest.raises(wp.LaunchError) as info:
        wp.launch(scale_f32, 4, inputs=[f32(), 2])
    assert isinstance(info.value, RuntimeError)
    assert str(info.value) == ("Error launching kernel 'scale_f32', passed 2 arguments but kernel "
                               "requires 3.")


def test_launch_too_many_arguments():
    with pytest.raises(wp.LaunchError) as info:
        wp.launch(scale_f32, 4, inputs=[f32(), 2], outputs=[f32(), f32()])
    assert str(info.value) == ("Error launching kernel 'scale_f32', passed 4 arguments but kernel "
                               "requires 3.")


def test_launch_float64_array_to_float32_param():
    x = wp.zeros(4, dtype=wp.float64)
    with pytest.raises(wp.LaunchTypeError) as info:
        wp.launch(scale_f32, 4, inputs=[x, 2], outputs=[f32()])
    assert isinstance(info.value, TypeError) and isinstance(info.value, RuntimeError)
    assert str(info.value) == ("launch(scale_f32): argument 'x' (position 0) expects "
                               "array(dtype=float32, ndim=1), got array(dtype=float64, ndim=1).")


def test_launch_2d_array_to_1d_param():
    y = wp.zeros((2, 2), dtype=wp.float32)
    with pytest.raises(wp.LaunchTypeError) as info:
        wp.launch(scale_f32, 4, inputs=[f32(), 2], outputs=[y])
    check_launch_error(info.value, "scale_f32", "argument 'y' (position 2)",
                       "expects array(dtype=float32, ndim=1)", "got array(dtype=float32, ndim=2)")


def test_launch_numpy_array_instead_of_wp_array():
    with pytest.raises(wp.LaunchTypeError) as info:
        wp.launch(scale_f32, 4, inputs=[np.zeros(4, np.float32), 2], outputs=[f32()])
    check_launch_error(info.value, "scale_f32", "argument 'x' (position 0)",
                       "expects array(dtype=float32, ndim=1)", "numpy.ndarray", "float32",
                       "wp.array(")


def test_launch_float_for_int_param():
    with pytest.raises(wp.LaunchTypeError) as info:
        wp.launch(scale_f32, 4, inputs=[f32(), 1.5], outputs=[f32()])
    assert isinstance(info.value, TypeError)
    check_launch_error(info.value, "scale_f32", "argument 'n' (position 1)", "expects int32",
                       "float", "1.5")


def test_launch_array_for_scalar_param():
    with pytest.raises(wp.LaunchTypeError) as info:
        wp.launch(scale_f32, 4, inputs=[f32(), f32()], outputs=[f32()])
    check_launch_error(info.value, "scale_f32", "argument 'n' (position 1)", "expects int32",
                       "array(dtype=float32, ndim=1)")


def test_launch_scalar_for_array_param():
    with pytest.raises(wp.LaunchTypeError) as info:
        wp.launch(scale_f32, 4, inputs=[2.0, 2], outputs=[f32()])
    check_launch_error(info.value, "scale_f32", "argument 'x' (position 0)",
                       "expects array(dtype=float32, ndim=1)", "got float")


@pytest.mark.parametrize("dim", ["four", 2.5, None, (2, "a")], ids=repr)
def test_launch_bad_dim_type(dim):
    with pytest.raises(wp.LaunchTypeError) as info:
        wp.launch(scale_f32, dim, inputs=[f32(), 2], outputs=[f32()])
    check_launch_error(info.value, "scale_f32", "dim", repr(dim))


@pytest.mark.parametrize("dim", [-1, (), (1, 1, 1, 1, 1), (4, -2)], ids=repr)
def test_launch_bad_dim_value(dim):
    with pytest.raises(wp.DiffTapeError) as info:
        wp.launch(scale_f32, dim, inputs=[f32(), 2], outputs=[f32()])
    assert isinstance(info.value, RuntimeError)  # Warp raises RuntimeError for launch errors
    check_launch_error(info.value, "scale_f32", "dim")


def test_launch_2d_tid_kernel_with_1d_dim():
    with pytest.raises(wp.DiffTapeError) as info:
        wp.launch(grid_2d, 4, inputs=[wp.zeros((2, 2), dtype=wp.float64)])
    assert isinstance(info.value, RuntimeError)
    check_launch_error(info.value, "grid_2d", "2", "(4,)", "dimension")


def test_launch_non_kernel():
    with pytest.raises(wp.LaunchTypeError) as info:
        wp.launch(python_helper, 4, inputs=[f32()])
    check_launch_error(info.value, "@wp.kernel", "function")


# --- message quality ------------------------------------------------------------------------------


def test_error_inside_func_names_each_call_site():
    @wp.func
    def bad_helper(v: wp.float64):
        return v[0]

    @wp.func
    def middle(v: wp.float64):
        return bad_helper(v) * 2.0

    @wp.kernel
    def calls_bad_helper(x: wp.array(dtype=wp.float64)):
        i = wp.tid()
        x[i] = middle(x[i])

    with pytest.raises(wp.KernelTypeError) as info:
        calls_bad_helper.ir
    message = str(info.value)
    assert "in kernel 'calls_bad_helper': in function 'bad_helper':" in message
    assert message.index("return v[0]") < message.index("return bad_helper(v) * 2.0") \
        < message.index("x[i] = middle(x[i])")
    assert message.count("called from") == 2
    assert len(info.value.callers) == 2


def test_mixed_float_types_name_the_operator_and_the_cast():
    @wp.kernel
    def mixes_precisions(a: wp.array(dtype=wp.float64), b: wp.array(dtype=wp.float32)):
        i = wp.tid()
        a[i] = a[i] + b[i]

    with pytest.raises(wp.KernelTypeError) as info:
        mixes_precisions.ir
    message = str(info.value)
    assert "operator + (add) does not accept (float64, float32)" in message
    assert "wp.float64(...)" in message


def test_int_argument_to_float_builtin_suggests_a_cast():
    @wp.kernel
    def sine_of_index(y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.sin(i)

    with pytest.raises(wp.KernelTypeError) as info:
        sine_of_index.ir
    message = str(info.value)
    assert "sin() does not accept (int32)" in message
    assert "float16/float32/float64" in message and "float(i)" in message
