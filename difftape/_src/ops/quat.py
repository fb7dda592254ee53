"""Quaternion, transform and spatial-vector builtins (SPEC §5.5 items 26–27), over components.

Quaternions are (x, y, z, w) with w last; transforms are (p, q): translation then rotation.
Formulas follow Warp's so that gradients with respect to the raw (possibly non-unit)
components match Warp's.
"""

from __future__ import annotations

from . import components as C
from . import scalar as S
from .registry import composite
from .vector import _quat_mul, _quat_rotate

_QUAT, _XFORM = "Quaternion Math", "Transformations"


def _one(check, result=lambda t: t):
    return lambda ts: result(ts[0]) if len(ts) == 1 and check(ts[0]) else None


@composite(group=_QUAT, match=lambda ts: C.quat_of(ts[0]) if len(ts) == 2 and C.vec(ts[0], 3)
           and ts[1] is C.scalar(ts[0]) else None, examples=C.examples("v3,s"))
def quat_from_axis_angle(axis, angle):
    """Rotation of ``angle`` radians about ``axis`` (not normalized, as Warp)."""
    half = angle * 0.5
    s = S.sin(half)
    return [axis[0] * s, axis[1] * s, axis[2] * s, S.cos(half)]


def _rotate_match(ts):
    return C.vec3_of(ts[0]) if len(ts) == 2 and C.quat(ts[0]) and ts[1] is C.vec3_of(ts[0]) \
        else None


@composite(group=_QUAT, match=_rotate_match, examples=C.examples("q,v3"))
def quat_rotate(q, x):
    """Rotate ``x`` by quaternion ``q``."""
    return _quat_rotate(q, x)


@composite(group=_QUAT, match=_rotate_match, examples=C.examples("q,v3"))
def quat_rotate_inv(q, x):
    """Rotate ``x`` by the inverse of quaternion ``q``."""
    return _quat_rotate(q, x, inverse=True)


@composite(group=_QUAT, match=_one(C.quat), examples=C.examples("q"))
def quat_inverse(q):
    """The conjugate ``(-x, -y, -z, w)`` (the inverse of a unit quaternion)."""
    return [-q[0], -q[1], -q[2], q[3]]


@composite(group=_QUAT, match=_one(C.quat, lambda t: C.mat_of(t, 3, 3)), examples=C.examples("q"))
def quat_to_matrix(q):
    """The 3×3 rotation matrix of ``q``; its columns are the rotated axes."""
    cols = [_quat_rotate(q, axis) for axis in ([1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0])]
    return [[cols[c][r] for c in range(3)] for r in range(3)]


@composite(group=_QUAT, match=lambda ts: C.quaternion_type(ts[0]) if len(ts) == 3 and
           ts[0] in C.FLOATS and ts[0] is ts[1] is ts[2] else None, examples=C.examples("s,s,s"))
def quat_rpy(roll, pitch, yaw):
    """Quaternion from roll, pitch and yaw angles (radians)."""
    cy, sy = S.cos(yaw * 0.5), S.sin(yaw * 0.5)
    cr, sr = S.cos(roll * 0.5), S.sin(roll * 0.5)
    cp, sp = S.cos(pitch * 0.5), S.sin(pitch * 0.5)
    return [cy * sr * cp - sy * cr * sp, cy * cr * sp + sy * sr * cp,
            sy * cr * cp - cy * sr * sp, cy * cr * cp + sy * sr * sp]


@composite(group=_QUAT, match=lambda ts: C.quaternion_type(C.dtypes.float32) if ts == () else None,
           examples=[], differentiable=False, reason="a constant")
def quat_identity():
    """The identity rotation (0, 0, 0, 1); ``dtype=`` picks the scalar type."""
    return [0.0, 0.0, 0.0, 1.0]


def _point_match(ts):
    return C.vec3_of(ts[0]) if len(ts) == 2 and C.xform(ts[0]) and ts[1] is C.vec3_of(ts[0]) \
        else None


@composite(group=_XFORM, match=_point_match, examples=C.examples("t,v3"))
def transform_point(t, x):
    """Apply rotation then translation to the point ``x``."""
    r = _quat_rotate(t[3:], x)
    return [r[k] + t[k] for k in range(3)]


@composite(group=_XFORM, match=_point_match, examples=C.examples("t,v3"))
def transform_vector(t, x):
    """Apply only the rotation to the direction ``x``."""
    return _quat_rotate(t[3:], x)


@composite(group=_XFORM, match=_one(C.xform, C.vec3_of), examples=C.examples("t"))
def transform_get_translation(t):
    """The translation part ``p``."""
    return list(t[:3])


@composite(group=_XFORM, match=_one(C.xform, C.quat_of), examples=C.examples("t"))
def transform_get_rotation(t):
    """The rotation part ``q``."""
    return list(t[3:])


@composite(group=_XFORM, match=lambda ts: ts[0] if len(ts) == 2 and C.xform(ts[0]) and
           ts[0] is ts[1] else None, examples=C.examples("t,t"))
def transform_multiply(a, b):
    """Compose transforms: apply ``b`` then ``a``."""
    p = _quat_rotate(a[3:], b[:3])
    return [p[k] + a[k] for k in range(3)] + _quat_mul(a[3:], b[3:])


@composite(group=_XFORM, match=_one(C.xform), examples=C.examples("t"))
def transform_inverse(t):
    """The inverse transform (for a unit rotation)."""
    q_inv = [-t[3], -t[4], -t[5], t[6]]
    p = _quat_rotate(q_inv, t[:3])
    return [-p[0], -p[1], -p[2]] + q_inv


@composite(group=_XFORM, match=lambda ts: C.transform_type(C.dtypes.float32) if ts == () else None,
           examples=[], differentiable=False, reason="a constant")
def transform_identity():
    """The identity transform; ``dtype=`` picks the scalar type."""
    return [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]


def _spatial(ts):
    ok = len(ts) == 1 and C.float_composite(ts[0]) and ts[0]._kind == "spatial_vector"
    return C.vec3_of(ts[0]) if ok else None


@composite(group=_XFORM, match=_spatial, examples=[])
def spatial_top(a):
    """The first three components of a spatial vector."""
    return list(a[:3])


@composite(group=_XFORM, match=_spatial, examples=[])
def spatial_bottom(a):
    """The last three components of a spatial vector."""
    return list(a[3:])
