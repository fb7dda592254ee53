"""Integer ``%``, ``//`` and ``/`` in kernels round toward zero as C does, give 0 for a divisor
of 0, and never fault (x86's division does on 0, and on the most negative value over -1);
compiled, each is one division instruction (``backends/cpu_math.py``)."""

import numpy as np
import pytest

import difftape as wp
from difftape._src.ops.arithmetic import truncated_quotient, truncated_remainder


def _kernel(dtype):
    @wp.kernel
    def divide(a: wp.array(dtype=dtype), b: wp.array(dtype=dtype), q: wp.array(dtype=dtype),
               r: wp.array(dtype=dtype), s: wp.array(dtype=dtype)):
        i = wp.tid()
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]
        s[i] = a[i] / b[i]

    return divide


_KERNELS = {t: _kernel(t) for t in (wp.int32, wp.int64, wp.uint32, wp.int8, wp.uint64)}


@pytest.mark.parametrize("dtype", list(_KERNELS), ids=lambda t: t.__name__)
def test_integer_division_matches_the_python_definition(dtype):
    np_type = np.dtype(dtype._np)
    info = np.iinfo(np_type)
    edges = [0, 1, -1, 2, -2, 7, -7, 100, info.min, info.max, info.min + 1]
    pairs = [(a, b) for a in edges for b in edges if info.min <= a <= info.max
             and info.min <= b <= info.max]
    rng = np.random.default_rng(0)
    lo, hi = max(info.min, -1000), min(info.max, 1000)
    pairs += [(int(a), int(b)) for a, b in rng.integers(lo, hi + 1, (200, 2))]
    a = np.array([p[0] for p in pairs], np_type)
    b = np.array([p[1] for p in pairs], np_type)
    q = wp.zeros(len(pairs), dtype=dtype)
    r = wp.zeros(len(pairs), dtype=dtype)
    s = wp.zeros(len(pairs), dtype=dtype)
    wp.launch(_KERNELS[dtype], len(pairs), inputs=[wp.array(a), wp.array(b)], outputs=[q, r, s])
    wrap = 1 << (8 * np_type.itemsize)

    def typed(v):  # the Python definition's integer, wrapped to the kernel's type
        v %= wrap
        return v - wrap if info.min < 0 and v > info.max else v

    want_q = [typed(truncated_quotient(int(x), int(y))) for x, y in zip(a, b)]
    want_r = [typed(truncated_remainder(int(x), int(y))) for x, y in zip(a, b)]
    assert q.numpy().tolist() == want_q
    assert r.numpy().tolist() == want_r
    assert s.numpy().tolist() == want_q
