"""Kernels compiled by both warp-lang and difftape in test_warp_oracle.py.

``wp`` is not imported here: the loader injects ``warp`` or ``difftape`` before executing this
file, so the very same source runs under both libraries.
"""

# ruff: noqa: F821  (wp is injected)


def elementwise(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    a = wp.sin(v) * wp.exp(v * 0.5) + wp.sqrt(wp.abs(v) + 1.0)
    b = wp.clamp(v, -0.5, 0.7) + wp.min(v, 0.25) * wp.max(v, -0.25)
    c = wp.pow(wp.abs(v) + 0.5, 1.5) - wp.atan2(v, 1.0 + v * v)
    if v > 0.0:
        y[i] = a * b + c
    else:
        y[i] = a - b * c + wp.tanh(v)


def reduce_sum(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] * y[i])


def stencil(u: wp.array2d(dtype=float), out: wp.array2d(dtype=float)):
    i, j = wp.tid()
    n = u.shape[0]
    m = u.shape[1]
    left = u[i, wp.max(j - 1, 0)]
    right = u[i, wp.min(j + 1, m - 1)]
    up = u[wp.max(i - 1, 0), j]
    down = u[wp.min(i + 1, n - 1), j]
    out[i, j] = u[i, j] + 0.1 * (left + right + up + down - 4.0 * u[i, j])


def static_loop(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    s = float(0.0)
    for k in range(4):
        s = s + x[i] * float(k + 1)
    y[i] = s * x[i]


def atomic_extrema(x: wp.array(dtype=float), hi: wp.array(dtype=float),
                   lo: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_max(hi, 0, x[i])
    wp.atomic_min(lo, 0, x[i])


def component_loops(m: wp.array(dtype=wp.mat33), v: wp.array(dtype=wp.vec3),
                    out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    a = m[i]
    b = v[i]
    r = wp.vec3()
    for j in range(3):  # static loops: Warp unrolls them, and so does difftape
        s = float(0.0)
        for k in range(3):
            s = s + a[j, k] * b[k]
        r[j] = s * b[j]
    out[i] = r


def negative_components(m: wp.array(dtype=wp.mat22), v: wp.array(dtype=wp.vec3),
                        out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    c = i % 4 - 2  # -2, -1, 0, 1: component indices known only at run time, negative ones too
    a = m[i]
    b = v[i]
    r = wp.vec3()  # fresh locals: Warp gets overwritten components wrong (docs/differences.md §5)
    r[c] = b[c] * a[c, -1 - c]
    n = wp.mat22()
    n[c] = wp.vec2(b[c - 1], a[-1 - c, c])
    out[i] = b + r + wp.vec3(n[0, 0], n[1, 1], n[c, 0])


def matrices_from_vectors(a: wp.array(dtype=wp.vec3), b: wp.array(dtype=wp.vec3),
                          out: wp.array(dtype=wp.mat33)):
    i = wp.tid()
    rows = wp.matrix_from_rows(a[i], b[i], wp.cross(a[i], b[i]))
    cols = wp.matrix_from_cols(b[i], a[i] * 2.0, a[i] - b[i])
    out[i] = rows * cols


def draws(seed: int, f: wp.array2d(dtype=float), ints: wp.array2d(dtype=int),
          uints: wp.array2d(dtype=wp.uint32), v3: wp.array2d(dtype=wp.vec3)):
    i = wp.tid()
    uints[i, 0] = wp.rand_init(seed)
    state = wp.rand_init(seed, i)
    f[i, 0] = wp.randf(state)
    f[i, 1] = wp.randf(state, -2.5, 7.0)
    f[i, 2] = wp.randn(state)
    ints[i, 0] = wp.randi(state)
    ints[i, 1] = wp.randi(state, -7, 1000)
    uints[i, 1] = wp.randu(state)
    uints[i, 2] = wp.randu(state, wp.uint32(3), wp.uint32(1000000))
    a = wp.sample_triangle(state)
    b = wp.sample_unit_ring(state)
    c = wp.sample_unit_disk(state)
    d = wp.sample_unit_square(state)
    v3[i, 0] = wp.vec3(a[0], a[1], b[0]) + wp.vec3(b[1], c[0], c[1]) * 10.0 + wp.vec3(d[0], d[1], 0.0) * 100.0
    v3[i, 1] = wp.sample_unit_sphere_surface(state)
    v3[i, 2] = wp.sample_unit_sphere(state)
    v3[i, 3] = wp.sample_unit_hemisphere_surface(state)
    v3[i, 4] = wp.sample_unit_hemisphere(state)
    v3[i, 5] = wp.sample_unit_cube(state)
    uints[i, 3] = state


def library_draws(cdf: wp.array(dtype=float), lams: wp.array(dtype=float),
                  idx: wp.array2d(dtype=int), counts: wp.array2d(dtype=wp.uint32),
                  states: wp.array(dtype=wp.uint32)):
    i = wp.tid()
    state = wp.rand_init(77, i)
    idx[i, 0] = wp.sample_cdf(state, cdf)
    for k in range(lams.shape[0]):
        counts[i, k] = wp.poisson(state, lams[k])
    idx[i, 1] = wp.lower_bound(cdf, float(i % 11) / 10.0)
    idx[i, 2] = wp.lower_bound(cdf, 1, 4, float(i % 11) / 10.0)
    states[i] = state
