"""Workload 4 for Taichi: 5-point diffusion with clamped borders, one field slice per step."""

STEPS = 20
K = 0.2


@ti.kernel  # noqa: F821 (ti is injected)
def diffuse(u: ti.template(), t: ti.i32, k: ti.f32):  # noqa: F821
    for i, j in ti.ndrange(u.shape[1], u.shape[2]):  # noqa: F821
        n = u.shape[1]
        m = u.shape[2]
        im = ti.max(i - 1, 0)  # noqa: F821
        ip = ti.min(i + 1, n - 1)  # noqa: F821
        jm = ti.max(j - 1, 0)  # noqa: F821
        jp = ti.min(j + 1, m - 1)  # noqa: F821
        c = u[t, i, j]
        u[t + 1, i, j] = c + k * (u[t, im, j] + u[t, ip, j] + u[t, i, jm] + u[t, i, jp] - 4.0 * c)


@ti.kernel  # noqa: F821
def sq_loss(u: ti.template(), t: ti.i32, loss: ti.template()):  # noqa: F821
    for i, j in ti.ndrange(u.shape[1], u.shape[2]):  # noqa: F821
        loss[None] += u[t, i, j] * u[t, i, j]


def setup(inputs):
    n = inputs["u0"].shape[0]
    u = ti.field(ti.f32, shape=(STEPS + 1, n, n), needs_grad=True)  # noqa: F821
    loss = ti.field(ti.f32, shape=(), needs_grad=True)  # noqa: F821
    import numpy as np
    full = np.zeros((STEPS + 1, n, n), np.float32)
    full[0] = inputs["u0"]
    u.from_numpy(full)
    return {"u": u, "loss": loss}


def prepare(st):
    st["loss"][None] = 0.0
    st["u"].grad.fill(0.0)
    st["loss"].grad[None] = 0.0


def forward(st):
    for t in range(STEPS):
        diffuse(st["u"], t, K)
    sq_loss(st["u"], STEPS, st["loss"])


def backward(st):
    st["loss"].grad[None] = 1.0
    sq_loss.grad(st["u"], STEPS, st["loss"])
    for t in reversed(range(STEPS)):
        diffuse.grad(st["u"], t, K)


def gradients(st):
    return {"u0": st["u"].grad.to_numpy()[0]}
