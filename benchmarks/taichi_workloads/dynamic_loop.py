"""Workload 3 for Taichi: runtime-length loop with a branch and a loop-carried product.

Taichi differentiates the loop with a per-thread autodiff stack; ``ti.init`` must be given an
``ad_stack_size`` above the trip count (the runner passes 256).
Note: ``p = p * x[i]`` reads the field inside the loop. Hoisting ``xi = x[i]`` above the loop (as the
Warp-style source does) makes Taichi 1.7.4 drop that gradient path silently (dx rel. error ~1).
"""


@ti.kernel  # noqa: F821 (ti is injected)
def poly(x: ti.template(), c: ti.template(), n: ti.i32, y: ti.template()):  # noqa: F821
    for i in x:
        p = ti.cast(1.0, ti.f32)  # noqa: F821
        acc = ti.cast(0.0, ti.f32)  # noqa: F821
        for k in range(n):
            t = c[k] * p
            if t > 0.0:
                acc = acc + t
            else:
                acc = acc + 0.5 * t
            p = p * x[i]
        y[i] = acc


@ti.kernel  # noqa: F821
def sum_loss(y: ti.template(), loss: ti.template()):  # noqa: F821
    for i in y:
        loss[None] += y[i]


def setup(inputs):
    n = inputs["x"].shape[0]
    iters = inputs["c"].shape[0]
    x = ti.field(ti.f32, shape=n, needs_grad=True)  # noqa: F821
    c = ti.field(ti.f32, shape=iters, needs_grad=True)  # noqa: F821
    y = ti.field(ti.f32, shape=n, needs_grad=True)  # noqa: F821
    loss = ti.field(ti.f32, shape=(), needs_grad=True)  # noqa: F821
    x.from_numpy(inputs["x"])
    c.from_numpy(inputs["c"])
    return {"x": x, "c": c, "y": y, "loss": loss, "iters": int(iters)}


def prepare(st):
    st["loss"][None] = 0.0
    for a in ("x", "c", "y"):
        st[a].grad.fill(0.0)
    st["loss"].grad[None] = 0.0


def forward(st):
    poly(st["x"], st["c"], st["iters"], st["y"])
    sum_loss(st["y"], st["loss"])


def backward(st):
    st["loss"].grad[None] = 1.0
    sum_loss.grad(st["y"], st["loss"])
    poly.grad(st["x"], st["c"], st["iters"], st["y"])


def gradients(st):
    return {"x": st["x"].grad.to_numpy()}
