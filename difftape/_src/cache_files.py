"""The cache directory (``config.cache_dir``) and writing files into it whole.

Generated kernel modules, Numba's runtime and the code of difftape's dataclasses are kept
there; several processes may write the same file at once, so each is written to a temporary
file and renamed over the target: a reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

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
