"""Notebook display of a Tape: SVG through GraphViz ``dot`` when it exists, else markdown/text."""

import shutil

import numpy as np
import pytest

import difftape as wp


@wp.kernel
def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel
def accumulate(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


def recorded_tape():
    x = wp.array(np.ones(3), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(double, dim=3, inputs=[x], outputs=[y])
        wp.launch(accumulate, dim=3, inputs=[y], outputs=[loss])
    tape.record_func(lambda: None, [x])
    return tape


def test_repr_is_one_line_summary():
    text = repr(recorded_tape())
    assert text.startswith("<difftape.Tape: 2 launches (double, accumulate), 1 callback")
    assert "\n" not in text
    assert repr(wp.Tape()) == "<difftape.Tape: 0 launches, 0 gradient buffers>"


def test_without_dot_svg_is_none_and_markdown_lists_records(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    tape = recorded_tape()
    assert tape._repr_svg_() is None
    md = tape._repr_markdown_()
    assert "| 0 | `double` | (3,) | x | y |" in md
    assert "| 1 | `accumulate` | (3,) | y | loss |" in md
    assert "| 2 | callback" in md
    assert "(nothing recorded)" in wp.Tape()._repr_markdown_()


def test_with_dot_renders_svg(monkeypatch, tmp_path):
    if shutil.which("dot") is None:  # a stand-in `dot` that prints a fixed SVG
        fake = tmp_path / "dot"
        fake.write_text("#!/bin/sh\ncat > /dev/null\necho '<svg>double accumulate</svg>'\n")
        fake.chmod(0o755)
        monkeypatch.setattr(shutil, "which", lambda name: str(fake))
    tape = recorded_tape()
    svg = tape._repr_svg_()
    assert svg is not None and "<svg" in svg and "double" in svg and "accumulate" in svg
    assert tape._repr_markdown_() is None  # the notebook shows the SVG instead


def test_failing_dot_falls_back(monkeypatch, tmp_path):
    broken = tmp_path / "dot"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setattr(shutil, "which", lambda name: str(broken))
    assert recorded_tape()._repr_svg_() is None


@pytest.mark.parametrize("count", [45])
def test_long_tapes_are_truncated(count, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    x = wp.array(np.ones(2), dtype=float, requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for _ in range(count):
            wp.launch(double, dim=2, inputs=[x], outputs=[y])
    assert f"{count - 40} more records" in tape._repr_markdown_()
