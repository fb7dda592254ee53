"""Random numbers in kernels: ``rand_init``, ``randf``/``randi``/``randu``/``randn`` and the
``sample_*`` shapes, bit for bit Warp's generator.

The state is a uint32 local; each draw replaces it by a hash of itself (Jarzynski and Olano's
PCG hash, "Hash Functions for GPU Rendering", JCGT 2020) and reads its value from the new
state. ``wp.randf(state)`` therefore changes ``state``: the frontend spells every draw as
``state = _rand_next(state)`` followed by the value, computed here on traced scalars from the
successive states. Values follow Warp's formulas in float32, draws in the order Warp's C++
takes them (left to right), so a kernel draws the same numbers as under Warp.

The hash and the integer values are builtins of their own (hidden: Warp has no such names), the
float values are written with ``sqrt``/``log``/``cos``/``acos``/``pow``, whose rules give
``randf(state, low, high)`` its gradient to ``low`` and ``high`` (Warp gives none). The draws
that loop, ``sample_cdf`` and ``poisson``, are kernel-language functions
(``kernel_library.py``).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from . import arithmetic as A
from . import scalar as S
from ..composite import vector_type
from .registry import builtin, random_draw

_GROUP = "Random"
_STATE = "the random state is an integer hash: nothing to differentiate"
_INTEGER = "integer results have no gradient"
_MASK = 0xFFFFFFFF
# Warp adds 5.96e-8 (2^-24 rounded down) to the uniform value before its logarithm in randn.
_RANDN_EPSILON = 5.96e-8
_TWO_PI = 2.0 * math.pi  # as a float32 literal: 2 * float32(pi), Warp's 2.f * M_PI_F
_u32, _i32, _f32 = dtypes.uint32, dtypes.int32, dtypes.float32
_V2, _V3 = vector_type(2, _f32), vector_type(3, _f32)
_ANY_STATE = {"state": (0, 1 << 32)}  # where the registry tests draw states


def pcg_hash(state):
    """The PCG hash of a 32-bit state (in 64-bit integers: no product overflows)."""
    b = (np.int64(state) * 747796405 + 2891336453) & _MASK
    c = (((b >> ((b >> 28) + 4)) ^ b) * 277803737) & _MASK
    return (c >> 22) ^ c


def as_int32(u):
    """The int32 whose bits are the uint32 ``u`` (an int64 in ``[0, 2**32)``)."""
    return np.int32(u - 4294967296 if u >= 2147483648 else u)


# --- Seeding and the state's step (integer builtins) -------------------------------------------


@builtin(group=_GROUP, inputs={"seed": _i32}, output=_u32, differentiable=False, reason=_STATE)
def rand_init(seed):
    """Return a random state (uint32) initialised from ``seed``."""
    return np.uint32(pcg_hash(np.int64(seed) & _MASK))


@builtin("rand_init", group=_GROUP, inputs={"seed": _i32, "offset": _i32}, output=_u32,
         differentiable=False, reason=_STATE)
def rand_init_offset(seed, offset):
    """Return a random state for stream ``offset`` (a thread's index) of ``seed``."""
    stream = pcg_hash(np.int64(offset) & _MASK)
    return np.uint32(pcg_hash(((np.int64(seed) & _MASK) + stream) & _MASK))


@builtin("_rand_next", group=_GROUP, inputs={"state": _u32}, output=_u32, differentiable=False,
         reason=_STATE, sample=_ANY_STATE, hidden=True)
def rand_next(state):
    """Return the state after ``state``: one step of the generator."""
    return np.uint32(pcg_hash(state))


@builtin("_rand_unit", group=_GROUP, inputs={"state": _u32}, output=_f32, differentiable=False,
         reason=_STATE, sample=_ANY_STATE, hidden=True)
def rand_unit(state):
    """Return the uniform float32 in [0, 1) that ``state`` stands for: its top 24 bits / 2**24."""
    return np.float32(np.int64(state) >> 8) * np.float32(1.0 / 16777216.0)


@builtin("_rand_int", group=_GROUP, inputs={"state": _u32}, output=_i32, differentiable=False,
         reason=_INTEGER, sample=_ANY_STATE, hidden=True)
def rand_int(state):
    """Return ``state``'s bits as an int32."""
    return as_int32(np.int64(state))


@builtin("_rand_int_range", group=_GROUP, inputs={"state": _u32, "low": _i32, "high": _i32},
         output=_i32, differentiable=False, reason=_INTEGER, sample=_ANY_STATE, hidden=True)
def rand_int_range(state, low, high):
    """Return ``state % (high - low) + low`` in C's unsigned arithmetic (Warp's randi)."""
    span = (np.int64(high) - np.int64(low)) & _MASK
    drawn = np.int64(state) % span if span != 0 else np.int64(0)
    return as_int32((drawn + (np.int64(low) & _MASK)) & _MASK)


@builtin("_rand_uint_range", group=_GROUP, inputs={"state": _u32, "low": _u32, "high": _u32},
         output=_u32, differentiable=False, reason=_INTEGER, hidden=True,
         sample={**_ANY_STATE, "low": (0, 9), "high": (9, 1 << 32)})
def rand_uint_range(state, low, high):
    """Return ``state % (high - low) + low`` in uint32 arithmetic (Warp's randu)."""
    span = (np.int64(high) - np.int64(low)) & _MASK
    drawn = np.int64(state) % span if span != 0 else np.int64(0)
    return np.uint32((drawn + np.int64(low)) & _MASK)


# --- Draws: the state advances, the value comes from the new states -----------------------------


@random_draw("randi", group=_GROUP, inputs={"state": _u32}, output=_i32, draws=1,
             reason=_INTEGER)
def randi(s):
    """Return a random int32 (any of the 2**32 values), advancing ``state``."""
    return rand_int(s)


@random_draw("randi", group=_GROUP, inputs={"state": _u32, "low": _i32, "high": _i32},
             output=_i32, draws=1, reason=_INTEGER)
def randi_range(s, low, high):
    """Return a random int32 in [``low``, ``high``), advancing ``state``."""
    return rand_int_range(s, low, high)


@random_draw("randu", group=_GROUP, inputs={"state": _u32}, output=_u32, draws=1,
             reason=_INTEGER)
def randu(s):
    """Return a random uint32, advancing ``state``."""
    return s


@random_draw("randu", group=_GROUP, inputs={"state": _u32, "low": _u32, "high": _u32},
             output=_u32, draws=1, reason=_INTEGER)
def randu_range(s, low, high):
    """Return a random uint32 in [``low``, ``high``), advancing ``state``."""
    return rand_uint_range(s, low, high)


@random_draw("randf", group=_GROUP, inputs={"state": _u32}, output=_f32, draws=1, reason=_STATE)
def randf(s):
    """Return a random float32 in [0, 1) (multiples of 2**-24), advancing ``state``."""
    return rand_unit(s)


@random_draw("randf", group=_GROUP, inputs={"state": _u32, "low": _f32, "high": _f32},
             output=_f32, draws=1, differentiable={"low": True, "high": True}, reason=_STATE)
def randf_range(s, low, high):
    """Return a random float32 in [``low``, ``high``), advancing ``state``."""
    return (high - low) * rand_unit(s) + low


@random_draw("randn", group=_GROUP, inputs={"state": _u32}, output=_f32, draws=2, reason=_STATE)
def randn(s1, s2):
    """Return a normally distributed float32 (Box-Muller, two draws), advancing ``state``."""
    radius = S.sqrt(-2.0 * S.log(rand_unit(s1) + _RANDN_EPSILON))
    return radius * S.cos(_TWO_PI * rand_unit(s2))


def _angle(s):
    return _TWO_PI * rand_unit(s)  # randf(state, 0, 2 pi) = (2 pi - 0) * u + 0


def _direction(s_phi, s_theta, span, radius=None):
    """Warp's (cos theta sin phi, sin theta sin phi, cos phi), each first times ``radius`` if
    given, for phi = acos(1 - span * u) (span 2: the sphere, 1: the upper hemisphere)."""
    u = rand_unit(s_phi)
    phi = S.acos(1.0 - (u if span == 1.0 else span * u))
    theta = _angle(s_theta)

    def scaled(c):
        return c if radius is None else radius * c

    return [scaled(S.cos(theta)) * S.sin(phi), scaled(S.sin(theta)) * S.sin(phi),
            scaled(S.cos(phi))]


@random_draw("sample_triangle", group=_GROUP, inputs={"state": _u32}, output=_V2, draws=2,
             reason=_STATE)
def sample_triangle(s1, s2):
    """Return uniform barycentric coordinates (u, v) on a triangle, advancing ``state``."""
    r = S.sqrt(rand_unit(s1))
    return [1.0 - r, rand_unit(s2) * r]


@random_draw("sample_unit_ring", group=_GROUP, inputs={"state": _u32}, output=_V2, draws=1,
             reason=_STATE)
def sample_unit_ring(s):
    """Return a uniform point on the unit circle, advancing ``state``."""
    theta = _angle(s)
    return [S.cos(theta), S.sin(theta)]


@random_draw("sample_unit_disk", group=_GROUP, inputs={"state": _u32}, output=_V2, draws=2,
             reason=_STATE)
def sample_unit_disk(s1, s2):
    """Return a uniform point in the unit disk, advancing ``state``."""
    r = S.sqrt(rand_unit(s1))
    theta = _angle(s2)
    return [r * S.cos(theta), r * S.sin(theta)]


@random_draw("sample_unit_sphere_surface", group=_GROUP, inputs={"state": _u32}, output=_V3,
             draws=2, reason=_STATE)
def sample_unit_sphere_surface(s1, s2):
    """Return a uniform point on the unit sphere, advancing ``state``."""
    return _direction(s1, s2, 2.0)


@random_draw("sample_unit_sphere", group=_GROUP, inputs={"state": _u32}, output=_V3, draws=3,
             reason=_STATE)
def sample_unit_sphere(s1, s2, s3):
    """Return a uniform point in the unit ball, advancing ``state``."""
    return _direction(s1, s2, 2.0, _radius(s3))


@random_draw("sample_unit_hemisphere_surface", group=_GROUP, inputs={"state": _u32}, output=_V3,
             draws=2, reason=_STATE)
def sample_unit_hemisphere_surface(s1, s2):
    """Return a uniform point on the upper (z >= 0) unit hemisphere, advancing ``state``."""
    return _direction(s1, s2, 1.0)


@random_draw("sample_unit_hemisphere", group=_GROUP, inputs={"state": _u32}, output=_V3, draws=3,
             reason=_STATE)
def sample_unit_hemisphere(s1, s2, s3):
    """Return a uniform point in the upper (z >= 0) unit half ball, advancing ``state``."""
    return _direction(s1, s2, 1.0, _radius(s3))


def _radius(s):
    """A radius whose cube is uniform: pow(u, 1/3)."""
    return A.pow(rand_unit(s), 1.0 / 3.0)


@random_draw("sample_unit_square", group=_GROUP, inputs={"state": _u32}, output=_V2, draws=2,
             reason=_STATE)
def sample_unit_square(s1, s2):
    """Return a uniform point in the square [-0.5, 0.5)^2, advancing ``state``."""
    return [rand_unit(s) - 0.5 for s in (s1, s2)]


@random_draw("sample_unit_cube", group=_GROUP, inputs={"state": _u32}, output=_V3, draws=3,
             reason=_STATE)
def sample_unit_cube(s1, s2, s3):
    """Return a uniform point in the cube [-0.5, 0.5)^3, advancing ``state``."""
    return [rand_unit(s) - 0.5 for s in (s1, s2, s3)]

