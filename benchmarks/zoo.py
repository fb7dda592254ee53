"""The kernel zoo: one small kernel per value type and builtin family (quaternions, transforms,
2x2 to 4x4 and spatial matrices, float64 and float16, random draws), per neighbour pattern (a
rope's segments, guarded and wrapped-around neighbours, a cloth's boundary branches) and per
loop pattern (a dense layer's sums, a loop left by ``break``, a ``while`` loop), each a tape
forward + ``backward()`` at 1M threads (300k for spatial matrices), timed by
``benchmarks/run.py`` (section "Kernel zoo") under warp-lang and difftape on one thread,
alternating. The workloads time whole programs; the zoo finds the value types whose generated
code is slow (mat44 and mat33d rows were gathered component by component, 3-4x slower than
warp-lang, until ``codegen/strides.py`` learned to avoid it).

``wp`` is injected by the runner (warp or difftape); this file must not import either.
"""

# ruff: noqa: F821  (wp is injected)

@wp.kernel
def quat_rot(q: wp.array(dtype=wp.quat), v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = wp.quat_rotate(q[i], v[i])


@wp.kernel
def xform_pt(t: wp.array(dtype=wp.transform), v: wp.array(dtype=wp.vec3),
             out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = wp.transform_point(t[i], v[i])


@wp.kernel
def mat44_vec(m: wp.array(dtype=wp.mat44), v: wp.array(dtype=wp.vec4),
              out: wp.array(dtype=wp.vec4)):
    i = wp.tid()
    out[i] = m[i] * v[i]


@wp.kernel
def mat22_inv(m: wp.array(dtype=wp.mat22), out: wp.array(dtype=wp.mat22)):
    i = wp.tid()
    out[i] = wp.inverse(m[i])


@wp.kernel
def vec3d_norm(v: wp.array(dtype=wp.vec3d), out: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    out[i] = wp.normalize(v[i])


@wp.kernel
def mat33d_det(m: wp.array(dtype=wp.mat33d), out: wp.array(dtype=wp.float64)):
    i = wp.tid()
    out[i] = wp.determinant(m[i])


@wp.kernel
def mat33_gather(m: wp.array(dtype=wp.mat33), idx: wp.array(dtype=wp.int32),
                 v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = m[idx[i]] * v[i]


@wp.kernel
def vec3_scatter(v: wp.array(dtype=wp.vec3), idx: wp.array(dtype=wp.int32),
                 out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    wp.atomic_add(out, idx[i], v[i] * 2.0)


@wp.kernel
def grid_vec3(u: wp.array2d(dtype=wp.vec3), out: wp.array2d(dtype=wp.vec3)):
    i, j = wp.tid()
    out[i, j] = wp.cross(u[i, j], wp.vec3(1.0, 2.0, 3.0)) * wp.length(u[i, j])


@wp.kernel
def quat_chain(a: wp.array(dtype=wp.vec3), ang: wp.array(dtype=float), q: wp.array(dtype=wp.quat),
               out: wp.array(dtype=wp.quat)):
    i = wp.tid()
    r = wp.quat_from_axis_angle(wp.normalize(a[i]), ang[i])
    out[i] = wp.normalize(r * q[i])


@wp.kernel
def mat33_tmul(m: wp.array(dtype=wp.mat33), out: wp.array(dtype=wp.mat33)):
    i = wp.tid()
    out[i] = wp.transpose(m[i]) * m[i]


@wp.kernel
def f64_math(x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    i = wp.tid()
    v = x[i]
    out[i] = wp.sin(v) * wp.exp(v) + wp.tanh(v)


@wp.kernel
def mat33_svd_like(m: wp.array(dtype=wp.mat33), out: wp.array(dtype=float)):
    i = wp.tid()
    a = m[i]
    out[i] = wp.trace(a * wp.transpose(a)) + wp.determinant(a) + wp.ddot(a, a)


@wp.kernel
def xform_mul(a: wp.array(dtype=wp.transform), b: wp.array(dtype=wp.transform),
              out: wp.array(dtype=wp.transform)):
    i = wp.tid()
    out[i] = wp.transform_multiply(a[i], wp.transform_inverse(b[i]))


@wp.kernel
def vec4_arith(a: wp.array(dtype=wp.vec4), b: wp.array(dtype=wp.vec4),
               out: wp.array(dtype=wp.vec4)):
    i = wp.tid()
    out[i] = wp.cw_mul(a[i], b[i]) + wp.max(a[i], b[i]) * 0.5


@wp.kernel
def vec4d_arith(a: wp.array(dtype=wp.vec4d), b: wp.array(dtype=wp.vec4d),
                out: wp.array(dtype=wp.vec4d)):
    i = wp.tid()
    out[i] = wp.cw_mul(a[i], b[i]) + a[i] * wp.float64(0.5)


@wp.kernel
def mat22d_inv(m: wp.array(dtype=wp.mat22d), out: wp.array(dtype=wp.mat22d)):
    i = wp.tid()
    out[i] = wp.inverse(m[i])


@wp.kernel
def xformd_pt(t: wp.array(dtype=wp.transformd), v: wp.array(dtype=wp.vec3d),
              out: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    out[i] = wp.transform_point(t[i], v[i])


@wp.kernel
def quatd_rot(q: wp.array(dtype=wp.quatd), v: wp.array(dtype=wp.vec3d),
              out: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    out[i] = wp.quat_rotate(q[i], v[i])


@wp.kernel
def mat33d_vec(m: wp.array(dtype=wp.mat33d), v: wp.array(dtype=wp.vec3d),
               out: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    out[i] = m[i] * v[i]


@wp.kernel
def mat44_det(m: wp.array(dtype=wp.mat44), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.determinant(m[i])


@wp.kernel
def vec3d_cross(a: wp.array(dtype=wp.vec3d), b: wp.array(dtype=wp.vec3d),
                out: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    out[i] = wp.cross(a[i], b[i])


@wp.kernel
def f16_scale(x: wp.array(dtype=wp.float16), out: wp.array(dtype=wp.float16)):
    i = wp.tid()
    out[i] = x[i] * wp.float16(2.0) + wp.float16(1.0)



@wp.kernel
def spatial_quadratic(m: wp.array(dtype=wp.spatial_matrix), v: wp.array(dtype=wp.spatial_vector),
                      out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.dot(v[i], m[i] * v[i])


@wp.kernel
def rope(x: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    if i < x.shape[0] - 1:  # rows read under a branch
        d = x[i + 1] - x[i]
        stretch = wp.length(d) - 0.01
        out[i] = 0.5 * stretch * stretch


@wp.func
def bond_energy(a: wp.vec3, b: wp.vec3, rest: float):
    stretch = wp.length(a - b) - rest
    return 0.5 * stretch * stretch


@wp.kernel
def guarded_neighbours(x: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    e = float(0.0)
    for k in range(1, 4):
        if i + k < x.shape[0]:
            e += bond_energy(x[i], x[i + k], float(k) * 0.01)
    out[i] = e


@wp.kernel
def ring_neighbours(x: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    e = float(0.0)
    for k in range(1, 4):
        e += bond_energy(x[i], x[(i + k) % x.shape[0]], float(k) * 0.01)
    out[i] = e


@wp.kernel
def pair_smoothing(x: wp.array(dtype=wp.vec3), s: wp.array(dtype=wp.vec3)):
    # All pairs, weighted sums of the neighbours (SPH-like smoothing; pair forces obeying
    # Newton's third law would sum to zero under the zoo's seed of ones).
    i, j = wp.tid()
    d = x[j] - x[i]
    w = 1.0 / (1.0 + 4.0 * wp.dot(d, d))
    wp.atomic_add(s, i, w * x[j])  # every thread of row i: into s[i]


@wp.kernel
def cloth_edges(x: wp.array2d(dtype=wp.vec3), f: wp.array2d(dtype=wp.vec3)):
    # A grid's springs to the neighbours that exist: boundary branches that run for a whole row
    # of threads (i) or for all but its first thread (j).
    i, j = wp.tid()
    acc = wp.vec3(0.0, 0.0, 0.0)
    if i > 0:
        acc = acc + (x[i - 1, j] - x[i, j])
    if i < x.shape[0] - 1:
        acc = acc + (x[i + 1, j] - x[i, j])
    if j > 0:
        acc = acc + (x[i, j - 1] - x[i, j])
    if j < x.shape[1] - 1:
        acc = acc + (x[i, j + 1] - x[i, j])
    f[i, j] = acc * 10.0


@wp.kernel
def dense16(x: wp.array2d(dtype=float), w: wp.array2d(dtype=float), y: wp.array2d(dtype=float)):
    # A 16-output layer, one thread per (sample, output): 16 products per thread, each
    # weight's gradient the sum over all samples.
    i, o = wp.tid()
    s = float(0.0)
    for k in range(16):
        s = s + w[o, k] * x[i, k]
    y[i, o] = wp.tanh(s)


@wp.func
def _sphere(p: wp.vec3):
    return wp.length(p - wp.vec3(0.0, 0.0, 3.0)) - 1.0


@wp.kernel
def sphere_march(d: wp.array(dtype=wp.vec3), t: wp.array(dtype=float)):
    # Sphere tracing: up to 32 steps, leaving the loop where the ray meets the surface (rays
    # that miss take every step, in the same strips of threads as rays that hit).
    i = wp.tid()
    u = wp.normalize(d[i] + wp.vec3(0.0, 0.0, 1.5))
    s = float(0.0)
    for k in range(32):
        h = _sphere(u * s)
        if wp.abs(h) < 1.0e-4:
            break
        s = s + h
    t[i] = s


@wp.kernel
def sphere_pixels(eye: wp.array(dtype=wp.vec3), depth: wp.array2d(dtype=float)):
    # Sphere tracing, one ray per pixel of a 1000x1000 image (a 2-D launch); every ray reads
    # the camera offset eye[0], whose gradient sums over all of them.
    i, j = wp.tid()
    u = float(j) * 0.0012 - 0.6
    v = float(i) * 0.0012 - 0.6
    d = wp.normalize(wp.vec3(u, v, 1.0) + eye[0] * 0.1)
    s = float(0.0)
    for k in range(32):
        h = _sphere(d * s)
        if wp.abs(h) < 1.0e-4:
            break
        s = s + wp.min(h, 0.5)
    depth[i, j] = s


@wp.kernel
def sphere_scene(d: wp.array(dtype=wp.vec3), centers: wp.array(dtype=wp.vec3),
                 t: wp.array(dtype=float)):
    # Sphere tracing a scene of 8 spheres: each of up to 24 steps finds the nearest sphere in a
    # loop over the scene (a loop inside the marching loop); every ray reads every center,
    # whose gradients sum over all rays.
    i = wp.tid()
    u = wp.normalize(d[i] * 0.3 + wp.vec3(0.0, 0.0, 1.0))
    s = float(0.0)
    for k in range(24):
        h = float(1.0e6)
        for q in range(centers.shape[0]):
            c = centers[q] * 0.5 + wp.vec3(0.0, 0.0, 3.0)
            h = wp.min(h, wp.length(u * s - c) - 0.4)
        if wp.abs(h) < 1.0e-4:
            break
        s = s + wp.min(h, 0.5)
    t[i] = s


@wp.kernel
def newton_while(a: wp.array(dtype=float), r: wp.array(dtype=float)):
    # Newton's square root of 2 + a, to convergence: a while loop of ~5 steps.
    i = wp.tid()
    c = a[i] + 2.0
    x = c
    k = int(0)
    while k < 40 and wp.abs(x * x - c) > 1.0e-5 * c:
        x = 0.5 * (x + c / x)
        k = k + 1
    r[i] = x


@wp.kernel
def brownian(x: wp.array(dtype=wp.vec3), sigma: wp.array(dtype=float),
             out: wp.array(dtype=wp.vec3)):
    # 16 random steps from each start: a direction on the sphere, a normal length (random draws)
    i = wp.tid()
    state = wp.rand_init(17, i)
    p = x[i]
    for _ in range(16):
        p = p + wp.sample_unit_sphere_surface(state) * (sigma[i] * wp.randn(state))
    out[i] = p


N = 1_000_000
PARTICLES = 2048
ROWS = N // 16
# Cases whose loops warp-lang's adjoint does not replay (SPEC §5.4): its gradients there are
# wrong, and only difftape's are checked (tests/kernels/test_interchanged_break.py).
WARP_GRADIENT_WRONG = {"sphere_march", "sphere_pixels", "sphere_scene", "newton_while"}
# name -> (launch dim, arguments: (dtype name, element shape, numpy scalar[, the array's own
# shape, where not the launch's]) or "index"; the last argument is the output whose gradient is
# seeded with ones)
CASES = {
    "quat_rot": (N, [("quat", (4,), "f4"), ("vec3", (3,), "f4"), ("vec3", (3,), "f4")]),
    "quat_chain": (N, [("vec3", (3,), "f4"), ("float32", (), "f4"), ("quat", (4,), "f4"),
                       ("quat", (4,), "f4")]),
    "quatd_rot": (N, [("quatd", (4,), "f8"), ("vec3d", (3,), "f8"), ("vec3d", (3,), "f8")]),
    "xform_pt": (N, [("transform", (7,), "f4"), ("vec3", (3,), "f4"), ("vec3", (3,), "f4")]),
    "xform_mul": (N, [("transform", (7,), "f4"), ("transform", (7,), "f4"),
                      ("transform", (7,), "f4")]),
    "xformd_pt": (N, [("transformd", (7,), "f8"), ("vec3d", (3,), "f8"), ("vec3d", (3,), "f8")]),
    "vec4_arith": (N, [("vec4", (4,), "f4"), ("vec4", (4,), "f4"), ("vec4", (4,), "f4")]),
    "vec4d_arith": (N, [("vec4d", (4,), "f8"), ("vec4d", (4,), "f8"), ("vec4d", (4,), "f8")]),
    "vec3d_norm": (N, [("vec3d", (3,), "f8"), ("vec3d", (3,), "f8")]),
    "vec3d_cross": (N, [("vec3d", (3,), "f8"), ("vec3d", (3,), "f8"), ("vec3d", (3,), "f8")]),
    "grid_vec3": ((1000, 1000), [("vec3", (3,), "f4"), ("vec3", (3,), "f4")]),
    "vec3_scatter": (N, [("vec3", (3,), "f4"), "index", ("vec3", (3,), "f4")]),
    "mat22_inv": (N, [("mat22", (2, 2), "f4"), ("mat22", (2, 2), "f4")]),
    "mat22d_inv": (N, [("mat22d", (2, 2), "f8"), ("mat22d", (2, 2), "f8")]),
    "mat33_tmul": (N, [("mat33", (3, 3), "f4"), ("mat33", (3, 3), "f4")]),
    "mat33_svd_like": (N, [("mat33", (3, 3), "f4"), ("float32", (), "f4")]),
    "mat33_gather": (N, [("mat33", (3, 3), "f4"), "index", ("vec3", (3,), "f4"),
                         ("vec3", (3,), "f4")]),
    "mat33d_det": (N, [("mat33d", (3, 3), "f8"), ("float64", (), "f8")]),
    "mat33d_vec": (N, [("mat33d", (3, 3), "f8"), ("vec3d", (3,), "f8"), ("vec3d", (3,), "f8")]),
    "mat44_vec": (N, [("mat44", (4, 4), "f4"), ("vec4", (4,), "f4"), ("vec4", (4,), "f4")]),
    "mat44_det": (N, [("mat44", (4, 4), "f4"), ("float32", (), "f4")]),
    "spatial_quadratic": (300_000, [("spatial_matrix", (6, 6), "f4"),
                                    ("spatial_vector", (6,), "f4"), ("float32", (), "f4")]),
    "rope": (N, [("vec3", (3,), "f4"), ("float32", (), "f4")]),
    "guarded_neighbours": (N, [("vec3", (3,), "f4"), ("float32", (), "f4")]),
    "ring_neighbours": (N, [("vec3", (3,), "f4"), ("float32", (), "f4")]),
    "f64_math": (N, [("float64", (), "f8"), ("float64", (), "f8")]),
    "f16_scale": (N, [("float16", (), "f2"), ("float16", (), "f2")]),
    "pair_smoothing": ((PARTICLES, PARTICLES), [("vec3", (3,), "f4", (PARTICLES,)),
                                                ("vec3", (3,), "f4", (PARTICLES,))]),
    "cloth_edges": ((1000, 1000), [("vec3", (3,), "f4"), ("vec3", (3,), "f4")]),
    "dense16": ((ROWS, 16), [("float32", (), "f4", (ROWS, 16)), ("float32", (), "f4", (16, 16)),
                             ("float32", (), "f4", (ROWS, 16))]),
    "sphere_march": (N, [("vec3", (3,), "f4"), ("float32", (), "f4")]),
    "sphere_pixels": ((1000, 1000), [("vec3", (3,), "f4", (1,)), ("float32", (), "f4")]),
    "sphere_scene": (N // 4, [("vec3", (3,), "f4"), ("vec3", (3,), "f4", (8,)),
                              ("float32", (), "f4")]),
    "newton_while": (N, [("float32", (), "f4"), ("float32", (), "f4")]),
    "brownian": (N // 4, [("vec3", (3,), "f4"), ("float32", (), "f4"), ("vec3", (3,), "f4")]),
}


def make_arrays(name: str, scale: float = 1.0, seed: int = 0) -> list:
    """Numpy data for case ``name``'s arguments (uniform in [-1, 1]; random indices)."""
    import numpy as np

    dim, specs = CASES[name]
    shape = (dim,) if isinstance(dim, int) else dim
    shape = (max(1, int(shape[0] * scale)),) + tuple(shape[1:])
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    data = []
    for spec in specs:
        if spec == "index":
            data.append(rng.integers(0, n, n).astype(np.int32))
        else:
            _, element, scalar, *own = spec
            data.append(rng.uniform(-1.0, 1.0, (own[0] if own else shape) + element)
                        .astype(scalar))
    return data


def launch_dim(name: str, scale: float = 1.0):
    dim = CASES[name][0]
    return max(1, int(dim * scale)) if isinstance(dim, int) else (
        max(1, int(dim[0] * scale)),) + tuple(dim[1:])
