"""Vector and matrix builtins (SPEC §5.5 items 18–25), written over component lists.

Each function is branch-free Python over components: in kernels it is expanded into scalar
builtin calls, so its derivative is the exact composition of the scalar rules. Warp's edge
conventions (``length``/``normalize`` of the zero vector, first-index ties in reductions) are
kept with ``where`` so that no NaN leaks into gradients.
"""

from __future__ import annotations

from .. import dtypes
from . import components as C
from . import scalar as S
from .registry import composite

_VEC, _MAT = "Vector Math", "Matrix Math"


def _same(check):
    return lambda ts: ts[0] if len(ts) == 2 and check(ts[0]) and ts[0] is ts[1] else None


def _any_composite(t) -> bool:
    return C.float_composite(t)


# ------------------------------------------------------------------ arithmetic


@composite("add", group=_VEC, match=_same(_any_composite), examples=C.examples("v3,v3", "m22,m22", "q,q"))
def add_(a, b):
    """Component-wise sum."""
    return _map2(a, b, lambda x, y: x + y)


@composite("sub", group=_VEC, match=_same(_any_composite), examples=C.examples("v3,v3", "m22,m22"))
def sub_(a, b):
    """Component-wise difference."""
    return _map2(a, b, lambda x, y: x - y)


@composite("neg", group=_VEC, match=lambda ts: ts[0] if len(ts) == 1 and _any_composite(ts[0])
           else None, examples=C.examples("v3", "m22"))
def neg_(a):
    """Component-wise negation."""
    return _map1(a, lambda x: -x)


@composite("pos", group=_VEC, match=lambda ts: ts[0] if len(ts) == 1 and _any_composite(ts[0])
           else None, examples=C.examples("v3"))
def pos_(a):
    """Identity."""
    return _map1(a, lambda x: x)


def _scale_match(ts):
    if len(ts) != 2:
        return None
    a, b = ts
    if _any_composite(a) and b is C.scalar(a):
        return a
    if _any_composite(b) and a is C.scalar(b):
        return b
    return None


def _mul_match(ts):
    if len(ts) != 2:
        return None
    a, b = ts
    if C.mat(a) and C.vec(b) and C.scalar(a) is C.scalar(b) and a._shape[1] == b._length:
        return C.vec_of(a, a._shape[0])
    if C.vec(a) and C.mat(b) and C.scalar(a) is C.scalar(b) and b._shape[0] == a._length:
        return C.vec_of(b, b._shape[1])
    if C.mat(a) and C.mat(b) and C.scalar(a) is C.scalar(b) and a._shape[1] == b._shape[0]:
        return C.mat_of(a, a._shape[0], b._shape[1])
    if C.quat(a) and a is b:
        return a
    if C.xform(a) and a is b:
        return a
    return _scale_match(ts)


@composite("mul", group=_VEC, match=_mul_match,
           examples=C.examples("v3,s", "s,v3", "m22,v2", "v2,m22", "m22,m22", "m23,v3", "q,q",
                               "t,t"))
def mul_(a, b):
    """Scaling by a scalar, matrix products (``@``), quaternion and transform products."""
    a_vec, b_vec = isinstance(a, list), isinstance(b, list)
    if a_vec and b_vec:
        a_mat, b_mat = isinstance(a[0], list), isinstance(b[0], list)
        if a_mat and b_mat:
            return [[_dot([row[k] for k in range(len(b))], [b[k][c] for k in range(len(b))])
                     for c in range(len(b[0]))] for row in a]
        if a_mat:
            return [_dot(row, b) for row in a]
        if b_mat:
            return [_dot(a, [b[r][c] for r in range(len(b))]) for c in range(len(b[0]))]
        if len(a) == 4:
            return _quat_mul(a, b)
        return _transform_mul(a, b)
    if a_vec:
        return _map1(a, lambda x: x * b)
    return _map1(b, lambda x: a * x)


@composite("matmul", group=_MAT, match=lambda ts: _mul_match(ts) if len(ts) == 2 and (
    C.mat(ts[0]) or C.mat(ts[1])) else None, examples=C.examples("m22,v2", "m22,m22"))
def matmul_(a, b):
    """Matrix product ``a @ b``."""
    return mul_.forward(a, b)


def _div_match(ts):
    if len(ts) == 2 and _any_composite(ts[0]) and ts[1] is C.scalar(ts[0]):
        return ts[0]
    if len(ts) == 2 and C.vec(ts[1]) and ts[0] is C.scalar(ts[1]):
        return ts[1]
    return None


@composite("div", group=_VEC, match=_div_match, examples=C.examples("v3,s", "s,v3", "m22,s"),
           sample={"a": (0.5, 2.0), "b": (0.5, 2.0)})
def div_(a, b):
    """Division by a scalar, or a scalar divided component-wise by a vector."""
    if isinstance(a, list):
        return _map1(a, lambda x: x / b)
    return _map1(b, lambda x: a / x)


# ------------------------------------------------------------------ vector math


def _vec_to_scalar(ts):
    return C.scalar(ts[0]) if len(ts) == 2 and C.vec(ts[0]) and ts[0] is ts[1] else None


def _quat_or_vec_pair(ts):
    ok = len(ts) == 2 and ts[0] is ts[1] and (C.vec(ts[0]) or C.quat(ts[0]))
    return C.scalar(ts[0]) if ok else None


@composite(group=_VEC, match=_quat_or_vec_pair, examples=C.examples("v3,v3", "q,q"))
def dot(a, b):
    """Dot product."""
    return _dot(a, b)


@composite(group=_VEC, match=lambda ts: ts[0] if len(ts) == 2 and C.vec(ts[0], 3) and
           ts[0] is ts[1] else None, examples=C.examples("v3,v3"))
def cross(a, b):
    """Cross product of two 3-vectors."""
    return _cross(a, b)


@composite(group=_VEC, match=lambda ts: C.mat_of(ts[0], ts[0]._length, ts[1]._length)
           if len(ts) == 2 and C.vec(ts[0]) and C.vec(ts[1]) and C.scalar(ts[0]) is
           C.scalar(ts[1]) else None, examples=C.examples("v3,v3", "v2,v3"))
def outer(a, b):
    """Outer product ``a b^T``."""
    return [[x * y for y in b] for x in a]


def _vectors_of_one_type(ts) -> bool:
    return len(ts) >= 1 and C.vec(ts[0]) and all(t is ts[0] for t in ts)


@composite(group=_MAT, match=lambda ts: C.mat_of(ts[0], len(ts), ts[0]._length)
           if _vectors_of_one_type(ts) else None, examples=C.examples("v3,v3,v3", "v3,v3"))
def matrix_from_rows(*rows):
    """The matrix whose rows are the given vectors (Warp's replacement for ``wp.mat33(v, ...)``)."""
    return [list(row) for row in rows]


@composite(group=_MAT, match=lambda ts: C.mat_of(ts[0], ts[0]._length, len(ts))
           if _vectors_of_one_type(ts) else None, examples=C.examples("v3,v3,v3", "v2,v2,v2"))
def matrix_from_cols(*cols):
    """The matrix whose columns are the given vectors."""
    return [[col[r] for col in cols] for r in range(len(cols[0]))]


@composite(group=_VEC, match=_same(lambda t: C.vec(t) or C.mat(t)),
           examples=C.examples("v3,v3", "m22,m22"))
def cw_mul(a, b):
    """Component-wise product."""
    return _map2(a, b, lambda x, y: x * y)


@composite(group=_VEC, match=_same(lambda t: C.vec(t) or C.mat(t)),
           examples=C.examples("v3,v3"), sample={"a": (-2.0, 2.0), "b": (0.5, 2.0)})
def cw_div(a, b):
    """Component-wise quotient."""
    return _map2(a, b, lambda x, y: x / y)


def _norm_match(ts):
    return C.scalar(ts[0]) if len(ts) == 1 and (C.vec(ts[0]) or C.quat(ts[0])) else None


@composite(group=_VEC, match=_norm_match, examples=C.examples("v3", "q"))
def length(a):
    """Euclidean length; 0 (with a zero gradient) for the zero vector, as Warp."""
    return _length(a)


@composite(group=_VEC, match=_norm_match, examples=C.examples("v3", "q"))
def length_sq(a):
    """Squared length."""
    return _dot(a, a)


@composite(group=_VEC, match=lambda ts: ts[0] if len(ts) == 1 and (C.vec(ts[0]) or C.quat(ts[0]))
           else None, examples=C.examples("v3", "q"))
def normalize(a):
    """``a / length(a)``; the zero vector (and a zero gradient) for the zero vector, as Warp."""
    d = _dot(a, a)
    nonzero = d > 0.0
    inv = S.where(nonzero, 1.0 / S.sqrt(S.where(nonzero, d, 1.0)), 0.0)
    return [x * inv for x in a]


@composite(group=_VEC, match=_vec_to_scalar, examples=C.examples("v3,v3"))
def distance(a, b):
    """``length(a - b)``."""
    return _length([x - y for x, y in zip(a, b)])


@composite("min", group=_VEC, match=_same(C.vec), examples=C.examples("v3,v3"))
def min_(a, b):
    """Component-wise minimum (ties give the gradient to ``b``, as scalar ``min``)."""
    return _map2(a, b, S.min)


@composite("max", group=_VEC, match=_same(C.vec), examples=C.examples("v3,v3"))
def max_(a, b):
    """Component-wise maximum (ties give the gradient to ``b``, as scalar ``max``)."""
    return _map2(a, b, S.max)


def _reduce_match(ts):
    return C.scalar(ts[0]) if len(ts) == 1 and C.vec(ts[0]) else None


@composite("max", group=_VEC, match=_reduce_match, examples=C.examples("v3"))
def max_reduce(a):
    """Largest component; ties send the gradient to the first, as Warp."""
    best = a[0]
    for x in a[1:]:
        best = S.where(x > best, x, best)
    return best


@composite("min", group=_VEC, match=_reduce_match, examples=C.examples("v3"))
def min_reduce(a):
    """Smallest component; ties send the gradient to the first, as Warp."""
    best = a[0]
    for x in a[1:]:
        best = S.where(x < best, x, best)
    return best


def _arg_match(ts):
    return dtypes.int32 if len(ts) == 1 and C.vec(ts[0]) else None


@composite(group=_VEC, match=_arg_match, examples=C.examples("v3"), differentiable=False,
           reason="an index has no gradient")
def argmax(a):
    """Index of the largest component (first on ties)."""
    best, index = a[0], 0
    for k in range(1, len(a)):
        index = S.where(a[k] > best, k, index)
        best = S.where(a[k] > best, a[k], best)
    return index


@composite(group=_VEC, match=_arg_match, examples=C.examples("v3"), differentiable=False,
           reason="an index has no gradient")
def argmin(a):
    """Index of the smallest component (first on ties)."""
    best, index = a[0], 0
    for k in range(1, len(a)):
        index = S.where(a[k] < best, k, index)
        best = S.where(a[k] < best, a[k], best)
    return index


@composite("abs", group=_VEC, match=lambda ts: ts[0] if len(ts) == 1 and C.vec(ts[0]) else None,
           examples=C.examples("v3"), sample={"a": (0.3, 2.0)})
def abs_(a):
    """Component-wise absolute value."""
    return _map1(a, S.abs)


@composite("lerp", group=_VEC, match=lambda ts: ts[0] if len(ts) == 3 and _any_composite(ts[0])
           and ts[0] is ts[1] and ts[2] is C.scalar(ts[0]) else None,
           examples=C.examples("v3,v3,s"))
def lerp_(a, b, t):
    """``a * (1 - t) + b * t`` component-wise."""
    return _map2(a, b, lambda x, y: x * (1.0 - t) + y * t)


# ------------------------------------------------------------------ matrices


@composite(group=_MAT, match=lambda ts: C.mat_of(ts[0], ts[0]._shape[1], ts[0]._shape[0])
           if len(ts) == 1 and C.mat(ts[0]) else None, examples=C.examples("m23", "m33"))
def transpose(m):
    """Matrix transpose."""
    return [[m[r][c] for r in range(len(m))] for c in range(len(m[0]))]


def _square_to_scalar(ts):
    return C.scalar(ts[0]) if len(ts) == 1 and C.mat(ts[0], square=True) else None


@composite(group=_MAT, match=_square_to_scalar, examples=C.examples("m33"))
def trace(m):
    """Sum of the diagonal."""
    total = m[0][0]
    for k in range(1, len(m)):
        total = total + m[k][k]
    return total


@composite(group=_MAT, match=lambda ts: _square_to_scalar(ts) if ts and C.mat(ts[0]) and
           ts[0]._shape[0] <= 4 else None, examples=C.examples("m22", "m33", "m44"))
def determinant(m):
    """Determinant of a 2×2, 3×3 or 4×4 matrix."""
    return _det(m)


@composite(group=_MAT, match=lambda ts: ts[0] if len(ts) == 1 and C.mat(ts[0], square=True) and
           ts[0]._shape[0] <= 4 else None, examples=C.examples("m22", "m33", "m44"),
           sample={"m": (0.5, 2.0)}, tolerance=1e-5)
def inverse(m):
    """Inverse of a 2×2, 3×3 or 4×4 matrix (adjugate over determinant)."""
    n = len(m)
    det = _det(m)
    inv_det = 1.0 / det
    result = []
    for r in range(n):
        row = []
        for c in range(n):
            # adj(m)[r][c] = (-1)^(r+c) * minor(m, c, r)
            sign = 1.0 if (r + c) % 2 == 0 else -1.0
            row.append(sign * _det(_minor(m, c, r)) * inv_det)
        result.append(row)
    return result


@composite(group=_MAT, match=lambda ts: C.mat_of(ts[0], ts[0]._length, ts[0]._length)
           if len(ts) == 1 and C.vec(ts[0]) else None, examples=C.examples("v3"))
def diag(v):
    """Square matrix with ``v`` on the diagonal."""
    return [[v[r] if r == c else 0.0 for c in range(len(v))] for r in range(len(v))]


@composite(group=_MAT, match=lambda ts: C.vec_of(ts[0], ts[0]._shape[0])
           if len(ts) == 1 and C.mat(ts[0], square=True) else None, examples=C.examples("m33"))
def get_diag(m):
    """The diagonal of a square matrix."""
    return [m[k][k] for k in range(len(m))]


@composite(group=_MAT, match=lambda ts: C.mat_of(ts[0], 3, 3) if len(ts) == 1 and
           C.vec(ts[0], 3) else None, examples=C.examples("v3"))
def skew(v):
    """The cross-product matrix: ``skew(a) @ b == cross(a, b)``."""
    return [[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]]


@composite(group=_MAT, match=lambda ts: C.scalar(ts[0]) if len(ts) == 2 and C.mat(ts[0]) and
           ts[0] is ts[1] else None, examples=C.examples("m33,m33"))
def ddot(a, b):
    """Double contraction ``sum_ij a_ij b_ij``."""
    total = a[0][0] * b[0][0]
    for r in range(len(a)):
        for c in range(len(a[0])):
            if r or c:
                total = total + a[r][c] * b[r][c]
    return total


# ------------------------------------------------------------------ helpers (component lists)


def _map1(a, f):
    if isinstance(a[0], list):
        return [[f(x) for x in row] for row in a]
    return [f(x) for x in a]


def _map2(a, b, f):
    if isinstance(a[0], list):
        return [[f(x, y) for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]
    return [f(x, y) for x, y in zip(a, b)]


def _dot(a, b):
    total = a[0] * b[0]
    for x, y in zip(a[1:], b[1:]):
        total = total + x * y
    return total


def _length(a):
    d = _dot(a, a)
    nonzero = d > 0.0
    return S.where(nonzero, S.sqrt(S.where(nonzero, d, 1.0)), 0.0)


def _cross(a, b):
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def _minor(m, row, col):
    return [[m[r][c] for c in range(len(m)) if c != col] for r in range(len(m)) if r != row]


def _det(m):
    n = len(m)
    if n == 1:
        return m[0][0]
    if n == 2:
        return m[0][0] * m[1][1] - m[0][1] * m[1][0]
    total = m[0][0] * _det(_minor(m, 0, 0))
    for c in range(1, n):
        term = m[0][c] * _det(_minor(m, 0, c))
        total = total - term if c % 2 else total + term
    return total


def _quat_mul(a, b):
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return [aw * bx + bw * ax + ay * bz - by * az,
            aw * by + bw * ay + az * bx - bz * ax,
            aw * bz + bw * az + ax * by - bx * ay,
            aw * bw - ax * bx - ay * by - az * bz]


def _quat_rotate(q, x, inverse=False):
    v, w = q[:3], q[3]
    c = _cross(v, x)
    d = _dot(v, x)
    s = 2.0 * w * w - 1.0
    sign = -1.0 if inverse else 1.0
    return [x[k] * s + sign * c[k] * w * 2.0 + v[k] * d * 2.0 for k in range(3)]


def _transform_mul(a, b):
    p = _quat_rotate(a[3:], b[:3])
    return [p[k] + a[k] for k in range(3)] + _quat_mul(a[3:], b[3:])
