"""Workload 8 for Taichi: the St. Venant-Kirchhoff energy of N 3x3 deformation gradients."""

MU = 2.0
LAM = 5.0


@ti.kernel  # noqa: F821 (ti is injected)
def svk_energy(F: ti.template(), loss: ti.template()):  # noqa: F821
    for i in F:
        f = F[i]
        E = 0.5 * (f.transpose() @ f - ti.Matrix.identity(ti.f32, 3))  # noqa: F821
        s = 0.0
        for r in ti.static(range(3)):  # noqa: F821
            for c in ti.static(range(3)):  # noqa: F821
                s += E[r, c] * E[r, c]
        t = E.trace()
        loss[None] += MU * s + 0.5 * LAM * t * t


def setup(inputs):
    n = inputs["F"].shape[0]
    F = ti.Matrix.field(3, 3, ti.f32, shape=n, needs_grad=True)  # noqa: F821
    loss = ti.field(ti.f32, shape=(), needs_grad=True)  # noqa: F821
    F.from_numpy(inputs["F"])
    return {"F": F, "loss": loss}


def prepare(st):
    st["loss"][None] = 0.0
    st["F"].grad.fill(0.0)
    st["loss"].grad[None] = 0.0


def forward(st):
    svk_energy(st["F"], st["loss"])


def backward(st):
    st["loss"].grad[None] = 1.0
    svk_energy.grad(st["F"], st["loss"])


def gradients(st):
    return {"F": st["F"].grad.to_numpy()}
