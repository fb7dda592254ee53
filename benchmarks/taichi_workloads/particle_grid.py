"""Workload 9 for Taichi: particle to grid, a 3 x 3 x 3 quadratic B-spline stencil."""

RES = 64
SIDE = RES + 2


@ti.kernel  # noqa: F821 (ti is injected)
def particle_to_grid(x: ti.template(), v: ti.template(), mass: ti.template(),  # noqa: F821
                     momentum: ti.template()):  # noqa: F821
    for p in x:
        q = x[p] * RES
        base = ti.floor(q - 0.5)  # noqa: F821
        fx = q - base
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        b = ti.cast(base, ti.i32)  # noqa: F821
        for i in ti.static(range(3)):  # noqa: F821
            for j in ti.static(range(3)):  # noqa: F821
                for k in ti.static(range(3)):  # noqa: F821
                    weight = w[i][0] * w[j][1] * w[k][2]
                    cell = ((b[0] + i) * SIDE + b[1] + j) * SIDE + b[2] + k
                    mass[cell] += weight
                    momentum[cell] += weight * v[p]


@ti.kernel  # noqa: F821
def grid_loss(mass: ti.template(), momentum: ti.template(), g: ti.template(),  # noqa: F821
              h: ti.template(), loss: ti.template()):  # noqa: F821
    for c in mass:
        loss[None] += g[c] * mass[c] + h[c].dot(momentum[c])


def setup(inputs):
    n = inputs["x"].shape[0]
    cells = SIDE ** 3
    st = {"x": ti.Vector.field(3, ti.f32, shape=n, needs_grad=True),  # noqa: F821
          "v": ti.Vector.field(3, ti.f32, shape=n, needs_grad=True),  # noqa: F821
          "g": ti.field(ti.f32, shape=cells),  # noqa: F821
          "h": ti.Vector.field(3, ti.f32, shape=cells),  # noqa: F821
          "mass": ti.field(ti.f32, shape=cells, needs_grad=True),  # noqa: F821
          "momentum": ti.Vector.field(3, ti.f32, shape=cells, needs_grad=True),  # noqa: F821
          "loss": ti.field(ti.f32, shape=(), needs_grad=True)}  # noqa: F821
    for name in ("x", "v", "g", "h"):
        st[name].from_numpy(inputs[name])
    return st


def prepare(st):
    for name in ("mass", "momentum"):
        st[name].fill(0.0)
        st[name].grad.fill(0.0)
    for name in ("x", "v"):
        st[name].grad.fill(0.0)
    st["loss"][None] = 0.0
    st["loss"].grad[None] = 0.0


def forward(st):
    particle_to_grid(st["x"], st["v"], st["mass"], st["momentum"])
    grid_loss(st["mass"], st["momentum"], st["g"], st["h"], st["loss"])


def backward(st):
    st["loss"].grad[None] = 1.0
    grid_loss.grad(st["mass"], st["momentum"], st["g"], st["h"], st["loss"])
    particle_to_grid.grad(st["x"], st["v"], st["mass"], st["momentum"])


def gradients(st):
    return {"x": st["x"].grad.to_numpy(), "v": st["v"].grad.to_numpy()}
