"""One benchmark process: ``python -m benchmarks.worker <mode> '<json spec>' <out.json>``.

Modes:
  timing    interleaved warm-kernel timing of one workload for several implementations
  firstrun  one implementation in a fresh process: import, compile or cache load, first result
  memory    peak resident memory of one workload's tape (forward + backward) for one implementation
  zoo       the kernel zoo (benchmarks/zoo.py): small kernels per value type, warp-lang and difftape

The runner (``benchmarks/run.py``) starts these; each writes its result as JSON to <out.json>.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import statistics
import sys
import time

T_ENTER = time.time()

from benchmarks import common  # noqa: E402


class Unavailable(Exception):
    """The implementation cannot run this workload (e.g. a missing feature)."""


# ----------------------------------------------------------------------------- implementations


class WarpStyle:
    """warp-lang or difftape running the shared Warp-style workload module."""

    def __init__(self, name: str, threads: int, cache_dir: str | None,
                 parallel_mode: str = "parallel", flush_denormals: bool = False):
        self.name = name
        self.threads = threads
        if name == "warp":
            import warp as wp
            wp.config.quiet = True
            if cache_dir:
                wp.config.kernel_cache_dir = cache_dir
            wp.init()
            self.mode = "single thread"
        else:
            import difftape as wp
            import numba
            if threads > 1:
                numba.set_num_threads(threads)
                wp.config.cpu_parallel = parallel_mode
                self.mode = f"cpu_parallel={parallel_mode}, {threads} threads"
            else:
                wp.config.cpu_parallel = "serial"
                self.mode = "cpu_parallel=serial"
            if flush_denormals:
                wp.config.flush_denormals = True
                self.mode += ", flush_denormals"
        self.wp = wp

    def load(self, workload: str):
        missing = common.missing_features(workload, self.wp)
        if missing:
            tag = "vec3 pending" if "vec3" in missing else "missing " + ", ".join(missing)
            raise Unavailable(tag)
        self.module = common.load_warp_style(workload, self.wp)

    def setup(self, inputs):
        self.state = self.module.setup(inputs)

    def prepare(self):
        self.module.prepare(self.state)

    def run(self) -> tuple[float, float]:
        m, st, wp = self.module, self.state, self.wp
        tape = wp.Tape()
        t0 = time.perf_counter()
        with tape:
            m.forward(st)
        t1 = time.perf_counter()
        tape.backward(m.loss(st))
        t2 = time.perf_counter()
        self.tape = tape  # keep it alive until the next run (memory mode reads the peak)
        return t1 - t0, t2 - t1

    def gradients(self):
        return self.module.gradients(self.state)

    def release(self):
        self.state = None
        self.tape = None


class Taichi:
    def __init__(self, threads: int, cache_dir: str | None):
        import taichi as ti
        kwargs = {}
        if cache_dir:
            kwargs = {"offline_cache": True, "offline_cache_file_path": cache_dir}
        ti.init(arch=ti.cpu, cpu_max_num_threads=threads, ad_stack_size=256,
                log_level=ti.WARN, default_fp=ti.f32, **kwargs)
        self.ti = ti
        self.name = "taichi"
        self.threads = threads
        self.mode = f"cpu_max_num_threads={threads}"

    def load(self, workload: str):
        if not common.has_taichi_version(workload):
            raise Unavailable("no Taichi version (Taichi has no quaternion or transform types)")
        self.module = common.load_taichi(workload, self.ti)

    def setup(self, inputs):
        self.state = self.module.setup(inputs)

    def prepare(self):
        self.module.prepare(self.state)
        self.ti.sync()

    def run(self) -> tuple[float, float]:
        m, st, ti = self.module, self.state, self.ti
        t0 = time.perf_counter()
        m.forward(st)
        ti.sync()
        t1 = time.perf_counter()
        m.backward(st)
        ti.sync()
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1

    def gradients(self):
        return self.module.gradients(self.state)

    def release(self):
        self.state = None


class NumpyCopy:
    """Memory-bandwidth probe timed in the same rounds as the workloads: ``numpy.copyto`` of a
    256 MiB float32 array; "fwd" is the copy, "bwd" is 0. GB/s = 2 * bytes / time."""

    name = "numpy_copy"
    mode = "numpy.copyto, 256 MiB float32"

    def __init__(self, mb: int = 256):
        import numpy as np
        self.src = np.random.default_rng(0).random(mb * 2**20 // 4, dtype=np.float32)
        self.dst = np.empty_like(self.src)
        self.bytes = 2 * self.src.nbytes

    def prepare(self):
        pass

    def run(self) -> tuple[float, float]:
        import numpy as np
        t0 = time.perf_counter()
        np.copyto(self.dst, self.src)
        return time.perf_counter() - t0, 0.0


def make_impl(name: str, threads: int, cache_dir: str | None = None,
              parallel_mode: str = "parallel", flush_denormals: bool = False):
    if name == "taichi":
        return Taichi(threads, cache_dir)
    return WarpStyle(name, threads, cache_dir, parallel_mode, flush_denormals)


class FpState:
    """Each implementation runs in the x86 FP state (MXCSR) its own initialisation leaves.

    ``ti.init`` sets flush-to-zero on the calling thread for the whole process; without this,
    warp and difftape would run with it too whenever Taichi shares their process, and workloads
    that make denormals (the dynamic loop: x**k) would run several times faster than they do for
    a user of either library."""

    def __init__(self):
        import platform
        self.enabled = platform.machine().lower() in ("x86_64", "amd64")
        if self.enabled:
            from difftape._src.backends.cpu_runtime import fp_control, set_fp_control
            self.get, self.set = fp_control, set_fp_control
            self.default = self.get()

    def adopt(self, impl) -> None:
        """Remember the state ``impl``'s initialisation left, then restore the default."""
        if self.enabled:
            impl.fp_state = self.get()
            self.set(self.default)
            impl.mode += f", MXCSR {impl.fp_state:#06x}"

    def enter(self, impl) -> None:
        if self.enabled:
            self.set(getattr(impl, "fp_state", self.default))


# ----------------------------------------------------------------------------- modes


def _grad_check(workload: str, impl, ref) -> dict:
    err = common.max_rel_error(impl.gradients(), ref)
    tol = common.TOLERANCE[workload]
    known = common.KNOWN_WRONG.get((workload, impl.name))
    status = "ok" if err <= tol else ("known wrong" if known else "FAIL")
    return {"max_rel_error": err, "tolerance": tol, "status": status}


def timing(spec: dict) -> dict:
    workload, threads = spec["workload"], spec["threads"]
    rounds, warmup = spec["rounds"], spec.get("warmup", 1)
    threshold, retries = spec.get("noise_threshold", 0.1), spec.get("retries", 1)
    retry_max_s = spec.get("retry_max_s", 2.0)  # longer samples average the noise out
    numpy_part = common.load_numpy_part(workload)
    inputs = numpy_part.make_inputs(spec["scale"], seed=0)
    ref = numpy_part.reference(inputs) if spec.get("check", True) else None

    out = {"spec": spec, "impls": {}}
    impls = []
    fp = FpState()
    for name in spec["impls"]:
        rec = out["impls"][name] = {"fwd": [], "bwd": [], "noise": [], "retried": 0}
        try:
            impl = make_impl(name, threads, spec.get("cache_dirs", {}).get(name),
                             spec.get("parallel_mode", "parallel"),
                             spec.get("flush_denormals", False))
            fp.adopt(impl)
            rec["mode"] = impl.mode
            impl.load(workload)
            impl.setup(inputs)
        except Unavailable as err:
            rec["status"] = f"n/a ({err})"
            continue
        except Exception as err:  # a library that cannot run this program: report, go on
            rec["status"] = f"n/a (error: {type(err).__name__}: {str(err).splitlines()[0][:120]})"
            continue
        rec["status"] = "ok"
        impls.append(impl)

    if spec.get("bandwidth"):
        probe = NumpyCopy()
        out["impls"][probe.name] = {"fwd": [], "bwd": [], "noise": [], "retried": 0,
                                    "status": "ok", "mode": probe.mode, "bytes": probe.bytes}
        impls.append(probe)

    meter = common.NoiseMeter()
    gc.disable()
    try:
        for r in range(warmup + rounds):
            order = impls[r % len(impls):] + impls[:r % len(impls)] if impls else []
            for impl in order:
                rec = out["impls"][impl.name]
                for attempt in range(retries + 1):
                    gc.collect()
                    fp.enter(impl)
                    impl.prepare()
                    meter.start()
                    fwd, bwd = impl.run()
                    noise = meter.stop()
                    if (r < warmup or noise <= threshold or attempt == retries
                            or fwd + bwd > retry_max_s):
                        break
                    rec["retried"] += 1
                if r < warmup:
                    if r == warmup - 1 and ref is not None and hasattr(impl, "gradients"):
                        rec["grad"] = _grad_check(workload, impl, ref)
                    continue
                rec["fwd"].append(fwd)
                rec["bwd"].append(bwd)
                rec["noise"].append(noise)
    finally:
        gc.enable()
    for rec in out["impls"].values():
        if rec["fwd"]:
            rec["fwd_ms"] = 1e3 * statistics.median(rec["fwd"])
            rec["bwd_ms"] = 1e3 * statistics.median(rec["bwd"])
            rec["fwd_min_ms"] = 1e3 * min(rec["fwd"])
            rec["bwd_min_ms"] = 1e3 * min(rec["bwd"])
            rec["noise_median"] = statistics.median(rec["noise"])
    return out


def firstrun(spec: dict) -> dict:
    """Time from process start to the first finished forward + backward (and its parts)."""
    workload, name = spec["workload"], spec["impl"]
    numpy_part = common.load_numpy_part(workload)
    inputs = numpy_part.make_inputs(spec["scale"], seed=0)
    t_import0 = time.time()
    impl = make_impl(name, spec["threads"], spec.get("cache_dir"),
                     spec.get("parallel_mode", "parallel"), spec.get("flush_denormals", False))
    t_import1 = time.time()
    try:
        impl.load(workload)
    except Unavailable as err:
        return {"status": f"n/a ({err})"}
    impl.setup(inputs)
    impl.prepare()
    t_setup = time.time()
    impl.run()
    t_first = time.time()
    impl.prepare()
    impl.run()
    t_second = time.time()
    return {"status": "ok", "mode": impl.mode,
            "interpreter_s": T_ENTER - spec["spawn_time"],
            "import_init_s": t_import1 - t_import0,
            "first_call_s": t_first - t_setup,
            "second_call_s": t_second - t_first,
            "first_result_s": t_first - spec["spawn_time"]}


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field)


def _return_freed_memory() -> None:
    """Hand the heap's freed pages back to the system (glibc ``malloc_trim``), so that the
    baseline counts no memory the warm-up run freed: an allocator that reuses those pages for
    the full-size arrays would otherwise show less growth than the arrays' size."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def memory(spec: dict) -> dict:
    """Peak RSS of setup + forward + backward at full size, above a baseline taken after the
    kernels were compiled (on a tiny problem) and the numpy inputs were built."""
    workload, name = spec["workload"], spec["impl"]
    numpy_part = common.load_numpy_part(workload)
    tiny = numpy_part.make_inputs(1e-3, seed=0)
    inputs = numpy_part.make_inputs(spec["scale"], seed=0)
    impl = make_impl(name, spec["threads"], spec.get("cache_dir"))
    try:
        impl.load(workload)
    except Unavailable as err:
        return {"status": f"n/a ({err})"}
    impl.setup(tiny)
    for _ in range(2):
        impl.prepare()
        impl.run()
    impl.release()
    gc.collect()
    _return_freed_memory()
    base = _status_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to the current RSS
    impl.setup(inputs)
    after_setup = _status_kb("VmRSS")
    for _ in range(2):
        impl.prepare()
        impl.run()
    peak = _status_kb("VmHWM")
    return {"status": "ok", "mode": impl.mode, "baseline_mb": base / 1024,
            "state_mb": (after_setup - base) / 1024, "peak_mb": (peak - base) / 1024}


def zoo(spec: dict) -> dict:
    """The kernel zoo (``benchmarks/zoo.py``): each case's tape forward and backward under each
    implementation, alternating, medians; and how far difftape's gradients are from warp-lang's."""
    import numpy as np

    rounds, scale = spec["rounds"], spec.get("scale", 1.0)
    impls = [make_impl(name, 1, spec.get("cache_dirs", {}).get(name)) for name in spec["impls"]]
    path = os.path.join(common.HERE, "zoo.py")
    modules = {impl.name: common.load_warp_style("zoo", impl.wp, path) for impl in impls}
    cases = next(iter(modules.values()))  # the case table, the same in every copy
    out = {}
    for case in spec.get("cases") or cases.CASES:
        data = cases.make_arrays(case, scale)
        dim = cases.launch_dim(case, scale)
        runs, rec = {}, {}
        out[case] = rec
        for impl in impls:
            wp = impl.wp
            arrays = [wp.array(d, dtype=wp.int32) if d.dtype == np.int32 else
                      wp.array(d, dtype=getattr(wp, spec_[0]), requires_grad=True)
                      for d, spec_ in zip(data, cases.CASES[case][1])]
            runs[impl.name] = _zoo_run(wp, getattr(modules[impl.name], case), dim, arrays)
        try:
            for run in runs.values():
                run()
                run()
            samples = {name: [] for name in runs}
            for r in range(rounds):
                for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
                    samples[name].append(runs[name]())
        except Exception as err:  # a library that cannot run this kernel: report, go on
            rec["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
            continue
        for name, times in samples.items():
            rec[name] = {"fwd_ms": 1e3 * statistics.median(t[0] for t in times),
                         "bwd_ms": 1e3 * statistics.median(t[1] for t in times)}
        rec["warp_gradient_wrong"] = case in cases.WARP_GRADIENT_WRONG
        grads = {name: run.gradients() for name, run in runs.items()}
        if "warp" in grads and "difftape" in grads:
            rec["grad_diff"] = max(
                float(np.max(np.abs(ours - theirs)) / max(float(np.max(np.abs(theirs))), 1e-30))
                for ours, theirs in zip(grads["difftape"], grads["warp"]))
    return {"cases": out}


def _zoo_run(wp, kernel, dim, arrays):
    """A callable timing one tape forward and backward of ``kernel`` (the last array seeded
    with ones), with ``gradients()`` for the inputs' gradients after its last call."""
    seed = wp.ones_like(arrays[-1])

    def run() -> tuple[float, float]:
        for a in arrays:
            if a.grad is not None:
                a.grad.zero_()
        tape = wp.Tape()
        t0 = time.perf_counter()
        with tape:
            wp.launch(kernel, dim, inputs=arrays, device="cpu")
        t1 = time.perf_counter()
        tape.backward(grads={arrays[-1]: seed})
        return t1 - t0, time.perf_counter() - t1

    run.gradients = lambda: [a.grad.numpy().astype("f8") for a in arrays[:-1]
                             if a.grad is not None]
    return run


def main(argv):
    mode, spec, out_path = argv[1], json.loads(argv[2]), argv[3]
    result = {"timing": timing, "firstrun": firstrun, "memory": memory, "zoo": zoo}[mode](spec)
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv)
