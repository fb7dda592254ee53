"""Chain throw: find how to throw a mass-spring chain so it flies onto a target, turned sideways.

Sixteen 50 g beads held in a line along x are joined by stretch springs (neighbours) and bend
springs (every other bead). Each step, one launch accumulates the spring forces with
``wp.atomic_add`` into a fresh force array (one thread per spring, adding to both of its beads)
and another integrates the beads under gravity; the 1 s flight is 240 launches on one tape. The
loss is the mean squared distance of the beads from their targets at the end: the same chain
2 m ahead, turned 90 degrees to lie along z. ``difftape.optim.Adam`` fits every bead's initial
velocity (a ``vec3`` array), so the throw has to add the right spin for the chain to turn.

Run ``python -m examples.chain_throw`` (this is ``make demo``). Look at the loss on the progress
bar and in ``out/chain_throw/loss.png``, at ``out/chain_throw/flight.png`` (top and side views of
the chain every 0.1 s, the first throw in grey, the fitted one in colour, the targets as
crosses), and at the two launches per step folded into one repeated block in
``out/chain_throw/tape.svg``.
"""

import numpy as np
from matplotlib.figure import Figure

import difftape as wp
import difftape.optim

try:
    from examples import _reporting as report
except ImportError:  # run as a script: python examples/chain_throw.py
    import _reporting as report

BEADS = 16
SPACING = 0.1  # m between neighbours at rest
MASS = 0.05  # kg per bead
STRETCH_KE, BEND_KE, SPRING_KD = 400.0, 100.0, 0.5
STEPS = 120
DT = 1.0 / 120.0
AHEAD = 2.0  # m the chain's centre must travel along x


@wp.kernel
def spring_forces(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                  ends: wp.array(dtype=wp.vec2i), rest: wp.array(dtype=float),
                  stiffness: wp.array(dtype=float), damping: float,
                  f: wp.array(dtype=wp.vec3)):
    s = wp.tid()
    i = ends[s][0]
    j = ends[s][1]
    d = x[j] - x[i]
    length = wp.length(d)
    direction = d / length
    stretch_rate = wp.dot(v[j] - v[i], direction)
    force = (stiffness[s] * (length - rest[s]) + damping * stretch_rate) * direction
    wp.atomic_add(f, i, force)
    wp.atomic_sub(f, j, force)


@wp.kernel
def integrate(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.vec3),
              mass: float, dt: float, x_next: wp.array(dtype=wp.vec3),
              v_next: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v1 = v[i] + (f[i] / mass + wp.vec3(0.0, -9.81, 0.0)) * dt
    v_next[i] = v1
    x_next[i] = x[i] + v1 * dt


@wp.kernel
def mean_squared_distance(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3),
                          loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d) / float(x.shape[0]))


def chain():
    """Bead positions (a line along x, 1 m up), target positions, and the springs."""
    offsets = (np.arange(BEADS) - (BEADS - 1) / 2) * SPACING
    start = np.stack([offsets, np.ones(BEADS), np.zeros(BEADS)], axis=1)
    target = np.stack([np.full(BEADS, AHEAD), np.ones(BEADS), offsets], axis=1)
    ends = [(i, i + 1) for i in range(BEADS - 1)] + [(i, i + 2) for i in range(BEADS - 2)]
    rest = [SPACING] * (BEADS - 1) + [2 * SPACING] * (BEADS - 2)
    stiffness = [STRETCH_KE] * (BEADS - 1) + [BEND_KE] * (BEADS - 2)
    return start, target, np.array(ends), np.array(rest), np.array(stiffness)


def throw(x0, v0, ends, rest, stiffness, target):
    """Record one flight on a new tape; returns the tape, the loss and the positions per step."""
    xs, vs = [x0], [v0]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for _ in range(STEPS):
            f = wp.zeros(BEADS, dtype=wp.vec3, requires_grad=True)
            wp.launch(spring_forces, dim=len(rest),
                      inputs=[xs[-1], vs[-1], ends, rest, stiffness, SPRING_KD], outputs=[f])
            xs.append(wp.zeros(BEADS, dtype=wp.vec3, requires_grad=True))
            vs.append(wp.zeros(BEADS, dtype=wp.vec3, requires_grad=True))
            wp.launch(integrate, dim=BEADS, inputs=[xs[-2], vs[-2], f, MASS, DT],
                      outputs=[xs[-1], vs[-1]])
        wp.launch(mean_squared_distance, dim=BEADS, inputs=[xs[-1], target], outputs=[loss])
    return tape, loss, np.array([x.numpy() for x in xs])


def plot_flight(run: report.Run, first: np.ndarray, last: np.ndarray, target: np.ndarray):
    """Top (x, z) and side (x, y) views of the chain every 0.1 s, first and fitted throws."""
    fig = Figure(figsize=(10, 4), tight_layout=True)
    for k, (axis, name) in enumerate([(2, "z (m)"), (1, "y (m)")]):
        ax = fig.add_subplot(1, 2, k + 1)
        snapshots = range(0, STEPS + 1, 12)
        for n in snapshots:
            ax.plot(first[n, :, 0], first[n, :, axis], color="tab:gray", alpha=0.4, lw=1)
        for n in snapshots:
            ax.plot(last[n, :, 0], last[n, :, axis], "-o", markersize=2, lw=1,
                    color=(n / STEPS, 0.2, 1.0 - n / STEPS))
        ax.plot(target[:, 0], target[:, axis], "x", color="tab:red", markersize=5)
        ax.set_xlabel("x (m)")
        ax.set_ylabel(name)
        ax.set_title("top view" if axis == 2 else "side view")
        if axis == 2:
            ax.set_aspect("equal")
    path = run.folder / "flight.png"
    fig.savefig(path, dpi=100)
    run.files.append(path)


def main(iterations: int = 150, output_dir=None) -> report.Run:
    """Fit the initial bead velocities; returns the run (losses, output folder, files written)."""
    run = report.start("chain_throw", iterations, output_dir)
    start, goal, ends, rest, stiffness = chain()
    ends = wp.array(ends, dtype=wp.vec2i)
    rest = wp.array(rest, dtype=float)
    stiffness = wp.array(stiffness, dtype=float)
    target = wp.array(goal, dtype=wp.vec3)
    x0 = wp.array(start, dtype=wp.vec3, requires_grad=True)
    v0 = wp.zeros(BEADS, dtype=wp.vec3, requires_grad=True)  # first guess: just let go
    optimizer = difftape.optim.Adam([v0], lr=0.2)

    bar = report.progress(run)
    for it in bar:
        tape, loss, flight = throw(x0, v0, ends, rest, stiffness, target)
        tape.backward(loss)
        report.record(run, bar, it, float(loss.numpy()[0]))
        if it == 0:
            first = flight
        if it == iterations - 1:
            tape.visualize(str(report.graph_path(run)))
        else:
            optimizer.step([v0.grad])
        tape.zero()

    plot_flight(run, first, flight, goal)
    miss = np.linalg.norm(flight[-1] - goal, axis=1)
    spin = np.cross(start - start.mean(0), v0.numpy() - v0.numpy().mean(0)).sum(0) * MASS
    return report.finish(run, f"beads end {miss.mean() * 100:.1f} cm from their targets on "
                              f"average (worst {miss.max() * 100:.1f} cm); the throw's mean "
                              f"velocity is {np.round(v0.numpy().mean(0), 2)} m/s and its "
                              f"angular momentum {np.round(spin, 3)} kg m²/s")


if __name__ == "__main__":
    report.command_line(main, iterations=150)
