"""Which generated module a kernel produces, and other facts its IR alone decides, remembered
across processes.

A generated module's text follows from the kernel's typed IR, the variant, the kernel's origin,
which functions it holds, difftape's own code, and what of the target CPU decides generated
code (``cpu_target.stamp``): nothing else. A process whose kernels are all in Numba's disk
cache still generated each text to find the module's name (its content hash): a big kernel's
whole first launch, nearly (the rigid chain, forward and adjoint: 0.13 s of
0.2 s). This index maps a fingerprint of those inputs to the module's name and the replica views
that generating it returned, one small file per entry in the cache directory; a process that
finds an entry imports the module without generating it. ``remembered`` keeps other pure
functions of the IR the same way (``access.py``'s facts: 30 ms of the rigid chain's first
launch).

The fingerprint is the IR pickled, builtins by key and types by what they are (a scalar's name,
a composite's kind, shape and scalar, a struct's fields), with difftape's code as the hash of its
source files. An IR that does not pickle (a constant of an unusual type) has no fingerprint and
is generated every time, as before.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle

import numba

from .. import composite, dtypes
from ..cache_files import cache_dir, write_atomically
from . import cpu_target
from ..frontend import ir
from ..ops.registry import Builtin
from ..version import __version__ as _difftape_version

_CODE_STAMP: str | None = None


def _code_stamp() -> str:
    """A hash of difftape's source files (every module can shape generated text); the version
    alone where they are not on disk. Kept in the cache directory under the files' sizes and
    modification times, as Python keeps bytecode: reading and hashing them all took ~5 ms of
    every process's first launch, listing them takes <1 ms."""
    global _CODE_STAMP
    if _CODE_STAMP is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        try:
            sources = _source_files(root)
        except OSError:
            sources = None
        if sources is None:
            _CODE_STAMP = hashlib.sha256(_difftape_version.encode()).hexdigest()
            return _CODE_STAMP
        listing = repr([(rel, st.st_size, st.st_mtime_ns) for rel, _, st in sources])
        listed = hashlib.sha256(f"{_difftape_version}\n{listing}".encode()).hexdigest()[:32]
        path = os.path.join(cache_dir(), f"code_stamp_{listed}.txt")
        try:
            with open(path) as f:
                stamp = f.read()
        except OSError:
            stamp = ""
        if len(stamp) != 64:  # not kept yet (or cut short)
            stamp = _hash_sources(root, sources)
            try:
                write_atomically(path, stamp.encode())
            except OSError:
                pass
        _CODE_STAMP = stamp
    return _CODE_STAMP


def _source_files(root: str) -> list[tuple[str, str, os.stat_result]]:
    """Each ``.py`` file under ``root``: (path relative to it, path, stat), in a fixed order."""
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                found.append((os.path.relpath(path, root), path, os.stat(path)))
    return found


def _hash_sources(root: str, sources: list) -> str:
    digest = hashlib.sha256(_difftape_version.encode())
    try:
        for rel, path, _ in sources:
            digest.update(rel.encode())
            with open(path, "rb") as f:
                digest.update(f.read())
    except OSError:
        pass
    return digest.hexdigest()


def _type_key(t: type) -> tuple:
    if dtypes.is_scalar_type(t):
        return ("scalar", t.__name__)
    if composite.is_composite(t):
        return ("composite", t._kind, t._shape, _type_key(t._wp_scalar_type_))
    info = getattr(t, "_difftape_struct", None)
    if info is not None:
        return ("struct", t.__module__, t.__qualname__,
                tuple((name, kind, _type_key(f) if isinstance(f, type) else f)
                      for name, kind, f in info.fields))
    return ("type", t.__module__, t.__qualname__)


# Objects pickled as they are: most of an IR (skipping the checks below halves the time).
_PLAIN = {str, int, float, bool, type(None), tuple, list, dict, bytes,
          *(c for c in vars(ir).values() if isinstance(c, type) and c.__module__ == ir.__name__)}


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if obj.__class__ in _PLAIN:
            return None
        if isinstance(obj, type):
            return _type_key(obj)
        if isinstance(obj, Builtin):
            return ("builtin", obj.key)
        if isinstance(obj, (set, frozenset)):  # iteration order varies with the string hash seed
            return ("set", tuple(sorted(obj, key=repr)))
        return None


def _ir_digest(kernel: ir.KernelIR) -> bytes | None:
    """The fingerprint of ``kernel`` (computed once per IR: its forward and adjoint share it)."""
    digest = kernel.__dict__.get("_difftape_digest", False)
    if digest is False:
        out = io.BytesIO()
        try:
            _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(kernel)
            digest = hashlib.sha256(out.getvalue()).digest()
        except Exception:  # an unpicklable constant, an expression nested past pickle's depth
            digest = None
        kernel.__dict__["_difftape_digest"] = digest
    return digest


def _entry_key(kernel: ir.KernelIR, rest: tuple) -> str | None:
    digest = _ir_digest(kernel)
    if digest is None:
        return None
    rest += (_code_stamp(), numba.__version__, cpu_target.stamp())
    return hashlib.sha256(digest + repr(rest).encode()).hexdigest()[:32]


def key(kernel: ir.KernelIR, variant, origin: str, directions: tuple[bool, ...]) -> str | None:
    """The index key of the module generated from these inputs; None if the IR has no
    fingerprint."""
    return _entry_key(kernel, (repr(variant), origin, directions))


def _path(entry_key: str) -> str:
    return os.path.join(cache_dir(), f"index_{entry_key}.pkl")


def remembered(kernel: ir.KernelIR, kind: str, compute):
    """``compute(kernel)``, a function of the IR and difftape's code only, kept under ``kind``:
    read back where a process computed it before, computed (and kept) otherwise."""
    entry_key = _entry_key(kernel, (kind,))
    if entry_key is None:
        return compute(kernel)
    try:
        with open(_path(entry_key), "rb") as f:
            return pickle.load(f)
    except Exception:  # none yet, or unreadable: compute it
        pass
    value = compute(kernel)
    _write(entry_key, value)
    return value


def lookup(entry_key: str) -> tuple[str, str, object] | None:
    """(module name, module file, replica views) remembered under ``entry_key``, if its module
    file is still there."""
    try:
        with open(_path(entry_key), "rb") as f:
            module_name, views = pickle.load(f)
    except Exception:  # none, or unreadable (a difftape that pickled other classes): generate
        return None
    path = os.path.join(cache_dir(), module_name + ".py")
    return (module_name, path, views) if os.path.exists(path) else None


def remember(entry_key: str, module_name: str, views) -> None:
    _write(entry_key, (module_name, views))


def _write(entry_key: str, value) -> None:
    """Keep an entry; one that cannot be written only costs a later process the work."""
    try:
        write_atomically(_path(entry_key), pickle.dumps(value))
    except (OSError, pickle.PicklingError):
        pass
