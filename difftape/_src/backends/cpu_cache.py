"""Loading compiled kernels from Numba's disk cache without rebuilding Numba's compiler state.

Before it loads a cached function, Numba's cache refreshes the target context. The first refresh
in a process imports about eighty of Numba's own lowering modules and installs their
registries: 0.3-0.45 s here, most of a warm process's first launch. Only compiling needs them,
and Numba's compiler refreshes the context itself before it compiles anything. Running cached
machine code needs the runtime (NRT) alone: the cached wrappers call its functions to unbox
arrays. So the dispatchers of difftape's generated modules and runtime helpers load through
:class:`LoadOnlyCache`, which initialises the runtime and loads, and a process that finds every
kernel in the cache never builds the compiler's tables.

The runtime itself is a small LLVM module that Numba compiles in every process (36 ms here, of
a warm process's ~0.2 s first launch). :func:`initialize_runtime` compiles it once per machine
and Numba version, keeps its object code next to the generated modules, and loads that (6 ms).

Each cached function also holds the LLVM bitcode of all its code, for other code that links
against it; Numba parses it on every load and records every symbol in it (28 ms of the
mass-spring workload's first launch). A kernel is only ever called, so :class:`LoadOnlyCache`
loads the object code alone and parses the bitcode when something links against it (a helper
function that a kernel compiled later calls) or asks for a symbol it did not register.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle

import llvmlite
import numba
from llvmlite import binding as ll
from numba.core import config as numba_config
from numba.core.caching import FunctionCache
from numba.core.codegen import JitEngine, JITCodeLibrary
from numba.core.compiler_lock import global_compiler_lock
from numba.core.dispatcher import Dispatcher
from numba.core.funcdesc import FunctionDescriptor
from numba.core.runtime import nrt, nrtdynmod

from ..cache_files import cache_dir, write_atomically


class LoadOnlyCache(FunctionCache):
    """Numba's per-function disk cache, loading without the compiler's context refresh, and
    without reading the code's LLVM bitcode until something links against it."""

    def load_overload(self, sig, target_context):
        initialize_runtime(target_context)
        with self._guard_against_spurious_io_errors():
            loaded = self._load_overload(sig, target_context)
        # Processes compiling one function at once can leave an index entry naming another
        # signature's file (Numba numbers the files per process): a miss, not that overload
        # (a debug-mode index check would stay uncompiled: "Known signatures: ...").
        if loaded is not None and tuple(loaded.signature.args) != tuple(sig):
            return None
        return loaded

    def _load_overload(self, sig, target_context):
        if not _LAZY_SUPPORTED or not getattr(self, "_enabled", True):
            return super()._load_overload(sig, target_context)
        codegen = target_context.codegen()
        data = self._cache_file.load(self._index_key(sig, codegen))
        if data is None:
            return None
        libdata, fndesc = data[0], data[1]
        if not (isinstance(fndesc, FunctionDescriptor) and isinstance(libdata, tuple)
                and len(libdata) == 3 and libdata[1] == "object"):
            return self._impl.rebuild(target_context, data)
        # CompileResult._rebuild unserializes the library, then looks up the wrapper: the
        # one symbol the loaded function is called through, registered here.
        with global_compiler_lock:
            codegen.unserialize_library = functools.partial(
                _unserialize_lazily, codegen, fndesc.llvm_cpython_wrapper_name)
            try:
                return self._impl.rebuild(target_context, data)
            finally:
                del codegen.unserialize_library  # the class's method again


class _LazilyLinkedLibrary(JITCodeLibrary):
    """A library loaded from object code whose bitcode for linking (the code of every function
    in it) is parsed only when another library links against it or asks for a symbol
    :func:`_unserialize_lazily` did not register. Numba parses it and records all its symbols
    on every load: 28 ms of the mass-spring workload's 110 ms first launch in a warm process,
    for kernels that nothing links against."""

    def _parse_shared_bitcode(self) -> None:
        if self._shared_module is None:
            self._shared_module = ll.parse_bitcode(self._shared_bitcode)
            self._codegen._engine._load_defined_symbols(self._shared_module)

    def _get_module_for_linking(self):
        self._parse_shared_bitcode()
        return super()._get_module_for_linking()

    def get_pointer_to_function(self, name):
        if not self._codegen._engine.is_symbol_defined(name):
            self._parse_shared_bitcode()
        return super().get_pointer_to_function(name)


def _unserialize_lazily(codegen, wrapper: str, state):
    """``codegen.unserialize_library(state)`` for object code, as Numba does it, but with the
    bitcode kept unparsed (``_LazilyLinkedLibrary``) and only ``wrapper`` registered as a
    defined symbol (Numba's execution engine exits the process when asked for an undefined
    one, so lookups go by the names it knows)."""
    name, _, (object_code, shared_bitcode) = state
    library = codegen.create_library(name)
    if type(library) is not JITCodeLibrary:  # another Numba's library: load as it does
        return type(codegen).unserialize_library(codegen, state)
    library.__class__ = _LazilyLinkedLibrary  # same state, three methods differ
    library._shared_bitcode = shared_bitcode
    library.enable_object_caching()
    library._set_compiled_object(object_code)
    library._finalize_final_module()
    codegen._engine._defined_symbols.add(wrapper)
    return library


# The Numba internals LoadOnlyCache relies on; another Numba keeps its own cache.
_SUPPORTED = all(hasattr(FunctionCache, name) for name in (
    "_load_overload", "_guard_against_spurious_io_errors")) and hasattr(nrt, "rtsys")
# ... and those its lazy bitcode relies on; without them it loads as Numba does.
_LAZY_SUPPORTED = (hasattr(FunctionCache, "_index_key") and all(
    hasattr(JITCodeLibrary, name) for name in (
        "_get_module_for_linking", "get_pointer_to_function", "_set_compiled_object",
        "_finalize_final_module", "enable_object_caching")) and all(
    hasattr(JitEngine, name) for name in ("_load_defined_symbols", "is_symbol_defined")))
# ... and those initialize_runtime relies on; without them Numba initialises its runtime.
_RUNTIME_SUPPORTED = (hasattr(nrt, "_nrt") and hasattr(nrt._nrt, "c_helpers")
                      and hasattr(nrtdynmod, "create_nrt_module")
                      and hasattr(nrt.rtsys, "_init") and hasattr(type(nrt.rtsys), "library"))


def initialize_runtime(target_context) -> None:
    """Initialise Numba's runtime as ``nrt.rtsys.initialize`` does, but load its compiled
    functions from this machine's cache when an earlier process has written them."""
    runtime = nrt.rtsys
    if runtime._init:
        return
    if not _RUNTIME_SUPPORTED:
        runtime.initialize(target_context)
        return
    with global_compiler_lock:
        if runtime._init:
            return
        if numba_config.NRT_STATS:
            nrt._nrt.memsys_enable_stats()
        for py_name, address in nrt._nrt.c_helpers.items():  # symbols the module calls
            ll.add_symbol(py_name if py_name.startswith("_") else "NRT_" + py_name, address)
        runtime._library = _runtime_library(target_context)
        runtime._init = True


def _runtime_library(target_context):
    """The runtime's compiled module: loaded from the cache, else compiled and stored there."""
    codegen = target_context.codegen()
    key = repr((numba.__version__, llvmlite.__version__, codegen.magic_tuple(),
                numba_config.DEBUG_NRT))
    name = "numba_runtime_" + hashlib.sha256(key.encode()).hexdigest()[:20] + ".pkl"
    try:
        path = os.path.join(cache_dir(), name)
    except OSError:  # no cache directory: compile, and keep nothing
        path = None
    if path is not None and os.path.exists(path):
        try:
            with open(path, "rb") as f:
                return codegen.unserialize_library(pickle.load(f))
        except Exception:  # unreadable, or written by something else: compile it again
            pass
    module, library = nrtdynmod.create_nrt_module(target_context)
    library.enable_object_caching()
    library.add_ir_module(module)
    library.finalize()
    if path is not None:
        try:
            write_atomically(path, pickle.dumps(library.serialize_using_object_code()))
        except OSError:  # a read-only cache: compile again next time
            pass
    return library


def in_cache(dispatcher: Dispatcher, signature: tuple) -> bool:
    """Whether Numba's disk cache holds ``dispatcher`` compiled for ``signature`` (what its
    ``compile`` would load instead of compiling)."""
    cache = getattr(dispatcher, "_cache", None)
    if not isinstance(cache, FunctionCache) or not getattr(cache, "_enabled", True):
        return False
    key = cache._index_key(signature, dispatcher.targetctx.codegen())
    return key in cache._cache_file._load_index()


def load_only(dispatcher: Dispatcher) -> Dispatcher:
    """Make ``dispatcher`` (an ``@njit(cache=True)`` function) load through
    :class:`LoadOnlyCache`; anything else is returned unchanged."""
    cache = getattr(dispatcher, "_cache", None)
    if _SUPPORTED and type(cache) is FunctionCache:
        cache.__class__ = LoadOnlyCache  # same state, one method differs
    return dispatcher


def load_only_all(namespace: dict) -> None:
    """:func:`load_only` on every dispatcher among a module's globals."""
    for value in namespace.values():
        if isinstance(value, Dispatcher):
            load_only(value)
