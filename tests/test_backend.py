"""CPU backend: generated source, disk cache across processes, parallel variant and atomics."""

import inspect
import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

import difftape as wp
from difftape._src.launch import ATOMICS_FROM_THREADS


@wp.kernel
def scale_add(x: wp.array(dtype=float), y: wp.array(dtype=float), s: float):
    i = wp.tid()
    y[i] = x[i] * s + 1.0


@wp.kernel
def histogram(values: wp.array(dtype=wp.int32), counts: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_add(counts, values[i], wp.float64(1.0))


@wp.kernel
def gather_scatter(x: wp.array(dtype=wp.float64), idx: wp.array(dtype=wp.int32),
                   w: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    i = wp.tid()
    v = x[idx[i]] * w[0]
    out[idx[(i + 1) % idx.shape[0]]] += wp.sin(v)


@pytest.fixture
def parallel():
    saved = wp.config.cpu_parallel
    wp.config.cpu_parallel = "parallel"
    yield
    wp.config.cpu_parallel = saved


def test_generated_source_is_readable_python_with_user_lines():
    source = scale_add.source()
    lines, first = inspect.getsourcelines(scale_add.func)
    store_line = first + next(k for k, ln in enumerate(lines) if "y[i] =" in ln)
    assert f"# L{store_line}: y[i] = x[i] * s + 1.0" in source
    assert f"# adj L{store_line}: y[i] = x[i] * s + 1.0" in source
    assert "def scale_add_forward(" in source and "def scale_add_adjoint(" in source
    assert "float32(1.0)" in source  # literals are typed, never bare floats
    compile(source, "<generated>", "exec")


def test_parallel_atomics_lose_no_updates(parallel):
    n = 400_000
    values = wp.array(np.arange(n, dtype=np.int32) % 7, dtype=wp.int32)
    counts = wp.zeros(7, dtype=wp.float64)
    wp.launch(histogram, dim=n, inputs=[values, counts])
    expected = np.bincount(np.arange(n) % 7).astype(np.float64)
    np.testing.assert_array_equal(counts.numpy(), expected)
    assert "rt_atomic_add" in histogram.source(parallel=True)
    assert "nogil=True" in histogram.source(parallel=True)


def _gather_scatter_grads():
    rng = np.random.default_rng(3)
    n = 50_000
    x = wp.array(rng.uniform(-1, 1, n), dtype=wp.float64, requires_grad=True)
    idx = wp.array(rng.integers(0, n, n).astype(np.int32), dtype=wp.int32)
    w = wp.array([0.7], dtype=wp.float64, requires_grad=True)
    out = wp.zeros(n, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(gather_scatter, dim=n, inputs=[x, idx, w, out])
    tape.backward(grads={out: wp.array(rng.uniform(-1, 1, n), dtype=wp.float64)})
    return out.numpy().copy(), x.grad.numpy().copy(), w.grad.numpy().copy()


def test_parallel_scatter_adjoint_equals_serial(parallel):
    par = _gather_scatter_grads()
    wp.config.cpu_parallel = "serial"
    ser = _gather_scatter_grads()
    for a, b in zip(par, ser):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_second_process_loads_compiled_kernels_from_disk_cache(tmp_path):
    script = tmp_path / "cached_kernel.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import difftape as wp

        @wp.kernel
        def cube(x: wp.array(dtype=float), y: wp.array(dtype=float)):
            i = wp.tid()
            y[i] = x[i] * x[i] * x[i]

        x = wp.array(np.arange(4, dtype=np.float32), dtype=float, requires_grad=True)
        y = wp.zeros(4, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(cube, 4, inputs=[x, y])
        tape.backward(grads={y: wp.ones(4, dtype=float)})
        hits = 0  # the forward's program, and the one compiled for the adjoint's flags
        for program in cube._built.values():
            for fn in (program.forward, program.adjoint):
                hits += sum(fn.stats.cache_hits.values()) if fn is not None else 0
        print(hits, x.grad.numpy().tolist())
    """))
    env = dict(os.environ, DIFFTAPE_CACHE_DIR=str(tmp_path / "cache"),
               DIFFTAPE_COMPILE_AHEAD="0")  # each process compiles its adjoint itself
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                           text=True, check=True).stdout.split(maxsplit=1) for _ in range(2)]
    assert runs[0][0] == "0", "first process must compile"
    assert runs[1][0] == "2", "second process must load forward and adjoint from the cache"
    assert runs[0][1] == runs[1][1] == "[0.0, 3.0, 12.0, 27.0]\n"
    generated = [f for f in os.listdir(tmp_path / "cache") if f.endswith(".py")]
    assert len(generated) == 2 and all(f.startswith("difftape_gen_cube_") for f in generated)


_CACHED_RUNTIME_SCRIPT = """
    import json
    import sys

    import numba
    import numpy as np
    import difftape as wp

    @wp.kernel
    def waves(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.sin(x[i]) * wp.cos(2.0 * x[i]) + wp.sqrt(x[i] * x[i] + 1.0)

    @wp.kernel
    def springs(p: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.vec3)):
        i = wp.tid()
        d = p[(i + 1) % 8] - p[i]
        wp.atomic_add(f, i, wp.length(d) * wp.normalize(d))

    @wp.kernel
    def power(x: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
        i = wp.tid()
        v = float(1.0)
        for k in range(n):
            if v < 100.0:
                v = v * x[i]
        y[i] = v

    @wp.kernel
    def shifted(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i + 1]

    @wp.kernel
    def histogram(values: wp.array(dtype=wp.int32), counts: wp.array(dtype=wp.float64)):
        i = wp.tid()
        wp.atomic_add(counts, values[i], wp.float64(1.0))

    out = {}
    x = wp.array(np.linspace(0.5, 1.5, 8, dtype=np.float32), dtype=float, requires_grad=True)
    p = wp.array(np.arange(24, dtype=np.float32).reshape(8, 3) ** 1.5, dtype=wp.vec3,
                 requires_grad=True)
    y, z = (wp.zeros(8, dtype=float, requires_grad=True) for _ in range(2))
    f = wp.zeros(8, dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(waves, 8, inputs=[x, y])
        wp.launch(power, 8, inputs=[x, 7, z])
        wp.launch(springs, 8, inputs=[p, f])
    tape.backward(grads={y: wp.ones(8, dtype=float), z: wp.ones(8, dtype=float),
                         f: wp.ones(8, dtype=wp.vec3)})
    out["values"] = [a.numpy().tolist() for a in (y, z, f, x.grad, p.grad)]

    wp.config.flush_denormals = True
    wp.launch(waves, 8, inputs=[x, y])
    wp.config.flush_denormals = False
    wp.config.cpu_parallel = "parallel"
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    counts = wp.zeros(5, dtype=wp.float64)
    wp.launch(histogram, 200_000, inputs=[wp.array(np.arange(200_000, dtype=np.int32) % 5,
                                                   dtype=wp.int32), counts])
    out["counts"] = counts.numpy().tolist()
    wp.config.cpu_parallel = "serial"
    wp.config.mode = "debug"
    try:
        wp.launch(shifted, 8, inputs=[x, y])
    except IndexError as err:
        out["error"] = "index 8" in str(err) and "y[i] = x[i + 1]" in str(err)
    wp.config.mode = "release"

    hits = misses = 0
    for kernel in (waves, springs, power, shifted, histogram):
        for program in kernel._built.values():
            for fn in (program.forward, program.adjoint):
                if fn is not None:
                    hits += sum(fn.stats.cache_hits.values())
                    misses += sum(fn.stats.cache_misses.values())
    out["hits"], out["misses"] = hits, misses
    # imported only when Numba refreshes its compiler's registries
    out["refreshed"] = "numba.np.polynomial.polynomial_core" in sys.modules
    # imported by loading code that calls np.empty (power's stacks use rt_empty instead)
    out["arrayobj"] = "numba.np.arrayobj" in sys.modules
    # imported by Numba's Python typeof of an array (launches of plain arrays skip it)
    out["masked"] = "numpy.ma" in sys.modules
    print(json.dumps(out))
"""


def _two_processes(tmp_path, script: str, argv=((), ())) -> list:
    """The JSON printed by ``script`` run in two processes, one after the other, on one pair of
    empty kernel and Numba cache directories (``argv``: each process's arguments)."""
    import json

    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    env = dict(os.environ, DIFFTAPE_CACHE_DIR=str(tmp_path / "cache"),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"), DIFFTAPE_COMPILE_AHEAD="0")
    return [json.loads(subprocess.run([sys.executable, str(path), *args], env=env,
                                      capture_output=True, text=True, check=True).stdout)
            for args in argv]


def test_second_process_runs_cached_kernels_without_the_compilers_registries(tmp_path):
    """A process that finds every kernel in the disk cache loads them without Numba's context
    refresh (``backends/cpu_cache.py``); what the cached code needs at run time (math, the
    runtime's array unboxing, exceptions, atomics, FP control) must all still work."""
    first, second = _two_processes(tmp_path, _CACHED_RUNTIME_SCRIPT)
    assert first["misses"] > 0 and first["refreshed"], "the first process compiles"
    assert second["misses"] == 0 and second["hits"] == first["misses"]
    assert not second["refreshed"] and not second["arrayobj"] and not second["masked"]
    assert second["values"] == first["values"] and second["counts"] == first["counts"]
    assert second["counts"] == [40_000.0] * 5 and second["error"] is True


def test_debug_mode_reports_out_of_bounds_reads():
    @wp.kernel
    def shifted(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i + 1]

    saved = wp.config.mode
    wp.config.mode = "debug"
    try:
        x, y = wp.zeros(4, dtype=float), wp.zeros(4, dtype=float)
        with pytest.raises(IndexError) as info:
            wp.launch(shifted, 4, inputs=[x, y])
    finally:
        wp.config.mode = saved
    message = str(info.value)
    assert isinstance(info.value, wp.ArrayIndexError)
    assert "kernel 'shifted'" in message and "index 4" in message and "array 'x'" in message
    assert "y[i] = x[i + 1]" in message and __file__ in message


@wp.kernel
def neighbour_sum(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = x[i] + x[wp.max(i - 1, 0)]


@pytest.fixture
def chunk_counts(monkeypatch):
    """The number of chunks of every multi-threaded launch run while the test runs (every launch
    that may use threads does: no timing, thread_choice.py)."""
    from difftape._src import chunks, thread_choice

    monkeypatch.setattr(thread_choice, "TIMED", False)
    counts = []
    run = chunks.run

    def spy(fn, dims, args, views, count, margin=0):
        counts.append(count)
        return run(fn, dims, args, views, count, margin)

    monkeypatch.setattr(chunks, "run", spy)
    return counts


def _atomic_programs(kernel):
    return {key[1] for key in kernel._programs}


@wp.kernel
def gather_scaled(x: wp.array(dtype=wp.float64), idx: wp.array(dtype=wp.int32),
                  y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = 2.0 * x[idx[i]]


def test_auto_mode_runs_large_atomic_free_launches_in_parallel(chunk_counts):
    saved = (wp.config.cpu_parallel, wp.config.parallel_threshold)
    wp.config.cpu_parallel, wp.config.parallel_threshold = "auto", 100
    parallel = [numba.get_num_threads()] if numba.get_num_threads() > 1 else []
    try:
        assert scale_add.scatters() == (False, False)
        assert neighbour_sum.scatters() == (False, True)  # adjoint scatters into x[i - 1]
        assert neighbour_sum.scatter_sites() == ({}, {"x": True})
        x = wp.array(np.arange(500.0), dtype=wp.float64, requires_grad=True)
        y = wp.zeros(500, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(neighbour_sum, 500, inputs=[x, y])
        tape.backward(grads={y: wp.ones(500, dtype=wp.float64)})
        expected = np.full(500, 2.0)
        expected[-1] = 1.0
        expected[0] = 3.0  # y[0] reads x[0] twice, y[1] once more
        np.testing.assert_allclose(x.grad.numpy(), expected)
        # The forward is atomic-free; the adjoint's scatter array is small: per-chunk copies.
        assert chunk_counts == parallel * 2
        assert _atomic_programs(neighbour_sum) == {False}

        # A large gather target: copies would cost more than the launch; the adjoint is
        # serial (or atomic on ATOMICS_FROM_THREADS threads and more), unless the gathered
        # array needs no gradient (no scatter site is live).
        big = wp.array(np.arange(100_000.0), dtype=wp.float64, requires_grad=True)
        idx = wp.array(np.arange(200) * 7, dtype=wp.int32)
        out = wp.zeros(200, dtype=wp.float64, requires_grad=True)
        chunk_counts.clear()
        tape = wp.Tape()
        with tape:
            wp.launch(gather_scaled, 200, inputs=[big, idx, out])
        tape.backward(grads={out: wp.ones(200, dtype=wp.float64)})
        assert big.grad.numpy()[::7][:200].tolist() == [2.0] * 200
        atomic = numba.get_num_threads() >= ATOMICS_FROM_THREADS
        assert chunk_counts == parallel * (2 if atomic else 1)  # else the forward only
        big.requires_grad = False
        chunk_counts.clear()
        tape = wp.Tape()
        with tape:
            wp.launch(gather_scaled, 200, inputs=[big, idx, out])
        tape.backward(grads={out: wp.ones(200, dtype=wp.float64)})
        assert chunk_counts == parallel * 2
        wp.config.deterministic = True  # parallel sums would add in a varying order
        chunk_counts.clear()
        wp.launch(scale_add, 500, inputs=[wp.zeros(500, dtype=float), wp.zeros(500, dtype=float),
                                          1.0])
        assert chunk_counts == []
    finally:
        wp.config.cpu_parallel, wp.config.parallel_threshold = saved
        wp.config.deterministic = False


def test_auto_mode_uses_as_many_chunks_as_copies_fit(chunk_counts, monkeypatch):
    """On many cores, a scatter array too big for a copy per thread gets fewer chunks (as many
    as the copies budget holds), not a serial launch; and the chunks' sums still add up."""
    from difftape._src import launch

    monkeypatch.setattr(launch.numba, "get_num_threads", lambda: 16)
    monkeypatch.setattr(wp.config, "cpu_parallel", "auto")
    monkeypatch.setattr(wp.config, "parallel_threshold", 100)
    rows = 200
    for size, adjoint_chunks in ((100, 16), (500, 3), (799, 2), (801, 16)):
        # the copies may hold REPLICA_ELEMENTS_PER_THREAD (8) * rows = 1600 elements in all;
        # beyond, atomics on every thread (test_auto_mode_uses_atomics_where_copies_do_not_fit)
        x = wp.array(np.arange(size, dtype=np.float64), requires_grad=True)
        index = (np.arange(rows) * 3) % min(size, 97)  # every chunk adds into the same rows
        out = wp.zeros(rows, dtype=wp.float64, requires_grad=True)
        chunk_counts.clear()
        tape = wp.Tape()
        with tape:
            wp.launch(gather_scaled, rows, inputs=[x, wp.array(index, dtype=wp.int32), out])
        tape.backward(grads={out: wp.ones(rows, dtype=wp.float64)})
        assert chunk_counts == [16, adjoint_chunks], size
        np.testing.assert_array_equal(x.grad.numpy(), 2.0 * np.bincount(index, minlength=size))
        np.testing.assert_array_equal(out.numpy(), 2.0 * index)


@wp.kernel
def splat_twelve(x: wp.array(dtype=wp.float64), grid: wp.array(dtype=wp.float64)):
    i = wp.tid()
    for k in range(12):  # unrolled: 12 scatter adds per thread
        wp.atomic_add(grid, (i * 5 + k * 31) % grid.shape[0], x[i] * wp.float64(k + 1))


def test_auto_mode_budgets_copies_by_the_adds_of_a_thread(chunk_counts, monkeypatch):
    """A launch whose threads add more than REPLICA_ELEMENTS_PER_THREAD (8) elements each gets
    copies holding up to as many elements as it adds (a particle splatting into 27 grid cells
    runs faster replicated than serially), then the fixed budget's way: atomics on 16 threads."""
    from difftape._src import launch

    monkeypatch.setattr(launch.numba, "get_num_threads", lambda: 16)
    monkeypatch.setattr(wp.config, "cpu_parallel", "auto")
    monkeypatch.setattr(wp.config, "parallel_threshold", 100)
    assert splat_twelve.scatter_adds() == (12, 0)
    assert gather_scaled.scatter_adds() == (0, 1)
    rows = 200
    x = wp.array(np.arange(rows, dtype=np.float64), requires_grad=True)
    # copies may hold 12 * 200 = 2400 elements in all (8 * 200 = 1600 without the adds)
    for size, chunks in ((150, 16), (800, 3), (1000, 2), (1200, 2), (1201, 16)):
        grid = wp.zeros(size, dtype=wp.float64, requires_grad=True)
        x.grad.zero_()
        chunk_counts.clear()
        tape = wp.Tape()
        with tape:
            wp.launch(splat_twelve, rows, inputs=[x, grid])
        tape.backward(grads={grid: wp.array(np.arange(size, dtype=np.float64))})
        assert chunk_counts == [chunks, 16], size
        i, k = np.meshgrid(np.arange(rows), np.arange(12), indexing="ij")
        cells = (i * 5 + k * 31) % size
        expected = np.bincount(cells.ravel(), (i * (k + 1)).ravel().astype(np.float64), size)
        np.testing.assert_array_equal(grid.numpy(), expected)
        np.testing.assert_array_equal(x.grad.numpy(), (cells * (k + 1)).sum(axis=1))


@pytest.mark.parametrize("threads", [3, 4, 16])
def test_auto_mode_uses_atomics_where_copies_do_not_fit(chunk_counts, monkeypatch, threads):
    """Where not even two chunks' copies fit the budget, "auto" runs a launch with atomics on
    every thread from ATOMICS_FROM_THREADS (4) threads on, and serially below; a scatter site
    that is not a plain add (its result used) takes the same way. Gradients stay exact."""
    from difftape._src import launch

    monkeypatch.setattr(launch.numba, "get_num_threads", lambda: threads)
    monkeypatch.setattr(wp.config, "cpu_parallel", "auto")
    monkeypatch.setattr(wp.config, "parallel_threshold", 100)
    ways = []
    threading = launch._threading

    def spy(*args, **kwargs):
        how = threading(*args, **kwargs)
        ways.append((how.atomic, how.chunks))
        return how

    monkeypatch.setattr(launch, "_threading", spy)
    atomics = threads >= launch.ATOMICS_FROM_THREADS
    rows, size = 200, 5000  # copies of 5000 elements: over the budget of 8 * 200
    index = (np.arange(rows) * 7) % 300  # every chunk adds into the same elements
    x = wp.array(np.arange(size, dtype=np.float64), requires_grad=True)
    out = wp.zeros(rows, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(gather_scaled, rows, inputs=[x, wp.array(index, dtype=wp.int32), out])
    tape.backward(grads={out: wp.ones(rows, dtype=wp.float64)})
    assert ways == [(False, threads), (True, threads) if atomics else (False, 1)]
    assert chunk_counts == [threads] * (2 if atomics else 1)
    np.testing.assert_array_equal(x.grad.numpy(), 2.0 * np.bincount(index, minlength=size))

    ways.clear()
    counts = wp.zeros(size, dtype=wp.int32)
    slots = wp.zeros(rows, dtype=wp.int32)
    wp.launch(take_slot, rows, inputs=[wp.array(index, dtype=wp.int32), counts, slots])
    assert ways == [(True, threads) if atomics else (False, 1)]
    np.testing.assert_array_equal(counts.numpy(), np.bincount(index, minlength=size))
    for k in np.unique(index):  # each thread took a distinct slot of its element
        assert sorted(slots.numpy()[index == k]) == list(range(np.sum(index == k)))


@wp.kernel
def take_slot(idx: wp.array(dtype=wp.int32), counts: wp.array(dtype=wp.int32),
              slots: wp.array(dtype=wp.int32)):
    i = wp.tid()
    slots[i] = wp.atomic_add(counts, idx[i], 1)


@wp.kernel
def product_plus(a: wp.array(dtype=float), b: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = a[i] * b[i] + 2.0 * a[i]


@pytest.mark.parametrize("mode", ["serial", "parallel", "replicate", "auto"])
def test_one_array_passed_twice_gets_every_gradient(mode):
    """Compiled code assumes array arguments don't overlap (LLVM vectorizes with it; parallel
    variants always do): a launch with the same array twice must not lose adds into its .grad."""
    saved = (wp.config.cpu_parallel, wp.config.parallel_threshold)
    wp.config.cpu_parallel, wp.config.parallel_threshold = mode, 1000
    try:
        n = 20_000
        x = wp.array(np.linspace(0.5, 1.5, n), dtype=float, requires_grad=True)
        y = wp.zeros(n, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(product_plus, n, inputs=[x, x], outputs=[y])
        tape.backward(grads={y: wp.ones(n, dtype=float)})
        np.testing.assert_allclose(y.numpy(), x.numpy() ** 2 + 2 * x.numpy(), rtol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy() + 2, rtol=1e-6)
        # A view of the same memory overlaps too.
        view = x[:]
        x.grad.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(product_plus, n, inputs=[x, view], outputs=[y])
        tape.backward(grads={y: wp.ones(n, dtype=float)})
        np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy() + 2, rtol=1e-6)
    finally:
        wp.config.cpu_parallel, wp.config.parallel_threshold = saved


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_parallel_launches_work_in_a_forked_child(tmp_path):
    """The chunk thread pool's threads do not survive fork(): the child starts a new pool
    (before, its first parallel launch waited forever)."""
    script = tmp_path / "fork_child.py"
    script.write_text(textwrap.dedent("""
        import os
        import numpy as np
        import difftape as wp

        wp.config.cpu_parallel = "replicate"

        @wp.kernel
        def twice(x: wp.array(dtype=float), y: wp.array(dtype=float)):
            i = wp.tid()
            y[i] = 2.0 * x[i]

        x = wp.array(np.ones(100_000, np.float32))
        y = wp.zeros(100_000, dtype=float)
        wp.launch(twice, 100_000, inputs=[x, y])  # starts the pool in the parent
        pid = os.fork()
        if pid == 0:
            y.zero_()
            wp.launch(twice, 100_000, inputs=[x, y])
            os._exit(0 if float(y.numpy().min()) == 2.0 else 1)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, check=True)
    assert run.stdout.split() == ["child", "0"]


@wp.kernel
def running_max(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_max(out, 0, x[i])  # thread-invariant: a per-chunk maximum, in lanes


@wp.kernel
def bounds64(x: wp.array(dtype=wp.float64), hi: wp.array(dtype=wp.float64),
             lo: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_max(hi, 0, x[i])
    wp.atomic_min(lo, 1, x[i])


@wp.kernel
def max_and_add(x: wp.array(dtype=float), out: wp.array(dtype=float),
                count: wp.array(dtype=wp.int32)):
    i = wp.tid()
    wp.atomic_add(out, 0, 1.0)  # an add and a max of one array do not commute: in place
    wp.atomic_max(out, 0, x[i])
    wp.atomic_max(count, 0, i)  # integers keep their atomics too


@pytest.mark.parametrize("mode", ["serial", "parallel", "replicate", "auto"])
def test_thread_invariant_atomic_max_is_exact_in_every_mode(mode):
    saved = (wp.config.cpu_parallel, wp.config.parallel_threshold)
    wp.config.cpu_parallel, wp.config.parallel_threshold = mode, 1000
    try:
        assert running_max.scatter_sites()[0] == {}  # a per-chunk extremum: no atomics
        assert "rt_lane_extremum(" in running_max.source().split("_adjoint(")[0]
        assert max_and_add.scatter_sites()[0] == {"out": False, "count": False}
        values = np.random.default_rng(3).uniform(-5.0, 5.0, 200_000).astype(np.float32)
        values[[7, 150_000]] = np.nan  # NaN values are passed over, as max(m, nan) passes
        out = wp.array(np.array([-100.0], np.float32))
        wp.launch(running_max, len(values), inputs=[wp.array(values), out])
        assert out.numpy()[0] == np.nanmax(values)
        x = np.random.default_rng(4).standard_normal(100_001)
        hi, lo = wp.array([-1e300, 0.0]), wp.array([0.0, 1e300])
        hi, lo = (wp.array(np.array(a, np.float64), dtype=wp.float64) for a in (hi.numpy(),
                                                                              lo.numpy()))
        wp.launch(bounds64, len(x), inputs=[wp.array(x, dtype=wp.float64), hi, lo])
        assert hi.numpy().tolist() == [x.max(), 0.0] and lo.numpy().tolist() == [0.0, x.min()]
        started = wp.array(np.array([3.0], np.float32))
        wp.launch(running_max, 2000, inputs=[wp.array(values[:2000] - 10.0), started])
        assert started.numpy()[0] == 3.0  # the flush keeps what the array held
    finally:
        wp.config.cpu_parallel, wp.config.parallel_threshold = saved


@wp.kernel
def running_max16(x: wp.array(dtype=wp.float16), out: wp.array(dtype=wp.float16)):
    i = wp.tid()
    wp.atomic_max(out, 0, x[i])  # float16: no extremum lanes, the update in place


def test_a_float16_atomic_max_stays_in_place():
    assert running_max16.scatter_sites()[0] == {"out": False}
    x = np.random.default_rng(6).standard_normal(30_000).astype(np.float16)
    out = wp.array(np.array([-100.0], np.float16), dtype=wp.float16)
    wp.launch(running_max16, len(x), inputs=[wp.array(x, dtype=wp.float16), out])
    assert out.numpy()[0] == x.max()


def test_an_atomic_max_beside_an_add_stays_in_place():
    """Adds and maxima of one element, thread by thread in a serial launch: neither goes to a
    per-chunk local (the adds summed in afterwards landed after every max: 5004 for 5002.2)."""
    x = np.random.default_rng(5).uniform(0.0, 4.0, 5000).astype(np.float32)
    out, count = wp.zeros(1, dtype=float), wp.zeros(1, dtype=wp.int32)
    wp.launch(max_and_add, len(x), inputs=[wp.array(x), out, count])
    expected = np.float32(0.0)
    for v in x:  # thread by thread, as the serial launch runs them
        expected = max(np.float32(expected + np.float32(1.0)), v)
    assert out.numpy()[0] == expected and count.numpy()[0] == len(x) - 1


@wp.kernel
def count_and_read(idx: wp.array(dtype=wp.int32), out: wp.array(dtype=float),
                   total: wp.array(dtype=float), seen: wp.array(dtype=float)):
    i = wp.tid()
    j = idx[i]
    before = out[j]
    wp.atomic_add(out, j, 1.0)
    wp.atomic_add(total, 0, 1.0)
    seen[i] = out[j] - before + total[0] * 0.0


@pytest.mark.parametrize("mode", ["serial", "parallel", "replicate", "auto"])
def test_a_thread_reads_back_what_it_added(mode):
    """Adds into an array the kernel also reads go to the array itself (atomics in threads),
    never to a per-chunk copy or local it cannot read back: each thread sees its own add."""
    assert count_and_read.scatter_sites()[0] == {"out": False, "total": False}
    saved = (wp.config.cpu_parallel, wp.config.parallel_threshold)
    wp.config.cpu_parallel, wp.config.parallel_threshold = mode, 1000
    try:
        n = 100_000
        idx = wp.array(np.random.default_rng(4).permutation(n).astype(np.int32), dtype=wp.int32)
        out, total = wp.zeros(n, dtype=float), wp.zeros(1, dtype=float)
        seen = wp.zeros(n, dtype=float)
        wp.launch(count_and_read, n, inputs=[idx, out, total, seen])
        assert np.all(seen.numpy() == 1.0) and np.all(out.numpy() == 1.0)
        assert total.numpy()[0] == n
    finally:
        wp.config.cpu_parallel, wp.config.parallel_threshold = saved


@wp.kernel
def add_then_store(idx: wp.array(dtype=wp.int32), w: wp.array(dtype=float),
                   x: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(x, idx[i], wp.sin(w[i]) * wp.cos(w[i]) + 1.0)
    x[i] = 5.0  # overwrites the add above where idx[i] == i


@pytest.mark.parametrize("mode", ["serial", "parallel", "replicate", "auto"])
def test_a_thread_stores_over_what_it_added(mode):
    """A thread's store lands after its own earlier add into the same element: adds into an
    array the kernel stores to are not deferred to a per-chunk copy summed in afterwards (which
    gave 6 where the thread wrote 5)."""
    assert add_then_store.scatter_sites()[0] == {"x": False}
    saved = (wp.config.cpu_parallel, wp.config.parallel_threshold)
    wp.config.cpu_parallel, wp.config.parallel_threshold = mode, 1000
    try:
        n = 100_000
        x = wp.zeros(n, dtype=float)
        wp.launch(add_then_store, n, inputs=[wp.array(np.arange(n, dtype=np.int32)),
                                             wp.zeros(n, dtype=float), x])
        assert np.all(x.numpy() == 5.0)
    finally:
        wp.config.cpu_parallel, wp.config.parallel_threshold = saved


@wp.kernel
def write_then_gather(a: wp.array(dtype=float), idx: wp.array(dtype=wp.int32),
                      x: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = a[i] * 3.0
    b[i] = x[idx[i]] * 2.0  # reads what this thread stored where idx[i] == i


@pytest.mark.parametrize("mode", ["serial", "parallel", "replicate", "auto"])
def test_an_adjoint_reads_back_its_own_adds(mode):
    """The gather's adjoint adds into adj_x, which the store's adjoint (later in the thread's
    reverse sweep) reads: those adds go to adj_x itself, not to a per-chunk copy summed in
    afterwards (which gave a.grad 0 and x.grad 2 where they are 6 and 0)."""
    assert write_then_gather.scatter_sites()[1] == {"x": False}
    saved = (wp.config.cpu_parallel, wp.config.parallel_threshold)
    wp.config.cpu_parallel, wp.config.parallel_threshold = mode, 1000
    try:
        n = 50_000
        a0 = np.random.default_rng(5).uniform(-1, 1, n).astype(np.float32)
        a = wp.array(a0, requires_grad=True)
        x = wp.zeros(n, dtype=float, requires_grad=True)
        b = wp.zeros(n, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(write_then_gather, n, inputs=[a, wp.array(np.arange(n, dtype=np.int32)),
                                                    x, b])
        tape.backward(grads={b: wp.ones_like(b)})
        np.testing.assert_allclose(b.numpy(), 6.0 * a0, rtol=1e-6)
        assert np.all(a.grad.numpy() == 6.0) and np.all(x.grad.numpy() == 0.0)
    finally:
        wp.config.cpu_parallel, wp.config.parallel_threshold = saved


@wp.kernel
def add_then_scale(x: wp.array(dtype=float), c: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(c, 0, x[i])
    y[i] = c[0] * 2.0


@pytest.mark.parametrize("mode", ["serial", "auto"])
def test_an_adjoint_at_a_shared_index_reads_back_its_own_adds(mode):
    """The read of c[0] adds into adj_c[0], which the atomic's adjoint then reads: not a
    per-chunk local flushed at the end (x.grad was 0, even for one thread)."""
    assert add_then_scale.scatter_sites()[1] == {"c": False}
    saved = wp.config.cpu_parallel
    wp.config.cpu_parallel = mode
    try:
        x = wp.array(np.array([1.5], np.float32), requires_grad=True)
        c = wp.zeros(1, dtype=float, requires_grad=True)
        y = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(add_then_scale, 1, inputs=[x, c, y])
        tape.backward(grads={y: wp.ones_like(y)})
        assert y.numpy()[0] == 3.0  # y = 2 (c + x)
        assert x.grad.numpy()[0] == 2.0 and c.grad.numpy()[0] == 2.0
    finally:
        wp.config.cpu_parallel = saved


def test_overlap_check_tells_struct_fields_apart():
    from difftape._src.launch import _overlapping

    data = np.zeros(10, dtype=[("a", np.float32), ("b", np.float32)])
    plain = np.zeros(4, np.float32)
    assert not _overlapping([data["a"], data["b"], plain])
    assert _overlapping([data["a"], data["a"]])
    assert _overlapping([plain, plain[1:]])
    assert not _overlapping([plain, np.zeros(4, np.float32)])


@wp.kernel
def blend(a: wp.array(dtype=wp.vec3), b: wp.array(dtype=wp.vec3), w: float,
          out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = a[i] * w + b[i] * (1.0 - w)


def _blend_grads(grad_a: bool, grad_b: bool, retain: bool):
    rng = np.random.default_rng(1)
    n = 37
    a = wp.array(rng.standard_normal((n, 3)), dtype=wp.vec3, requires_grad=grad_a)
    b = wp.array(rng.standard_normal((n, 3)), dtype=wp.vec3, requires_grad=grad_b)
    out = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
    out.retain_grad = retain
    tape = wp.Tape()
    with tape:
        wp.launch(blend, n, inputs=[a, b, 0.25], outputs=[out])
    seed = rng.standard_normal((n, 3))
    out.grad.assign(seed)
    tape.backward()
    return (a.grad.numpy() if grad_a else None, b.grad.numpy() if grad_b else None,
            out.grad.numpy(), seed)


def test_adjoints_are_compiled_for_their_launches_flags():
    """Each combination of has-adjoint and consume flags gets its own adjoint, with the flags
    folded into the code (no branch on them left), and every combination is right."""
    for grad_a, grad_b, retain in [(True, True, False), (True, False, False),
                                   (False, True, True), (True, True, False)]:
        ga, gb, gout, seed = _blend_grads(grad_a, grad_b, retain)
        if grad_a:
            np.testing.assert_allclose(ga, 0.25 * seed, rtol=1e-6)
        if grad_b:
            np.testing.assert_allclose(gb, 0.75 * seed, rtol=1e-6)
        np.testing.assert_allclose(gout, seed if retain else 0.0, rtol=1e-6)  # consumed
    specialised = [p for p in blend._built.values() if p.variant.flags is not None]
    assert len(specialised) == 3  # one per combination
    for program in specialised:
        body = program.source.split("def blend_adjoint(")[1].split("\n", 1)[1]
        assert "has_adj_" not in body and "consume_" not in body
    assert "if has_adj_a:" in blend.source()  # the generic text, as kernel.source() shows it


def test_stack_allocation_rejects_sizes_it_cannot_allocate():
    """``rt_empty`` (the generated adjoints' stacks) is freed when its last reference goes, and
    raises MemoryError, not a crash, for a negative size, one whose bytes overflow, and one
    malloc refuses."""
    from difftape._src.backends.cpu_runtime import rt_empty

    @numba.njit
    def allocate(n):
        a = rt_empty(n, np.float64)
        a[0] = 1.5
        a[n - 1] = 2.5
        return a[0] + a[n - 1], a.shape[0]

    from numba.core.runtime import _nrt_python as nrt_stats

    enabled = nrt_stats.memsys_stats_enabled()
    nrt_stats.memsys_enable_stats()
    try:
        before = nrt_stats.memsys_get_stats_mi_alloc(), nrt_stats.memsys_get_stats_mi_free()
        assert allocate(3) == (4.0, 3)
        allocated = nrt_stats.memsys_get_stats_mi_alloc() - before[0]
        freed = nrt_stats.memsys_get_stats_mi_free() - before[1]
        assert allocated == freed == 1  # freed when the function returns
    finally:
        if not enabled:
            nrt_stats.memsys_disable_stats()
    for n in (-1, 2**62, 2**50):
        with pytest.raises(MemoryError):
            allocate(n)


_RUNTIME_CACHE_SCRIPT = """
    import json
    import sys

    import numpy as np
    from numba.core.runtime import nrtdynmod

    compiled = []
    original = nrtdynmod.create_nrt_module
    nrtdynmod.create_nrt_module = lambda ctx: compiled.append(1) or original(ctx)

    import difftape as wp

    @wp.kernel
    def power(x: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
        i = wp.tid()
        v = float(1.0)
        for k in range(n):
            v = v * x[i]
        y[i] = v

    kernels = [power]
    if sys.argv[1] == "new":  # compiled by this process, linked against the loaded runtime
        @wp.kernel
        def poly(x: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
            i = wp.tid()
            v = float(0.0)
            for k in range(n):
                v = v * x[i] + 2.0
            y[i] = v

        kernels.append(poly)
    x = wp.array(np.linspace(0.9, 1.1, 6, dtype=np.float32), dtype=float, requires_grad=True)
    grads = []
    for kernel in kernels:
        y = wp.zeros(6, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, 6, inputs=[x, 300, y])  # 300 iterations: the stack grows
        tape.backward(grads={y: wp.ones(6, dtype=float)})
        grads.append(x.grad.numpy().tolist())
        tape.zero()
    print(json.dumps([len(compiled), grads]))
"""


def test_second_process_loads_numbas_runtime_from_the_cache(tmp_path):
    """Numba's runtime module is compiled once and then loaded from the kernel cache
    (``cpu_cache.initialize_runtime``); code loaded from the cache, and code compiled after the
    load, allocates and frees through it."""
    first, second = _two_processes(tmp_path, _RUNTIME_CACHE_SCRIPT, (["old"], ["new"]))
    assert first[0] == 1 and second[0] == 0
    assert any(f.startswith("numba_runtime_") for f in os.listdir(tmp_path / "cache"))
    x = np.linspace(0.9, 1.1, 6, dtype=np.float32).astype(np.float64)
    np.testing.assert_allclose(first[1][0], 300 * x ** 299, rtol=1e-4)
    assert second[1][0] == first[1][0]
    # v_n = 2 (x^n - 1) / (x - 1): the derivative by the quotient rule
    n = 300
    expected = 2 * ((n * x ** (n - 1)) * (x - 1) - (x ** n - 1)) / (x - 1) ** 2
    np.testing.assert_allclose(second[1][1], expected, rtol=1e-3)


_LAZY_BITCODE_SCRIPT = """
    import gc
    import json
    import sys

    import numpy as np

    import difftape as wp
    from difftape._src.backends import cpu_cache

    @wp.kernel
    def waves(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.sqrt(x[i]) + wp.sin(x[i])

    kernels = [waves]
    if sys.argv[1] == "new":  # compiled here: it links the helpers the cache loaded lazily
        @wp.kernel
        def ripples(x: wp.array(dtype=float), y: wp.array(dtype=float)):
            i = wp.tid()
            y[i] = wp.sqrt(x[i]) * wp.sin(x[i]) + 2.0

        kernels.append(ripples)
    x = wp.array(np.linspace(0.1, 2.0, 16, dtype=np.float32), dtype=float, requires_grad=True)
    out = {"values": [], "grads": []}
    for kernel in kernels:
        y = wp.zeros(16, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, 16, inputs=[x, y])
        tape.backward(grads={y: wp.ones(16, dtype=float)})
        out["values"].append(y.numpy().tolist())
        out["grads"].append(x.grad.numpy().tolist())
        tape.zero()
    waves_libraries = [cres.library for program in waves._built.values()
                       for fn in (program.forward, program.adjoint) if fn is not None
                       for cres in fn.overloads.values()]
    out["waves_lazy"] = [type(lib) is cpu_cache._LazilyLinkedLibrary and
                         lib._shared_module is None for lib in waves_libraries]
    out["linked"] = sorted(lib.name.split("_")[0] for lib in gc.get_objects()
                           if type(lib) is cpu_cache._LazilyLinkedLibrary
                           and lib._shared_module is not None)
    print(json.dumps(out))
"""


def test_cached_code_is_loaded_without_parsing_its_bitcode_until_linked(tmp_path):
    """A warm process loads kernels from object code without parsing the bitcode kept for
    linking (``cpu_cache._LazilyLinkedLibrary``); a kernel it compiles still links the helper
    functions it loaded that way, which then parse it."""
    first, second = _two_processes(tmp_path, _LAZY_BITCODE_SCRIPT, (["old"], ["new"]))
    assert first["waves_lazy"] == [False, False]  # compiled: Numba's own libraries
    assert second["waves_lazy"] == [True, True]  # loaded, bitcode never parsed
    assert "sqrt" in second["linked"] and "sincos32" in second["linked"]  # wp.sin's helper
    x = np.linspace(0.1, 2.0, 16, dtype=np.float32).astype(np.float64)
    assert second["values"][0] == first["values"][0]
    assert second["grads"][0] == first["grads"][0]
    np.testing.assert_allclose(second["values"][1], np.sqrt(x) * np.sin(x) + 2, rtol=1e-6)
    np.testing.assert_allclose(second["grads"][1],
                               0.5 / np.sqrt(x) * np.sin(x) + np.sqrt(x) * np.cos(x), rtol=1e-5)


_SWAPPED_CACHE_SCRIPT = """
    import glob
    import json
    import os
    import sys

    from numba import njit

    from difftape._src.backends import cpu_cache

    @njit(cache=True)
    def plus_one(x):
        return x + 1

    if sys.argv[1] == "fill":
        print(json.dumps([plus_one(1), plus_one(1.5)]))
    elif sys.argv[1] == "swap":  # each signature's entry now names the other's file
        first, second = sorted(glob.glob(os.path.join(os.environ["NUMBA_CACHE_DIR"], "**",
                                                      "*plus_one*.nbc"), recursive=True))
        os.replace(first, first + ".tmp")
        os.replace(second, first)
        os.replace(first + ".tmp", second)
        print(json.dumps(None))
    else:
        cpu_cache.load_only(plus_one)
        print(json.dumps([plus_one(1), plus_one(1.5)]))
"""


def test_a_cache_entry_holding_another_signature_is_a_miss(tmp_path):
    """Processes compiling one function at once can leave Numba's index naming another
    signature's file; loading it must not stand in for the one asked for (debug-mode index
    checks then failed to compile: "Known signatures: ...")."""
    filled, _, loaded = _two_processes(tmp_path, _SWAPPED_CACHE_SCRIPT,
                                       (["fill"], ["swap"], ["load"]))
    assert filled == [2, 2.5] and loaded == [2, 2.5]
    assert type(loaded[0]) is int  # not the float signature's code (2.0)


@wp.kernel
def claim_and_swap(flags: wp.array(dtype=wp.int32), slots: wp.array(dtype=float),
                   olds: wp.array(dtype=float), winners: wp.array(dtype=wp.int32),
                   signed_zeros: wp.array(dtype=float)):
    i = wp.tid()
    if wp.atomic_cas(flags, 0, 0, 1) == 0:  # one thread claims the flag
        winners[i] = 1
    olds[i] = wp.atomic_exch(slots, i % 4, float(i))
    wp.atomic_cas(signed_zeros, i % 2, 0.0, 1.0)  # by value: -0.0 equals 0.0


@pytest.mark.parametrize("mode", ["serial", "parallel", "auto"])
def test_atomic_exch_and_cas_in_every_mode(mode, monkeypatch):
    """Warp's lock and swap atomics: one thread claims a flag, exchanges hand every value on
    exactly once, a compare matches floats by value (Warp's CPU code); serial code and
    LLVM's atomicrmw/cmpxchg (parallel) alike."""
    monkeypatch.setattr(wp.config, "cpu_parallel", mode)
    n = 40_000
    flags, slots = wp.zeros(1, dtype=wp.int32), wp.zeros(4, dtype=float)
    olds, winners = wp.zeros(n, dtype=float), wp.zeros(n, dtype=wp.int32)
    signed = wp.array(np.array([-0.0, np.nan], np.float32), dtype=float)
    wp.launch(claim_and_swap, n, inputs=[flags, slots, olds, winners, signed])
    assert winners.numpy().sum() == 1 and flags.numpy().tolist() == [1]
    handed_on = np.concatenate([olds.numpy(), slots.numpy()])  # every value once, 4 zeros
    assert sorted(handed_on.tolist()) == [0.0] * 4 + [float(k) for k in range(n)]
    assert signed.numpy()[0] == 1.0 and np.isnan(signed.numpy()[1])
    assert "rt_atomic_cas" in claim_and_swap.source(parallel=True)


@wp.kernel
def exchange_vectors(v: wp.array(dtype=wp.vec3), x: wp.array(dtype=float),
                     old: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    old[i] = wp.atomic_exch(v, i, wp.vec3(x[i], 2.0 * x[i], 3.0))


def test_atomic_exch_of_vectors_has_no_gradient():
    v = wp.array(np.ones((2, 3), np.float32), dtype=wp.vec3, requires_grad=True)
    x = wp.array([1.0, 2.0], dtype=float, requires_grad=True)
    old = wp.zeros(2, dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(exchange_vectors, 2, inputs=[v, x, old])
    tape.backward(grads={v: wp.ones(2, dtype=wp.vec3)})
    assert v.numpy().tolist() == [[1.0, 2.0, 3.0], [2.0, 4.0, 3.0]]
    assert old.numpy().tolist() == [[1.0] * 3] * 2 and not x.grad.numpy().any()  # Warp: none
