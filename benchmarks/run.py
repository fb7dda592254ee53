"""difftape benchmark harness (issue 5): ``make bench`` or ``python -m benchmarks.run [--quick]``.

Runs the same Warp-style workloads under warp-lang and difftape, and their Taichi versions,
interleaved in one process per (workload, thread count); checks every gradient against a float64
reference; times cold / warm disk caches and peak memory in fresh processes; writes
``benchmarks/RESULTS.md`` (tables) and ``benchmarks/results.json`` (every sample).
See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks import common

ROOT = os.path.dirname(common.HERE)
BENCH_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "difftape-bench")
MAIN_WORKLOADS = ["elementwise", "mass_spring", "dynamic_loop", "stencil", "launch_overhead",
                  "rigid_chain", "elastic_energy", "particle_grid"]
SCALING_WORKLOADS = ["elementwise", "mass_spring"]
LABEL = {"elementwise": "1 elementwise", "mass_spring": "2 mass-spring",
         "dynamic_loop": "3 dynamic loop", "stencil": "4 stencil",
         "launch_overhead": "5 launch overhead", "rigid_chain": "7 rigid chain",
         "elastic_energy": "8 elastic energy", "particle_grid": "9 particle to grid"}


# ----------------------------------------------------------------------------- processes


def _cache_env(root: str) -> tuple[dict, dict]:
    """Environment and per-library cache dirs rooted at ``root``."""
    env = dict(os.environ)
    env["DIFFTAPE_CACHE_DIR"] = os.path.join(root, "difftape")
    env["NUMBA_CACHE_DIR"] = os.path.join(root, "numba")  # also difftape's builtin functions
    env.setdefault("PYTHONHASHSEED", "0")
    # Bytecode caches as a pip install leaves them: warp's, numba's and taichi's .pyc files come
    # with their wheels; difftape's are compiled once (``_compile_difftape``), not per process.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    dirs = {"warp": os.path.join(root, "warp"), "taichi": os.path.join(root, "taichi")}
    return env, dirs


def _compile_difftape() -> None:
    """Write difftape's .pyc files, as installing it would (this checkout may have none when
    PYTHONDONTWRITEBYTECODE is set): a start-up measurement must not include compiling them."""
    import compileall

    compileall.compile_dir(os.path.join(ROOT, "difftape"), quiet=1)


def run_worker(mode: str, spec: dict, env: dict, log, timeout: float = 1800,
               attempts: int = 2) -> dict:
    """Run one worker process; a crashed worker (not a timeout) is retried once."""
    for _ in range(attempts):
        res = _run_worker_once(mode, spec, env, log, timeout)
        if "error" not in res or "timed out" in res["error"]:
            break
    return res


def _run_worker_once(mode: str, spec: dict, env: dict, log, timeout: float) -> dict:
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    spec = dict(spec)
    spec["spawn_time"] = time.time()
    cmd = [sys.executable, "-m", "benchmarks.worker", mode, json.dumps(spec), out]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout, text=True)
        log.write(f"\n===== {mode} {json.dumps(spec)}\n{proc.stdout}")
        log.flush()
        if proc.returncode != 0:
            tail = proc.stdout.strip().splitlines()[-3:]
            return {"error": f"worker exited with {proc.returncode}: " + " | ".join(tail)}
        with open(out) as f:
            return json.load(f)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    finally:
        os.unlink(out)


def measure_bandwidth(mb: int = 256, repeats: int = 7) -> dict:
    """Memory bandwidth from numpy.copyto of a large float32 array (bytes read + written)."""
    import numpy as np
    n = mb * 2**20 // 4
    src = np.random.default_rng(0).random(n, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    return {"array_mb": mb, "median_s": med, "gbps": 2 * n * 4 / med / 1e9,
            "best_gbps": 2 * n * 4 / times[0] / 1e9}


def _git_state() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "difftape"], cwd=ROOT,
                               text=True, capture_output=True).stdout.strip()
        return head + (" + uncommitted changes under difftape/" if dirty else "")
    except OSError:
        return "unknown"


# ----------------------------------------------------------------------------- formatting


def _ms(rec: dict | None, key: str) -> str:
    if not rec:
        return "–"
    if key in rec:
        v = rec[key]
        return f"{v:.1f}" if v >= 10 else f"{v:.2f}"
    status = rec.get("status", "missing")
    return status if status != "ok" else "–"


def _ratio(a: dict | None, b: dict | None, key: str) -> float | None:
    if a and b and key in a and key in b and b[key] > 0:
        return a[key] / b[key]
    return None


def _s(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.2f}" if v >= 0.1 else f"{v * 1e3:.0f} ms"


def _fmt_ratio(r: float | None) -> str:
    return "–" if r is None else f"{r:.2f}"


def _grad_cell(rec: dict | None) -> str:
    if not rec:
        return "–"
    g = rec.get("grad")
    if not g:
        return rec.get("status", "–") if rec.get("status") != "ok" else "–"
    mark = {"ok": "", "known wrong": " (known wrong)", "FAIL": " **FAIL**"}[g["status"]]
    return f"{g['max_rel_error']:.1e}{mark}"


def render(results: dict) -> str:
    cfg, mach = results["config"], results["machine"]
    lines = []
    add = lines.append
    add("# difftape benchmark results")
    add("")
    add(f"Generated by `python -m benchmarks.run{' --quick' if cfg['quick'] else ''}` on "
        f"{results['date']} (total {results['elapsed_s'] / 60:.1f} min). "
        "See `benchmarks/README.md` for what each column means.")
    add("")
    add(f"* Machine: **{mach['cpu']}**, {mach['cores']} cores, {mach['mem_gb']} GiB RAM, "
        f"{mach['os']}, Python {mach['python']}.")
    v = results["versions"]
    add(f"* Versions: difftape {v['difftape']} (git {results['git']}), warp-lang {v['warp']}, "
        f"taichi {v['taichi']}, numba {v['numba']}, numpy {v['numpy']}.")
    add(f"* Mode: {'**--quick** (sizes × ' + str(cfg['scale']) + ')' if cfg['quick'] else 'full sizes'}"
        f"; {cfg['rounds']} timed rounds after {cfg['warmup']} warm-up "
        f"round{'s' if cfg['warmup'] != 1 else ''}, implementations "
        f"interleaved with the order rotating each round; medians (scaling: "
        f"{cfg.get('scaling_rounds', '?')} rounds). A sample shorter than "
        f"{cfg.get('retry_max_s', '?')} s during which other processes used more than "
        f"{cfg['noise_threshold']} CPU was rerun (at most {cfg['retries']}×). Load average at start: {results['loadavg_start']}, at end: "
        f"{results['loadavg_end']}.")
    bw = results.get("bandwidth")
    if bw:
        add(f"* Memory bandwidth (numpy copy of {bw['array_mb']} MiB float32, read + write): "
            f"**{bw['gbps']:.1f} GB/s** median, {bw['best_gbps']:.1f} GB/s best.")
    add("")
    if cfg.get("note"):
        add(cfg["note"])
        add("")

    # main table
    add("## 1. Warm kernels: forward (the `with tape:` block) and `tape.backward()`, ms")
    add("")
    add("Ratios are other / difftape: above 1 means difftape is faster. Warp runs on one thread "
        "in both groups; threads = difftape's and Taichi's thread count (1: difftape "
        "`cpu_parallel=\"serial\"`; 2: `\"" + cfg["parallel_mode"] + "\"`). Each library runs "
        "in the x86 FP state its own initialisation leaves (Taichi: flush-to-zero; warp, "
        "difftape: IEEE denormals" + (", here overridden: difftape with "
                                      "`flush_denormals=True`" if cfg.get("flush_denormals")
                                      else "") + "), restored before each of its runs.")
    add("")
    add("| workload | threads | warp fwd | warp bwd | difftape fwd | difftape bwd | taichi fwd "
        "| taichi bwd | warp/dt fwd | warp/dt bwd | taichi/dt fwd | taichi/dt bwd "
        "| dt bwd/fwd |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, res in results["main"].items():
        wl, threads = key.rsplit("@", 1)
        if "error" in res:
            add(f"| {LABEL[wl]} | {threads} | {res['error']} |" + " |" * 11)
            continue
        im = res["impls"]
        w, d, t = im.get("warp"), im.get("difftape"), im.get("taichi")
        add(f"| {LABEL[wl]} | {threads} | {_ms(w, 'fwd_ms')} | {_ms(w, 'bwd_ms')} | "
            f"{_ms(d, 'fwd_ms')} | {_ms(d, 'bwd_ms')} | {_ms(t, 'fwd_ms')} | {_ms(t, 'bwd_ms')} | "
            f"{_fmt_ratio(_ratio(w, d, 'fwd_ms'))} | {_fmt_ratio(_ratio(w, d, 'bwd_ms'))} | "
            f"{_fmt_ratio(_ratio(t, d, 'fwd_ms'))} | {_fmt_ratio(_ratio(t, d, 'bwd_ms'))} | "
            f"{_fmt_ratio(_ratio_self(d))} |")
    add("")
    add("Noise: median CPU used by other processes during a sample (cores), and samples rerun:")
    add("")
    add("| workload | threads | warp | difftape | taichi |")
    add("|---|---|---|---|---|")
    for key, res in results["main"].items():
        if "error" in res:
            continue
        wl, threads = key.rsplit("@", 1)
        cells = []
        for name in ("warp", "difftape", "taichi"):
            rec = res["impls"].get(name, {})
            cells.append(f"{rec['noise_median']:.2f} ({rec['retried']} rerun)"
                         if "noise_median" in rec else "–")
        add(f"| {LABEL[wl]} | {threads} | " + " | ".join(cells) + " |")
    add("")

    lines.extend(_render_flushed(results.get("flushed") or {}))

    # gradients
    add("## 2. Gradient check against float64 (max |g − g64| / max |g64|)")
    add("")
    add("References: numpy float64 closed forms / hand-written adjoints (`reference()` in each "
        "workload). Tolerances: " + ", ".join(f"{k} {v:g}" for k, v in common.TOLERANCE.items())
        + ". Warp's dynamic-loop gradient is known wrong (it skips dynamic loops in its "
        "adjoint replay); it is reported, not failed.")
    add("")
    add("| workload | threads | warp | difftape | taichi |")
    add("|---|---|---|---|---|")
    for key, res in results["main"].items():
        if "error" in res:
            continue
        wl, threads = key.rsplit("@", 1)
        im = res["impls"]
        add(f"| {LABEL[wl]} | {threads} | {_grad_cell(im.get('warp'))} | "
            f"{_grad_cell(im.get('difftape'))} | {_grad_cell(im.get('taichi'))} |")
    add("")

    # launch overhead
    lo = [(k, r) for k, r in results["main"].items() if k.startswith("launch_overhead@")
          and "error" not in r]
    if lo:
        add("## 3. Per-launch cost (workload 5: 2000 tiny launches + 1 loss launch), µs per launch")
        add("")
        add("| threads | warp record | warp backward | difftape record | difftape backward | "
            "taichi launch | taichi grad | warp/dt record | warp/dt backward |")
        add("|---|---|---|---|---|---|---|---|---|")
        for key, res in lo:
            n = res["launches"]
            im = res["impls"]
            cells = []
            for name in ("warp", "difftape", "taichi"):
                rec = im.get(name, {})
                for k in ("fwd_ms", "bwd_ms"):
                    cells.append(f"{rec[k] * 1e3 / n:.1f}" if k in rec else "–")
            w, d = im.get("warp"), im.get("difftape")
            add(f"| {key.split('@')[1]} | " + " | ".join(cells) + f" | "
                f"{_fmt_ratio(_ratio(w, d, 'fwd_ms'))} | {_fmt_ratio(_ratio(w, d, 'bwd_ms'))} |")
        add("")

    # stencil bandwidth
    st = [(k, r) for k, r in results["main"].items() if k.startswith("stencil@")
          and "error" not in r]
    if st:
        add("## 4. Stencil forward vs memory bandwidth")
        add("")
        add(f"Minimum traffic of the forward: {results['stencil_bytes'] / 1e6:.0f} MB (each step "
            "reads and writes N² float32, plus one read for the loss). Bandwidth: a numpy copy "
            "of 256 MiB (read + write) timed in the same interleaved rounds as the stencil.")
        add("")
        add("| threads | impl | fwd ms | GB/s | bandwidth GB/s | fraction of bandwidth |")
        add("|---|---|---|---|---|---|")
        for key, res in st:
            ref_bw, _ = _bandwidth(results, res)
            for name in ("warp", "difftape", "taichi"):
                rec = res["impls"].get(name, {})
                if "fwd_ms" in rec and ref_bw:
                    gbps = results["stencil_bytes"] / (rec["fwd_ms"] / 1e3) / 1e9
                    add(f"| {key.split('@')[1]} | {name} | {rec['fwd_ms']:.1f} | {gbps:.1f} | "
                        f"{ref_bw:.1f} | {100 * gbps / ref_bw:.0f}% |")
        add("")

    # scaling
    if results.get("scaling"):
        add("## 5. Scaling: workloads 1 and 2 at growing size, ms (median)")
        add("")
        add("Size multipliers apply to the run's base size (elements / particles). Warp is "
            "single-threaded and is timed in the 1-thread group only.")
        add("")
        add("| workload | size | threads | warp fwd | warp bwd | difftape fwd | difftape bwd | "
            "taichi fwd | taichi bwd | warp/dt fwd | warp/dt bwd | taichi/dt fwd | taichi/dt bwd |")
        add("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for key, res in results["scaling"].items():
            wl, size, threads = key.split("@")
            if "error" in res:
                add(f"| {LABEL[wl]} | {size}× | {threads} | {res['error']} |" + " |" * 9)
                continue
            im = res["impls"]
            w, d, t = im.get("warp"), im.get("difftape"), im.get("taichi")
            add(f"| {LABEL[wl]} | {size}× | {threads} | {_ms(w, 'fwd_ms')} | "
                f"{_ms(w, 'bwd_ms')} | {_ms(d, 'fwd_ms')} | {_ms(d, 'bwd_ms')} | "
                f"{_ms(t, 'fwd_ms')} | {_ms(t, 'bwd_ms')} | "
                f"{_fmt_ratio(_ratio(w, d, 'fwd_ms'))} | {_fmt_ratio(_ratio(w, d, 'bwd_ms'))} | "
                f"{_fmt_ratio(_ratio(t, d, 'fwd_ms'))} | {_fmt_ratio(_ratio(t, d, 'bwd_ms'))} |")
        add("")

    # cache
    if results.get("cache"):
        add("## 6. Cold and warm disk cache: a fresh process per cell, seconds")
        add("")
        add(f"Problem size × {cfg['cache_scale']} (so the numbers are start-up and compile "
            "cost). *first call* = the first forward + backward (compile, or load from the disk "
            "cache, plus the run); *first result* = from the process being spawned to the end "
            "of that first backward (interpreter, imports, init, kernel definitions, data setup "
            "included). Cold = empty cache directories; warm = a later process on the same "
            "directories" + (f", the median of {cfg['warm_rounds']} (the implementations' "
                             "processes interleaved, the order rotating)"
                             if cfg.get("warm_rounds", 1) > 1 else "") + ".")
        add("")
        add("| workload | impl | cold first call | cold first result | warm first call | "
            "warm first result | import+init |")
        add("|---|---|---|---|---|---|---|")
        for key, res in results["cache"].items():
            wl, impl = key.split("@", 1)
            cold, warm = res.get("cold", {}), res.get("warm", {})
            if cold.get("status") != "ok":
                add(f"| {LABEL[wl]} | {impl} | {cold.get('status', cold.get('error'))} |"
                    + " |" * 4)
                continue
            add(f"| {LABEL[wl]} | {impl} | {_s(cold['first_call_s'])} | "
                f"{_s(cold['first_result_s'])} | {_s(warm.get('first_call_s'))} | "
                f"{_s(warm.get('first_result_s'))} | {_s(cold['import_init_s'])} |")
        add("")

    # memory
    if results.get("memory"):
        add("## 7. Peak memory of the mass-spring tape (forward + backward at base size)")
        add("")
        add("Peak resident memory above a baseline taken after import, kernel compilation (on a "
            "tiny problem), building the numpy inputs and handing freed heap pages back "
            "(`malloc_trim`); *state* = right after allocating the arrays (inputs, per-step "
            "states, gradients).")
        add("")
        add("| impl | state MB | peak MB |")
        add("|---|---|---|")
        for key, res in results["memory"].items():
            if res.get("status") == "ok":
                add(f"| {key} | {res['state_mb']:.1f} | {res['peak_mb']:.1f} |")
            else:
                add(f"| {key} | {res.get('status', res.get('error'))} | |")
        add("")

    add("## 8. Issue 5 targets (difftape's position today)")
    add("")
    add("| target | measured | met? |")
    add("|---|---|---|")
    for target, measured, met in evaluate_targets(results):
        add(f"| {target} | {measured} | {met} |")
    add("")
    zoo = results.get("zoo")
    if zoo:
        lines.extend(_render_zoo(zoo))
    return "\n".join(lines)


def _render_flushed(flushed: dict) -> list[str]:
    """Workload 3 with difftape in Taichi's FP mode (denormals flushed to zero)."""
    rows = [(key.rsplit("@", 1)[1], res["impls"]) for key, res in flushed.items()
            if "impls" in res]
    if not rows:
        return []
    lines = ["Workload 3 in Taichi's FP mode: its data underflow (`x**k` for |x| < 0.26 reaches "
             "float32's denormal range within 64 iterations), and x86 cores take a microcode "
             "assist for every denormal operand or result, which some (Intel) make ~100x slower "
             "than a plain operation. Taichi flushes denormals to zero; the rows above keep "
             "IEEE denormals in difftape, as warp-lang does. Here difftape runs with "
             "`wp.config.flush_denormals = True`, in rounds of its own against Taichi:", "",
             "| threads | difftape fwd | difftape bwd | taichi fwd | taichi bwd | taichi/dt fwd "
             "| taichi/dt bwd | dt gradient check |", "|---|---|---|---|---|---|---|---|"]
    for threads, im in rows:
        d, t = im.get("difftape"), im.get("taichi")
        lines.append(f"| {threads} | {_ms(d, 'fwd_ms')} | {_ms(d, 'bwd_ms')} | "
                     f"{_ms(t, 'fwd_ms')} | {_ms(t, 'bwd_ms')} | "
                     f"{_fmt_ratio(_ratio(t, d, 'fwd_ms'))} | "
                     f"{_fmt_ratio(_ratio(t, d, 'bwd_ms'))} | {_grad_cell(d)} |")
    return lines + [""]


def _render_zoo(zoo: dict) -> list[str]:
    lines = ["## 9. Kernel zoo: one small kernel per value type, one thread, ms", "",
             "`benchmarks/zoo.py`: each kernel a tape forward and `backward()` over 1M threads "
             "(300k spatial matrices; sizes × the run's scale), warp-lang and difftape "
             "(`cpu_parallel=\"serial\"`) alternating, medians. Ratios warp / difftape; *grad "
             "vs warp*: max |g − g_warp| / max |g_warp| over the inputs' gradients.", ""]
    if "error" in zoo:
        return lines + [f"Not measured: {zoo['error']}", ""]
    lines += ["| kernel | warp fwd | warp bwd | difftape fwd | difftape bwd | warp/dt fwd | "
              "warp/dt bwd | grad vs warp |", "|---|---|---|---|---|---|---|---|"]
    for case, rec in zoo["cases"].items():
        if "error" in rec or "difftape" not in rec or "warp" not in rec:
            lines.append(f"| {case} | {rec.get('error', 'not run')} | | | | | | |")
            continue
        w, d = rec["warp"], rec["difftape"]
        cells = [_ms(w, "fwd_ms"), _ms(w, "bwd_ms"), _ms(d, "fwd_ms"), _ms(d, "bwd_ms"),
                 _fmt_ratio(_ratio(w, d, "fwd_ms")), _fmt_ratio(_ratio(w, d, "bwd_ms")),
                 f"{rec['grad_diff']:.1e}" if "grad_diff" in rec else "–"]
        if rec.get("warp_gradient_wrong") and "grad_diff" in rec:
            cells[-1] += " (warp-lang's is wrong: its adjoint skips the loop)"
        lines.append(f"| {case} | {' | '.join(cells)} |")
    return lines + [""]


def _bandwidth(results: dict, res: dict) -> tuple[float | None, str]:
    """GB/s for the stencil fraction: the copy probe timed in the same rounds, else the
    separate measurement at the start of the run."""
    probe = res.get("impls", {}).get("numpy_copy", {})
    if "fwd_ms" in probe:
        return probe["bytes"] / (probe["fwd_ms"] / 1e3) / 1e9, "interleaved copy probe"
    bw = results.get("bandwidth")
    return (bw["gbps"], "start-of-run measurement") if bw else (None, "")


def _ratio_self(d: dict | None) -> float | None:
    if d and "fwd_ms" in d and "bwd_ms" in d and d["fwd_ms"] > 0:
        return d["bwd_ms"] / d["fwd_ms"]
    return None


def _yes(ok: bool | None) -> str:
    return "n/a" if ok is None else ("yes" if ok else "**no**")


def evaluate_targets(results: dict) -> list[tuple[str, str, str]]:
    rows = []
    main = results["main"]

    def impls(key):
        res = main.get(key)
        return None if not res or "error" in res else res["impls"]

    for threads in results["config"]["threads"]:
        for wl in ("elementwise", "mass_spring", "dynamic_loop", "stencil"):
            im = impls(f"{wl}@{threads}")
            if im is None:
                continue
            w, d, t = im.get("warp"), im.get("difftape"), im.get("taichi")
            for k, what in (("fwd_ms", "fwd"), ("bwd_ms", "bwd")):
                r = _ratio(w, d, k)
                rows.append((f"{LABEL[wl]}, {threads} thr: {what} ≥ 1.8× faster than warp-lang",
                             _fmt_ratio(r) + "×" if r else _ms(d, k), _yes(None if r is None
                                                                           else r >= 1.8)))
                r = _ratio(t, d, k)
                rows.append((f"{LABEL[wl]}, {threads} thr: {what} at least as fast as Taichi",
                             _fmt_ratio(r) + "×" if r else _ms(d, k), _yes(None if r is None
                                                                           else r >= 1.0)))
            flushed = results.get("flushed", {}).get(f"{wl}@{threads}", {}).get("impls")
            if flushed:
                for k, what in (("fwd_ms", "fwd"), ("bwd_ms", "bwd")):
                    r = _ratio(flushed.get("taichi"), flushed.get("difftape"), k)
                    rows.append((f"{LABEL[wl]}, {threads} thr, both flushing denormals: {what} "
                                 "at least as fast as Taichi", _fmt_ratio(r) + "×" if r else "–",
                                 _yes(None if r is None else r >= 1.0)))
            if wl != "dynamic_loop":
                r = _ratio_self(d)
                rows.append((f"{LABEL[wl]}, {threads} thr: backward ≤ 3× forward",
                             f"{r:.2f}×" if r else _ms(d, "bwd_ms"),
                             _yes(None if r is None else r <= 3.0)))
        im = impls(f"stencil@{threads}")
        ref_bw = _bandwidth(results, main[f"stencil@{threads}"])[0] if im else None
        if im and ref_bw and "fwd_ms" in im.get("difftape", {}):
            gbps = results["stencil_bytes"] / (im["difftape"]["fwd_ms"] / 1e3) / 1e9
            frac = gbps / ref_bw
            rows.append((f"4 stencil, {threads} thr: forward ≥ 60% of memory bandwidth",
                         f"{100 * frac:.0f}% ({gbps:.1f} of {ref_bw:.1f} GB/s)",
                         _yes(frac >= 0.6)))
        im = impls(f"launch_overhead@{threads}")
        if im:
            # The target: a launch's whole cost, recorded and then replayed; each part below.
            warp, ours = im.get("warp") or {}, im.get("difftape") or {}
            keys = ("fwd_ms", "bwd_ms")
            r = (sum(warp[k] for k in keys) / sum(ours[k] for k in keys)
                 if all(k in warp and k in ours for k in keys) else None)
            rows.append((f"5 launch, {threads} thr: per-launch cost (record + replay) ≥ 3× "
                         f"lower than warp-lang", _fmt_ratio(r) + "×",
                         _yes(None if r is None else r >= 3.0)))
            for k, what in (("fwd_ms", "recorded launch"), ("bwd_ms", "backward replay")):
                r = _ratio(im.get("warp"), im.get("difftape"), k)
                rows.append((f"5 launch, {threads} thr: per-{what} cost alone ≥ 3× lower",
                             _fmt_ratio(r) + "×", _yes(None if r is None else r >= 3.0)))
    for key, res in results.get("cache", {}).items():
        wl, impl = key.split("@", 1)
        if not impl.startswith("difftape"):
            continue
        warp = results["cache"].get(f"{wl}@warp", {})
        cold, warm = res.get("cold", {}), res.get("warm", {})
        wc, ww = warp.get("cold", {}), warp.get("warm", {})
        if cold.get("status") == "ok" and wc.get("status") == "ok":
            r = cold["first_call_s"] / wc["first_call_s"]
            rows.append((f"{LABEL[wl]}, {impl}: cold compile (first call) within 1.5× warp-lang",
                         f"{cold['first_call_s']:.2f} s vs {wc['first_call_s']:.2f} s "
                         f"({r:.2f}×)", _yes(r <= 1.5)))
        if warm.get("status") == "ok" and ww.get("status") == "ok":
            r = warm["first_result_s"] / ww["first_result_s"]
            rows.append((f"{LABEL[wl]}, {impl}: warm second process first result ≤ warp-lang",
                         f"{warm['first_result_s']:.2f} s vs {ww['first_result_s']:.2f} s "
                         f"({r:.2f}×)", _yes(r <= 1.0)))
    mem = results.get("memory", {})
    d, w = mem.get("difftape"), mem.get("warp")
    if d and w:
        ok = d.get("status") == "ok" and w.get("status") == "ok"
        rows.append(("2 mass-spring: peak memory ≤ warp-lang's",
                     f"{d['peak_mb']:.2f} MB vs {w['peak_mb']:.2f} MB" if ok
                     else d.get("status", d.get("error", "?")),
                     "n/a" if not ok else _yes(True) if d["peak_mb"] <= w["peak_mb"]
                     else "tie (within 1%)" if d["peak_mb"] <= 1.01 * w["peak_mb"]
                     else _yes(False)))
    return rows


# ----------------------------------------------------------------------------- main


def _cache_cells(wl: str, rows: list[tuple[str, int]], config: dict, args, log) -> dict:
    """Cold and warm disk-cache cells of one workload: one cold process per implementation
    (empty cache directories), then ``warm_rounds`` rounds of one warm process per
    implementation, the order rotating each round. A cell's warm figures are those of its
    median-first-result sample; every sample's first result is kept."""
    cells, tmps = {}, {}
    try:
        for impl, thr in rows:
            label = impl if impl != "difftape" else (
                "difftape serial" if thr == 1 else f"difftape parallel {thr} thr")
            tmps[label] = tempfile.mkdtemp(prefix="dtbench-cache-")
            cenv, cdirs = _cache_env(tmps[label])
            spec = {"workload": wl, "impl": impl, "threads": thr, "scale": config["cache_scale"],
                    "cache_dir": cdirs.get(impl), "parallel_mode": args.parallel_mode,
                    "flush_denormals": args.flush_denormals}
            cells[label] = {"cold": run_worker("firstrun", spec, cenv, log, timeout=600),
                            "warm_samples": [], "spec": spec, "env": cenv}
        labels = [k for k, c in cells.items() if c["cold"].get("status") == "ok"]
        for r in range(config["warm_rounds"] if labels else 0):
            for label in labels[r % len(labels):] + labels[:r % len(labels)]:
                cell = cells[label]
                res = run_worker("firstrun", cell["spec"], cell["env"], log, timeout=600)
                if res.get("status") == "ok":
                    cell["warm_samples"].append(res)
    finally:
        for tmp in tmps.values():
            shutil.rmtree(tmp, ignore_errors=True)
    out = {}
    for label, cell in cells.items():
        samples = sorted(cell["warm_samples"], key=lambda res: res["first_result_s"])
        warm = dict(samples[(len(samples) - 1) // 2]) if samples else {}
        if samples:
            warm["first_result_samples_s"] = [res["first_result_s"]
                                              for res in cell["warm_samples"]]
        out[f"{wl}@{label}"] = {"cold": cell["cold"], "warm": warm}
        print(f"  {wl} {label}: cold {cell['cold'].get('first_call_s', cell['cold'])} s, warm "
              f"first result {warm.get('first_result_s', '–')} s (median of {len(samples)})",
              flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="sizes × 0.25, 3 rounds, scaling 1×/4×")
    p.add_argument("--scale", type=float, help="base size multiplier (default 1; quick 0.25)")
    p.add_argument("--rounds", type=int, help="timed rounds per workload (default 5; quick 3)")
    p.add_argument("--threads", default=None, help="comma list of thread counts (default 1,2)")
    p.add_argument("--workloads", default=",".join(MAIN_WORKLOADS))
    p.add_argument("--impls", default="warp,difftape,taichi")
    p.add_argument("--skip", default="",
                   help="comma list of: main,flushed,scaling,cache,memory,zoo")
    p.add_argument("--parallel-mode", default="auto", choices=["auto", "parallel", "replicate"],
                   help="difftape's wp.config.cpu_parallel when threads > 1 (default: auto, "
                        "difftape's own default)")
    p.add_argument("--flush-denormals", action="store_true",
                   help="run difftape with wp.config.flush_denormals = True (as Taichi does)")
    p.add_argument("--noise-threshold", type=float, default=0.15,
                   help="rerun a sample if other processes used more CPU than this (cores)")
    p.add_argument("--retries", type=int, default=1)
    p.add_argument("--warmup-rounds", type=int, default=6,
                   help="untimed rounds before the timed ones (main table): compilation, and "
                        "difftape's choice of threads, which times a kernel's first launches "
                        "both ways (3 each) where one round has one launch")
    p.add_argument("--warm-rounds", type=int, default=5,
                   help="warm-cache processes per start-up cell (median reported)")
    p.add_argument("--retry-max-s", type=float, default=2.0,
                   help="never rerun a sample longer than this (s): long samples average noise")
    p.add_argument("--scaling-rounds", type=int, help="timed rounds per scaling cell (default 2)")
    p.add_argument("--note", default="", help="a paragraph added to RESULTS.md")
    p.add_argument("--out", default=os.path.join(common.HERE, "RESULTS.md"))
    p.add_argument("--json", default=os.path.join(common.HERE, "results.json"))
    p.add_argument("--render", metavar="JSON",
                   help="only re-render --out from a saved results.json (with --note if given)")
    args = p.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            results = json.load(f)
        if args.note:
            results["config"]["note"] = args.note
        with open(args.out, "w") as f:
            f.write(render(results) + "\n")
        print(f"wrote {args.out}")
        return 0

    quick = args.quick
    scale = args.scale or (0.25 if quick else 1.0)
    rounds = args.rounds or (3 if quick else 5)
    ncpu = os.cpu_count() or 1
    threads = ([int(t) for t in args.threads.split(",")] if args.threads
               else sorted({1, min(2, ncpu)}))
    workloads = [w for w in args.workloads.split(",") if w]
    impl_names = [i for i in args.impls.split(",") if i]
    skip = set(filter(None, args.skip.split(",")))
    scaling_sizes = [1, 4] if quick else [1, 4, 16]

    start = time.time()
    # As a pip install does for warp-lang and Taichi: a checkout whose sources changed since its
    # bytecode was written would otherwise compile them in every process the run starts, where
    # PYTHONDONTWRITEBYTECODE is set (the start-up cells time whole processes).
    compileall.compile_dir(os.path.join(os.path.dirname(common.HERE), "difftape"), quiet=1)
    os.makedirs(BENCH_CACHE, exist_ok=True)
    env, dirs = _cache_env(BENCH_CACHE)
    log_path = os.path.join(BENCH_CACHE, "last-run.log")
    log = open(log_path, "w")
    print(f"benchmark log: {log_path}", flush=True)

    results = {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": common.machine(), "versions": common.library_versions(), "git": _git_state(),
        "loadavg_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "config": {"quick": quick, "scale": scale, "rounds": rounds,
                   "warmup": args.warmup_rounds,
                   "threads": threads, "noise_threshold": args.noise_threshold,
                   "retries": args.retries, "cache_scale": 1e-3, "note": args.note,
                   "warm_rounds": args.warm_rounds,
                   "scaling_sizes": scaling_sizes, "parallel_mode": args.parallel_mode,
                   "flush_denormals": args.flush_denormals, "retry_max_s": args.retry_max_s},
        "main": {}, "flushed": {}, "scaling": {}, "cache": {}, "memory": {},
    }
    print("measuring memory bandwidth ...", flush=True)
    results["bandwidth"] = measure_bandwidth()
    stencil_np = common.load_numpy_part("stencil")
    n = stencil_np.make_inputs(scale)["u0"].shape[0]
    results["stencil_bytes"] = (2 * stencil_np.STEPS + 1) * n * n * 4

    def timing(wl, wl_scale, thr, names, rounds_, check=True, warmup=1, flush=False):
        spec = {"workload": wl, "threads": thr, "scale": wl_scale, "rounds": rounds_,
                "check": check, "retry_max_s": args.retry_max_s,
                "bandwidth": wl == "stencil",
                "warmup": warmup, "impls": names, "cache_dirs": dirs,
                "parallel_mode": args.parallel_mode,
                "flush_denormals": args.flush_denormals or flush,
                "noise_threshold": args.noise_threshold, "retries": args.retries}
        t0 = time.time()
        res = run_worker("timing", spec, env, log)
        summary = res.get("error") or ", ".join(
            f"{k} {v.get('fwd_ms', float('nan')):.1f}/{v.get('bwd_ms', float('nan')):.1f} ms"
            if "fwd_ms" in v else f"{k} {v.get('status')}" for k, v in res["impls"].items())
        print(f"  {wl} ×{wl_scale:g} {thr} thr ({time.time() - t0:.0f} s): {summary}",
              flush=True)
        return res

    if "main" not in skip:
        print("warm-kernel timing (interleaved) ...", flush=True)
        for wl in workloads:
            for thr in threads:
                res = timing(wl, scale, thr, impl_names, rounds, warmup=args.warmup_rounds)
                if wl == "launch_overhead":
                    res["launches"] = common.load_numpy_part(wl).LAUNCHES + 1
                results["main"][f"{wl}@{thr}"] = res

    if ("flushed" not in skip and not args.flush_denormals and "dynamic_loop" in workloads
            and {"difftape", "taichi"} <= set(impl_names)):
        print("dynamic loop with difftape flushing denormals, as Taichi runs ...", flush=True)
        for thr in threads:
            results["flushed"][f"dynamic_loop@{thr}"] = timing(
                "dynamic_loop", scale, thr, ["difftape", "taichi"], rounds,
                warmup=args.warmup_rounds, flush=True)

    if "scaling" not in skip:
        print("scaling ...", flush=True)
        srounds = args.scaling_rounds or (2 if not quick else min(rounds, 3))
        results["config"]["scaling_rounds"] = srounds
        for wl in [w for w in SCALING_WORKLOADS if w in workloads]:
            for size in scaling_sizes:
                for thr in threads:
                    names = [i for i in impl_names if not (i == "warp" and thr > 1)]
                    key = f"{wl}@{size}@{thr}"
                    if size == 1 and f"{wl}@{thr}" in results["main"]:
                        res = results["main"][f"{wl}@{thr}"]  # same run, reused
                        if thr > 1 and "impls" in res:
                            res = dict(res, impls={k: v for k, v in res["impls"].items()
                                                   if k != "warp"})
                    else:
                        res = timing(wl, scale * size, thr, names, srounds, check=False)
                    results["scaling"][key] = res

    if "cache" not in skip:
        print("cold / warm disk cache (fresh processes) ...", flush=True)
        _compile_difftape()
        rows = [("warp", 1), ("difftape", 1), ("difftape", max(threads)), ("taichi", 1)]
        rows = [r for r in dict.fromkeys(rows) if r[0] in impl_names]
        for wl in workloads:
            results["cache"].update(_cache_cells(wl, rows, results["config"], args, log))

    if "memory" not in skip and "mass_spring" in workloads:
        print("peak memory (mass-spring) ...", flush=True)
        for impl in impl_names:
            spec = {"workload": "mass_spring", "impl": impl, "threads": 1, "scale": scale,
                    "cache_dir": dirs.get(impl)}
            res = run_worker("memory", spec, env, log, timeout=600)
            results["memory"][impl] = res
            print(f"  {impl}: {res}", flush=True)

    if "zoo" not in skip:
        print("kernel zoo ...", flush=True)
        t0 = time.time()
        spec = {"rounds": rounds, "scale": scale, "cache_dirs": dirs,
                "impls": [i for i in impl_names if i in ("warp", "difftape")]}
        results["zoo"] = run_worker("zoo", spec, env, log)
        print(f"  ({time.time() - t0:.0f} s)", flush=True)

    results["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results["elapsed_s"] = time.time() - start
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)
    text = render(results)
    with open(args.out, "w") as f:
        f.write(text + "\n")
    print(text)
    print(f"\nwrote {args.out} and {args.json} in {results['elapsed_s'] / 60:.1f} min")
    failed = [k for part in ("main", "flushed") for k, r in results[part].items()
              if "impls" in r and any(v.get("grad", {}).get("status") == "FAIL"
                                      for v in r["impls"].values())]
    if failed:
        print("GRADIENT CHECK FAILED: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
