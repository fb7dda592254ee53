"""Compiling a kernel's adjoint in a forked process while its forward compiles and runs.

A kernel's first launch on a Tape compiles its forward; its adjoint, two to three times the code,
is compiled only when ``backward()`` reaches it. On a machine with a spare core the adjoint can be
compiled meanwhile: :func:`start` forks the process before the forward compiles, and the child
works out the adjoint launch the Tape will make (the same arguments, their ``.grad`` buffers, so
the same program and Numba signature), compiles it into the disk cache and exits. When
``backward()`` reaches the kernel, :func:`wait` waits for the child, and the adjoint then loads
from the cache (a cold first forward + backward on two cores: the rigid chain 4.8 -> 3.8 s,
mass-spring 2.3 -> 1.5 s). Under ``cpu_parallel="auto"`` it also compiles the serial launch's
program, which differs from the threaded one where threads would use atomics (many cores).

The child only ever writes the disk cache, whose files are written whole and renamed into place,
so whatever becomes of it, the parent's results do not depend on it: if the child failed, or
worked out a launch other than the one ``backward()`` makes, the parent compiles as it would
have. A kernel an earlier process compiled (the module index knows its forward) forks nothing,
and a child that finds the adjoint cached all the same exits without saying so. Each spare core
compiles one kernel's adjoint at a time; kernels launched meanwhile wait their turn, and are
forked for at a later launch. A forked child has only the thread that forked it, and would wait
forever for a lock another thread held at the fork; so it forks only when the process has no
Python thread but this one and the idle workers of difftape's launch pool, on Linux (``fork``
and ``/proc``), with at least two cores this process may use, one child per spare core.
``wp.config.compile_ahead = False`` (or ``DIFFTAPE_COMPILE_AHEAD=0``) turns it off.
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import sys
import threading
import time
import warnings

from . import chunks, config
from .backends import cpu_index

# Kernels whose adjoint a child is compiling: kernel -> (pid, read end of its pipe, pid of the
# process that forked it: a process forked later, by the user, must leave those children alone).
pending: dict = {}
# Kernels waiting for a core (every spare one compiles for another): kernel -> its latest launch
# on a Tape, (dims, args, tape); forked for, oldest first, as cores free up.
queued: dict = {}
# A kernel seen on a Tape carries this attribute (each is compiled ahead at most once a process;
# on the kernel, not in a set here, so that a kernel made and dropped at run time can go).
SEEN = "_compile_ahead_seen"

_COMPILING = b"c"  # what a child writes once it knows it compiles (the cache lacks the adjoint)
_STALL_S = 5.0  # a child that used no CPU for this long is taken to be stuck, and killed
_DECIDE_S = 0.25  # how long backward() waits for a child to say whether it compiles


def start(kernel, dims: tuple[int, ...], args: list, tape) -> None:
    """At a launch of ``kernel`` on ``tape`` (its first, or one while it waits for a core),
    before its forward compiles: fork children that compile the adjoint launches
    ``tape.backward()`` will make, for this kernel and those waiting, as far as cores allow.
    Nothing here may fail a launch: where it cannot tell, it compiles nothing ahead."""
    try:
        if SEEN not in kernel.__dict__:
            setattr(kernel, SEEN, True)
            if (not config.compile_ahead or sys.platform != "linux"
                    or not kernel.enable_backward or _ran_before(kernel, len(dims))):
                return
        elif kernel not in queued:
            _fork_queued()
            return
        queued[kernel] = (dims, args, tape)
        _fork_queued()
    except Exception:
        queued.clear()


def _ran_before(kernel, rank: int) -> bool:
    """Whether an earlier process generated this kernel's forward (the module index knows it):
    its adjoint is then most likely in the disk cache, and a fork cannot pay (the parent's
    copy-on-write page faults while the child lives cost a warm mass-spring first launch 20-40
    ms)."""
    origin = kernel.origin()
    for atomic in (False, True):
        variant = kernel.variant(rank, atomic)
        key = cpu_index.key(kernel.ir_for(variant.debug), variant, origin, (False,))
        if key and cpu_index.lookup(key) is not None:
            return True
    return False


def _fork_queued() -> None:
    """Fork for queued kernels while cores are spare; forget them all where forking is unsafe
    or cannot pay (later launches then cost nothing here)."""
    spare = _spare_cores()
    if spare is None:
        queued.clear()
        return
    while queued and spare > 0:
        kernel = next(iter(queued))
        _fork(kernel, *queued.pop(kernel))
        spare -= 1


def _spare_cores() -> int | None:
    """Cores free for another child; None where forking is unsafe (another Python thread than
    the launch pool's idle workers) or there is no second core."""
    if threading.active_count() > 1:
        others = set(threading.enumerate()) - {threading.current_thread()}
        if others - chunks.pool_threads():
            return None
    try:
        cores = len(os.sched_getaffinity(0))
    except OSError:
        return None
    if cores < 2:
        return None
    _reap()
    return cores - 1 - len(pending)


def _fork(kernel, dims: tuple[int, ...], args: list, tape) -> None:
    read_end, write_end = os.pipe()
    try:
        # Python 3.12 warns of fork() in a process with other OS threads; ours has no other
        # Python thread, and the child runs no BLAS (OpenBLAS's idle workers are such threads).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return
    if pid == 0:  # the child: never returns
        os.close(read_end)
        _compile_in_child(kernel, dims, args, tape, write_end)
    os.close(write_end)
    pending[kernel] = (pid, read_end, os.getpid())


def _compile_in_child(kernel, dims, args, tape, write_end: int) -> None:
    status = 1
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # the parent reports what there is to report
        os.dup2(devnull, 2)
        warnings.simplefilter("ignore")
        from .backends import cpu_cache
        from .launch import run_adjoint

        adjoints = [tape.get_adjoint(a) for a in args]  # as backward() passes them
        # "auto" times a launch on threads, then serially: with atomics on many cores, those
        # are two programs (launch.ATOMICS_FROM_THREADS). This child's configuration is its own.
        modes = [config.cpu_parallel] + (["serial"] if config.cpu_parallel == "auto" else [])
        told = False
        for mode in modes:
            config.cpu_parallel = mode
            found = run_adjoint(kernel, dims, args, adjoints, checked=True, compile_only=True)
            if found is not None and not cpu_cache.in_cache(*found):
                if not told:
                    os.write(write_end, _COMPILING)
                    told = True
                found[0].compile(found[1])
        status = 0
    except BaseException:  # the parent compiles whatever the child could not
        pass
    finally:
        os._exit(status)  # no atexit handlers, no flushing of the parent's buffers


def wait(kernel) -> None:
    """Before ``kernel``'s adjoint is built: wait for the child compiling it, if one is. A child
    still finding out whether it has to (the cache may hold the adjoint) gets ``_DECIDE_S``
    to say so, and is stopped after that."""
    queued.pop(kernel, None)
    entry = pending.pop(kernel, None)
    if entry is None:
        return
    pid, read_end, parent = entry
    try:
        if parent != os.getpid():
            return
        ready, _, _ = select.select([read_end], [], [], _DECIDE_S)
        compiling = bool(ready) and os.read(read_end, 1) == _COMPILING
        if compiling:
            _wait_for(pid, read_end)
        else:
            _stop(pid)
    except OSError:  # the pipe or the child is gone: the parent compiles what it must
        pass
    finally:
        try:
            os.close(read_end)
        except OSError:
            pass


def _wait_for(pid: int, read_end: int) -> None:
    """Wait until ``pid`` exits (its end of the pipe closes); stop it if it stops using CPU
    (stuck) for ``_STALL_S``."""
    used, since = _cpu_ticks(pid), time.monotonic()
    while True:
        ready, _, _ = select.select([read_end], [], [], 0.05)
        if ready and not os.read(read_end, 1):  # end of file: the child has exited
            break
        now_used = _cpu_ticks(pid)
        if now_used != used:
            used, since = now_used, time.monotonic()
        elif time.monotonic() - since > _STALL_S:
            break
    _stop(pid)


def _cpu_ticks(pid: int) -> int | None:
    """User + system CPU time of ``pid`` so far, in clock ticks (None if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def _stop(pid: int) -> None:
    """Kill the child ``pid`` (if it still runs) and reap it."""
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _reap() -> None:
    """Forget children that have exited (they compiled, or found nothing to compile)."""
    for kernel, (pid, read_end, parent) in list(pending.items()):
        try:
            done = pid if parent != os.getpid() else os.waitpid(pid, os.WNOHANG)[0]
        except ChildProcessError:
            done = pid
        if done:
            del pending[kernel]
            os.close(read_end)


def stop_all() -> None:
    """Stop every child still running (at exit: a kernel whose backward never came)."""
    queued.clear()
    while pending:
        _, (pid, read_end, parent) = pending.popitem()
        if parent == os.getpid():
            _stop(pid)
        os.close(read_end)


atexit.register(stop_all)
