"""Heat inverse problem: recover the initial temperature of a plate from one blurred, noisy photo.

A 48 x 48 plate starts with a few hot spots and a warm bar, then heat diffuses for 40 explicit
steps (one launch each, insulated edges). We observe only the final field, with 1% noise, and
fit the initial field: the loss is the squared misfit between the simulated and the observed
final fields plus a small smoothness penalty on the initial field (diffusion erases fine detail,
so without it the noise would be amplified back). ``difftape.optim.SGD`` with momentum updates
the 2-D initial field through the 40 recorded launches.

Run ``python -m examples.heat_inverse``. Look at the loss on the progress bar and in
``out/heat_inverse/loss.png``, at ``out/heat_inverse/fields.png`` (true initial field, the
observed final field, and the recovered initial field: the spots and the bar come back sharper
than what was observed), the error against the true field printed at the end, and the diffusion
steps folded into one repeated block in ``out/heat_inverse/tape.svg``.
"""

import numpy as np
from matplotlib.figure import Figure

import difftape as wp
import difftape.optim

try:
    from examples import _reporting as report
except ImportError:  # run as a script: python examples/heat_inverse.py
    import _reporting as report

SIZE = 48
STEPS = 40
RATE = 0.2  # diffusivity * dt / dx², below the 0.25 stability limit
NOISE = 0.01
SMOOTHNESS = 0.01


@wp.kernel
def diffuse(u: wp.array2d(dtype=float), rate: float, u_next: wp.array2d(dtype=float)):
    i, j = wp.tid()
    n = u.shape[0] - 1
    m = u.shape[1] - 1
    # Clamped neighbours: no heat flows through the edges.
    around = (u[wp.max(i - 1, 0), j] + u[wp.min(i + 1, n), j]
              + u[i, wp.max(j - 1, 0)] + u[i, wp.min(j + 1, m)])
    u_next[i, j] = u[i, j] + rate * (around - 4.0 * u[i, j])


@wp.kernel
def misfit(u: wp.array2d(dtype=float), observed: wp.array2d(dtype=float),
           loss: wp.array(dtype=float)):
    i, j = wp.tid()
    d = u[i, j] - observed[i, j]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def roughness(u: wp.array2d(dtype=float), weight: float, loss: wp.array(dtype=float)):
    i, j = wp.tid()
    dx = u[wp.min(i + 1, u.shape[0] - 1), j] - u[i, j]
    dy = u[i, wp.min(j + 1, u.shape[1] - 1)] - u[i, j]
    wp.atomic_add(loss, 0, weight * (dx * dx + dy * dy))


def true_initial_field() -> np.ndarray:
    """Three hot spots and a warm bar on a cold plate."""
    y, x = np.mgrid[0:SIZE, 0:SIZE].astype(np.float64)
    field = np.zeros((SIZE, SIZE))
    for cx, cy, r in [(12, 14, 3.0), (34, 12, 4.0), (30, 34, 2.5)]:
        field += np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * r * r))
    field[26:30, 6:22] += 0.8
    return field


def run_forward(u0: wp.array) -> list:
    """Diffuse ``u0`` for STEPS launches, each into a fresh array; returns every field."""
    fields = [u0]
    for _ in range(STEPS):
        fields.append(wp.zeros((SIZE, SIZE), dtype=float, requires_grad=u0.requires_grad))
        wp.launch(diffuse, dim=(SIZE, SIZE), inputs=[fields[-2], RATE], outputs=[fields[-1]])
    return fields


def plot_fields(run: report.Run, truth: np.ndarray, observed: np.ndarray, fitted: np.ndarray):
    """True initial field, observed final field and recovered initial field, side by side."""
    fig = Figure(figsize=(11, 3.8), tight_layout=True)
    panels = [(truth, "true initial field"), (observed, "observed final field (the data)"),
              (fitted, "recovered initial field")]
    for k, (field, title) in enumerate(panels):
        ax = fig.add_subplot(1, 3, k + 1)
        image = ax.imshow(field, cmap="inferno", vmin=0.0, vmax=max(1.0, truth.max()))
        ax.set_title(title)
        ax.set_xticks([])
        ax.set_yticks([])
        fig.colorbar(image, ax=ax, shrink=0.8)
    path = run.folder / "fields.png"
    fig.savefig(path, dpi=100)
    run.files.append(path)


def main(iterations: int = 150, output_dir=None) -> report.Run:
    """Recover the initial field; returns the run (losses, output folder, files written)."""
    run = report.start("heat_inverse", iterations, output_dir)
    truth = true_initial_field()
    final = run_forward(wp.array(truth, dtype=float))[-1].numpy()
    noise = np.random.default_rng(0).normal(0.0, NOISE, final.shape)
    observed = wp.array(final + noise, dtype=float)

    u0 = wp.zeros((SIZE, SIZE), dtype=float, requires_grad=True)  # first guess: a cold plate
    optimizer = difftape.optim.SGD([u0], lr=0.4, momentum=0.9)
    bar = report.progress(run)
    for it in bar:
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            fields = run_forward(u0)
            wp.launch(misfit, dim=(SIZE, SIZE), inputs=[fields[-1], observed], outputs=[loss])
            wp.launch(roughness, dim=(SIZE, SIZE), inputs=[u0, SMOOTHNESS], outputs=[loss])
        tape.backward(loss)
        error = np.sqrt(np.mean((u0.numpy() - truth) ** 2))
        report.record(run, bar, it, float(loss.numpy()[0]), rms_error=error)
        if it == iterations - 1:
            tape.visualize(str(report.graph_path(run)))
        else:
            optimizer.step([u0.grad])
        tape.zero()

    plot_fields(run, truth, observed.numpy(), u0.numpy())
    blurred = np.sqrt(np.mean((observed.numpy() - truth) ** 2))
    return report.finish(run, f"RMS error of the initial field: {np.sqrt(np.mean(truth ** 2)):.3f}"
                              f" for a cold plate, {blurred:.3f} taking the observation as it is,"
                              f" {error:.3f} recovered")


if __name__ == "__main__":
    report.command_line(main, iterations=150)
