"""Bounce: find the initial velocity that sends a ball off the ground and a wall onto a target.

A ball of radius 0.1 m is thrown from 1 m above the ground towards a wall 2 m away. It bounces
off the ground and the wall with restitution 0.8, contacts resolved at their moment of impact
inside each substep, so the final position is a smooth function of the initial velocity. One
launch advances one 1/60 s frame in 16 substeps (a loop inside the kernel); the 60 frames of the
1 s flight are 60 launches on one tape, each writing fresh state arrays, and the loss is the
squared distance from the ball to the target at the end. ``difftape.optim.Adam`` updates the
initial velocity (a one-element ``vec3`` array).

Run ``python -m examples.bounce``. Look at the loss on the progress bar and in
``out/bounce/loss.png``, at ``out/bounce/trajectory.png`` (the first throw misses; the fitted one
bounces on the ground, then off the wall, and comes down onto the target), and at the 60 frame
launches folded into one repeated block in ``out/bounce/tape.svg``.
"""

import numpy as np
from matplotlib.figure import Figure

import difftape as wp
import difftape.optim

try:
    from examples import _reporting as report
except ImportError:  # run as a script: python examples/bounce.py
    import _reporting as report

FRAMES = 60
SUBSTEPS = 16
FRAME_DT = 1.0 / 60.0
RADIUS = 0.1
WALL_X = 2.0
START = (0.0, 1.0, 0.0)
TARGET = (0.5, 1.2, 0.0)
RESTITUTION = 0.8


@wp.func
def bounce(x: float, v: float, a: float, limit: float, restitution: float, dt: float):
    """Bounce a coordinate that crossed ``limit`` (moving up, with acceleration ``a``) in the
    last step: rewind to the moment of contact, reverse and scale the velocity, replay the rest
    of the step. Whichever substep the contact falls in, the result is the same up to O(dt²), so
    the loss is smooth in the initial velocity (a penalty force or a plain velocity flip would
    make it depend on that phase, and the loss bumpy).
    """
    if x > limit:
        tau = wp.min((x - limit) / wp.max(v, 1.0e-3), dt)  # time since the contact
        v_hit = v - a * tau
        v = -restitution * v_hit + a * tau
        x = limit - restitution * v_hit * tau + 0.5 * a * tau * tau
    return x, v


@wp.kernel
def frame(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), substeps: int, dt: float,
          restitution: float, wall_x: float, radius: float,
          x_next: wp.array(dtype=wp.vec3), v_next: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    px = x[i][0]
    py = x[i][1]
    vx = v[i][0]
    vy = v[i][1]
    for _ in range(substeps):
        vy = vy - 9.81 * dt
        px = px + vx * dt
        py = py + vy * dt
        px, vx = bounce(px, vx, 0.0, wall_x - radius, restitution, dt)  # the wall
        ny, nvy = bounce(-py, -vy, 9.81, -radius, restitution, dt)  # the ground, y mirrored
        py = -ny
        vy = -nvy
    x_next[i] = wp.vec3(px, py, x[i][2])
    v_next[i] = wp.vec3(vx, vy, v[i][2])


@wp.kernel
def distance_to_target(x: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    d = x[0] - target
    loss[0] = wp.dot(d, d)


def simulate(velocity: wp.array, target: wp.vec3):
    """Record one flight on a new tape; returns the tape, the loss and the positions per frame."""
    xs = [wp.array([START], dtype=wp.vec3, requires_grad=True)]
    vs = [velocity]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for _ in range(FRAMES):
            xs.append(wp.zeros(1, dtype=wp.vec3, requires_grad=True))
            vs.append(wp.zeros(1, dtype=wp.vec3, requires_grad=True))
            wp.launch(frame, dim=1, inputs=[xs[-2], vs[-2], SUBSTEPS, FRAME_DT / SUBSTEPS,
                                            RESTITUTION, WALL_X, RADIUS],
                      outputs=[xs[-1], vs[-1]])
        wp.launch(distance_to_target, dim=1, inputs=[xs[-1], target], outputs=[loss])
    return tape, loss, np.array([x.numpy()[0] for x in xs])


def plot_trajectories(run: report.Run, first: np.ndarray, last: np.ndarray) -> None:
    """Side view of the first and the final throw, the ground, the wall and the target."""
    fig = Figure(figsize=(6, 4), tight_layout=True)
    ax = fig.add_subplot()
    ax.plot(first[:, 0], first[:, 1], "--", color="tab:gray", label="first throw")
    ax.plot(last[:, 0], last[:, 1], "-o", markersize=2, color="tab:blue", label="optimized")
    ax.plot(*TARGET[:2], "x", color="tab:red", markersize=10, label="target")
    ax.axhline(0.0, color="black")
    ax.axvline(WALL_X, color="black")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_aspect("equal")
    ax.legend(loc="upper left")
    path = run.folder / "trajectory.png"
    fig.savefig(path, dpi=100)
    run.files.append(path)


def main(iterations: int = 120, output_dir=None) -> report.Run:
    """Fit the initial velocity; returns the run (losses, output folder, files written)."""
    run = report.start("bounce", iterations, output_dir)
    target = wp.vec3(*TARGET)
    velocity = wp.array([(3.0, -3.0, 0.0)], dtype=wp.vec3, requires_grad=True)
    optimizer = difftape.optim.Adam([velocity], lr=0.1)

    bar = report.progress(run)
    for it in bar:
        tape, loss, path = simulate(velocity, target)
        tape.backward(loss)
        report.record(run, bar, it, float(loss.numpy()[0]))
        if it == 0:
            first = path
        if it == iterations - 1:
            tape.visualize(str(report.graph_path(run)))
        else:
            optimizer.step([velocity.grad])
        tape.zero()

    plot_trajectories(run, first, path)
    v = velocity.numpy()[0]
    miss = np.linalg.norm(path[-1] - np.array(TARGET))
    return report.finish(run, f"initial velocity ({v[0]:.3f}, {v[1]:.3f}) m/s: the ball ends "
                              f"{miss * 100:.2f} cm from the target")


if __name__ == "__main__":
    report.command_line(main, iterations=120)
