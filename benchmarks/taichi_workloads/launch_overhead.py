"""Workload 5 for Taichi: LAUNCHES tiny chained launches, one field row per step."""

LAUNCHES = 2000
WIDTH = 8
A = 0.999


@ti.kernel  # noqa: F821 (ti is injected)
def axpb(xs: ti.template(), t: ti.i32, a: ti.f32):  # noqa: F821
    for i in range(WIDTH):
        xs[t + 1, i] = a * xs[t, i] + 0.001


@ti.kernel  # noqa: F821
def sum_loss(xs: ti.template(), t: ti.i32, loss: ti.template()):  # noqa: F821
    for i in range(WIDTH):
        loss[None] += xs[t, i]


def setup(inputs):
    import numpy as np
    xs = ti.field(ti.f32, shape=(LAUNCHES + 1, WIDTH), needs_grad=True)  # noqa: F821
    loss = ti.field(ti.f32, shape=(), needs_grad=True)  # noqa: F821
    full = np.zeros((LAUNCHES + 1, WIDTH), np.float32)
    full[0] = inputs["x0"]
    xs.from_numpy(full)
    return {"x": xs, "loss": loss}


def prepare(st):
    st["loss"][None] = 0.0
    st["x"].grad.fill(0.0)
    st["loss"].grad[None] = 0.0


def forward(st):
    xs = st["x"]
    for t in range(LAUNCHES):
        axpb(xs, t, A)
    sum_loss(xs, LAUNCHES, st["loss"])


def backward(st):
    xs = st["x"]
    st["loss"].grad[None] = 1.0
    sum_loss.grad(xs, LAUNCHES, st["loss"])
    for t in reversed(range(LAUNCHES)):
        axpb.grad(xs, t, A)


def gradients(st):
    return {"x0": st["x"].grad.to_numpy()[0]}
