"""Finite-difference checking of whole tapes, shared by the kernel-level gradient tests.

``check_tape(run, inputs, outputs)``: ``run(arrays)`` launches kernels on a dict of difftape
arrays; ``inputs``/``outputs`` map names to float64 numpy data and difftape dtypes. The tape's
input gradients for random output seeds must pass the dot-product test against central
differences of fresh untaped runs.
"""

from __future__ import annotations

import numpy as np
from numpy.lib import recfunctions

import difftape as wp


def _flat(value: np.ndarray) -> np.ndarray:
    """Structured (struct-array) data as plain floats; other data unchanged."""
    if value.dtype.names:
        return recfunctions.structured_to_unstructured(value).astype(np.float64)
    return value


def _like(flat: np.ndarray, template: np.ndarray) -> np.ndarray:
    if template.dtype.names:
        return recfunctions.unstructured_to_structured(flat, dtype=template.dtype)
    return flat


def _arrays(data: dict, dtypes_: dict, grad: bool) -> dict:
    return {name: wp.array(value.copy(), dtype=dtypes_[name], requires_grad=grad)
            for name, value in data.items()}


def check_tape(run, inputs: dict, outputs: dict, dtypes_: dict, seed: int = 0,
               directions: int = 2, eps: float = 1e-6, rtol: float = 1e-6,
               atol: float = 1e-9) -> dict:
    """Assert tape gradients of ``run`` match central differences; returns the gradients."""
    rng = np.random.default_rng(seed)
    seeds = {name: rng.standard_normal(np.shape(_flat(value))) for name, value in outputs.items()}

    def forward(x: dict) -> dict:
        arrays = _arrays({**x, **outputs}, dtypes_, grad=False)
        run(arrays)
        return {name: _flat(arrays[name].numpy().copy()) for name in outputs}

    arrays = _arrays({**inputs, **outputs}, dtypes_, grad=True)
    tape = wp.Tape()
    with tape:
        run(arrays)
    tape.backward(grads={arrays[name]: wp.array(_like(seeds[name], outputs[name]),
                                                dtype=dtypes_[name]) for name in outputs})
    grads = {name: _flat(arrays[name].grad.numpy().copy()) for name in inputs}
    flat_inputs = {name: _flat(value) for name, value in inputs.items()}
    for _ in range(directions):
        v = {name: rng.standard_normal(np.shape(value)) for name, value in flat_inputs.items()}
        plus = forward({n: _like(flat_inputs[n] + eps * v[n], inputs[n]) for n in inputs})
        minus = forward({n: _like(flat_inputs[n] - eps * v[n], inputs[n]) for n in inputs})
        fd = sum(float(np.sum(seeds[n] * (plus[n] - minus[n]))) for n in outputs) / (2 * eps)
        ad = sum(float(np.sum(grads[n] * v[n])) for n in inputs)
        assert abs(ad - fd) <= atol + rtol * max(abs(fd), abs(ad)) * 100, \
            f"tape gradient · v = {ad!r} but finite differences give {fd!r}"
    return grads
