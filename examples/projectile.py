"""Projectile: find launch velocities that land eight balls on eight targets through drag and wind.

Each thread flies one ball (gravity, quadratic air drag relative to a side wind) with a dynamic
time-stepping loop that stops when the ball hits the ground, then interpolates the landing point
across the last step. The loss is the mean squared miss distance; ``tape.backward()`` gives exact
gradients through the loop and its ``break``, and ``difftape.optim.Adam`` updates the ``vec3``
velocities.

Run ``python -m examples.projectile`` (or ``python examples/projectile.py``). Look at the loss
going down on the progress bar and in ``out/projectile/loss.png`` (the RMS miss falls from 15 m
to under a millimetre), the fitted throws printed at the end, and the two recorded launches in
``out/projectile/tape.svg``.
"""

import math

import numpy as np

import difftape as wp
import difftape.optim

try:
    from examples import _reporting as report
except ImportError:  # run as a script: python examples/projectile.py
    import _reporting as report

DRAG = 0.02  # quadratic drag per unit mass, 1/m
DT = 0.005
MAX_STEPS = 2000  # 10 s of flight: every ball lands long before


@wp.kernel
def fly(velocity: wp.array(dtype=wp.vec3), wind: wp.vec3, drag: float, dt: float,
        max_steps: int, landing: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    x = wp.vec3(0.0, 1.0, 0.0)  # thrown from 1 m above the ground
    v = velocity[i]
    x_prev = x
    for _ in range(max_steps):
        x_prev = x
        air = v - wind
        a = wp.vec3(0.0, -9.81, 0.0) - drag * wp.length(air) * air
        v = v + a * dt
        x = x + v * dt
        if x[1] < 0.0:
            break
    # Where the last step crossed the ground: continuous in the velocity, unlike x itself.
    s = x_prev[1] / (x_prev[1] - x[1])
    landing[i] = x_prev + s * (x - x_prev)


@wp.kernel
def mean_squared_miss(landing: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3),
                      loss: wp.array(dtype=float)):
    i = wp.tid()
    d = landing[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d) / float(landing.shape[0]))


def targets(n: int) -> np.ndarray:
    """Targets on the ground in a fan in front of the thrower, 12 to 40 m away."""
    angles = np.linspace(-0.6, 0.6, n)
    ranges = np.linspace(12.0, 40.0, n)
    return np.stack([ranges * np.cos(angles), np.zeros(n), ranges * np.sin(angles)], axis=1)


def main(iterations: int = 200, output_dir=None) -> report.Run:
    """Fit the launch velocities; returns the run (losses, output folder, files written)."""
    run = report.start("projectile", iterations, output_dir)
    n = 8
    target = wp.array(targets(n), dtype=wp.vec3)
    wind = wp.vec3(0.0, 0.0, 3.0)  # a 3 m/s side wind
    # Every ball starts with the same throw: 10 m/s forward, 10 m/s up.
    velocity = wp.array(np.tile([10.0, 10.0, 0.0], (n, 1)), dtype=wp.vec3, requires_grad=True)
    optimizer = difftape.optim.Adam([velocity], lr=0.5)

    bar = report.progress(run)
    for it in bar:
        landing = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(fly, dim=n, inputs=[velocity, wind, DRAG, DT, MAX_STEPS], outputs=[landing])
            wp.launch(mean_squared_miss, dim=n, inputs=[landing, target], outputs=[loss])
        tape.backward(loss)
        report.record(run, bar, it, float(loss.numpy()[0]))
        if it == iterations - 1:
            tape.visualize(str(report.graph_path(run)))
        else:
            optimizer.step([velocity.grad])
        tape.zero()

    miss = np.linalg.norm(landing.numpy() - target.numpy(), axis=1)
    speeds = np.linalg.norm(velocity.numpy(), axis=1)
    elevations = [math.degrees(math.asin(v[1] / s)) for v, s in zip(velocity.numpy(), speeds)]
    lines = [f"  target {t[0]:5.1f} m ahead, {t[2]:5.1f} m aside: speed {s:5.2f} m/s at "
             f"{e:4.1f} deg up, miss {m * 100:6.2f} cm"
             for t, s, e, m in zip(target.numpy(), speeds, elevations, miss)]
    return report.finish(run, "fitted throws:\n" + "\n".join(lines))


if __name__ == "__main__":
    report.command_line(main, iterations=200)
