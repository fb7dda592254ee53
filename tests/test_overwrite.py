"""Always-on overwrite detection (beyond Warp, GH-1350/GH-1470): arrays changed between a recorded
launch that read them and ``backward()``.

Checks that true hazards are named (array, reading launch, overwriting launch with file:line),
that "error"/"off" work, that patterns whose gradients stay right (ping-pong with a linear
integrator, write-then-read, in-place kernels, fresh tapes per iteration) stay silent, and
the per-kernel facts behind it (which parameters' values the adjoint needs).
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import difftape as wp
from difftape._src.access import access_of, rule_reads
from difftape._src.errors import ArrayOverwriteError, ArrayOverwriteWarning
from difftape._src.ops import registry


@wp.kernel
def square_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    tid = wp.tid()
    y[tid] = x[tid] ** 2.0


@wp.kernel
def overwrite_kernel(z: wp.array(dtype=float), x: wp.array(dtype=float)):
    tid = wp.tid()
    x[tid] = z[tid]


@wp.kernel
def loss_kernel(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    tid = wp.tid()
    wp.atomic_add(loss, 0, x[tid])


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), f: wp.array(dtype=float),
              dt: float, x_out: wp.array(dtype=float), v_out: wp.array(dtype=float)):
    i = wp.tid()
    v1 = v[i] + f[i] * dt
    v_out[i] = v1
    x_out[i] = x[i] + v1 * dt


@wp.kernel
def spring_force(x: wp.array(dtype=float), f: wp.array(dtype=float)):
    i = wp.tid()
    f[i] = -x[i] * x[i] * x[i]


@wp.kernel
def square_in_place(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = a[i] * a[i]


@wp.kernel
def gather(x: wp.array(dtype=float), idx: wp.array(dtype=wp.int32), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[idx[i]]


@wp.kernel
def track_max(x: wp.array(dtype=float), m: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_max(m, 0, x[i])


@wp.kernel
def clipped(x: wp.array(dtype=float), c: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    if c[i] > 0.0:
        y[i] = x[i] * 3.0
    else:
        y[i] = x[i]


def f32(values) -> wp.array:
    return wp.array(np.asarray(values, np.float32), dtype=float, requires_grad=True)


def record_doc_example():
    """SPEC §2.6 doc example A: b = a², then a = c, then loss = Σb."""
    a = f32([1.0, 2.0, 3.0])
    b = wp.zeros_like(a)
    c = f32([-1.0, -2.0, -3.0])
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square_kernel, a.shape, inputs=[a], outputs=[b])
        line = inspect.currentframe().f_lineno
        wp.launch(overwrite_kernel, c.shape, inputs=[c], outputs=[a])
        wp.launch(loss_kernel, a.shape, inputs=[b, loss])
    return tape, a, c, loss, line


# --------------------------------------------------------------------------- true hazards


def test_doc_example_is_reported_by_default_naming_both_launches():
    tape, a, c, loss, line = record_doc_example()
    with pytest.warns(ArrayOverwriteWarning) as caught:
        tape.backward(loss)
    assert len(caught) == 1
    text = str(caught[0].message)
    assert text.startswith("Array 'a' was changed after a recorded launch read it")
    assert f"read by:    kernel 'square_kernel' (argument 'x') at {__file__}:{line - 1}" in text
    assert f"changed by: kernel 'overwrite_kernel' (argument 'x') at {__file__}:{line + 1}" \
        in text
    assert caught[0].filename == __file__  # points at the backward() call
    np.testing.assert_array_equal(a.grad.numpy(), [-2.0, -4.0, -6.0])  # Warp's (wrong) values


def test_error_mode_raises_before_any_adjoint_runs(monkeypatch):
    monkeypatch.setattr(wp.config, "overwrite_check", "error")
    tape, a, c, loss, _ = record_doc_example()
    with pytest.raises(ArrayOverwriteError, match="Array 'a' was changed") as info:
        tape.backward(loss)
    assert isinstance(info.value, RuntimeError)
    assert not a.grad.numpy().any() and not loss.grad.numpy().any()


def test_off_mode_is_silent(monkeypatch):
    monkeypatch.setattr(wp.config, "overwrite_check", "off")
    tape, a, c, loss, _ = record_doc_example()
    tape.backward(loss)  # filterwarnings=error turns any warning into a failure
    np.testing.assert_array_equal(a.grad.numpy(), [-2.0, -4.0, -6.0])


def test_bad_mode_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(wp.config, "overwrite_check", "loud")
    tape, _, _, loss, _ = record_doc_example()
    with pytest.raises(ValueError, match=r"overwrite_check must be one of \('warn', 'error', "):
        tape.backward(loss)


@pytest.mark.parametrize("how, writer", [
    (lambda a: a.zero_(), "zero_(), not recorded on this tape"),
    (lambda a: a.fill_(2.0), "fill_(), not recorded on this tape"),
    (lambda a: a.assign(np.ones(3, np.float32)), "a copy (wp.copy / clone / assign)"),
    (lambda a: a.__setitem__(0, 5.0), "item assignment, not recorded on this tape"),
])
def test_python_scope_writes_after_the_tape_are_named(how, writer):
    a, b = f32([1.0, 2.0, 3.0]), wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square_kernel, 3, inputs=[a], outputs=[b])
    how(a)
    with pytest.warns(ArrayOverwriteWarning, match="changed by: " + writer.replace("(", r"\(")
                      .replace(")", r"\)")):
        tape.backward(grads={b: wp.ones(3)})


def test_untaped_launch_is_named_by_kernel():
    a, b, c = f32([1.0, 2.0, 3.0]), wp.zeros(3, dtype=float), f32([0.0, 0.0, 0.0])
    tape = wp.Tape()
    with tape:
        wp.launch(square_kernel, 3, inputs=[a], outputs=[b])
    wp.launch(overwrite_kernel, 3, inputs=[c], outputs=[a])
    with pytest.warns(ArrayOverwriteWarning,
                      match="changed by: kernel 'overwrite_kernel', not recorded on this tape"):
        tape.backward(grads={b: wp.ones(3)})


def test_taped_copy_is_named_with_its_line():
    a, b, src = f32([1.0, 2.0, 3.0]), wp.zeros(3, dtype=float), f32([4.0, 5.0, 6.0])
    tape = wp.Tape()
    with tape:
        wp.launch(square_kernel, 3, inputs=[a], outputs=[b])
        line = inspect.currentframe().f_lineno + 1
        wp.copy(a, src)
    with pytest.warns(ArrayOverwriteWarning) as caught:
        tape.backward(grads={b: wp.ones(3)})
    assert f"changed by: a copy (wp.copy / clone / assign) at {__file__}:{line}" \
        in str(caught[0].message)


def test_write_to_parent_after_read_through_view_is_seen():
    base = wp.array(np.ones((2, 3), np.float32), dtype=float, requires_grad=True)
    out = wp.zeros(3, dtype=float)
    tape = wp.Tape()
    with tape:
        wp.launch(square_kernel, 3, inputs=[base[1]], outputs=[out])
    base.zero_()
    with pytest.warns(ArrayOverwriteWarning, match="Array 'base' was changed"):
        tape.backward(grads={out: wp.ones(3)})


def test_one_warning_per_array_counting_the_other_readers():
    a, b1, b2 = f32([1.0, 2.0]), wp.zeros(2, dtype=float), wp.zeros(2, dtype=float)
    tape = wp.Tape()
    with tape:
        wp.launch(square_kernel, 2, inputs=[a], outputs=[b1])
        wp.launch(square_kernel, 2, inputs=[a], outputs=[b2])
    a.fill_(0.0)
    with pytest.warns(ArrayOverwriteWarning) as caught:
        tape.backward(grads={b1: wp.ones(2), b2: wp.ones(2)})
    assert len(caught) == 1
    assert "(and 1 later recorded launch that read it)" in str(caught[0].message)


def test_optimizer_step_then_second_backward_on_same_tape_warns():
    x, y = f32([1.0, 2.0]), wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square_kernel, 2, inputs=[x], outputs=[y])
    tape.backward(grads={y: wp.ones(2)})
    x.assign(x.numpy() - 0.1 * x.grad.numpy())  # a step without re-recording
    with pytest.warns(ArrayOverwriteWarning, match="Array 'x' was changed"):
        tape.backward(grads={y: wp.ones(2)})


def test_nonlinear_ping_pong_warns_and_its_gradient_is_really_wrong():
    def run(ping_pong: bool):
        x0 = f32([0.5, 1.0])
        buffers = [x0, wp.zeros(2, dtype=float, requires_grad=True)]
        v0 = f32([0.0, 0.0])
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            x, v = x0, v0
            for step in range(4):
                f = wp.zeros(2, dtype=float, requires_grad=True)
                wp.launch(spring_force, 2, inputs=[x], outputs=[f])
                x_out = buffers[(step + 1) % 2] if ping_pong else \
                    wp.zeros(2, dtype=float, requires_grad=True)
                v_out = wp.zeros(2, dtype=float, requires_grad=True)
                wp.launch(integrate, 2, inputs=[x, v, f, 0.1], outputs=[x_out, v_out])
                x, v = x_out, v_out
            wp.launch(loss_kernel, 2, inputs=[x, loss])
        tape.backward(loss)
        return x0.grad.numpy().copy()

    exact = run(ping_pong=False)
    with pytest.warns(ArrayOverwriteWarning, match="read by:    kernel 'spring_force'"):
        corrupted = run(ping_pong=True)
    assert not np.allclose(exact, corrupted, rtol=1e-3)


def test_gather_indices_and_branch_conditions_are_needed():
    x, y = f32([1.0, 2.0, 3.0]), wp.zeros(3, dtype=float, requires_grad=True)
    idx = wp.array([2, 1, 0], dtype=wp.int32)
    c = f32([1.0, -1.0, 1.0])
    tape = wp.Tape()
    with tape:
        wp.launch(gather, 3, inputs=[x, idx], outputs=[y])
        wp.launch(clipped, 3, inputs=[y, c], outputs=[wp.zeros(3, dtype=float)])
    idx.zero_()
    c.fill_(1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tape.backward(grads={y: wp.ones(3)})
    texts = sorted(str(w.message).splitlines()[0] for w in caught)
    assert texts == ["Array 'c' was changed after a recorded launch read it, so backward() will "
                     "compute gradients from the new values and they will be wrong.",
                     "Array 'idx' was changed after a recorded launch read it, so backward() "
                     "will compute gradients from the new values and they will be wrong."]


# --------------------------------------------------------------------------- no false alarms


def test_linear_ping_pong_is_silent_and_exact():
    """x_{k+1} = x_k + v_k·dt in two alternating buffers: the adjoint never reads x's values."""
    def run(ping_pong: bool):
        x0, v0 = f32([1.0, 2.0]), f32([0.5, -0.5])
        xs = [x0, wp.zeros(2, dtype=float, requires_grad=True)]
        vs = [v0, wp.zeros(2, dtype=float, requires_grad=True)]
        f = f32([0.1, 0.2])
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for step in range(6):
                src, dst = step % 2, (step + 1) % 2
                if ping_pong:
                    outs = [xs[dst], vs[dst]]
                else:
                    outs = [wp.zeros(2, dtype=float, requires_grad=True) for _ in range(2)]
                wp.launch(integrate, 2, inputs=[xs[src], vs[src], f, 0.01], outputs=outs)
                if not ping_pong:
                    xs[dst], vs[dst] = outs
            wp.launch(loss_kernel, 2, inputs=[xs[0], loss])
        tape.backward(loss)
        return x0.grad.numpy().copy(), f.grad.numpy().copy()

    fresh = run(ping_pong=False)
    pinged = run(ping_pong=True)  # filterwarnings=error: a warning fails the test
    np.testing.assert_allclose(pinged[0], fresh[0])
    np.testing.assert_allclose(pinged[1], fresh[1])


def test_write_then_read_and_fresh_tape_per_iteration_are_silent():
    x = f32([1.0, 2.0, 3.0])
    y, z = wp.zeros_like(x), wp.zeros_like(x)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    for _ in range(3):
        tape = wp.Tape()
        with tape:
            loss.zero_()
            wp.launch(square_kernel, 3, inputs=[x], outputs=[y])  # write y, then read it
            wp.launch(square_kernel, 3, inputs=[y], outputs=[z])
            wp.launch(loss_kernel, 3, inputs=[z, loss])
        tape.backward(loss)
        x.assign(x.numpy() - 0.01 * x.grad.numpy())  # optimizer step after backward
        tape.zero()


def test_in_place_kernel_is_snapshotted_so_a_later_overwrite_is_harmless():
    a = f32([1.0, 2.0, 3.0])
    tape = wp.Tape()
    with tape:
        wp.launch(square_in_place, 3, inputs=[a])
    a.fill_(10.0)
    tape.backward(grads={a: wp.ones(3)})
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 4.0, 6.0])


def test_reset_forgets_the_recorded_counts():
    a, b = f32([1.0, 2.0]), wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square_kernel, 2, inputs=[a], outputs=[b])
    tape.reset()
    a.zero_()
    with tape:
        wp.launch(square_kernel, 2, inputs=[a], outputs=[b])
    tape.backward(grads={b: wp.ones(2)})
    assert tape._read_versions and all(rec in tape.launches for rec, _ in
                                       tape._read_versions.values())


def test_records_keep_warps_layout():
    a, b = f32([1.0]), wp.zeros(1, dtype=float)
    tape = wp.Tape()
    with tape:
        wp.launch(square_kernel, 1, inputs=[a], outputs=[b])
    record = tape.launches[0]
    assert type(record) is list and len(record) == 8 and set(record[7]) == {"caller"}


# --------------------------------------------------------------------------- facts


def names(kernel, indices) -> list[str]:
    return [kernel.ir.params[k].name for k in indices]


def test_value_reads_per_kernel():
    assert names(integrate, access_of(integrate).value_reads) == []
    assert names(square_kernel, access_of(square_kernel).value_reads) == ["x"]
    assert names(loss_kernel, access_of(loss_kernel).value_reads) == []
    assert names(gather, access_of(gather).value_reads) == ["idx"]
    assert names(clipped, access_of(clipped).value_reads) == ["c"]
    assert names(track_max, access_of(track_max).value_reads) == ["x", "m"]
    facts = access_of(square_in_place)
    assert names(square_in_place, facts.value_reads) == ["a"]
    assert names(square_in_place, facts.inplace) == ["a"]


@pytest.mark.parametrize("key, expected", [
    ("add", [(), ()]),
    ("sub", [(), ()]),
    ("mul", [(1,), (0,)]),
    ("div", [(1,), (0, 1)]),  # d/db reads ret = a/b
    ("sin", [(0,)]),
    ("min", [(0, 1), (0, 1)]),
])
def test_rule_reads_follows_each_contribution(key, expected):
    record = registry.lookup(key)[0]
    n = len(record.param_names)
    assert [rule_reads(record.adjoint, n, (k,)) for k in range(n)] == expected


def test_unreadable_rule_reads_everything():
    assert rule_reads(len, 2, (0,)) == (0, 1)
