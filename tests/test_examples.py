"""The examples optimize for real: each short run lowers its loss by the factor stated here and
writes its loss curve (PNG) and tape graph (SVG when GraphViz's ``dot`` is installed, else dot
text) into the folder it is given.

The runs are shorter than the examples' defaults, so the stated factors are floors with room to
spare, not the examples' final results.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# example module, iterations for the test, how many times lower the last loss must be
EXAMPLES = [
    ("projectile", 80, 1e3),
    ("bounce", 72, 1e2),
    ("chain_throw", 60, 1e2),
    ("heat_inverse", 60, 50.0),
    ("arm_ik", 100, 1e3),
]
EXTRA_PLOTS = {"bounce": ["trajectory.png"], "chain_throw": ["flight.png"],
               "heat_inverse": ["fields.png"], "arm_ik": ["arms.png"]}


def check_outputs(folder: Path, extra_plots: list[str]) -> None:
    for name in ["loss.png", *extra_plots]:
        assert (folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    if shutil.which("dot"):
        assert (folder / "tape.svg").read_text().lstrip().startswith("<?xml")
    else:
        assert (folder / "tape.dot").read_text().startswith("digraph")


@pytest.mark.parametrize("name, iterations, factor", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_example_lowers_its_loss_and_writes_its_plots(name, iterations, factor, tmp_path,
                                                      capsys):
    example = importlib.import_module(f"examples.{name}")
    run = example.main(iterations=iterations, output_dir=tmp_path)
    assert len(run.losses) == iterations
    assert run.losses[-1] * factor < run.losses[0], f"{name}: only {run.reduction:.3g}x lower"
    check_outputs(tmp_path, EXTRA_PLOTS.get(name, []))
    out = capsys.readouterr().out
    assert f"x lower) in {iterations} iterations" in out and f"wrote {tmp_path}" in out


def test_without_graphviz_the_graph_is_written_as_dot_text(tmp_path, monkeypatch):
    from examples import _reporting, projectile

    monkeypatch.setattr(_reporting.shutil, "which", lambda name: None)
    run = projectile.main(iterations=2, output_dir=tmp_path)
    assert (tmp_path / "tape.dot").read_text().startswith("digraph")
    assert not (tmp_path / "tape.svg").exists() and tmp_path / "tape.dot" in run.files


SCRIPT_HELP = """
import runpy, sys
for path in sys.argv[1:]:
    sys.argv = [path, "--help"]
    sys.path[0] = path.rsplit("/", 1)[0]  # as `python examples/<name>.py` would set it
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as stop:
        assert stop.code == 0, (path, stop.code)
"""


def test_examples_start_as_scripts_with_their_command_line(tmp_path):
    # --help stops before any kernel compiles: this checks the script-mode imports (no
    # `examples` package on the path) and the options, for every example in one process.
    paths = [str(ROOT / "examples" / f"{e[0]}.py") for e in EXAMPLES]
    result = subprocess.run([sys.executable, "-c", SCRIPT_HELP, *paths], capture_output=True,
                            text=True, cwd=tmp_path, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    for name, _, _ in EXAMPLES:
        assert f"usage: {name}.py [-h] [--iterations ITERATIONS]" in result.stdout
    assert result.stdout.count("default: out/<example name>/") == len(EXAMPLES)
