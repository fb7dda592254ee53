"""The cache directory (``config.cache_dir``) and writing files into it whole.

Generated kernel modules and the code objects compiled from them and from the generated
launchers (``kept_code``), Numba's runtime and the code of difftape's dataclasses are kept
there; several processes may write the same file at once, so each is written to a temporary
file and renamed over the target: a reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import marshal
import os
import tempfile
from types import CodeType

from . import config


def cache_dir() -> str:
    """The cache directory (created on use)."""
    path = os.path.expanduser(config.cache_dir)
    os.makedirs(path, exist_ok=True)
    return path


def write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_MAGIC = importlib.util.MAGIC_NUMBER.hex()  # marshalled code is for one bytecode version


def kept_code(source: str, filename: str) -> CodeType:
    """``compile(source, filename, "exec")``, kept in the cache directory by the hash of both.

    Generated Python (kernel modules, launchers) is compiled once per machine: Python's own
    bytecode cache may be off (``PYTHONDONTWRITEBYTECODE``, common in containers), and then every
    process compiled every generated module again (15 ms for one of the rigid chain's)."""
    digest = hashlib.sha256(f"{filename}\n{source}".encode()).hexdigest()[:32]
    path = os.path.join(cache_dir(), f"code_{digest}_{_MAGIC}.marshal")
    try:
        with open(path, "rb") as f:
            code = marshal.loads(f.read())
        if code.__class__ is CodeType:
            return code
    except (OSError, EOFError, ValueError, TypeError):  # not kept yet, or unreadable
        pass
    code = compile(source, filename, "exec", dont_inherit=True)
    try:
        write_atomically(path, marshal.dumps(code))
    except OSError:  # a read-only cache: compile again next time
        pass
    return code


# What difftape writes into the cache directory: generated modules, their compiled code and
# index entries, Numba's runtime; Numba's own cache of the generated modules is in __pycache__.
_CACHE_PREFIXES = ("difftape_gen_", "code_", "index_", "numba_runtime_")


def clear_kernel_cache() -> int:
    """Delete difftape's compiled kernels from the cache directory (Warp's
    ``wp.clear_kernel_cache``): later launches compile again. Only files difftape names are
    removed; returns how many."""
    removed = 0
    root = cache_dir()
    for folder in (root, os.path.join(root, "__pycache__")):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            if name.startswith(_CACHE_PREFIXES):
                with contextlib.suppress(FileNotFoundError):  # another process was faster
                    os.remove(os.path.join(folder, name))
                    removed += 1
    return removed
