"""Workload 3, dynamic loop: per thread a runtime-length loop (n = 64) with a branch and a
loop-carried product ``p = p * x``; loss = sum of the per-thread results by atomic_add.

y[i] = sum_k w_k * c[k] * x[i]**k, with w_k = 1 if c[k] * x[i]**k > 0 else 0.5.
Warp's gradient is known to be wrong here (it skips dynamic loops in its adjoint replay).
``wp`` is injected by the runner (warp or difftape); this file must not import either.
"""

import numpy as np

NAME = "dynamic_loop"
REQUIRES = ()
BASE_N = 1_000_000
ITERS = 64


@wp.kernel  # noqa: F821 (wp is injected)
def poly(x: wp.array(dtype=wp.float32), c: wp.array(dtype=wp.float32),  # noqa: F821
         n: wp.int32, y: wp.array(dtype=wp.float32)):  # noqa: F821
    i = wp.tid()  # noqa: F821
    xi = x[i]
    p = wp.float32(1.0)  # noqa: F821
    acc = wp.float32(0.0)  # noqa: F821
    for k in range(n):
        t = c[k] * p
        if t > 0.0:
            acc = acc + t
        else:
            acc = acc + 0.5 * t
        p = p * xi
    y[i] = acc


@wp.kernel  # noqa: F821
def sum_loss(y: wp.array(dtype=wp.float32), loss: wp.array(dtype=wp.float32)):  # noqa: F821
    i = wp.tid()  # noqa: F821
    wp.atomic_add(loss, 0, y[i])  # noqa: F821


def make_inputs(scale=1.0, seed=0):
    n = max(1, int(BASE_N * scale))
    rng = np.random.default_rng(seed)
    return {"x": rng.uniform(-0.99, 0.99, n).astype(np.float32),
            "c": rng.uniform(-1.0, 1.0, ITERS).astype(np.float32)}


def reference(inputs):
    x = inputs["x"].astype(np.float64)
    c = inputs["c"].astype(np.float64)
    g = np.zeros_like(x)
    for lo in range(0, x.shape[0], 1 << 16):
        xs = x[lo:lo + (1 << 16)]
        p = np.ones_like(xs)
        dp = np.zeros_like(xs)  # d p / d x
        gs = np.zeros_like(xs)
        for k in range(c.shape[0]):
            t = c[k] * p
            w = np.where(t > 0.0, 1.0, 0.5)
            gs += w * c[k] * dp
            dp = dp * xs + p
            p = p * xs
        g[lo:lo + xs.shape[0]] = gs
    return {"x": g}


def setup(inputs):
    n = inputs["x"].shape[0]
    return {
        "n": n,
        "iters": int(inputs["c"].shape[0]),
        "x": wp.array(inputs["x"], dtype=wp.float32, requires_grad=True),  # noqa: F821
        "c": wp.array(inputs["c"], dtype=wp.float32, requires_grad=False),  # noqa: F821
        "y": wp.zeros(n, dtype=wp.float32, requires_grad=True),  # noqa: F821
        "loss": wp.zeros(1, dtype=wp.float32, requires_grad=True),  # noqa: F821
    }


def prepare(st):
    st["loss"].zero_()
    for a in (st["x"], st["y"], st["loss"]):
        a.grad.zero_()


def forward(st):
    wp.launch(poly, dim=st["n"], inputs=[st["x"], st["c"], st["iters"], st["y"]])  # noqa: F821
    wp.launch(sum_loss, dim=st["n"], inputs=[st["y"], st["loss"]])  # noqa: F821


def loss(st):
    return st["loss"]


def gradients(st):
    return {"x": st["x"].grad.numpy()}
