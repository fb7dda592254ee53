"""``wp.config.verify_autograd_array_access`` (SPEC §3, §6 item 41): Warp's read flags and texts.

Ported from Warp 1.19's test_overwrite.py: inter-kernel warnings at launch, the build-time
intra-kernel warning, flag propagation through funcs, views and copies, and flag clearing by
``backward()``, ``reset()``, ``zero_()`` and ``fill_()``.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import difftape as wp
from difftape._src.access import access_of

INTER = ("is being written to but has already been read from in a previous launch. This may "
         "corrupt gradient computation in the backward pass.")
INTRA = ("is being written to after it has been read from within the same kernel. This may "
         "corrupt gradient computation in the backward pass.")


@pytest.fixture(autouse=True)
def verify(monkeypatch):
    monkeypatch.setattr(wp.config, "verify_autograd_array_access", True)
    monkeypatch.setattr(wp.config, "overwrite_check", "off")  # only Warp's check here


def recorded(fn) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught]


@wp.kernel
def square_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    tid = wp.tid()
    y[tid] = x[tid] * x[tid]




@wp.kernel
def overwrite_kernel(z: wp.array(dtype=float), x: wp.array(dtype=float)):
    tid = wp.tid()
    x[tid] = z[tid]


OVERWRITE_LINE = overwrite_kernel.func.__code__.co_firstlineno  # the decorator line, as Warp


@wp.kernel
def write_kernel(a: wp.array(dtype=float), d: wp.array(dtype=float)):
    tid = wp.tid()
    a[tid] = d[tid]


@wp.kernel
def writeread_kernel(a: wp.array(dtype=float), b: wp.array(dtype=float),
                     c: wp.array(dtype=float)):
    tid = wp.tid()
    a[tid] = c[tid] * c[tid]
    b[tid] = a[tid]


@wp.func
def read_func(a: wp.array(dtype=float), idx: int):
    return a[idx]


@wp.func
def write_func(c: wp.array(dtype=float), idx: int):
    c[idx] = 1.0


@wp.kernel
def func_kernel(a: wp.array(dtype=float), b: wp.array(dtype=float), c: wp.array(dtype=float),
                d: wp.array(dtype=float)):
    tid = wp.tid()
    x = read_func(a, tid) + read_func(b, tid)
    write_func(c, tid)
    d[tid] = x


@wp.kernel
def inplace_b(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    tid = wp.tid()
    x[tid] += y[tid]


@wp.kernel
def atomics(a: wp.array(dtype=wp.int32), b: wp.array(dtype=wp.int32), c: wp.array(dtype=wp.int32),
            d: wp.array(dtype=wp.int32)):
    i = wp.tid()
    wp.atomic_add(a, i, 1)
    wp.atomic_sub(b, i, 1)
    wp.atomic_min(c, i, 1)
    wp.atomic_max(d, i, 3)


def ramp(n=3):
    return wp.array(np.arange(1.0, n + 1), dtype=float, requires_grad=True)


# --------------------------------------------------------------------------- inter-kernel


def test_doc_example_gives_exactly_one_warning_naming_x_of_overwrite_kernel():
    a = ramp()
    b = wp.zeros_like(a)
    c = wp.array(np.array([-1.0, -2.0, -3.0]), dtype=float, requires_grad=True)
    tape = wp.Tape()

    def forward():
        with tape:
            wp.launch(square_kernel, a.shape, inputs=[a], outputs=[b])
            wp.launch(overwrite_kernel, c.shape, inputs=[c], outputs=[a])

    texts = recorded(forward)
    assert texts == [f"Array [-1. -2. -3.] passed to argument x in kernel overwrite_kernel at "
                     f"{__file__}:{OVERWRITE_LINE} {INTER}"]
    tape.backward(grads={b: wp.ones(3)})
    assert not a._is_read and not b._is_read and not c._is_read


@pytest.mark.parametrize("sequence", ["write-read-write", "read-writeread", "writeread-write"])
def test_inter_kernel_sequences_warn(sequence):
    a, b, c, d = ramp(5), wp.zeros(5), wp.zeros(5), wp.zeros(5)

    def forward():
        with wp.Tape():
            if sequence == "write-read-write":
                wp.launch(square_kernel, 5, inputs=[a], outputs=[b])
                wp.launch(square_kernel, 5, inputs=[b], outputs=[c])
                wp.launch(overwrite_kernel, 5, inputs=[d], outputs=[b])
            elif sequence == "read-writeread":
                wp.launch(write_kernel, 5, inputs=[b, a])
                wp.launch(writeread_kernel, 5, inputs=[a, d, c])
            else:
                wp.launch(writeread_kernel, 5, inputs=[a, b, c])
                wp.launch(write_kernel, 5, inputs=[a, d])

    assert any(INTER in t for t in recorded(forward))


def test_no_tape_means_no_marks():
    a, b = ramp(), wp.zeros(3)
    wp.launch(square_kernel, 3, inputs=[a], outputs=[b])
    assert not a._is_read


def test_flags_through_funcs_views_and_in_place_operators():
    a, b, c, d = (wp.zeros(5, dtype=float, requires_grad=True) for _ in range(4))
    with wp.Tape():
        wp.launch(func_kernel, 5, inputs=[a, b, c, d])
    assert (a._is_read, b._is_read, c._is_read, d._is_read) == (True, True, False, False)

    x, y = wp.zeros(3, requires_grad=True), wp.zeros(3, requires_grad=True)
    with wp.Tape():
        wp.launch(inplace_b, 3, inputs=[x, y])
    assert (x._is_read, y._is_read) == (False, True)  # x[i] += v is a write only

    base = wp.zeros((3, 3), dtype=float, requires_grad=True)
    view = base.view(wp.int32)
    flat = view.flatten()
    assert not view._is_read and not flat._is_read
    flat.mark_read()
    assert base._is_read


def test_atomics_are_writes_not_reads():
    facts = access_of(atomics)
    assert facts.is_write == (True, True, True, True)
    assert facts.is_read == (False, False, False, False)


# --------------------------------------------------------------------------- build time


def test_read_then_write_in_one_kernel_warns_at_first_launch_with_line():
    @wp.kernel
    def readwrite_kernel(a: wp.array(dtype=float), b: wp.array(dtype=float)):
        tid = wp.tid()
        b[tid] = a[tid] * a[tid]
        a[tid] = 1.0

    write_line = inspect.getsourcelines(readwrite_kernel.func)[1] + 4
    a, b = ramp(5), wp.zeros(5)
    texts = recorded(lambda: wp.launch(readwrite_kernel, 5, inputs=[a, b]))
    assert texts == [f"Array passed to argument a in kernel readwrite_kernel at "
                     f"{__file__}:{write_line} {INTRA}"]
    assert recorded(lambda: wp.launch(readwrite_kernel, 5, inputs=[a, b])) == []  # once


def test_in_place_operator_after_read_and_write_in_func_warn():
    @wp.kernel
    def inplace_c(x: wp.array(dtype=float)):
        tid = wp.tid()
        x[tid] = 1.0
        a = x[tid]
        x[tid] += a

    @wp.func
    def write_func_2(x: wp.array(dtype=float), idx: int):
        x[idx] = 2.0

    @wp.kernel
    def read_kernel_func_write(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        tid = wp.tid()
        a = x[tid]
        write_func_2(x, tid)
        y[tid] = a

    call_line = inspect.getsourcelines(read_kernel_func_write.func)[1] + 4
    x, y = wp.zeros(3, requires_grad=True), wp.zeros(3, requires_grad=True)
    assert any(INTRA in t for t in recorded(lambda: wp.launch(inplace_c, 3, inputs=[x])))
    texts = recorded(lambda: wp.launch(read_kernel_func_write, 3, inputs=[x, y]))
    assert texts == [f"Array passed to argument x in kernel read_kernel_func_write at "
                     f"{__file__}:{call_line} {INTRA}"]


def test_nothing_at_build_time_when_the_flag_is_off(monkeypatch):
    monkeypatch.setattr(wp.config, "verify_autograd_array_access", False)

    @wp.kernel
    def readwrite_quiet(a: wp.array(dtype=float)):
        tid = wp.tid()
        a[tid] = a[tid] * 2.0

    wp.launch(readwrite_quiet, 3, inputs=[ramp()])  # filterwarnings=error


# --------------------------------------------------------------------------- flag lifetime


def test_backward_and_reset_clear_flags():
    a, b = ramp(), wp.zeros(3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(write_kernel, 3, inputs=[b, a])
    assert a._is_read and not b._is_read
    tape.backward(grads={b: wp.ones(3)})
    assert not a._is_read and not b._is_read
    tape2 = wp.Tape()
    with tape2:
        wp.launch(write_kernel, 3, inputs=[b, a])
    assert a._is_read
    tape2.reset()
    assert not a._is_read


def test_zero_and_fill_clear_the_flag():
    a = ramp()
    a.mark_read()
    a.zero_()
    assert not a._is_read
    a.mark_read()
    a.fill_(1.0)
    assert not a._is_read


def test_copy_marks_source_read_and_warns_at_the_copy_line():
    a, b = ramp(), wp.zeros(3, requires_grad=True)
    with wp.Tape():
        wp.copy(b, a)
    assert a._is_read and not b._is_read

    a, b = ramp(), wp.zeros(3, requires_grad=True)

    def forward():
        with wp.Tape():
            wp.launch(square_kernel, 3, inputs=[a], outputs=[b])
            a.assign(b)

    line = inspect.getsourcelines(forward)[1] + 3
    texts = recorded(forward)
    assert any(f"is being written to by an array copy at {__file__}:{line} but has already "
               "been read from in a previous launch" in t for t in texts)


def test_no_false_positives_in_a_training_loop_and_through_views():
    x = ramp()
    y, z = wp.zeros_like(x), wp.zeros_like(x)

    def loop():
        for _ in range(2):
            tape = wp.Tape()
            with tape:
                wp.launch(square_kernel, 3, inputs=(x,), outputs=[y])
                wp.launch(square_kernel, 3, inputs=[y], outputs=[z])
                wp.copy(z, y)
            tape.backward(grads={z: wp.ones_like(z)})
            tape.zero()

        tape = wp.Tape()
        with tape:
            wp.launch(square_kernel, 2, inputs=[x[:2]], outputs=[y[:2]])
        tape.backward()
        with wp.Tape():
            wp.launch(overwrite_kernel, 3, inputs=[wp.zeros(3)], outputs=[x])

    assert not any("has already been read" in t for t in recorded(loop))


def test_pending_tape_still_warns_and_another_backward_clears_shared_flags():
    a, b, c = ramp(), wp.zeros(3, requires_grad=True), wp.zeros(3, requires_grad=True)
    tape1 = wp.Tape()
    with tape1:
        wp.launch(square_kernel, 3, inputs=[a], outputs=[b])

    def overwrite():
        with wp.Tape():
            wp.launch(overwrite_kernel, 3, inputs=[wp.zeros(3)], outputs=[a])

    assert any("has already been read" in t for t in recorded(overwrite))

    tape2 = wp.Tape()
    with tape2:
        wp.launch(square_kernel, 3, inputs=[a], outputs=[c])
    tape1.backward(grads={b: wp.ones(3)})  # clears a's shared flag: tape2 loses protection
    assert not any("has already been read" in t for t in recorded(overwrite))


def test_log_level_above_warning_silences(monkeypatch):
    monkeypatch.setattr(wp.config, "log_level", wp.LOG_ERROR)
    a, b = ramp(), wp.zeros(3)
    with wp.Tape():
        wp.launch(square_kernel, 3, inputs=[a], outputs=[b])
        wp.launch(overwrite_kernel, 3, inputs=[wp.zeros(3)], outputs=[a])


def test_tape_private_helpers_exist_for_warp_tests():
    tape = wp.Tape()
    a, b = ramp(), wp.zeros(3)
    tape._check_kernel_array_access(square_kernel, [a, b])
    assert a._is_read and not b._is_read
    with tape:
        wp.launch(square_kernel, 3, inputs=[a], outputs=[b])
    tape._reset_array_read_flags()
    assert not a._is_read
