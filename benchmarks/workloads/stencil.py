"""Workload 4, stencil: 2-D 5-point diffusion with clamped borders on N x N, STEPS steps
(each step writes a new array), ``i, j = wp.tid()``; loss = sum(u_final**2) by atomic_add.

``wp`` is injected by the runner (warp or difftape); this file must not import either.
"""

import numpy as np

NAME = "stencil"
REQUIRES = ()
BASE_N = 1024
STEPS = 20
K = 0.2


@wp.kernel  # noqa: F821 (wp is injected)
def diffuse(u: wp.array2d(dtype=wp.float32), k: wp.float32,  # noqa: F821
            u1: wp.array2d(dtype=wp.float32)):  # noqa: F821
    i, j = wp.tid()  # noqa: F821
    n = u.shape[0]
    m = u.shape[1]
    im = wp.max(i - 1, 0)  # noqa: F821
    ip = wp.min(i + 1, n - 1)  # noqa: F821
    jm = wp.max(j - 1, 0)  # noqa: F821
    jp = wp.min(j + 1, m - 1)  # noqa: F821
    c = u[i, j]
    u1[i, j] = c + k * (u[im, j] + u[ip, j] + u[i, jm] + u[i, jp] - 4.0 * c)


@wp.kernel  # noqa: F821
def sq_loss(u: wp.array2d(dtype=wp.float32), loss: wp.array(dtype=wp.float32)):  # noqa: F821
    i, j = wp.tid()  # noqa: F821
    wp.atomic_add(loss, 0, u[i, j] * u[i, j])  # noqa: F821


def make_inputs(scale=1.0, seed=0):
    n = max(4, int(round(BASE_N * np.sqrt(scale))))
    rng = np.random.default_rng(seed)
    return {"u0": rng.uniform(0.0, 1.0, (n, n)).astype(np.float32)}


def _step64(u):
    p = np.pad(u, 1, mode="edge")
    return u + K * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4.0 * u)


def _step64_adjoint(g):
    """Transpose of ``_step64`` applied to the adjoint ``g`` of its output."""
    gu = (1.0 - 4.0 * K) * g
    kg = K * g
    gu[:-1, :] += kg[1:, :]   # u[i-1, j] read by row i >= 1
    gu[0, :] += kg[0, :]      # row 0 reads itself (clamped)
    gu[1:, :] += kg[:-1, :]   # u[i+1, j] read by row i <= n-2
    gu[-1, :] += kg[-1, :]
    gu[:, :-1] += kg[:, 1:]
    gu[:, 0] += kg[:, 0]
    gu[:, 1:] += kg[:, :-1]
    gu[:, -1] += kg[:, -1]
    return gu


def reference(inputs):
    u = inputs["u0"].astype(np.float64)
    for _ in range(STEPS):
        u = _step64(u)
    g = 2.0 * u
    for _ in range(STEPS):
        g = _step64_adjoint(g)
    return {"u0": g}


def setup(inputs):
    n = inputs["u0"].shape[0]
    us = [wp.array(inputs["u0"], dtype=wp.float32, requires_grad=True)]  # noqa: F821
    us += [wp.zeros((n, n), dtype=wp.float32, requires_grad=True)  # noqa: F821
           for _ in range(STEPS)]
    return {"n": n, "u": us,
            "loss": wp.zeros(1, dtype=wp.float32, requires_grad=True)}  # noqa: F821


def prepare(st):
    st["loss"].zero_()
    st["loss"].grad.zero_()
    for a in st["u"]:
        a.grad.zero_()


def forward(st):
    n, us = st["n"], st["u"]
    for t in range(STEPS):
        wp.launch(diffuse, dim=(n, n), inputs=[us[t], K], outputs=[us[t + 1]])  # noqa: F821
    wp.launch(sq_loss, dim=(n, n), inputs=[us[STEPS], st["loss"]])  # noqa: F821


def loss(st):
    return st["loss"]


def gradients(st):
    return {"u0": st["u"][0].grad.numpy()}
