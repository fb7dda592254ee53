"""Generated kernels compile through Numba's nopython pipeline less the passes generated code does
not need (``backends/cpu_pipeline.py``), SSA reconstruction among them. A local defined with two
types, which SSA would keep apart, sends the function back through Numba's default pipeline, so
that a result never depends on which pipeline compiled it."""

import textwrap

import numpy as np
from numba import float32, float64, int32, int64, njit, uint64

from difftape._src.backends.cpu_pipeline import GAVE_UP, GeneratedCodeCompiler
from tests.fresh_process import run_fresh

TRIMMED, DEFAULT = "difftape_generated", "nopython"
I32_ZERO, I32_STEP = np.int32(0), np.int32(1 << 30)  # module constants, as generated code has


def _pipelines(dispatcher) -> list[str]:
    """The pipeline that compiled each of ``dispatcher``'s overloads."""
    return [name for cres in dispatcher.overloads.values()
            for name in cres.metadata["pipeline_times"]]


def test_generated_kernels_compile_in_the_trimmed_pipeline(tmp_path):
    """Forward and adjoint of kernels with composites, a dynamic loop carrying a product, a
    branch, integer and float thread-invariant sums and float32 sin/cos pairs: all compiled
    by the trimmed pipeline (a fresh process, so that Numba compiles rather than loads)."""
    script = textwrap.dedent("""
        import numpy as np
        import difftape as wp
        from difftape._src.backends.cpu_pipeline import GAVE_UP

        @wp.kernel
        def chain(q: wp.array(dtype=float), base: wp.array(dtype=wp.transform),
                  tip: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float),
                  count: wp.array(dtype=int)):
            i = wp.tid()
            x = base[i]
            for k in range(3):
                x = x * wp.transform(wp.vec3(0.5, 0.0, 0.0),
                                     wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), q[i]))
            p = wp.transform_point(x, wp.vec3(1.0, 2.0, 3.0))
            tip[i] = p
            wp.atomic_add(loss, 0, wp.dot(p, p) + wp.sin(q[i]) * wp.cos(q[i]))
            wp.atomic_add(count, 0, 1)

        @wp.kernel
        def power(x: wp.array(dtype=float), n: wp.array(dtype=int),
                  loss: wp.array(dtype=float)):
            i = wp.tid()
            p = float(1.0)
            for k in range(n[i]):
                if p < 10.0:
                    p = p * x[i]
            wp.atomic_add(loss, 0, p)

        rng = np.random.default_rng(0)
        m = 7
        q = wp.array(rng.uniform(-1, 1, m).astype(np.float32), requires_grad=True)
        pose = np.concatenate([rng.uniform(-1, 1, (m, 3)), np.tile([0, 0, 0, 1.0], (m, 1))], 1)
        base = wp.array(pose.astype(np.float32), dtype=wp.transform, requires_grad=True)
        tip = wp.zeros(m, dtype=wp.vec3, requires_grad=True)
        loss = wp.zeros(2, dtype=float, requires_grad=True)
        count = wp.zeros(1, dtype=int)
        x = wp.array(rng.uniform(0.5, 1.5, m).astype(np.float32), requires_grad=True)
        n = wp.array(np.arange(m, dtype=np.int32))
        tape = wp.Tape()
        with tape:
            wp.launch(chain, dim=m, inputs=[q, base], outputs=[tip, loss, count])
            wp.launch(power, dim=m, inputs=[x, n], outputs=[loss])
        tape.backward(grads={loss: wp.array(np.ones(2, np.float32))})
        for kernel in (chain, power):
            for program in kernel._built.values():
                for fn in (program.forward, program.adjoint):
                    if fn is not None:
                        for cres in fn.overloads.values():
                            print(fn.__name__ + ":" + ",".join(cres.metadata["pipeline_times"]))
        print("gave_up:", len(GAVE_UP), *[str(g).replace(" ", "_") for g in GAVE_UP])
        print("count:", int(count.numpy()[0]))
    """)
    words = run_fresh(tmp_path, script)
    compiled = [w for w in words if ":" in w and not w.startswith(("gave_up", "count"))]
    names = {w.split(":")[0] for w in compiled}
    assert {"chain_forward", "chain_adjoint", "power_forward", "power_adjoint"} <= names, words
    assert all(w.endswith(":" + TRIMMED) for w in compiled), words
    assert words[words.index("gave_up:") + 1] == "0", words
    assert words[words.index("count:") + 1] == "7", words


def test_a_local_of_two_float_types_falls_back_to_numbas_pipeline():
    def mixed(x):
        y = float32(x)
        y = y * float32(3.0)  # float32 arithmetic: rounds unlike float64
        if x > 10.0:
            y = float64(x) / 3.0
        return y

    trimmed, plain = njit(pipeline_class=GeneratedCodeCompiler)(mixed), njit(mixed)
    before = len(GAVE_UP)
    for x in (0.1, 0.7, 30.0):
        assert trimmed(x) == plain(x)
    assert _pipelines(trimmed) == [DEFAULT]
    assert len(GAVE_UP) == before + 1 and "float64" in GAVE_UP[-1][1]
    assert trimmed.nopython_signatures == plain.nopython_signatures


def test_integers_only_widen_within_their_signedness():
    def widened(n):  # int32, then an int64: held as int64, exactly as computed
        t = int32(n)
        if n > 3:
            t = int64(n) * 2
        return t

    def narrowed(n):  # Numba without SSA would hold this int64 sum in an int32
        t = I32_ZERO
        for _ in range(n):
            t += I32_STEP
        return t

    def signs(n):  # uint64 and int64 unify to float64
        t = uint64(n)
        if n > 3:
            t = int64(n) - 5
        return t

    for function, pipeline in ((widened, TRIMMED), (narrowed, DEFAULT), (signs, DEFAULT)):
        trimmed, plain = njit(pipeline_class=GeneratedCodeCompiler)(function), njit(function)
        for n in (2, 5):
            assert trimmed(n) == plain(n), function.__name__
        assert _pipelines(trimmed) == [pipeline], function.__name__
        assert trimmed.nopython_signatures == plain.nopython_signatures, function.__name__
    assert int(njit(pipeline_class=GeneratedCodeCompiler)(narrowed)(5)) == 5 << 30
    assert np.int64(5 << 30) > np.iinfo(np.int32).max
