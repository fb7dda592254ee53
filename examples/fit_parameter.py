"""Fit the launch speed and drag of a projectile so it lands where observed, by gradient descent.

Each thread simulates one shot with a dynamic time-stepping loop (loop-carried, nonlinear drag),
the Tape records the launches, and ``tape.backward()`` gives exact gradients through the loop.
Run: ``python -m examples.fit_parameter`` (``make demo``).
"""

import time

import numpy as np

import difftape as wp

GRAVITY = wp.constant(9.81)


@wp.func
def step(x: float, v: float, drag: float, dt: float):
    """One semi-implicit Euler step of a falling body with quadratic drag (1-D vertical)."""
    a = -GRAVITY - drag * v * wp.abs(v)
    v_new = v + a * dt
    return x + v_new * dt, v_new


@wp.kernel
def simulate(speed: wp.array(dtype=float), drag: wp.array(dtype=float), angle: wp.array(dtype=float),
             steps: int, dt: float, landing: wp.array(dtype=float)):
    i = wp.tid()
    vx = speed[0] * wp.cos(angle[i])
    vy = speed[0] * wp.sin(angle[i])
    x = float(0.0)
    y = float(0.0)
    for _ in range(steps):
        vx = vx - drag[0] * vx * wp.abs(vx) * dt
        y, vy = step(y, vy, drag[0], dt)
        x = x + vx * dt
        if y < 0.0:
            break
    landing[i] = x


@wp.kernel
def squared_error(pred: wp.array(dtype=float), target: wp.array(dtype=float),
                  loss: wp.array(dtype=float)):
    i = wp.tid()
    d = pred[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


class Adam:
    """Adam on one-element arrays, with a learning rate per parameter (wp.optim arrives later)."""

    def __init__(self, lrs, betas=(0.9, 0.999), eps=1e-8):
        self.lrs, self.betas, self.eps, self.t = lrs, betas, eps, 0
        self.m = [0.0] * len(lrs)
        self.v = [0.0] * len(lrs)

    def step(self, params) -> None:
        self.t += 1
        b1, b2 = self.betas
        for k, (p, lr) in enumerate(zip(params, self.lrs)):
            g = float(p.grad.numpy()[0])
            self.m[k] = b1 * self.m[k] + (1 - b1) * g
            self.v[k] = b2 * self.v[k] + (1 - b2) * g * g
            m_hat, v_hat = self.m[k] / (1 - b1**self.t), self.v[k] / (1 - b2**self.t)
            p.numpy()[0] -= lr * m_hat / (np.sqrt(v_hat) + self.eps)


def main(iterations: int = 150) -> None:
    angles = np.linspace(0.3, 1.2, 16).astype(np.float32)
    steps, dt = 400, 0.01

    # Observations made with the "true" parameters.
    true_speed, true_drag = wp.array([22.0], dtype=float), wp.array([0.015], dtype=float)
    angle = wp.array(angles, dtype=float)
    observed = wp.zeros(len(angles), dtype=float)
    wp.launch(simulate, dim=len(angles), inputs=[true_speed, true_drag, angle, steps, dt, observed])

    speed = wp.array([15.0], dtype=float, requires_grad=True)
    drag = wp.array([0.05], dtype=float, requires_grad=True)
    landing = wp.zeros(len(angles), dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    params = [speed, drag]
    adam = Adam([0.5, 0.004])

    start = time.perf_counter()
    for it in range(iterations):
        loss.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(simulate, dim=len(angles), inputs=[speed, drag, angle, steps, dt, landing])
            wp.launch(squared_error, dim=len(angles), inputs=[landing, observed, loss])
        tape.backward(loss)
        if it % 15 == 0 or it == iterations - 1:
            print(f"iter {it:3d}  loss {loss.numpy()[0]:12.5f}  speed {speed.numpy()[0]:7.3f}  "
                  f"drag {drag.numpy()[0]:.5f}  dL/dspeed {speed.grad.numpy()[0]:10.3f}")
        adam.step(params)
        tape.zero()
    elapsed = time.perf_counter() - start
    print(f"fitted speed {speed.numpy()[0]:.3f} (true 22.0), drag {drag.numpy()[0]:.4f} (true 0.015)"
          f" in {iterations} iterations, {elapsed:.2f} s including compilation")


if __name__ == "__main__":
    main()
