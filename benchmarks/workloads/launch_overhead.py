"""Workload 5, launch overhead: LAUNCHES tiny launches (dim 8) chained on one tape,
y_{t+1} = a * y_t + 0.001, then a sum loss; backward replays all of them.

``wp`` is injected by the runner (warp or difftape); this file must not import either.
"""

import numpy as np

NAME = "launch_overhead"
REQUIRES = ()
LAUNCHES = 2000
WIDTH = 8
A = 0.999


@wp.kernel  # noqa: F821 (wp is injected)
def axpb(x: wp.array(dtype=wp.float32), a: wp.float32,  # noqa: F821
         y: wp.array(dtype=wp.float32)):  # noqa: F821
    i = wp.tid()  # noqa: F821
    y[i] = a * x[i] + 0.001


@wp.kernel  # noqa: F821
def sum_loss(y: wp.array(dtype=wp.float32), loss: wp.array(dtype=wp.float32)):  # noqa: F821
    i = wp.tid()  # noqa: F821
    wp.atomic_add(loss, 0, y[i])  # noqa: F821


def make_inputs(scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    return {"x0": rng.uniform(-1.0, 1.0, WIDTH).astype(np.float32)}


def reference(inputs):
    return {"x0": np.full(WIDTH, np.float64(np.float32(A)) ** LAUNCHES)}


def setup(inputs):
    xs = [wp.array(inputs["x0"], dtype=wp.float32, requires_grad=True)]  # noqa: F821
    xs += [wp.zeros(WIDTH, dtype=wp.float32, requires_grad=True)  # noqa: F821
           for _ in range(LAUNCHES)]
    return {"x": xs, "loss": wp.zeros(1, dtype=wp.float32, requires_grad=True)}  # noqa: F821


def prepare(st):
    st["loss"].zero_()
    st["loss"].grad.zero_()
    for a in st["x"]:
        a.grad.zero_()


def forward(st):
    xs = st["x"]
    for t in range(LAUNCHES):
        wp.launch(axpb, dim=WIDTH, inputs=[xs[t], A], outputs=[xs[t + 1]])  # noqa: F821
    wp.launch(sum_loss, dim=WIDTH, inputs=[xs[LAUNCHES], st["loss"]])  # noqa: F821


def loss(st):
    return st["loss"]


def gradients(st):
    return {"x0": st["x"][0].grad.numpy()}
