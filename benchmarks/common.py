"""Shared helpers of the benchmark harness: loading workloads, machine facts, noise, errors."""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ["elementwise", "mass_spring", "dynamic_loop", "stencil", "launch_overhead",
             "rigid_chain", "elastic_energy", "particle_grid"]
IMPLS = ["warp", "difftape", "taichi"]

# Gradient tolerance: max|g - g64| / max|g64| for a float32 computation.
TOLERANCE = {"elementwise": 1e-5, "mass_spring": 1e-4, "dynamic_loop": 1e-4,
             "stencil": 1e-5, "launch_overhead": 1e-4, "rigid_chain": 1e-4,
             "elastic_energy": 1e-4, "particle_grid": 1e-4}
# (workload, impl) pairs whose gradient is known wrong: reported, never failed.
KNOWN_WRONG = {("dynamic_loop", "warp"): "Warp skips dynamic loops in its adjoint replay"}



def _unique(name: str) -> str:
    k = 1
    candidate = name
    while candidate in sys.modules:
        k += 1
        candidate = f"{name}_{k}"
    return candidate


def load_warp_style(workload: str, wp, path: str | None = None):
    """Execute ``workloads/<workload>.py`` (or ``path``) with ``wp`` injected (a fresh module
    each call)."""
    lib = wp.__name__.split(".")[0]
    name = _unique(f"bench_{workload}_{lib}")  # stable: Warp's kernel cache keys on it
    path = path or os.path.join(HERE, "workloads", workload + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    module.wp = wp
    sys.modules[name] = module  # Warp looks kernels' modules up by name
    spec.loader.exec_module(module)
    return module


def has_taichi_version(workload: str) -> bool:
    return os.path.exists(os.path.join(HERE, "taichi_workloads", workload + ".py"))


def load_taichi(workload: str, ti):
    name = _unique(f"bench_ti_{workload}")
    path = os.path.join(HERE, "taichi_workloads", workload + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    module.ti = ti
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def missing_features(workload: str, wp) -> list[str]:
    """The names a workload REQUIRES that ``wp`` lacks (read without executing the module)."""
    import ast
    path = os.path.join(HERE, "workloads", workload + ".py")
    tree = ast.parse(open(path).read())
    required: tuple = ()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "REQUIRES"
                                                for t in node.targets):
            required = ast.literal_eval(node.value)
    return [r for r in required if not hasattr(wp, r)]


def max_rel_error(got: dict, ref: dict) -> float:
    """max over gradients of max|g - g64| / max|g64| (float64 arithmetic)."""
    import numpy as np
    worst = 0.0
    for key, r in ref.items():
        g = np.asarray(got[key], dtype=np.float64).reshape(r.shape)
        scale = float(np.max(np.abs(r))) or 1.0
        err = float(np.max(np.abs(g - r))) / scale
        if not np.all(np.isfinite(g)):
            err = float("inf")
        worst = max(worst, err)
    return worst


def machine() -> dict:
    model = platform.processor() or ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem_gb = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "mem_gb": mem_gb,
            "os": platform.platform(), "python": platform.python_version()}


def _proc_stat_busy() -> float | None:
    """System-wide busy CPU seconds (all cores), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
    except OSError:
        return None
    vals = [int(v) for v in fields]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return (sum(vals[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class NoiseMeter:
    """CPU used by *other* processes during a measurement, in cores (PERF-NOTES §2).

    System busy time minus this process's own CPU time, divided by the wall time. Resolution is
    one clock tick (10 ms), so it is coarse for measurements under ~100 ms.
    """

    def start(self):
        self.sys0 = _proc_stat_busy()
        t = os.times()
        self.own0 = t.user + t.system
        self.wall0 = time.perf_counter()

    def stop(self) -> float:
        wall = time.perf_counter() - self.wall0
        if self.sys0 is None or wall <= 0:
            return 0.0
        t = os.times()
        own = t.user + t.system - self.own0
        other = (_proc_stat_busy() - self.sys0) - own
        return max(0.0, other / wall)


def library_versions() -> dict:
    out = {}
    for name in ("numpy", "numba", "warp", "taichi", "difftape"):
        try:
            from importlib.metadata import version
            out[name] = version("warp-lang" if name == "warp" else name)
        except Exception:
            out[name] = "not installed"
    return out


class _Stub:
    """Stands in for ``wp`` when only a workload's numpy parts (inputs, reference) are needed."""

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _Stub):
            return args[0]  # used as a decorator
        return self


def load_numpy_part(workload: str):
    """The workload module executed with a stub ``wp``: make_inputs/reference without a library."""
    stub = _Stub()
    name = _unique(f"bench_{workload}_numpy")
    path = os.path.join(HERE, "workloads", workload + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    module.wp = stub
    spec.loader.exec_module(module)
    return module
