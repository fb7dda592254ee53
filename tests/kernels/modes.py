"""Helpers shared by the kernel-level tests."""

import os
import subprocess
import sys

import difftape as wp

# For scripts run by ``run_fresh``: the LLVM IR of a kernel's compiled forward or adjoint
# function (not its CPython wrapper), after the script has launched it.
IR_OF = """
def ir_of(kernel, adjoint=False):
    fn = next(getattr(p, "adjoint" if adjoint else "forward") for p in kernel._built.values()
              if getattr(p, "adjoint" if adjoint else "forward") is not None
              and getattr(p, "adjoint" if adjoint else "forward").signatures)
    return next(iter(fn.inspect_llvm().values())).split("define", 2)[1]
"""


def run_fresh(tmp_path, script: str) -> list[str]:
    """The words ``script`` prints, run in a new process with empty kernel and Numba caches
    (Numba cannot inspect the IR of code it loaded from its cache)."""
    env = dict(os.environ, DIFFTAPE_CACHE_DIR=str(tmp_path / "kernels"),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    path = tmp_path / "script.py"
    path.write_text(script)
    return subprocess.run([sys.executable, str(path)], env=env, capture_output=True,
                          text=True, check=True).stdout.split()


def debug_reference(run):
    """``run()``'s result in debug mode, which compiles kernels without loop interchange, strips
    or splits: the plain per-thread code the optimized variants must agree with."""
    saved = wp.config.mode
    wp.config.mode = "debug"
    try:
        return run()
    finally:
        wp.config.mode = saved
