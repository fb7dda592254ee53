"""Whether an ``"auto"`` launch that may run on several threads should: decided per compiled
program, direction and launch size, by timing its first launches both ways.

Threads pay back only when a launch's work outweighs handing chunks to them and summing
per-chunk copies, and that depends on the kernel, not on its thread count alone. On the 2-core
test VM an ``axpy`` of 200k threads took 21 us serially and 28 us on two threads (1M threads:
102 and 76 us), while 300k mass-spring springs ran 1.7x faster on two. So the first launches of
each (program, direction, size) alternate, threaded first, until each way has run ``TRIALS``
times (or threads won clearly); the faster one (by its fastest run: noise only ever adds time)
is kept for the next ``RECHECK`` launches, and then timed again: a core busy with something
else during the trials (another process, or a compile-ahead child, beside which ``launch``
times nothing) must not keep a launch off the threads for good.

The trials take a few milliseconds, and a host whose other core is busy for that long decides
wrong: on the 2-core test VM, mass-spring's forces (threads 1.3-1.8x faster) were kept serial
in two of four benchmark-like processes, and stayed serial for the whole run. So the way not
chosen is also timed at a few ``PROBES`` launches after the choice (threads ``PROBE_RUNS``
runs in a row, the fastest counting; serial once), and wins from then on if it beats the
chosen way's fastest run: one or two runs of the slower way at each probe when the choice was
right. The chosen way's launch right before a probe is timed too: a process's first launches run slower than later ones (cold
caches, page faults, threads starting), and with the trials' times alone a serial probe of a
1024² stencil step (0.71 ms) beat threads timed during warm-up (0.88 ms; 0.38 ms once warm),
which then stayed serial until the recheck.

This module only keeps the tally; ``launch._execute`` asks and reports.
"""

from __future__ import annotations

# Timed launches each way before the choice.
TRIALS = 3

# Threads win at once when a threaded run beat every serial one by this factor. (Serial runs
# do not win early: a process's first threaded run also starts the worker threads.)
CLEAR_WIN = 1.5

# Launches that follow a choice before it is timed again.
RECHECK = 200

# Launches after a choice (counted as ``Choice.followed``) that run the other way, timed.
PROBES = frozenset({4, 16, 64})

# Runs of threads at a probe of them, one after the other (counted as one launch): the first
# threaded run after many serial ones wakes workers that went to sleep, which on a virtual
# machine whose idle cores halt took 0.7-0.8 ms against 0.31 for a 1024² stencil step. A
# probe of the serial way runs once: where a benchmark's round makes one launch of a kernel,
# two serial runs took two of its five timed rounds (4M-element elementwise: 14 ms, not 7).
PROBE_RUNS = 2

# False: every launch that may use threads does (what tests of those rules set).
TIMED = True

# Launch sizes remembered per program and direction; more start the tally again.
_MAX_SIZES = 256


class Choice:
    """The tally of one (program, direction, launch size): fastest time each way so far."""

    __slots__ = ("threaded", "serial", "runs", "decided", "followed", "probing", "refreshing")

    def __init__(self):
        self.restart()

    def restart(self) -> None:
        """Forget the times: the next launches are timed both ways again."""
        self.threaded = self.serial = float("inf")
        self.runs = [0, 0]  # serial, threaded
        self.decided: bool | None = None  # True: threads; False: serial; None: still timing
        self.followed = 0  # launches since the choice
        self.probing = 0  # launches the other way still due at this probe, each timed
        self.refreshing = False  # a launch the chosen way, before a probe, is to be timed

    def keep(self) -> bool | None:
        """The way for one more launch (True: threads), which is counted: the way chosen, or
        the other at a probe (until a probe launch, or the chosen way's launch timed before it,
        reports or is ``skip``-ped, every launch asks for it again, uncounted); None while still
        timing, and once ``RECHECK`` launches have followed the choice (timed again)."""
        if self.decided is None:
            return None
        if self.probing:
            return not self.decided
        if self.refreshing:
            return self.decided
        self.followed += 1
        if self.followed > RECHECK:
            self.restart()
            return None
        if self.followed in PROBES:
            self.probing = 1 if self.decided else PROBE_RUNS
            return not self.decided
        self.refreshing = self.followed + 1 in PROBES
        return self.decided

    def timing(self) -> bool:
        """Whether the launch that asked should be timed and reported: a trial, a probe, or
        the chosen way's launch before a probe."""
        return self.decided is None or self.probing > 0 or self.refreshing

    def skip(self) -> None:
        """The launch that asked is not timed; a probe's (or the one before it) is dropped (it
        runs, uncounted)."""
        self.probing, self.refreshing = 0, False

    def record(self, threaded: bool, seconds: float) -> None:
        """Report one timed launch."""
        if threaded:
            self.threaded = min(self.threaded, seconds)
        else:
            self.serial = min(self.serial, seconds)
        if self.refreshing:
            self.refreshing = False
            return
        if self.probing:
            self.probing -= 1
            if not self.probing:
                self.decided = self.threaded < self.serial
            return
        self.runs[threaded] += 1
        if min(self.runs) >= TRIALS or self.runs[0] and self.threaded * CLEAR_WIN < self.serial:
            self.decided = self.threaded < self.serial


def choose(table: dict, adjoint: bool, total: int) -> tuple[Choice | None, bool]:
    """The tally for a launch of ``total`` threads in ``table`` (the program's own), and
    whether this launch should use threads; no tally when not :data:`TIMED`."""
    if not TIMED:
        return None, True
    key = (adjoint, total)
    choice = table.get(key)
    if choice is None:
        if len(table) >= _MAX_SIZES:
            table.clear()
        choice = table[key] = Choice()
    kept = choice.keep()
    if kept is not None:
        return choice, kept
    serial_runs, threaded_runs = choice.runs
    return choice, threaded_runs <= serial_runs


def stays_serial(table: dict, adjoint: bool, total: int) -> bool:
    """Whether a launch of ``total`` threads runs serially by a choice already made (and not
    due to be timed again or probed), counted as ``choose`` counts it: launchers that can run
    only serial launches ask this instead (``launch_fast.py``)."""
    choice = table.get((adjoint, total))
    return (TIMED and choice is not None and choice.decided is False and choice.keep() is False
            and not choice.refreshing)
