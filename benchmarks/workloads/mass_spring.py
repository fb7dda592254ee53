"""Workload 2, mass-spring: N particles, M = 3N random springs, STEPS steps of spring forces
(vec3 gathers, ``length``, ``normalize``, ``atomic_add``/``atomic_sub`` into forces) and
semi-implicit Euler, all on one tape; loss = sum |x_final|^2 by atomic_add.

Each step writes new state arrays (x[t+1], v[t+1], f[t]), so nothing is overwritten.
``wp`` is injected by the runner (warp or difftape); this file must not import either.
"""

import numpy as np

NAME = "mass_spring"
REQUIRES = ("vec3", "length", "normalize", "dot")
BASE_N = 100_000
SPRINGS_PER_PARTICLE = 3
STEPS = 10
KS = 50.0
DT = 0.002
INV_M = 1.0
GRAVITY = (0.0, -9.8, 0.0)


@wp.kernel  # noqa: F821 (wp is injected)
def spring_forces(x: wp.array(dtype=wp.vec3), si: wp.array(dtype=wp.int32),  # noqa: F821
                  sj: wp.array(dtype=wp.int32), rest: wp.array(dtype=wp.float32),  # noqa: F821
                  ks: wp.float32, f: wp.array(dtype=wp.vec3)):  # noqa: F821
    s = wp.tid()  # noqa: F821
    i = si[s]
    j = sj[s]
    d = x[j] - x[i]
    length = wp.length(d)  # noqa: F821
    fs = ks * (length - rest[s]) * wp.normalize(d)  # noqa: F821
    wp.atomic_add(f, i, fs)  # noqa: F821
    wp.atomic_sub(f, j, fs)  # noqa: F821


@wp.kernel  # noqa: F821
def integrate(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),  # noqa: F821
              f: wp.array(dtype=wp.vec3), inv_m: wp.float32, dt: wp.float32,  # noqa: F821
              x1: wp.array(dtype=wp.vec3), v1: wp.array(dtype=wp.vec3)):  # noqa: F821
    i = wp.tid()  # noqa: F821
    vn = v[i] + (f[i] * inv_m + wp.vec3(0.0, -9.8, 0.0)) * dt  # noqa: F821
    v1[i] = vn
    x1[i] = x[i] + vn * dt


@wp.kernel  # noqa: F821
def sq_loss(x: wp.array(dtype=wp.vec3), loss: wp.array(dtype=wp.float32)):  # noqa: F821
    i = wp.tid()  # noqa: F821
    wp.atomic_add(loss, 0, wp.dot(x[i], x[i]))  # noqa: F821


def make_inputs(scale=1.0, seed=0):
    n = max(2, int(BASE_N * scale))
    m = SPRINGS_PER_PARTICLE * n
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(0.0, 1.0, (n, 3)).astype(np.float32)
    v0 = rng.uniform(-0.1, 0.1, (n, 3)).astype(np.float32)
    si = rng.integers(0, n, m).astype(np.int32)
    sj = ((si + rng.integers(1, n, m)) % n).astype(np.int32)  # never a self-spring
    length0 = np.linalg.norm(x0[sj].astype(np.float64) - x0[si], axis=1)
    rest = (length0 * rng.uniform(0.8, 1.2, m)).astype(np.float32)
    return {"x0": x0, "v0": v0, "si": si, "sj": sj, "rest": rest}


def _scatter(index, values, n):
    return np.stack([np.bincount(index, values[:, k], minlength=n) for k in range(3)], axis=1)


def reference(inputs):
    """float64 forward and hand-written adjoint (numpy)."""
    x = inputs["x0"].astype(np.float64)
    v = inputs["v0"].astype(np.float64)
    si, sj = inputs["si"], inputs["sj"]
    rest = inputs["rest"].astype(np.float64)
    n = x.shape[0]
    g = np.array(GRAVITY)
    xs = [x]
    for _ in range(STEPS):
        d = x[sj] - x[si]
        length = np.linalg.norm(d, axis=1)
        fs = (KS * (length - rest) / length)[:, None] * d
        f = _scatter(si, fs, n) - _scatter(sj, fs, n)
        v = v + (f * INV_M + g) * DT
        x = x + v * DT
        xs.append(x)
    gx = 2.0 * x
    gv = np.zeros_like(gx)
    grest = np.zeros_like(rest)
    for t in reversed(range(STEPS)):
        gv = gv + gx * DT              # x1 = x + v1*dt
        gf = gv * (INV_M * DT)         # v1 = v + (f*inv_m + g)*dt
        xt = xs[t]
        d = xt[sj] - xt[si]
        length = np.linalg.norm(d, axis=1)
        gs = gf[si] - gf[sj]           # f[i] += fs; f[j] -= fs
        dgs = np.sum(d * gs, axis=1)
        gd = (KS * (1.0 - rest / length))[:, None] * gs + \
             (KS * rest / length ** 3 * dgs)[:, None] * d
        grest -= KS * dgs / length
        gx = gx + _scatter(sj, gd, n) - _scatter(si, gd, n)
    return {"x0": gx, "v0": gv, "rest": grest}


def setup(inputs):
    n = inputs["x0"].shape[0]
    m = inputs["si"].shape[0]
    vec3 = wp.vec3  # noqa: F821
    xs = [wp.array(inputs["x0"], dtype=vec3, requires_grad=True)]  # noqa: F821
    vs = [wp.array(inputs["v0"], dtype=vec3, requires_grad=True)]  # noqa: F821
    for _ in range(STEPS):
        xs.append(wp.zeros(n, dtype=vec3, requires_grad=True))  # noqa: F821
        vs.append(wp.zeros(n, dtype=vec3, requires_grad=True))  # noqa: F821
    fs = [wp.zeros(n, dtype=vec3, requires_grad=True) for _ in range(STEPS)]  # noqa: F821
    return {
        "n": n, "m": m, "x": xs, "v": vs, "f": fs,
        "si": wp.array(inputs["si"], dtype=wp.int32),  # noqa: F821
        "sj": wp.array(inputs["sj"], dtype=wp.int32),  # noqa: F821
        "rest": wp.array(inputs["rest"], dtype=wp.float32, requires_grad=True),  # noqa: F821
        "loss": wp.zeros(1, dtype=wp.float32, requires_grad=True),  # noqa: F821
    }


def prepare(st):
    st["loss"].zero_()
    st["loss"].grad.zero_()
    st["rest"].grad.zero_()
    for a in st["f"]:
        a.zero_()
        a.grad.zero_()
    for a in st["x"] + st["v"]:
        a.grad.zero_()


def forward(st):
    n, m, xs, vs, fs = st["n"], st["m"], st["x"], st["v"], st["f"]
    for t in range(STEPS):
        wp.launch(spring_forces, dim=m,  # noqa: F821
                  inputs=[xs[t], st["si"], st["sj"], st["rest"], KS], outputs=[fs[t]])
        wp.launch(integrate, dim=n, inputs=[xs[t], vs[t], fs[t], INV_M, DT],  # noqa: F821
                  outputs=[xs[t + 1], vs[t + 1]])
    wp.launch(sq_loss, dim=n, inputs=[xs[STEPS], st["loss"]])  # noqa: F821


def loss(st):
    return st["loss"]


def gradients(st):
    return {"x0": st["x"][0].grad.numpy(), "v0": st["v"][0].grad.numpy(),
            "rest": st["rest"].grad.numpy()}
