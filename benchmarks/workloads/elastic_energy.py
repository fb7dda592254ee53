"""Workload 8, elastic energy: the St. Venant-Kirchhoff energy of N deformation gradients (one
``mat33`` per element, as in a finite-element or MPM solid), summed into a loss by atomic_add.
Green strain ``E = (F^T F - I) / 2``, energy ``mu |E|^2 + lam/2 tr(E)^2``, the squared norm
written as two static loops over the matrix components, as users write it. It measures rows of
nine floats read per thread (and their adjoint written back), and loops Warp unrolls.

``wp`` is injected by the runner (warp or difftape); this file must not import either.
"""

import numpy as np

NAME = "elastic_energy"
REQUIRES = ("mat33", "transpose", "trace")
BASE_N = 1_000_000
MU = 2.0
LAM = 5.0


@wp.kernel  # noqa: F821 (wp is injected)
def svk_energy(F: wp.array(dtype=wp.mat33), mu: wp.float32, lam: wp.float32,  # noqa: F821
               loss: wp.array(dtype=wp.float32)):  # noqa: F821
    i = wp.tid()  # noqa: F821
    f = F[i]
    E = 0.5 * (wp.transpose(f) @ f - wp.identity(n=3, dtype=wp.float32))  # noqa: F821
    s = wp.float32(0.0)  # noqa: F821
    for r in range(3):
        for c in range(3):
            s += E[r, c] * E[r, c]
    t = wp.trace(E)  # noqa: F821
    wp.atomic_add(loss, 0, mu * s + 0.5 * lam * t * t)  # noqa: F821


def make_inputs(scale=1.0, seed=0):
    n = max(1, int(BASE_N * scale))
    rng = np.random.default_rng(seed)
    F = np.eye(3)[None] + 0.2 * rng.standard_normal((n, 3, 3))
    return {"F": F.astype(np.float32)}


def _energy(F):
    E = 0.5 * (np.einsum("nki,nkj->nij", F, F) - np.eye(3))
    t = np.trace(E, axis1=1, axis2=2)
    return MU * np.sum(E * E, axis=(1, 2)) + 0.5 * LAM * t * t


def reference(inputs):
    """d loss / d F in float64, by complex steps: each element's energy depends on its own F
    only, so one step per component gives every element's derivative at once."""
    F = inputs["F"].astype(np.float64)
    h = 1e-30
    g = np.zeros_like(F)
    for r in range(3):
        for c in range(3):
            step = F.astype(np.complex128)
            step[:, r, c] += 1j * h
            g[:, r, c] = _energy(step).imag / h
    return {"F": g}


# ---------------------------------------------------------------- the program

def setup(inputs):
    n = inputs["F"].shape[0]
    return {
        "n": n,
        "F": wp.array(inputs["F"], dtype=wp.mat33, requires_grad=True),  # noqa: F821
        "loss": wp.zeros(1, dtype=wp.float32, requires_grad=True),  # noqa: F821
    }


def prepare(st):
    st["loss"].zero_()
    st["loss"].grad.zero_()
    st["F"].grad.zero_()


def forward(st):
    wp.launch(svk_energy, dim=st["n"], inputs=[st["F"], MU, LAM, st["loss"]])  # noqa: F821


def loss(st):
    return st["loss"]


def gradients(st):
    return {"F": st["F"].grad.numpy()}
