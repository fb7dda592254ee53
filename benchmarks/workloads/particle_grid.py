"""Workload 9, particle to grid: the transfer step of the material point method. N particles
each add mass and momentum into the 3 x 3 x 3 grid cells around them, weighted by quadratic
B-splines (three static loops, the weights picked by ``if`` on the loop variables, as MPM codes
write them, and ``atomic_add`` into the grid); loss = a fixed random linear function of the grid.
Gradients dL/dx (through the weights) and dL/dv.

``wp`` is injected by the runner (warp or difftape); this file must not import either.
"""

import numpy as np

NAME = "particle_grid"
REQUIRES = ("vec3", "cw_mul", "floor")
BASE_N = 100_000
RES = 64  # cells per side; the grid has a border of 2 more
SIDE = RES + 2


@wp.kernel  # noqa: F821 (wp is injected)
def particle_to_grid(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),  # noqa: F821
                     mass: wp.array(dtype=wp.float32),  # noqa: F821
                     momentum: wp.array(dtype=wp.vec3)):  # noqa: F821
    p = wp.tid()  # noqa: F821
    q = x[p] * float(RES)
    base = wp.vec3(wp.floor(q[0] - 0.5), wp.floor(q[1] - 0.5), wp.floor(q[2] - 0.5))  # noqa: F821
    fx = q - base
    half = wp.vec3(0.5, 0.5, 0.5)  # noqa: F821
    w0 = wp.cw_mul(half, wp.cw_mul(wp.vec3(1.5, 1.5, 1.5) - fx,  # noqa: F821
                                   wp.vec3(1.5, 1.5, 1.5) - fx))  # noqa: F821
    w1 = wp.vec3(0.75, 0.75, 0.75) - wp.cw_mul(fx - wp.vec3(1.0, 1.0, 1.0),  # noqa: F821
                                               fx - wp.vec3(1.0, 1.0, 1.0))  # noqa: F821
    w2 = wp.cw_mul(half, wp.cw_mul(fx - half, fx - half))  # noqa: F821
    for i in range(3):
        for j in range(3):
            for k in range(3):
                wi = w0[0]
                if i == 1:
                    wi = w1[0]
                if i == 2:
                    wi = w2[0]
                wj = w0[1]
                if j == 1:
                    wj = w1[1]
                if j == 2:
                    wj = w2[1]
                wk = w0[2]
                if k == 1:
                    wk = w1[2]
                if k == 2:
                    wk = w2[2]
                weight = wi * wj * wk
                cell = ((int(base[0]) + i) * SIDE + int(base[1]) + j) * SIDE + int(base[2]) + k
                wp.atomic_add(mass, cell, weight)  # noqa: F821
                wp.atomic_add(momentum, cell, weight * v[p])  # noqa: F821


@wp.kernel  # noqa: F821
def grid_loss(mass: wp.array(dtype=wp.float32), momentum: wp.array(dtype=wp.vec3),  # noqa: F821
              g: wp.array(dtype=wp.float32), h: wp.array(dtype=wp.vec3),  # noqa: F821
              loss: wp.array(dtype=wp.float32)):  # noqa: F821
    c = wp.tid()  # noqa: F821
    wp.atomic_add(loss, 0, g[c] * mass[c] + wp.dot(h[c], momentum[c]))  # noqa: F821


def make_inputs(scale=1.0, seed=0):
    n = max(1, int(BASE_N * scale))
    rng = np.random.default_rng(seed)
    cells = SIDE ** 3
    return {"x": rng.uniform(0.05, 0.95, (n, 3)).astype(np.float32),
            "v": rng.uniform(-1.0, 1.0, (n, 3)).astype(np.float32),
            "g": rng.uniform(-1.0, 1.0, cells).astype(np.float32),
            "h": rng.uniform(-1.0, 1.0, (cells, 3)).astype(np.float32)}


def _weights(fx):
    """The three B-spline weights per axis, shape (3, n, 3): for offsets 0, 1, 2."""
    return np.stack([0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2])


def _per_particle_loss(x, v, base, g, h):
    """Each particle's share of the loss (the loss is linear in what it adds to the grid)."""
    w = _weights(x * RES - base)
    b = base.astype(np.int64)
    total = 0.0
    for i in range(3):
        for j in range(3):
            for k in range(3):
                weight = w[i][:, 0] * w[j][:, 1] * w[k][:, 2]
                cell = ((b[:, 0] + i) * SIDE + b[:, 1] + j) * SIDE + b[:, 2] + k
                total = total + weight * (g[cell] + np.sum(h[cell] * v, axis=1))
    return total


def reference(inputs):
    """dL/dx by complex steps (each particle's share depends on its own x only, and the cells
    it reaches do not move under an imaginary step), dL/dv in closed form; float64."""
    x, v = inputs["x"].astype(np.float64), inputs["v"].astype(np.float64)
    g, h = inputs["g"].astype(np.float64), inputs["h"].astype(np.float64)
    base = np.floor(x * RES - 0.5)
    step = 1e-30
    gx = np.zeros_like(x)
    for c in range(3):
        xc = x.astype(np.complex128)
        xc[:, c] += 1j * step
        gx[:, c] = _per_particle_loss(xc, v, base, g, h).imag / step
    w = _weights(x * RES - base)
    b = base.astype(np.int64)
    gv = np.zeros_like(v)
    for i in range(3):
        for j in range(3):
            for k in range(3):
                weight = w[i][:, 0] * w[j][:, 1] * w[k][:, 2]
                cell = ((b[:, 0] + i) * SIDE + b[:, 1] + j) * SIDE + b[:, 2] + k
                gv += weight[:, None] * h[cell]
    return {"x": gx, "v": gv}


# ---------------------------------------------------------------- the program

def setup(inputs):
    n = inputs["x"].shape[0]
    cells = SIDE ** 3
    return {
        "n": n, "cells": cells,
        "x": wp.array(inputs["x"], dtype=wp.vec3, requires_grad=True),  # noqa: F821
        "v": wp.array(inputs["v"], dtype=wp.vec3, requires_grad=True),  # noqa: F821
        "g": wp.array(inputs["g"], dtype=wp.float32),  # noqa: F821
        "h": wp.array(inputs["h"], dtype=wp.vec3),  # noqa: F821
        "mass": wp.zeros(cells, dtype=wp.float32, requires_grad=True),  # noqa: F821
        "momentum": wp.zeros(cells, dtype=wp.vec3, requires_grad=True),  # noqa: F821
        "loss": wp.zeros(1, dtype=wp.float32, requires_grad=True),  # noqa: F821
    }


def prepare(st):
    for name in ("mass", "momentum", "loss"):
        st[name].zero_()
        st[name].grad.zero_()
    for name in ("x", "v"):
        st[name].grad.zero_()


def forward(st):
    wp.launch(particle_to_grid, dim=st["n"], inputs=[st["x"], st["v"]],  # noqa: F821
              outputs=[st["mass"], st["momentum"]])
    wp.launch(grid_loss, dim=st["cells"],  # noqa: F821
              inputs=[st["mass"], st["momentum"], st["g"], st["h"], st["loss"]])


def loss(st):
    return st["loss"]


def gradients(st):
    return {name: st[name].grad.numpy() for name in ("x", "v")}
