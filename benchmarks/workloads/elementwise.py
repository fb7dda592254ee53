"""Workload 1, elementwise: y = sin(x) * x over N float32, loss = sum(y) by atomic_add.

``wp`` is injected by the runner (warp or difftape); this file must not import either.
"""

import numpy as np

NAME = "elementwise"
REQUIRES = ()
BASE_N = 4_000_000


@wp.kernel  # noqa: F821 (wp is injected)
def sin_x(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):  # noqa: F821
    i = wp.tid()  # noqa: F821
    y[i] = wp.sin(x[i]) * x[i]  # noqa: F821


@wp.kernel  # noqa: F821
def sum_loss(y: wp.array(dtype=wp.float32), loss: wp.array(dtype=wp.float32)):  # noqa: F821
    i = wp.tid()  # noqa: F821
    wp.atomic_add(loss, 0, y[i])  # noqa: F821


def make_inputs(scale=1.0, seed=0):
    n = max(1, int(BASE_N * scale))
    rng = np.random.default_rng(seed)
    return {"x": rng.uniform(-2.0, 2.0, n).astype(np.float32)}


def reference(inputs):
    x = inputs["x"].astype(np.float64)
    return {"x": np.cos(x) * x + np.sin(x)}


def setup(inputs):
    n = inputs["x"].shape[0]
    return {
        "n": n,
        "x": wp.array(inputs["x"], dtype=wp.float32, requires_grad=True),  # noqa: F821
        "y": wp.zeros(n, dtype=wp.float32, requires_grad=True),  # noqa: F821
        "loss": wp.zeros(1, dtype=wp.float32, requires_grad=True),  # noqa: F821
    }


def prepare(st):
    st["loss"].zero_()
    for a in (st["x"], st["y"], st["loss"]):
        a.grad.zero_()


def forward(st):
    wp.launch(sin_x, dim=st["n"], inputs=[st["x"], st["y"]])  # noqa: F821
    wp.launch(sum_loss, dim=st["n"], inputs=[st["y"], st["loss"]])  # noqa: F821


def loss(st):
    return st["loss"]


def gradients(st):
    return {"x": st["x"].grad.numpy()}
