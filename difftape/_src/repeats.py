"""Find runs of consecutively repeated subsequences (for folding loops in ``Tape.visualize``).

A sequence of keyed items is split into plain items and maximal runs ``block × count``: the run
covering the most items wins (ties: the shorter block, then the earlier start), and the parts
before and after it are split the same way. It compares keys only; it knows nothing of tapes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Item:
    """One element of the sequence: ``key`` decides equality, ``value`` is carried along."""

    key: object
    value: object


@dataclass
class Repeat:
    """``count`` consecutive copies of the first ``length`` items of ``items``."""

    items: list[Item]
    length: int
    count: int
    whole: bool  # the run is the entire sequence it was found in

    @property
    def block(self) -> list[Item]:
        return self.items[:self.length]

    def iterations(self) -> list[list[Item]]:
        return [self.items[i * self.length:(i + 1) * self.length] for i in range(self.count)]


def longest_run(codes: np.ndarray) -> tuple[int, int, int] | None:
    """``(start, length, count)`` of the repeated run covering the most items, or None."""
    n = len(codes)
    best: tuple[int, int, int] | None = None
    best_score = (0, 0, 0)
    for length in range(1, n // 2 + 1):
        same = np.concatenate(([0], (codes[:-length] == codes[length:]).astype(np.int8), [0]))
        edges = np.flatnonzero(np.diff(same))
        for start, stop in zip(edges[::2], edges[1::2]):
            run = stop - start  # items i with codes[i] == codes[i + length]
            if run < length:
                continue
            count = run // length + 1
            score = (count * length, -length, -start)
            if score > best_score:
                best_score, best = score, (int(start), length, count)
    return best


def find_repeats(items: list[Item]) -> list[Item | Repeat]:
    """``items`` with every maximal repeated run replaced by a ``Repeat`` (recursively)."""
    if len(items) < 2:
        return list(items)
    ids: dict[object, int] = {}
    codes = np.array([ids.setdefault(item.key, len(ids)) for item in items], dtype=np.int64)
    found = longest_run(codes)
    if found is None:
        return list(items)
    start, length, count = found
    stop = start + length * count
    run = Repeat(items[start:stop], length, count, whole=start == 0 and stop == len(items))
    return find_repeats(items[:start]) + [run] + find_repeats(items[stop:])
