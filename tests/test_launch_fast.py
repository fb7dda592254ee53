"""The generated fast paths of the launcher (``launch_fast.py``) run the common launch exactly as
the general path does, and decline, changing nothing, whatever they do not handle."""

import marshal

import numpy as np
import pytest

import difftape as wp
from difftape._src import cache_files, launch, launch_fast, thread_choice


@wp.kernel
def spring(x: wp.array(dtype=wp.vec3), idx: wp.array(dtype=wp.int32), k: float,
           steps: wp.int32, mask: wp.uint8, on: wp.bool, f: wp.array(dtype=wp.vec3),
           energy: wp.array(dtype=float)):
    s = wp.tid()
    i = idx[s]
    d = x[i] - x[s]
    scale = k * float(steps + wp.int32(mask))
    if on:
        scale = scale * 2.0
    wp.atomic_add(f, i, scale * d)  # a scatter: the serial program takes a replica view of f
    wp.atomic_sub(f, s, scale * d)
    wp.atomic_add(energy, 0, scale * wp.dot(d, d))


@wp.kernel
def grid(u: wp.array2d(dtype=float), c: float, v: wp.array2d(dtype=float)):
    i, j = wp.tid()
    v[i, j] = c * u[i, j] * u[i, j]


@wp.kernel
def flat(u: wp.array(dtype=float), v: wp.array(dtype=float)):
    i = wp.tid()  # a flat index, whatever the launch's rank
    v[i] = u[i] * u[i]


class Spy:
    """Counts what a plan's fast paths answer: [ran, declined] per direction."""

    def __init__(self, kernel, monkeypatch, enabled=True):
        plan = launch.plan_of(kernel)
        self.counts = {"forward": [0, 0], "adjoint": [0, 0]}
        for direction in self.counts:
            fast = getattr(plan, f"fast_{direction}")
            assert fast is not None
            monkeypatch.setattr(plan, f"fast_{direction}",
                                self._counting(fast, self.counts[direction]) if enabled else None)

    @staticmethod
    def _counting(fast, count):
        def counted(*args):
            ran = fast(*args)
            count[0 if ran else 1] += 1
            return ran
        return counted


def _spring_run(n=64):
    rng = np.random.default_rng(3)
    x = wp.array(rng.standard_normal((n, 3)), dtype=wp.vec3, requires_grad=True)
    idx = wp.array(rng.integers(0, n, n).astype(np.int32), dtype=wp.int32)
    f = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    energy = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for k in (0.5, 2, np.float32(1.5)):  # a float, an int and a numpy scalar for k
            wp.launch(spring, n, inputs=[x, idx, k, 3, 2, True], outputs=[f, energy])
    tape.backward(loss=energy)
    return [a.numpy().copy() for a in (x.grad, f, energy, f.grad)], [
        a._write_count for a in (x, f, energy, x.grad, f.grad)]


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_fast_launches_equal_general_ones_bit_for_bit(mode, monkeypatch):
    monkeypatch.setattr(wp.config, "cpu_parallel", mode)
    _spring_run()  # compiles; finds the entry points through the general path
    spy = Spy(spring, monkeypatch)
    fast_values, fast_writes = _spring_run()
    assert spy.counts == {"forward": [3, 0], "adjoint": [3, 0]}
    Spy(spring, monkeypatch, enabled=False)
    general_values, general_writes = _spring_run()
    for fast, general in zip(fast_values, general_values):
        np.testing.assert_array_equal(fast, general)
    assert fast_writes == general_writes  # overwrite checks see the same writes


def test_multi_dimensional_launches(monkeypatch):
    u = wp.array(np.arange(12, dtype=np.float32).reshape(3, 4), dtype=float, requires_grad=True)
    v = wp.zeros((3, 4), dtype=float, requires_grad=True)
    w = wp.zeros(12, dtype=float)
    flat_u = wp.array(u.numpy().ravel(), dtype=float)
    spies = [Spy(grid, monkeypatch), Spy(flat, monkeypatch)]
    for _ in range(2):
        u.grad.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(grid, (3, 4), inputs=[u, 0.5], outputs=[v])
        tape.backward(grads={v: wp.ones((3, 4), dtype=float)})
        np.testing.assert_array_equal(v.numpy(), 0.5 * u.numpy() ** 2)
        np.testing.assert_array_equal(u.grad.numpy(), u.numpy())
        w.zero_()
        wp.launch(flat, (3, 2), inputs=[flat_u, w])  # 6 threads, flat indices 0..5
        np.testing.assert_array_equal(w.numpy()[:6], np.arange(6) ** 2)
        np.testing.assert_array_equal(w.numpy()[6:], 0)
    assert spies[0].counts == {"forward": [1, 1], "adjoint": [1, 1]}  # the first found entries
    assert spies[1].counts["forward"][0] == 1


def _declines(kernel, args, adj_args=None, dims=(8,)):
    """Whether the forward fast path (the adjoint one, given ``adj_args``) declines a launch
    without changing any array's write count."""
    plan = launch.plan_of(kernel)
    arrays = [a for a in list(args) + list(adj_args or []) if isinstance(a, wp.array)]
    arrays += [a.grad for a in arrays if a.grad is not None]
    before = [a._write_count for a in arrays]
    if adj_args is None:
        ran = plan.fast_forward(kernel, list(args), dims)
    else:
        ran = plan.fast_adjoint(kernel, list(args), list(adj_args), dims)
    return not ran and [a._write_count for a in arrays] == before


@pytest.fixture
def warm_flat():
    u = wp.array(np.arange(8, dtype=np.float32), dtype=float, requires_grad=True)
    v = wp.zeros(8, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(flat, 8, inputs=[u, v])
    tape.backward(grads={v: wp.ones(8, dtype=float)})
    plan = launch.plan_of(flat)
    assert plan.fast_forward(flat, [u, v], (8,))
    assert plan.fast_adjoint(flat, [u, v], [None, None], (8,))
    return u, v


def test_declines_what_only_the_general_path_handles(warm_flat, monkeypatch):
    u, v = warm_flat
    storage = np.zeros(16, dtype=np.float32)
    strided = wp.array(storage[::2], dtype=float, copy=False)
    view = wp.array(storage[:8], dtype=float, copy=False)  # a numpy view: its base owns it
    for adjoints in (None, [None, None]):
        assert _declines(flat, [strided, v], adjoints)
        assert _declines(flat, [view, v], adjoints)
        assert _declines(flat, [u, u], adjoints)  # one array passed twice
        assert _declines(flat, [wp.zeros(8, dtype=wp.float64), v], adjoints)  # wrong dtype
    assert _declines(flat, [u, v], [None, u])  # an adjoint that is an argument
    assert _declines(flat, [u, v], [strided, None])  # a strided adjoint
    assert _declines(flat, [u, v], [wp.zeros(8, dtype=wp.float64), None])
    explicit = wp.zeros(8, dtype=float)  # an adjoint not consumed: a program of its own
    v.grad.fill_(1.0)
    wp.launch(flat, 8, inputs=[u, v], adj_inputs=[explicit, None], adjoint=True)
    v.grad.fill_(1.0)  # (the store's adjoint consumed it)
    assert not _declines(flat, [u, v], [explicit, None])
    np.testing.assert_array_equal(explicit.numpy(), 4 * u.numpy())  # 2u from each
    np.testing.assert_array_equal(v.grad.numpy(), 0)
    monkeypatch.setattr(wp.config, "cpu_parallel", "parallel")  # threads: the general path
    assert _declines(flat, [u, v]) and _declines(flat, [u, v], [None, None])
    monkeypatch.setattr(wp.config, "cpu_parallel", "auto")
    monkeypatch.setattr(wp.config, "parallel_threshold", 8)
    assert _declines(flat, [u, v]) and _declines(flat, [u, v], [None, None])
    monkeypatch.setattr(wp.config, "deterministic", True)  # deterministic runs serially
    assert not _declines(flat, [u, v]) and not _declines(flat, [u, v], [None, None])


def test_general_errors_are_kept(warm_flat):
    u, v = warm_flat
    with pytest.raises(wp.LaunchTypeError, match=r"flat.*'u'"):
        wp.launch(flat, 8, inputs=[wp.zeros(8, dtype=wp.float64), v])
    with pytest.raises(wp.LaunchTypeError, match=r"spring.*'k'"):
        wp.launch(spring, 8, inputs=[wp.zeros(8, dtype=wp.vec3), wp.zeros(8, dtype=wp.int32),
                                     True, 1, 1, True, wp.zeros(8, dtype=wp.vec3),
                                     wp.zeros(1, dtype=float)])


def test_an_empty_launch_runs_nothing_and_writes_nothing(warm_flat):
    u, v = warm_flat
    count = v._write_count
    assert launch.plan_of(flat).fast_forward(flat, [u, v], (0,))
    assert v._write_count == count


def test_debug_mode_switch_takes_the_checked_program_and_its_errors(warm_flat, monkeypatch):
    u, v = warm_flat
    short = wp.zeros(4, dtype=float)
    monkeypatch.setattr(wp.config, "mode", "debug")
    for _ in range(2):  # the general path (finding the debug entry point), then the fast one
        with pytest.raises(wp.ArrayIndexError, match=r"flat.*index 4 is out of bounds"):
            wp.launch(flat, 8, inputs=[u, short])
    assert launch.plan_of(flat).fast_forward(flat, [u, v], (8,))
    np.testing.assert_array_equal(v.numpy(), u.numpy() ** 2)


def test_a_retained_gradient_is_not_consumed(monkeypatch):
    u = wp.array(np.arange(8, dtype=np.float32), dtype=float, requires_grad=True)
    v = wp.zeros(8, dtype=float, requires_grad=True, retain_grad=True)
    w = wp.zeros(8, dtype=float, requires_grad=True)
    spy = Spy(flat, monkeypatch)
    for _ in range(2):
        tape = wp.Tape()
        with tape:
            wp.launch(flat, 8, inputs=[u, v])
            wp.launch(flat, 8, inputs=[u, w])
        tape.backward(grads={v: wp.ones(8, dtype=float), w: wp.ones(8, dtype=float)})
        np.testing.assert_array_equal(v.grad.numpy(), 1)  # retained
        np.testing.assert_array_equal(w.grad.numpy(), 0)  # consumed by the store's adjoint
    assert spy.counts["adjoint"][0] >= 2


def test_the_generated_code_is_kept_in_the_cache_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(wp.config, "cache_dir", str(tmp_path))
    compiled = []

    def counting(*args, **kwargs):
        compiled.append(args[1])
        return compile(*args, **kwargs)

    monkeypatch.setattr(cache_files, "compile", counting, raising=False)
    plan = launch.plan_of(flat)
    first = launch_fast.build(plan, flat.key, launch._reraise)
    assert len(compiled) == 1 and len(list(tmp_path.glob("code_*.marshal"))) == 1
    again = launch_fast.build(plan, flat.key, launch._reraise)
    assert len(compiled) == 1 and again[0].source == first[0].source
    kept = next(tmp_path.glob("code_*.marshal"))
    kept.write_bytes(b"not code")
    launch_fast.build(plan, flat.key, launch._reraise)
    assert len(compiled) == 2
    kept.write_bytes(marshal.dumps(42))  # marshal data, but not code
    launch_fast.build(plan, flat.key, launch._reraise)
    assert len(compiled) == 3


def test_auto_launches_that_timing_keeps_serial_take_the_fast_path(warm_flat, monkeypatch):
    u, v = warm_flat
    monkeypatch.setattr(wp.config, "cpu_parallel", "auto")
    monkeypatch.setattr(wp.config, "parallel_threshold", 8)  # big enough for threads
    fast = launch.plan_of(flat).fast_forward
    choices = flat.program(1, False, True, None).thread_choices
    choices.clear()
    assert not fast(flat, [u, v], (8,))  # not timed yet: the general path times it
    choice = choices[(False, 8)] = thread_choice.Choice()
    assert not fast(flat, [u, v], (8,))  # still timing
    choice.decided = False  # serial won
    assert fast(flat, [u, v], (8,)) and choice.followed == 1
    choice.followed = thread_choice.RECHECK  # due to be timed again
    assert not fast(flat, [u, v], (8,))
    choice.followed, choice.decided = 0, True  # threads won
    assert not fast(flat, [u, v], (8,))
    monkeypatch.setattr(thread_choice, "TIMED", False)  # every launch that may use threads does
    choice.decided = False
    assert not fast(flat, [u, v], (8,))


@wp.kernel
def fly(v: wp.array(dtype=wp.vec3), wind: wp.vec3, turn: wp.mat22, drag: wp.float64,
        out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    w = wind * float(drag)
    out[i] = wp.vec3(turn[0, 0] * v[i][0] + turn[0, 1] * v[i][1], v[i][1], v[i][2]) + w


def _fly_run():
    v = wp.array(np.arange(12, dtype=np.float32).reshape(4, 3), dtype=wp.vec3, requires_grad=True)
    out = wp.zeros(4, dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(fly, 4, inputs=[v, wp.vec3(0.5, 1.0, 2.0), wp.mat22(1.5, -2.0, 0.25, 1.0),
                                  wp.float64(0.5)], outputs=[out])
    tape.backward(grads={out: wp.ones(4, dtype=wp.vec3)})
    return out.numpy().copy(), v.grad.numpy().copy()


def test_vector_and_matrix_values_take_the_fast_path(monkeypatch):
    _fly_run()
    plan = launch.plan_of(fly)  # a tuple for a vector: the general path converts it
    args = [wp.zeros(4, dtype=wp.vec3), (0.5, 1.0, 2.0), wp.mat22(), 0.5,
            wp.zeros(4, dtype=wp.vec3)]
    assert not plan.fast_forward(fly, args, (4,))
    spy = Spy(fly, monkeypatch)
    fast = _fly_run()
    assert spy.counts == {"forward": [1, 0], "adjoint": [1, 0]}
    Spy(fly, monkeypatch, enabled=False)
    general = _fly_run()
    for a, b in zip(fast, general):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(fast[1][:, 0], 1.5)
