"""Workload 6, rigid chain: forward kinematics of a serial chain of LINKS revolute joints, one
robot per thread (``wp.transform`` products, ``quat_from_axis_angle``, ``transform_point``),
loss = sum over robots of |tip|^2 by atomic_add. One kernel of many quaternion and transform
builtins: it measures what a big kernel costs to compile, and its warm run time too.

``wp`` is injected by the runner (warp or difftape); this file must not import either.
"""

import numpy as np

NAME = "rigid_chain"
REQUIRES = ("transform", "quat_from_axis_angle", "transform_point")
BASE_N = 200_000
LINKS = 8
AXES = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0],
                 [0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])


@wp.kernel  # noqa: F821 (wp is injected)
def chain_tips(base: wp.array(dtype=wp.transform), q: wp.array2d(dtype=wp.float32),  # noqa: F821
               link: wp.array(dtype=wp.vec3), tip: wp.array(dtype=wp.vec3),  # noqa: F821
               loss: wp.array(dtype=wp.float32)):  # noqa: F821
    i = wp.tid()  # noqa: F821
    x = base[i]
    # One joint per line (LINKS = 8): a rotation about a fixed axis, then the link's offset.
    x = x * wp.transform(link[0], wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), q[i, 0]))  # noqa: F821,E501
    x = x * wp.transform(link[1], wp.quat_from_axis_angle(wp.vec3(0.0, 1.0, 0.0), q[i, 1]))  # noqa: F821,E501
    x = x * wp.transform(link[2], wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), q[i, 2]))  # noqa: F821,E501
    x = x * wp.transform(link[3], wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), q[i, 3]))  # noqa: F821,E501
    x = x * wp.transform(link[4], wp.quat_from_axis_angle(wp.vec3(0.0, 1.0, 0.0), q[i, 4]))  # noqa: F821,E501
    x = x * wp.transform(link[5], wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), q[i, 5]))  # noqa: F821,E501
    x = x * wp.transform(link[6], wp.quat_from_axis_angle(wp.vec3(0.0, 1.0, 0.0), q[i, 6]))  # noqa: F821,E501
    x = x * wp.transform(link[7], wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), q[i, 7]))  # noqa: F821,E501
    p = wp.transform_point(x, link[0])  # noqa: F821
    tip[i] = p
    wp.atomic_add(loss, 0, wp.dot(p, p))  # noqa: F821


def make_inputs(scale=1.0, seed=0):
    n = max(1, int(BASE_N * scale))
    rng = np.random.default_rng(seed)
    rotation = rng.standard_normal((n, 4))
    rotation /= np.linalg.norm(rotation, axis=1, keepdims=True)
    base = np.concatenate([rng.uniform(-1.0, 1.0, (n, 3)), rotation], axis=1)
    return {"base": base.astype(np.float32),
            "q": rng.uniform(-np.pi, np.pi, (n, LINKS)).astype(np.float32),
            "link": rng.uniform(0.2, 0.6, (LINKS, 3)).astype(np.float32)}


# ---------------------------------------------------------------- float64 reference (numpy)
# Quaternions (x, y, z, w) and transforms (p, q) as Warp defines them, on arrays of any dtype,
# so that the same code runs on complex numbers for complex-step derivatives.

def _qmul(a, b):
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack([aw * bx + bw * ax + ay * bz - az * by,
                     aw * by + bw * ay + az * bx - ax * bz,
                     aw * bz + bw * az + ax * by - ay * bx,
                     aw * bw - ax * bx - ay * by - az * bz], axis=-1)


def _rotate(q, v):
    u, w = q[..., :3], q[..., 3:]
    return v * (2.0 * w * w - 1.0) + np.cross(u, v) * w * 2.0 + u * np.sum(u * v, -1,
                                                                             keepdims=True) * 2.0


def _chain(base, q, link):
    """Each robot's tip, and the rotation that each link offset is turned by (the last entry
    that of the tip's offset, ``link[0]`` again)."""
    p, r = base[:, :3], base[:, 3:]
    rotations = []
    for k in range(LINKS):
        half = q[:, k:k + 1] * 0.5
        joint = np.concatenate([AXES[k] * np.sin(half), np.cos(half)], axis=1)
        rotations.append(r)
        p = p + _rotate(r, np.broadcast_to(link[k], p.shape))
        r = _qmul(r, joint)
    rotations.append(r)
    return p + _rotate(r, np.broadcast_to(link[0], p.shape)), rotations


def reference(inputs):
    """d loss / d (base, q, link) in float64. Base and joint angles by complex steps: each
    robot's tip depends on its own row only, so one step per column gives every robot's
    derivative at once. The tip is affine in each link offset (``R v`` added), so the offsets'
    gradient is exact in closed form: the sum over robots of ``2 R^T tip``."""
    data = {k: inputs[k].astype(np.float64) for k in ("base", "q", "link")}
    h = 1e-30
    grads = {}
    for name in ("base", "q"):
        g = np.zeros_like(data[name])
        for c in range(g.shape[1]):
            args = {k: v.astype(np.complex128) for k, v in data.items()}
            args[name][:, c] += 1j * h
            tips, _ = _chain(args["base"], args["q"], args["link"])
            g[:, c] = np.sum(tips * tips, axis=1).imag / h
        grads[name] = g
    tips, rotations = _chain(data["base"], data["q"], data["link"])
    conjugate = np.array([-1.0, -1.0, -1.0, 1.0])
    back = [np.sum(_rotate(r * conjugate, 2.0 * tips), axis=0) for r in rotations]
    grads["link"] = np.stack(back[:LINKS])
    grads["link"][0] += back[LINKS]
    return grads


# ---------------------------------------------------------------- the program

def setup(inputs):
    n = inputs["q"].shape[0]
    return {
        "n": n,
        "base": wp.array(inputs["base"], dtype=wp.transform, requires_grad=True),  # noqa: F821
        "q": wp.array(inputs["q"], dtype=wp.float32, requires_grad=True),  # noqa: F821
        "link": wp.array(inputs["link"], dtype=wp.vec3, requires_grad=True),  # noqa: F821
        "tip": wp.zeros(n, dtype=wp.vec3, requires_grad=True),  # noqa: F821
        "loss": wp.zeros(1, dtype=wp.float32, requires_grad=True),  # noqa: F821
    }


def prepare(st):
    st["loss"].zero_()
    for name in ("base", "q", "link", "tip", "loss"):
        st[name].grad.zero_()


def forward(st):
    wp.launch(chain_tips, dim=st["n"],  # noqa: F821
              inputs=[st["base"], st["q"], st["link"], st["tip"], st["loss"]])


def loss(st):
    return st["loss"]


def gradients(st):
    return {name: st[name].grad.numpy() for name in ("base", "q", "link")}
