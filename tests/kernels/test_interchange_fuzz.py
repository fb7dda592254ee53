"""Random kernels built around a loop, run interchanged (``codegen/interchange.py``) against the
plain per-thread code of debug mode: values and each thread's gradients bit for bit, the
gradients of values every thread reads up to summation order.

Each kernel's loop body is drawn from statements that exercise what the interchange has to
follow: carried locals, branches whose arms save unalike (nested too), ``break``, ``continue``
and ``return``, a ``return`` before the loop, a ``while`` loop, a loop inside the loop (in a
branch too), loops counted down, the loop in a branch, a second loop after it, builtins of a
few instructions and compiled ones, coefficients the loop's variables pick, a value every
thread reads before the loop, arrays read and written at the thread's own element, random draws
(a carried state), and one- and two-dimensional launches. The kernels are written to
a file and imported (kernels are parsed from their source)."""

import importlib.util
import random

import numpy as np
import pytest

import difftape as wp
from difftape._src.codegen.interchange import ADJOINT_STRIP
from tests.kernels.modes import debug_reference

# Loop-body statements; ``s``, ``a``, ``b`` are float64 locals, ``k`` the loop's variable.
STATEMENTS = [
    "s = s * wp.float64(0.9) + a * wp.float64(0.1)",
    "s = s + c[k % 3] * a",
    "a = a * wp.float64(0.95) + wp.sin(s) * wp.float64(0.05)",
    "b = wp.sqrt(wp.abs(b) + wp.float64(1.0))",
    "if s > a:\n    s = s - b * wp.float64(0.1)",
    "if s > wp.float64(0.5):\n    a = a * s\nelse:\n    b = b + s",
    "if a > wp.float64(0.0):\n    if s > wp.float64(1.0):\n        s = s * wp.float64(0.5)\n"
    "        b = b * a\n    else:\n        s = s + a\nelse:\n    a = a + wp.float64(0.25)",
    "if s > wp.float64(3.0):\n    break",
    "if b > wp.float64(2.5):\n    continue",
    "t = s * a\ns = s + t * wp.float64(0.1)",
    "s = wp.min(s, wp.float64(4.0)) + wp.exp(-b)",
    "if s > wp.float64(3.5):\n    y[i] = s * b\n    return",
]

# Statements of a loop inside the loop (``interchange.pieces``), ``j`` its variable.
INNER_STATEMENTS = [
    "s = s + c[j] * a * wp.float64(0.1)",
    "a = a * wp.float64(0.97) + wp.cos(s + wp.float64(j)) * wp.float64(0.02)",
    "if s > b:\n    s = s - c[j] * wp.float64(0.05)",
    "b = b + wp.float64(0.01) * s * c[(j + k) % 4]",
    "t = s * c[j]\nif t > wp.float64(0.2):\n    a = a + t * wp.float64(0.1)",
]

# Random draws: the state ``st`` is a carried uint32 local every draw advances.
DRAW_STATEMENTS = [
    "s = s + wp.float64(wp.randf(st)) * a",
    "if wp.randf(st) < 0.3:\n    continue",
    "a = a + wp.float64(wp.randn(st)) * wp.float64(0.05) * s",
    "if wp.randi(st, 0, 4) == 2:\n    b = b * wp.float64(0.9)",
    "v = wp.sample_unit_sphere(st)\ns = s + wp.float64(v[0]) * a",
]

# Statements updating the thread's own elements of the kernel's arrays in place.
IN_PLACE_STATEMENTS = [
    "y[i] = y[i] * wp.float64(0.5) + s * wp.float64(0.1)",
    "s = s + y[i] * wp.float64(0.2)",
    "x[i] = x[i] * wp.float64(0.9) + s * wp.float64(0.01)\na = a + x[i] * wp.float64(0.1)",
]

HEADER = """import difftape as wp

"""

KERNEL = """@wp.kernel
def {name}(x: wp.array(dtype=wp.float64), c: wp.array(dtype=wp.float64), n: int,
           y: wp.array(dtype=wp.float64)):
    {tid}
    a = x[i]
    b = c[3] + wp.float64(0.5)  # thread-invariant: its gradient goes to c alone
    s = wp.float64(0.25)
    st = wp.rand_init(11, i)
{loop}
    y[i] = s + a * b
"""


def _kernel_source(name: str, rng: random.Random, two_d: bool, width: int,
                   nest: bool = False, in_place: bool = False, draws: bool = False) -> str:
    body = [rng.choice(STATEMENTS) for _ in range(rng.randint(2, 5))]
    for _ in range(rng.randint(1, 2) if in_place else 0):
        body.insert(rng.randint(0, len(body)), rng.choice(IN_PLACE_STATEMENTS))
    for _ in range(rng.randint(1, 3) if draws else 0):
        body.insert(rng.randint(0, len(body)), rng.choice(DRAW_STATEMENTS))
    if nest:  # a loop inside, somewhere (after a break, continue or return it stays plain)
        inner = [rng.choice(INNER_STATEMENTS) for _ in range(rng.randint(1, 3))]
        bounds = rng.choice(["c.shape[0]", "n // 3", "n - 9"])
        head = ["for k in reversed(range(n)):" if rng.random() < 0.25 else "for k in range(n):"]
        if rng.random() < 0.25:  # in a while loop
            head = ["m = int(0)", "while m < n:", "    m = m + 1"]
            body = [stmt for stmt in body if "k %" not in stmt]
            inner = [stmt for stmt in inner if "k)" not in stmt] or [INNER_STATEMENTS[0]]
        counted = f"reversed(range({bounds}))" if rng.random() < 0.25 else f"range({bounds})"
        nested = [f"for j in {counted}:"] + [
            "    " + line for stmt in inner for line in stmt.split("\n")]
        if rng.random() < 0.3:  # in a branch of the loop
            nested = ["if a > wp.float64(0.1):"] + ["    " + line for line in nested]
        body.insert(rng.randint(0, len(body) // 2), "\n".join(nested))
    elif rng.random() < 0.25:  # a while loop with the same statements
        head = ["m = int(0)", "while m < n:", "    m = m + 1"]
        body = [stmt for stmt in body if "k %" not in stmt] or [STATEMENTS[0]]
    else:
        head = ["for k in range(n):"]
    lines = head + ["    " + line for stmt in body for line in stmt.split("\n")]
    if nest and rng.random() < 0.3:  # a second loop after it
        lines += ["for j in range(n // 3):", "    s = s * wp.float64(0.8) + c[j] * b",
                  "    if s > a:", "        b = b + s * wp.float64(0.1)"]
    if nest and rng.random() < 0.4:  # the loop in a branch some threads take
        lines = ["if a > wp.float64(-0.4):", "    b = b * wp.float64(1.5)"] + [
            "    " + line for line in lines] + ["    s = s - b"]
    tid = (f"r, q = wp.tid()\n    i = r * {width} + q" if two_d else "i = wp.tid()")
    if rng.random() < 0.3:  # an early return: the rest of the body under its flag
        tid += "\n    if i % 5 == 3:\n        return"
    return KERNEL.format(name=name, tid=tid, loop="\n".join("    " + line for line in lines))


# Kernels: the first PLAIN with the loop's statements only, up to NESTED with a loop inside
# it, up to IN_PLACE with arrays read and written in place, the rest with random draws.
PLAIN, NESTED, IN_PLACE, COUNT = 14, 22, 28, 33


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    rng = random.Random(20261205)
    cases = []
    source = HEADER
    nests = random.Random(20261206)
    in_place = random.Random(20261207)
    draws = random.Random(20261208)
    for index in range(COUNT):
        two_d = index % 3 == 2
        width = ADJOINT_STRIP + 5
        name = f"fuzzed_{index}"
        nest, updates, drawn = (PLAIN <= index < NESTED, NESTED <= index < IN_PLACE,
                                index >= IN_PLACE)
        source += _kernel_source(
            name, draws if drawn else in_place if updates else nests if nest else rng, two_d,
            width, nest or (drawn and index % 2 == 0), updates, drawn) + "\n\n"
        cases.append((name, two_d, width))
    path = tmp_path_factory.mktemp("fuzz") / "fuzzed_kernels.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("fuzzed_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [(getattr(module, name), two_d, width) for name, two_d, width in cases]


def test_most_nests_are_interchanged(kernels):
    """A third or more of the kernels with a loop inside the loop run both interchanged,
    forward and backward (the others have it after an exit, or a loop three deep, or a second
    loop after one holding a loop)."""
    both = 0
    for kernel, two_d, _ in kernels[PLAIN:NESTED]:
        source = kernel.source(dim=2 if two_d else 1)
        forward, adjoint = source.split("_adjoint(")
        both += "for rt_inner" in forward and "rt_trip_it_" in adjoint
    assert both >= (NESTED - PLAIN) // 3


def test_in_place_updates_are_interchanged(kernels):
    """The one-dimensional kernels updating their own elements run interchanged both ways."""
    for kernel, two_d, _ in kernels[NESTED:IN_PLACE]:
        forward, adjoint = kernel.source(dim=2 if two_d else 1).split("_adjoint(")
        if not two_d:  # (two-dimensional ones compute i: not provably the thread's own)
            assert "rt_carry_" in forward and "rt_carry_" in adjoint, kernel.key


@pytest.mark.parametrize("index", range(COUNT))
def test_interchanged_kernels_match_the_plain_code(kernels, threading, index):
    kernel, two_d, width = kernels[index]
    threading("serial")
    dim = (3, width) if two_d else 2 * ADJOINT_STRIP + 7
    size = 3 * width if two_d else dim
    rng = np.random.default_rng(index)
    x0 = rng.uniform(-1.0, 1.0, size)
    c0 = rng.uniform(-1.0, 1.0, 4)
    n = 9 + index % 5

    def run():
        x = wp.array(x0, dtype=wp.float64, requires_grad=True)
        c = wp.array(c0, dtype=wp.float64, requires_grad=True)
        y = wp.zeros(size, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, dim, inputs=[x, c, n], outputs=[y])
        tape.backward(grads={y: wp.array(np.linspace(0.5, 1.5, size), dtype=wp.float64)})
        return y.numpy(), x.grad.numpy(), c.grad.numpy()

    (y, gx, gc), (y_ref, gx_ref, gc_ref) = run(), debug_reference(run)
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(gx, gx_ref)
    np.testing.assert_allclose(gc, gc_ref, rtol=1e-9, atol=1e-9)
    assert np.any(gc != 0.0)  # c[3] is read by every thread before the loop
