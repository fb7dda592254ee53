"""The threads a launch runs its chunks on, handed their work through flags they poll.

``chunks.py`` decides what runs where; this module only runs calls on threads and waits for
them. A worker polls for its next call for ``SPIN_S`` after each (``backends/cpu_spin.py``)
before it sleeps, and the launching thread polls for the workers' results just as long: a
sleeping thread is woken by an interrupt from another core, which on a virtual machine whose
idle cores halt costs tens of microseconds (a round trip of two empty calls took 31-64 us
through a ThreadPoolExecutor on the 2-core test VM, 6-7 us here).

Python code reads and writes the flags under the GIL, which orders those accesses. The compiled
functions poll without it; the two flags set without it (a worker's "done", a waiting
launcher's "waiting") are set by an atomic exchange followed by a check of the other's flag,
so of the two threads one always sees the other's, and no wake-up is lost.
"""

from __future__ import annotations

import threading

import numpy as np

from .backends import cpu_spin

# How long a worker polls for its next call, and a launch for its workers' results (of the
# mass-spring tape's hand-offs, 22% found the worker asleep with 200 us, 4% with 1 ms).
SPIN_S = 1e-3

# How long a worker that sees its call posted still polls before it takes the GIL: the
# launching thread holds the GIL until its own chunk's compiled code starts, and a worker
# blocked on the GIL sleeps (and is woken slowly).
AFTER_S = 5e-6

# Per-worker flag columns, in a 64-byte row of their own (no false sharing).
_POSTED, _DONE, _ASLEEP, _WAITING = 0, 1, 2, 3
_ROW = 8


class Workers:
    """``count`` daemon threads that run calls for one launching thread at a time."""

    def __init__(self, count: int):
        self._flags = np.zeros(count * _ROW, np.int64)
        self._calls: list = [None] * count
        self._errors: list = [None] * count
        self._wakes = [threading.Condition() for _ in range(count)]
        self._spin = cpu_spin.polling()  # compiled (or loaded) before any worker runs
        rate = self._spin.ticks_per_second()
        self._budget, self._after = int(rate * SPIN_S), int(rate * AFTER_S)
        self._in_use = threading.Lock()
        self.broken = False  # a launch stopped waiting for its workers (e.g. KeyboardInterrupt)
        self.threads = [threading.Thread(target=self._serve, args=(w,), daemon=True,
                                         name=f"difftape-{w}") for w in range(count)]
        for thread in self.threads:
            thread.start()

    @property
    def count(self) -> int:
        return len(self.threads)

    def run(self, calls: list[tuple]) -> None:
        """Make every call ``(fn, args)`` in ``calls``: the first on this thread, the others on
        workers (at most :attr:`count`), and return when all have returned; then raise the
        first error a call raised. While another thread's launch holds the workers, every call
        runs on this thread, one after another."""
        if len(calls) - 1 > self.count or not self._in_use.acquire(blocking=False):
            for fn, args in calls:
                fn(*args)
            return
        waited = False
        try:
            for w, call in enumerate(calls[1:]):
                self._post(w, call)
            try:
                fn, args = calls[0]
                fn(*args)
            finally:
                errors = [self._result(w) for w in range(len(calls) - 1)]
                waited = True
        finally:
            if not waited:  # interrupted while a worker may still be running its call
                self.broken = True
            self._in_use.release()
        for err in errors:
            if err is not None:
                raise err

    def _post(self, w: int, call: tuple) -> None:
        flags, row = self._flags, w * _ROW
        self._calls[w] = call
        flags[row + _DONE] = 0
        flags[row + _POSTED] = 1
        if flags[row + _ASLEEP]:
            with self._wakes[w]:
                self._wakes[w].notify_all()

    def _result(self, w: int) -> BaseException | None:
        """Wait for worker ``w``'s call; the error it raised, if any."""
        flags, row = self._flags, w * _ROW
        if not self._spin.spin_until(flags, row + _DONE, 1, self._budget, 0):
            with self._wakes[w]:
                # flags[_WAITING] = 1, then flags[_DONE]: the worker does the opposite
                if not self._spin.set_then_spin(flags, row + _WAITING, row + _DONE, row + _DONE,
                                                1, 0, 0):
                    while flags[row + _DONE] != 1:
                        self._wakes[w].wait()
                flags[row + _WAITING] = 0
        err, self._errors[w] = self._errors[w], None
        return err

    def _serve(self, w: int) -> None:
        flags, row, wake = self._flags, w * _ROW, self._wakes[w]
        budget, after = self._budget, self._after
        posted = False
        while True:
            if not posted:
                with wake:
                    flags[row + _ASLEEP] = 1
                    while flags[row + _POSTED] != 1:
                        wake.wait()
                    flags[row + _ASLEEP] = 0
            (fn, args), self._calls[w] = self._calls[w], None
            flags[row + _POSTED] = 0
            try:
                fn(*args)
            except BaseException as err:  # handed to the launching thread
                self._errors[w] = err
            del fn, args  # no reference to the launch's arrays while idle
            # Done, and the next call polled for in the same compiled call: the GIL is not
            # taken back in between, when the launching thread wants it.
            state = self._spin.set_then_spin(flags, row + _DONE, row + _WAITING, row + _POSTED,
                                             1, budget, after)
            if state < 0:
                with wake:
                    wake.notify_all()
                state = self._spin.spin_until(flags, row + _POSTED, 1, budget, after)
            posted = state == 1
