"""Warp builtins whose work is a loop, written in the kernel language and inlined like the user's
own ``@wp.func``: ``lower_bound`` (a binary search), and the draws ``sample_cdf`` and ``poisson``
(a search, a rejection sampler).

The draws take the caller's random state and return it advanced as their second result; the
frontend (``typecheck.library_draw``) assigns it back to the caller's variable, as
``wp.randf(state)`` does. The algorithms and constants are Warp's (``native/rand.h``: a
multiplication method for small means, Hörmann's transformed rejection for means of 10 and more),
in float32, so the draws are the same except where a float32 ``exp``/``log``/``sqrt`` rounds
differently from the C library's and a rejection test lands the other way.
"""

from typing import Any

import difftape as wp  # the kernel language these bodies are written in (read when compiled)

from .array import array
from .dtypes import float32, int32, uint32
from .function import func


@func
def lower_bound(arr: array(dtype=Any), value: Any) -> int:
    """The first index of sorted ``arr`` whose element is not less than ``value`` (its last index
    if none is)."""
    return _lower_bound(arr, 0, arr.shape[0], value)


@func
def lower_bound(arr: array(dtype=Any), arr_begin: int, arr_end: int,  # noqa: F811 (overload)
                value: Any) -> int:
    """The first index in [``arr_begin``, ``arr_end``) of sorted ``arr`` whose element is not
    less than ``value`` (``arr_end - 1`` if none is)."""
    return _lower_bound(arr, arr_begin, arr_end, value)


@func
def _lower_bound(arr: array(dtype=Any), arr_begin: int, arr_end: int, value: Any) -> int:
    lower = arr_begin
    upper = arr_end - 1
    while lower < upper:
        mid = lower + (upper - lower) // 2
        if arr[mid] < value:
            lower = mid + 1
        else:
            upper = mid
    return lower


@func
def _sample_cdf(state: uint32, cdf: array(dtype=float32)):
    """The bin of ``cdf`` (cumulative, ending at 1) a uniform draw falls in, and the state."""
    u = wp.randf(state)
    return _lower_bound(cdf, 0, cdf.shape[0], u), state


@func
def _log_gamma(x: float32) -> float32:
    """log(Gamma(x)) by Zhang and Jin's series (SPECFUN), shifted up to x >= 7."""
    if x == 1.0 or x == 2.0:
        return float32(0.0)
    n = int32(0)
    if x < 7.0:
        n = int32(7.0 - x)
    x0 = x + float32(n)
    x2 = (1.0 / x0) * (1.0 / x0)
    gl0 = float32(-1.39243221690590e+00)
    gl0 = gl0 * x2 + 1.796443723688307e-01
    gl0 = gl0 * x2 + -2.955065359477124e-02
    gl0 = gl0 * x2 + 6.410256410256410e-03
    gl0 = gl0 * x2 + -1.917526917526918e-03
    gl0 = gl0 * x2 + 8.417508417508418e-04
    gl0 = gl0 * x2 + -5.952380952380952e-04
    gl0 = gl0 * x2 + 7.936507936507937e-04
    gl0 = gl0 * x2 + -2.777777777777778e-03
    gl0 = gl0 * x2 + 8.333333333333333e-02
    gl = gl0 / x0 + 0.5 * 1.8378770664093453 + (x0 - 0.5) * wp.log(x0) - x0
    for _ in range(n):
        gl = gl - wp.log(x0 - 1.0)
        x0 = x0 - 1.0
    return gl


@func
def _poisson_product(state: uint32, lam: float32):
    """Counts uniform draws until their product falls to exp(-lam): for small means."""
    limit = wp.exp(-lam)
    count = uint32(0)
    product = wp.randf(state)
    while product > limit:
        count = count + uint32(1)
        product = product * wp.randf(state)
    return count, state


@func
def _poisson_rejection(state: uint32, lam: float32):
    """Hörmann's transformed rejection (PTRS), for means of 10 and more."""
    slam = wp.sqrt(lam)
    loglam = wp.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    invalpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2.0)
    k = uint32(0)
    while True:
        u = wp.randf(state) - 0.5
        v = wp.randf(state)
        us = 0.5 - wp.abs(u)
        k = uint32(wp.floor((2.0 * a / us + b) * u + lam + 0.43))
        if us >= 0.07 and v <= vr:
            break
        if us < 0.013 and v > us:
            continue
        bound = -lam + float32(k) * loglam - _log_gamma(float32(k + uint32(1)))
        if wp.log(v) + wp.log(invalpha) - wp.log(a / (us * us) + b) <= bound:
            break
    return k, state


@func
def _poisson(state: uint32, lam: float32):
    """A Poisson count of mean ``lam``, and the state (unchanged when ``lam`` is 0)."""
    count = uint32(0)
    if lam >= 10.0:
        count, state = _poisson_rejection(state, lam)
    elif lam != 0.0:
        count, state = _poisson_product(state, lam)
    return count, state


class Draw:
    """``wp.sample_cdf`` and ``wp.poisson``: in kernels, ``function`` inlined and the caller's
    state advanced (``typecheck.library_draw``); in Python scope, the value of a kernel's first
    draw, the state left as it is (Warp's behaviour), through the one-thread kernel
    ``first_draw`` (None: kernels only)."""

    def __init__(self, function, doc: str, first_draw=None):
        self._difftape_draw = function
        self.__doc__ = doc
        self.__name__ = function.key.lstrip("_")
        self._first_draw = first_draw
        self._kernel = None

    def __call__(self, state, *args):
        if self._first_draw is None:
            raise RuntimeError(f"wp.{self.__name__}() can only be called inside kernels")
        if self._kernel is None:
            self._kernel = wp.kernel(self._first_draw)
        out = wp.zeros(1, dtype=uint32)
        wp.launch(self._kernel, 1, inputs=[uint32(int(state) & 0xFFFFFFFF), *args, out])
        return int(out.numpy()[0])

    def __repr__(self) -> str:
        return f"<difftape random draw {self.__name__}>"


def _first_poisson(state: uint32, lam: float32, out: array(dtype=uint32)):
    out[0] = wp.poisson(state, lam)


sample_cdf = Draw(_sample_cdf, "Return the index of the bin of ``cdf`` (cumulative, ending at 1) "
                  "a uniform draw falls in, advancing ``state``; inside kernels only.")
poisson = Draw(_poisson, "Return a Poisson-distributed count (uint32) of mean ``lam``, advancing "
               "``state`` (not when ``lam`` is 0).", _first_poisson)
