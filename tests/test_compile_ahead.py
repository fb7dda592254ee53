"""A kernel's adjoint compiled in a forked child while its forward compiles (compile_ahead.py):
the parent then loads it from the disk cache; whatever the child does, gradients are the same and
the parent compiles what the child did not."""

import os
import sys
import textwrap

import numpy as np
import pytest

import difftape as wp
from difftape._src.launch import run_adjoint
from tests.fresh_process import run_fresh

forking = pytest.mark.skipif(
    sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2,
    reason="compiling ahead needs Linux and two cores")

SCRIPT = """
    import os, sys, time
    import numpy as np
    import difftape as wp
    from difftape._src import compile_ahead

    wp.config.compile_ahead = {ahead}
    {setup}

    @wp.kernel
    def spin(q: wp.array(dtype=float), x: wp.array(dtype=wp.vec3), y: wp.array(dtype=wp.vec3),
             loss: wp.array(dtype=float)):
        i = wp.tid()
        r = wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), q[i])
        p = wp.quat_rotate(r, x[i])
        y[i] = p
        wp.atomic_add(loss, 0, wp.dot(p, p) * q[i])

    n = 5
    q = wp.array(np.linspace(0.1, 1.0, n).astype(np.float32), requires_grad=True)
    x = wp.array(np.arange(3 * n, dtype=np.float32).reshape(n, 3), dtype=wp.vec3,
                 requires_grad=True)
    y = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(spin, n, inputs=[q, x], outputs=[y, loss])
    children = len(compile_ahead.pending)
    tape.backward(loss=loss)
    hits = {{}}
    for program in spin._built.values():
        for fn in (program.forward, program.adjoint):
            if fn is not None:
                hits[fn.__name__.split("_")[-1]] = sum(fn.stats.cache_hits.values())
    print("children", children, "forward", hits["forward"], "adjoint", hits["adjoint"],
          "grad", ",".join("%.6g" % v for v in np.concatenate([q.grad.numpy(),
                                                              x.grad.numpy().ravel()])))
"""


def _run(tmp_path, ahead: bool, setup: str = "") -> dict:
    tmp_path.mkdir(exist_ok=True)
    words = run_fresh(tmp_path, textwrap.dedent(SCRIPT.format(ahead=ahead, setup=setup)),
                      compile_ahead=True)
    return dict(zip(words[::2], words[1::2]))


def _expected_gradient() -> str:
    q = np.linspace(0.1, 1.0, 5)
    x = np.arange(15.0).reshape(5, 3)
    sq = np.sum(x * x, axis=1)  # a rotation keeps |x|^2: loss = sum q |x|^2
    return ",".join("%.6g" % v for v in np.concatenate([sq, (2 * q[:, None] * x).ravel()]))


def _same_gradient(found: str) -> bool:
    return np.allclose(np.array(found.split(","), float),
                       np.array(_expected_gradient().split(","), float), rtol=1e-5)


@forking
@pytest.mark.parametrize("mode", ["auto", "replicate", "parallel"])
def test_a_forked_child_compiles_the_adjoint_into_the_cache(tmp_path, mode):
    """Serial launches ("auto" at this size), and launches in two chunks with per-chunk copies
    of the adjoint arrays or with atomics: the child names the signature the adjoint runs with."""
    first = _run(tmp_path / "cold", ahead=True, setup=f"wp.config.cpu_parallel = {mode!r}")
    assert first["children"] == "1"
    assert first["forward"] == "0", "the parent compiles its forward"
    assert first["adjoint"] == "1", "the parent loads the adjoint the child compiled"
    assert _same_gradient(first["grad"]), first
    off = _run(tmp_path / "off", ahead=False, setup=f"wp.config.cpu_parallel = {mode!r}")
    assert (off["children"], off["forward"], off["adjoint"]) == ("0", "0", "0")
    assert off["grad"] == first["grad"]


@forking
def test_a_warm_cache_forks_no_child(tmp_path):
    _run(tmp_path, ahead=True)
    again = _run(tmp_path, ahead=True)  # the index knows the kernel: no fork
    assert (again["children"], again["forward"], again["adjoint"]) == ("0", "1", "1")
    assert _same_gradient(again["grad"])


# What goes wrong, as script lines, and whether a child is forked at all.
MISHAPS = {
    "child dies while compiling": ("""
        def die(kernel, dims, args, tape, write_end):
            os.write(write_end, compile_ahead._COMPILING)
            os._exit(3)
        compile_ahead._compile_in_child = die
    """, "1"),
    "child stuck (no CPU used)": ("""
        def stuck(kernel, dims, args, tape, write_end):
            os.write(write_end, compile_ahead._COMPILING)
            time.sleep(600)
        compile_ahead._compile_in_child = stuck
        compile_ahead._STALL_S = 0.3
    """, "1"),
    "another thread runs: no fork": ("""
        import threading
        release = threading.Event()
        threading.Thread(target=release.wait, daemon=True).start()
    """, "0"),
}


@forking
@pytest.mark.parametrize("mishap", list(MISHAPS))
def test_the_parent_compiles_what_no_child_did(tmp_path, mishap):
    lines, children = MISHAPS[mishap]
    found = _run(tmp_path, ahead=True, setup=textwrap.indent(textwrap.dedent(lines), " " * 4))
    assert (found["children"], found["adjoint"]) == (children, "0")
    assert _same_gradient(found["grad"])


@wp.kernel
def _scale(x: wp.array(dtype=float), c: float, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = c * x[i] * x[i]


@pytest.mark.parametrize("contiguous", [True, False])
def test_compile_only_names_the_signature_the_adjoint_runs_with(contiguous, monkeypatch):
    monkeypatch.setattr(wp.config, "compile_ahead", False)  # no fork of the test process
    base = wp.array(np.arange(8, dtype=np.float32), requires_grad=True)
    x = base if contiguous else base[::2]
    y = wp.zeros(x.shape[0], dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(_scale, x.shape[0], inputs=[x, 0.5], outputs=[y])
    args = [x, 0.5, y]
    adjoints = [tape.get_adjoint(a) for a in args]
    y.grad.fill_(1.0)
    dispatcher, signature = run_adjoint(_scale, (x.shape[0],), args, adjoints, checked=True,
                                        compile_only=True)
    assert not x.grad.numpy().any() and y.grad.numpy().all(), "compile_only runs nothing"
    assert tuple(signature) not in dispatcher.overloads
    tape.backward()
    assert tuple(signature) in dispatcher.overloads
    assert np.allclose(x.grad.numpy(), x.numpy())


MANY_THREADS = """
    import numba
    import numpy as np
    import difftape as wp
    from difftape._src import compile_ahead, launch

    launch.numba.get_num_threads = lambda: 8  # the fork keeps it: the child sees 8 too
    wp.config.parallel_threshold = 100

    @wp.kernel
    def gather(x: wp.array(dtype=float), idx: wp.array(dtype=wp.int32), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[idx[i]] * x[idx[i]]

    n = 400
    x = wp.array(np.linspace(0.0, 1.0, 100_000).astype(np.float32), requires_grad=True)
    idx = wp.array((np.arange(n) * 7) % 1000, dtype=wp.int32)
    y = wp.zeros(n, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(gather, n, inputs=[x, idx], outputs=[y])
    children = len(compile_ahead.pending)
    for _ in range(2):  # threaded (atomics: the copies of x.grad would not fit), then serially
        tape.backward(grads={y: wp.ones(n, dtype=float)})
    hits = sorted(sum(p.adjoint.stats.cache_hits.values()) for p in gather._built.values()
                  if p.adjoint is not None and p.adjoint.signatures)
    print("children", children, "adjoints", len(hits), "loaded", sum(h > 0 for h in hits))
"""


@forking
def test_a_child_compiles_both_ways_auto_times_an_adjoint_on_many_threads(tmp_path):
    words = run_fresh(tmp_path, textwrap.dedent(MANY_THREADS), compile_ahead=True)
    assert words == ["children", "1", "adjoints", "2", "loaded", "2"]
