"""Running a test script in a new process whose kernel and Numba caches are empty: Numba can
inspect the LLVM IR only of code it compiled in this process, not of code loaded from its cache."""

import os
import subprocess
import sys

# For scripts run by ``run_fresh``: the LLVM IR of a kernel's compiled forward or adjoint
# function (not its CPython wrapper), after the script has launched it.
IR_OF = """
def ir_of(kernel, adjoint=False):
    which = "adjoint" if adjoint else "forward"
    fn = next(f for p in kernel._built.values()
              if (f := getattr(p, which)) is not None and f.signatures)
    return next(iter(fn.inspect_llvm().values())).split("define", 2)[1]
"""


def run_fresh(tmp_path, script: str, compile_ahead: bool = False) -> list[str]:
    """The words ``script`` prints, run in a new process with empty kernel and Numba caches
    (Numba cannot inspect the IR of code it loaded from its cache), which compiles its adjoints
    itself unless ``compile_ahead`` (a forked child's are loaded from the cache)."""
    env = dict(os.environ, DIFFTAPE_CACHE_DIR=str(tmp_path / "kernels"),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               DIFFTAPE_COMPILE_AHEAD="1" if compile_ahead else "0")
    path = tmp_path / "script.py"
    path.write_text(script)
    return subprocess.run([sys.executable, str(path)], env=env, capture_output=True,
                          text=True, check=True, timeout=600).stdout.split()
