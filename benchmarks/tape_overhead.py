"""Per-launch Python overhead of the tape: launch (untaped), launch + record, and backward.

A one-thread kernel makes the kernel body negligible, so the numbers are the cost of argument
checking, recording and the adjoint dispatch. Run it before and after a change to the launch
path: ``.venv/bin/python -m benchmarks.tape_overhead``.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import difftape as wp


@wp.kernel
def tiny(x: wp.array(dtype=float), v: wp.array(dtype=float), y: wp.array(dtype=float), dt: float):
    i = wp.tid()
    y[i] = x[i] * v[i] + dt


def _per_launch_us(fn, n: int, rounds: int) -> float:
    """Median over ``rounds`` of the time of ``fn(n)`` divided by ``n``, in microseconds."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(n)
        times.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(times)


def measure(n: int = 2000, rounds: int = 15) -> dict[str, float]:
    """Median per-launch microseconds for the three phases."""
    x = wp.array(np.ones(1, np.float32), requires_grad=True)
    v = wp.array(np.ones(1, np.float32), requires_grad=True)
    y = wp.zeros(1, requires_grad=True)
    wp.launch(tiny, 1, inputs=[x, v], outputs=[y, 0.1])  # compile

    def untaped(count):
        for _ in range(count):
            wp.launch(tiny, 1, inputs=[x, v], outputs=[y, 0.1])

    tapes = []

    def taped(count):
        tape = wp.Tape()
        with tape:
            for _ in range(count):
                wp.launch(tiny, 1, inputs=[x, v], outputs=[y, 0.1])
        tapes.append(tape)

    def backward(count):
        tape = tapes.pop()
        tape.backward(grads={y: wp.ones(1)})

    results = {"launch": _per_launch_us(untaped, n, rounds),
               "launch+record": _per_launch_us(taped, n, rounds)}
    taped(n)  # one spare tape so every backward round has one
    results["backward"] = _per_launch_us(backward, n, rounds)
    return results


if __name__ == "__main__":
    for name, us in measure().items():
        print(f"{name:>14}: {us:6.2f} us per launch")
