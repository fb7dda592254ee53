"""Workload 2 for Taichi: springs (gather, length, normalize, atomic scatter) + semi-implicit
Euler, STEPS steps; x, v and f carry a step axis."""

STEPS = 10
KS = 50.0
DT = 0.002
INV_M = 1.0


@ti.kernel  # noqa: F821 (ti is injected)
def spring_forces(x: ti.template(), si: ti.template(), sj: ti.template(),  # noqa: F821
                  rest: ti.template(), ks: ti.f32, f: ti.template(), t: ti.i32):  # noqa: F821
    for s in si:
        i = si[s]
        j = sj[s]
        d = x[t, j] - x[t, i]
        length = d.norm()
        fs = ks * (length - rest[s]) * (d / length)
        f[t, i] += fs
        f[t, j] -= fs


@ti.kernel  # noqa: F821
def integrate(x: ti.template(), v: ti.template(), f: ti.template(), inv_m: ti.f32,  # noqa: F821
              dt: ti.f32, t: ti.i32):  # noqa: F821
    for i in range(x.shape[1]):
        vn = v[t, i] + (f[t, i] * inv_m + ti.Vector([0.0, -9.8, 0.0])) * dt  # noqa: F821
        v[t + 1, i] = vn
        x[t + 1, i] = x[t, i] + vn * dt


@ti.kernel  # noqa: F821
def sq_loss(x: ti.template(), t: ti.i32, loss: ti.template()):  # noqa: F821
    for i in range(x.shape[1]):
        loss[None] += x[t, i].dot(x[t, i])


def setup(inputs):
    import numpy as np
    n = inputs["x0"].shape[0]
    m = inputs["si"].shape[0]
    vec3 = ti.types.vector(3, ti.f32)  # noqa: F821
    x = ti.field(vec3, shape=(STEPS + 1, n), needs_grad=True)  # noqa: F821
    v = ti.field(vec3, shape=(STEPS + 1, n), needs_grad=True)  # noqa: F821
    f = ti.field(vec3, shape=(STEPS, n), needs_grad=True)  # noqa: F821
    si = ti.field(ti.i32, shape=m)  # noqa: F821
    sj = ti.field(ti.i32, shape=m)  # noqa: F821
    rest = ti.field(ti.f32, shape=m, needs_grad=True)  # noqa: F821
    loss = ti.field(ti.f32, shape=(), needs_grad=True)  # noqa: F821
    full = np.zeros((STEPS + 1, n, 3), np.float32)
    full[0] = inputs["x0"]
    x.from_numpy(full)
    full[0] = inputs["v0"]
    v.from_numpy(full)
    si.from_numpy(inputs["si"])
    sj.from_numpy(inputs["sj"])
    rest.from_numpy(inputs["rest"])
    return {"x": x, "v": v, "f": f, "si": si, "sj": sj, "rest": rest, "loss": loss}


def prepare(st):
    st["loss"][None] = 0.0
    st["f"].fill(0.0)
    for a in ("x", "v", "f", "rest"):
        st[a].grad.fill(0.0)
    st["loss"].grad[None] = 0.0


def forward(st):
    x, v, f = st["x"], st["v"], st["f"]
    for t in range(STEPS):
        spring_forces(x, st["si"], st["sj"], st["rest"], KS, f, t)
        integrate(x, v, f, INV_M, DT, t)
    sq_loss(x, STEPS, st["loss"])


def backward(st):
    x, v, f = st["x"], st["v"], st["f"]
    st["loss"].grad[None] = 1.0
    sq_loss.grad(x, STEPS, st["loss"])
    for t in reversed(range(STEPS)):
        integrate.grad(x, v, f, INV_M, DT, t)
        spring_forces.grad(x, st["si"], st["sj"], st["rest"], KS, f, t)


def gradients(st):
    return {"x0": st["x"].grad.to_numpy()[0], "v0": st["v"].grad.to_numpy()[0],
            "rest": st["rest"].grad.to_numpy()}
