"""Workload 1 for Taichi: y = sin(x) * x, loss = sum(y)."""


@ti.kernel  # noqa: F821 (ti is injected)
def sin_x(x: ti.template(), y: ti.template()):  # noqa: F821
    for i in x:
        y[i] = ti.sin(x[i]) * x[i]  # noqa: F821


@ti.kernel  # noqa: F821
def sum_loss(y: ti.template(), loss: ti.template()):  # noqa: F821
    for i in y:
        loss[None] += y[i]


def setup(inputs):
    n = inputs["x"].shape[0]
    x = ti.field(ti.f32, shape=n, needs_grad=True)  # noqa: F821
    y = ti.field(ti.f32, shape=n, needs_grad=True)  # noqa: F821
    loss = ti.field(ti.f32, shape=(), needs_grad=True)  # noqa: F821
    x.from_numpy(inputs["x"])
    return {"x": x, "y": y, "loss": loss}


def prepare(st):
    st["loss"][None] = 0.0
    for a in ("x", "y"):
        st[a].grad.fill(0.0)
    st["loss"].grad[None] = 0.0


def forward(st):
    sin_x(st["x"], st["y"])
    sum_loss(st["y"], st["loss"])


def backward(st):
    st["loss"].grad[None] = 1.0
    sum_loss.grad(st["y"], st["loss"])
    sin_x.grad(st["x"], st["y"])


def gradients(st):
    return {"x": st["x"].grad.to_numpy()}
