"""Values the adjoint's replay overwrites outside loops are kept in locals of their own
(``saved_<n>``), values overwritten inside loops on the per-thread stack (``codegen/forward.py``).
Each restore must take its own save, through branches and around loops: checked against finite
differences."""

import re

import numpy as np

import difftape as wp
from difftape._src.backends import cpu_target
from tests.fdcheck import check_tape


@wp.kernel
def straight(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = x[i]
    a = wp.sin(a) * a
    a = a * a + x[i]
    b = a * 2.0
    a = wp.exp(-a) + b
    y[i] = a * b


@wp.kernel
def branches_and_loops(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = x[i]
    a = a * a + 0.5            # saved outside loops
    if x[i] > 0.0:
        a = wp.sin(a) * a      # saved in the if branch
        a = a * x[i]
    else:
        a = wp.cos(a) + a      # saved in the else branch
    for k in range(n):
        a = a * 0.9 + wp.sin(a) * x[i]   # saved on the stack, every iteration
    a = a * a                  # saved outside loops again
    if a > 1.0:
        a = wp.sqrt(a)
    y[i] = a


def _adjoint(kernel) -> str:
    return kernel.source().split("def " + kernel.key + "_adjoint")[1]


def _inputs(n: int = 16) -> dict:
    return {"x": np.random.default_rng(5).uniform(-1.5, 1.5, n)}


def test_straight_line_code_uses_no_stack():
    check_tape(lambda a: wp.launch(straight, dim=16, inputs=[a["x"], a["y"]]), _inputs(),
               {"y": np.zeros(16)}, {"x": wp.float64, "y": wp.float64})
    adjoint = _adjoint(straight)
    assert "fstack" not in adjoint and "ftop" not in adjoint
    saves = re.findall(r"(saved_\d+) = a\b", adjoint)
    assert len(saves) == 4  # one per assignment of a (the first saves its initial zero)
    for saved in saves:
        assert len(re.findall(rf"\ba = {saved}\b", adjoint)) == 1


def test_saves_pair_with_restores_through_branches_and_loops(monkeypatch):
    # the plain adjoint's saves: where the loop of sines is not interchanged (``cpu_target``)
    monkeypatch.setattr(cpu_target, "BUILTIN_LOOPS_STAY_PLAIN", True)
    check_tape(lambda a: wp.launch(branches_and_loops, dim=16, inputs=[a["x"], 3, a["y"]]),
               _inputs(), {"y": np.zeros(16)}, {"x": wp.float64, "y": wp.float64})
    adjoint = _adjoint(branches_and_loops)
    assert "fstack[ftop] = a; ftop += 1" in adjoint  # inside the loop
    assert re.search(r"saved_\d+ = a\b", adjoint)  # outside it
