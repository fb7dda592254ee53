"""What every example shows while it optimizes: a tqdm progress bar with the current loss, a few
logged lines, a loss-curve PNG, the tape graph, and a summary naming the output folder.

It knows nothing about difftape kernels; the examples call ``tape.visualize`` themselves (so the
graph names arrays after their variables) with the path ``graph_path`` gives.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.figure import Figure
from tqdm import tqdm


@dataclass
class Run:
    """One optimization: its name, output folder, losses so far and the files it wrote."""

    name: str
    folder: Path
    iterations: int
    losses: list[float] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    seconds: float = 0.0

    @property
    def reduction(self) -> float:
        """How many times lower the last loss is than the first one."""
        last = self.losses[-1]
        return self.losses[0] / last if last > 0.0 else float("inf")


def start(name: str, iterations: int, output_dir: str | Path | None) -> Run:
    """Create the output folder (``out/<name>/`` unless given) and start the clock."""
    folder = Path(output_dir) if output_dir is not None else Path("out") / name
    folder.mkdir(parents=True, exist_ok=True)
    return Run(name, folder, iterations)


def progress(run: Run):
    """A tqdm bar over the iterations; pass each loss to ``record``."""
    return tqdm(range(run.iterations), desc=run.name, unit="it", dynamic_ncols=True)


def record(run: Run, bar, iteration: int, loss: float, **extra: float) -> None:
    """Keep ``loss``, show it on the bar, and log a line ten times per run."""
    run.losses.append(loss)
    bar.set_postfix(loss=f"{loss:.4g}", refresh=False)
    if iteration % max(1, run.iterations // 10) == 0 or iteration == run.iterations - 1:
        details = "".join(f"  {k} {v:.4g}" for k, v in extra.items())
        bar.write(f"iter {iteration:4d}  loss {loss:.6g}{details}")


def graph_path(run: Run) -> Path:
    """Where to ``tape.visualize``: an SVG when GraphViz's ``dot`` is installed, else dot text."""
    path = run.folder / ("tape.svg" if shutil.which("dot") else "tape.dot")
    run.files.append(path)
    return path


def save_loss_curve(run: Run, ylabel: str = "loss") -> Path:
    """Plot the losses on a log scale into ``loss.png``."""
    fig = Figure(figsize=(6, 4), tight_layout=True)
    ax = fig.add_subplot()
    ax.semilogy(range(len(run.losses)), run.losses, color="tab:blue")
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{run.name}: {run.reduction:.3g}x lower")
    ax.grid(True, which="both", alpha=0.3)
    path = run.folder / "loss.png"
    fig.savefig(path, dpi=100)
    run.files.append(path)
    return path


def finish(run: Run, summary: str) -> Run:
    """Stop the clock, write the loss curve, and print what changed and where the files are."""
    run.seconds = time.perf_counter() - run.started
    save_loss_curve(run)
    print(f"{run.name}: loss {run.losses[0]:.4g} -> {run.losses[-1]:.4g} "
          f"({run.reduction:.3g}x lower) in {len(run.losses)} iterations, "
          f"{run.seconds:.1f} s including compilation")
    print(summary)
    print(f"wrote {', '.join(str(p) for p in run.files)}")
    return run


def command_line(main, iterations: int) -> None:
    """Run ``main`` with ``--iterations`` and ``--output-dir`` taken from the command line."""
    doc = sys.modules[main.__module__].__doc__ or ""
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0] if doc else None)
    parser.add_argument("--iterations", type=int, default=iterations)
    parser.add_argument("--output-dir", default=None, help="default: out/<example name>/")
    args = parser.parse_args()
    main(iterations=args.iterations, output_dir=args.output_dir)
