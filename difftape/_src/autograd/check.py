"""Gradient checks: the tape's Jacobians against finite differences, for one kernel or a whole tape.

``gradcheck`` compares the two Jacobians of each (input, output) pair with ``np.allclose`` and
prints Warp's summary table. ``gradcheck_tape`` runs it on every recorded kernel launch and,
beyond Warp, names the first launch whose adjoint disagrees: kernel, where it was launched, the
worst (input, output) pair and its errors.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..kernel import Kernel
from .jacobian import FunctionMetadata, backward_enabled, jacobian, jacobian_fd

GREEN, RED, END = "\033[92m", "\033[91m", "\033[0m"


@dataclass
class PairResult:
    """How the tape's and the finite-difference Jacobian of one (input, output) pair compare."""

    input: str
    output: str
    matches: bool
    has_nan: bool
    max_abs: float
    max_rel: float
    at: tuple[int, ...]
    ad: float
    fd: float

    @property
    def passed(self) -> bool:
        return self.matches and not self.has_nan


@dataclass
class CheckResult:
    key: str
    pairs: list[tuple[int, int, PairResult]]

    @property
    def passed(self) -> bool:
        return all(p.passed for _, _, p in self.pairs)

    def worst(self) -> tuple[int, int, PairResult]:
        failed = [p for p in self.pairs if not p[2].passed] or self.pairs
        return max(failed, key=lambda p: (p[2].has_nan, p[2].max_abs))


def compare(jac_ad: np.ndarray, jac_fd: np.ndarray, atol: float, rtol: float, labels) -> PairResult:
    diff = np.abs(jac_ad - jac_fd)
    finite = np.where(np.isnan(diff), -np.inf, diff)
    at = tuple(int(k) for k in np.unravel_index(int(np.argmax(finite)), diff.shape)) \
        if diff.size else ()
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs((jac_ad - jac_fd) / (jac_fd + 1e-8))
    return PairResult(
        input=labels[0], output=labels[1],
        matches=bool(np.allclose(jac_ad, jac_fd, atol=atol, rtol=rtol)),
        has_nan=bool(np.any(np.isnan(jac_ad))),
        max_abs=float(diff.max()) if diff.size else 0.0,
        max_rel=float(rel.max()) if rel.size else 0.0,
        at=at, ad=float(jac_ad[at]) if diff.size else 0.0,
        fd=float(jac_fd[at]) if diff.size else 0.0)


def check(function: Kernel | Callable, dim, inputs, outputs, *, eps, atol, rtol,
          input_output_mask, device, max_blocks, block_dim, max_inputs_per_var,
          max_outputs_per_var, restore_inputs) -> tuple[CheckResult, dict, dict, FunctionMetadata]:
    """Both Jacobians and their comparison, without printing or raising."""
    if inputs is None:
        raise ValueError("The inputs argument must be provided")
    metadata = FunctionMetadata()
    common = dict(dim=dim, inputs=inputs, outputs=outputs, input_output_mask=input_output_mask,
                  device=device, max_blocks=max_blocks, block_dim=block_dim,
                  restore_inputs=restore_inputs, metadata=metadata)
    jacs_ad = jacobian(function, max_outputs_per_var=max_outputs_per_var, **common)
    jacs_fd = jacobian_fd(function, max_inputs_per_var=max_inputs_per_var, eps=eps, **common)
    pairs = []
    for (i, o), jac_fd in jacs_fd.items():
        fd, ad = jac_fd.numpy(), jacs_ad[i, o].numpy()
        if max_outputs_per_var > 0:
            fd, ad = fd[:max_outputs_per_var], ad[:max_outputs_per_var]
        if max_inputs_per_var > 0:
            fd, ad = fd[:, :max_inputs_per_var], ad[:, :max_inputs_per_var]
        labels = (metadata.input_labels[i], metadata.output_labels[o])
        pairs.append((i, o, compare(ad, fd, atol, rtol, labels)))
    return CheckResult(metadata.key, pairs), jacs_ad, jacs_fd, metadata


def gradcheck(function: Kernel | Callable, dim=None, inputs: Sequence | None = None,
              outputs: Sequence | None = None, *, eps: float = 1e-4, atol: float = 1e-3,
              rtol: float = 1e-2, raise_exception: bool = True,
              input_output_mask: list | None = None, device=None, max_blocks: int = 0,
              block_dim: int | None = None, max_inputs_per_var: int = -1,
              max_outputs_per_var: int = -1, plot_relative_error: bool = False,
              plot_absolute_error: bool = False, show_summary: bool = True,
              restore_inputs: bool = True) -> bool:
    """Check a kernel's or function's tape gradients against central finite differences.

    Passes when ``|AD - FD| <= atol + rtol·|FD|`` everywhere and AD has no NaN.

    Args:
        function: A ``@wp.kernel`` (inputs precede outputs) or a Python function.
        dim, inputs, outputs, device, max_blocks, block_dim: As for ``jacobian``.
        eps: Finite-difference step.
        atol, rtol: Tolerances.
        raise_exception: Raise ``ValueError`` on failure instead of returning False.
        input_output_mask: ``(input, output)`` pairs by index or name.
        max_inputs_per_var, max_outputs_per_var: Crop the compared block (all when <= 0).
        plot_relative_error, plot_absolute_error: Plot the error matrices (needs matplotlib).
        show_summary: Print Warp's table and a pass/fail line.
        restore_inputs: For functions, put the inputs' values back after each evaluation.

    Returns:
        Whether every pair passed.

    Raises:
        ValueError: on failure with ``raise_exception``; when ``inputs`` is missing.

    Example:
        >>> gradcheck(my_kernel, dim=2, inputs=[a, b], outputs=[out1, out2])
        True
    """
    result, jacs_ad, jacs_fd, metadata = check(
        function, dim, inputs, outputs, eps=eps, atol=atol, rtol=rtol,
        input_output_mask=input_output_mask, device=device, max_blocks=max_blocks,
        block_dim=block_dim, max_inputs_per_var=max_inputs_per_var,
        max_outputs_per_var=max_outputs_per_var, restore_inputs=restore_inputs)
    if show_summary:
        print_summary(result)
    if plot_relative_error or plot_absolute_error:
        _plot_errors(jacs_ad, jacs_fd, metadata, plot_relative_error, plot_absolute_error)
    if raise_exception and not result.passed:
        raise ValueError(failure_message(result))
    return result.passed


def failure_message(result: CheckResult) -> str:
    """Warp's text for the first failing pair."""
    i, o, pair = next(p for p in result.pairs if not p[2].passed)
    why = ("gradient contains NaN values" if pair.matches
           else "finite difference and autodiff gradients do not match")
    return f"Gradient check failed for kernel {result.key}, input {i}, output {o}: {why}"


def print_summary(result: CheckResult) -> None:
    header = ["Input", "Output", "Max Abs Error", "AD at MAE", "FD at MAE", "Max Rel Error",
              "Pass"]
    rows = []
    for _, _, p in result.pairs:
        status = (f"{RED}NaN{END}" if p.has_nan else f"{GREEN}PASS{END}" if p.matches
                  else f"{RED}FAIL{END}")
        rows.append([p.input, p.output, f"{p.max_abs:.3e} at {p.at}", f"{p.ad:.3e}",
                     f"{p.fd:.3e}", f"{p.max_rel:.3e}", status])
    print_table(header, rows)
    verdict = "passed" if result.passed else "failed"
    color = GREEN if result.passed else RED
    print(f"{color}Gradient check for kernel {result.key} {verdict}{END}")


def print_table(headers: list[str], cells: list[list[str]]) -> None:
    """Columns separated by `` | ``, widths ignoring ANSI colour codes (Warp's layout)."""
    def width(s) -> int:
        return len(re.sub(r"\033\[\d+m", "", str(s)))

    widths = [max(width(c) for c in col) for col in zip(headers, *cells)]
    print("".join(f"{h:{w}} | " for h, w in zip(headers, widths)))
    print("-" * (sum(widths) + 3 * len(widths) - 1))
    for row in cells:
        print("".join(f"{c}{' ' * (w - width(c))} | " for c, w in zip(row, widths)))


def _plot_errors(jacs_ad, jacs_fd, metadata, relative: bool, absolute: bool) -> None:
    from ..array_ops import empty_like
    from .plot import jacobian_plot

    for wanted, kind in ((relative, "relative"), (absolute, "absolute")):
        if not wanted:
            continue
        errors = {}
        for key, jac_fd in jacs_fd.items():
            ad, fd = jacs_ad[key].numpy(), jac_fd.numpy()
            out = empty_like(jac_fd, requires_grad=False)
            if kind == "absolute":
                out._data[...] = np.abs(ad - fd)
            else:
                denom = np.where(np.abs(ad) < 1e-8, 1e-8, ad)
                out._data[...] = (ad - fd) / denom
            errors[key] = out
        jacobian_plot(errors, metadata, title=f"{metadata.key} kernel Jacobian {kind} error")


# ------------------------------------------------------------ whole tapes


def gradcheck_tape(tape, *, eps: float = 1e-4, atol: float = 1e-3, rtol: float = 1e-2,
                   raise_exception: bool = True, input_output_masks: dict | None = None,
                   blacklist_kernels: list | None = None, whitelist_kernels: list | None = None,
                   max_inputs_per_var: int = -1, max_outputs_per_var: int = -1,
                   plot_relative_error: bool = False, plot_absolute_error: bool = False,
                   show_summary: bool = True, reverse_launches: bool = False,
                   skip_to_launch_index: int = 0) -> bool:
    """Run ``gradcheck`` on every kernel launch recorded on ``tape`` (callbacks are skipped).

    Each launch is checked with its recorded dim and arguments, as they are now. On failure the
    first disagreeing launch is reported by kernel, launch location and worst (input, output)
    pair with its max abs/rel error: in the ``ValueError`` with ``raise_exception``, printed
    otherwise.

    Args:
        tape: The recorded tape.
        input_output_masks: ``{kernel key: mask}``.
        blacklist_kernels, whitelist_kernels: Kernel keys to skip / to check exclusively.
        reverse_launches: Check the launches last to first.
        skip_to_launch_index: Skip this many launches first.
        eps, atol, rtol, max_*_per_var, plot_*, show_summary: As for ``gradcheck``.

    Returns:
        Whether every checked launch passed.

    Raises:
        ValueError: at the first failing launch, with ``raise_exception``.
    """
    masks = input_output_masks or {}
    blacklist, whitelist = set(blacklist_kernels or ()), set(whitelist_kernels or ())
    records = list(enumerate(tape.launches))
    if reverse_launches:
        records.reverse()
    overall = True
    for position, (index, record) in enumerate(records):
        if position < skip_to_launch_index or callable(record):
            continue
        kernel = record[0]
        if not isinstance(kernel, Kernel) or (whitelist and kernel.key not in whitelist) \
                or kernel.key in blacklist or not backward_enabled(kernel):
            continue
        dim, max_blocks, inputs, outputs, device, block_dim = (record[1], record[2], record[3],
                                                               record[4], record[5], record[6])
        result, jacs_ad, jacs_fd, metadata = check(
            kernel, dim, list(inputs), list(outputs), eps=eps, atol=atol, rtol=rtol,
            input_output_mask=masks.get(kernel.key), device=device, max_blocks=max_blocks,
            block_dim=block_dim, max_inputs_per_var=max_inputs_per_var,
            max_outputs_per_var=max_outputs_per_var, restore_inputs=True)
        if show_summary:
            print_summary(result)
        if plot_relative_error or plot_absolute_error:
            _plot_errors(jacs_ad, jacs_fd, metadata, plot_relative_error, plot_absolute_error)
        if result.passed:
            continue
        report = launch_report(index, record, result)
        if raise_exception:
            raise ValueError(f"{failure_message(result)}\n{report}")
        if overall:
            print(report)
        overall = False
    return overall


def launch_report(index: int, record: list, result: CheckResult) -> str:
    """Which launch disagrees with finite differences, where it was launched, and how badly."""
    caller = record[7].get("caller") if isinstance(record[7], dict) else None
    where = f"{caller['file']}:{caller['lineno']}" if caller else "an unknown location"
    _, _, worst = result.worst()
    what = "NaN in the tape's gradient" if worst.has_nan else (
        f"max abs error {worst.max_abs:.3e} (tape {worst.ad:.6g} vs finite differences "
        f"{worst.fd:.6g} at {worst.at}), max rel error {worst.max_rel:.3e}")
    return (f"First launch whose adjoint disagrees with finite differences: launch {index} of "
            f"the tape, kernel '{result.key}' launched at {where}; worst pair: input "
            f"'{worst.input}' -> output '{worst.output}': {what}")
