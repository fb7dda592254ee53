"""``"auto"`` launches time serial and threaded runs of each (program, direction, size) on their
first launches and keep the faster (``thread_choice.py``)."""

import numpy as np
import pytest

import difftape as wp
from difftape._src import chunks, thread_choice


def _tally(times: list[float], table=None, key=(False, 1000)) -> tuple[list, object]:
    """The ways ``choose`` picks for runs taking ``times`` seconds, and the tally."""
    table = {} if table is None else table
    ways = []
    for seconds in times:
        choice, threaded = thread_choice.choose(table, *key)
        ways.append(threaded)
        choice.record(threaded, seconds)
    return ways, choice


def test_the_tally_alternates_threaded_first_then_keeps_the_faster():
    table = {}
    ways, choice = _tally([5.0, 1.0, 4.0, 2.0, 0.8, 3.0], table)  # threaded 5, 4, 0.8; serial 1, 2, 3
    assert ways == [True, False] * thread_choice.TRIALS
    assert choice.decided is True  # fastest threaded run 0.8 s beats serial's 1 s
    assert thread_choice.choose(table, False, 1000) == (choice, True)
    other, threaded = thread_choice.choose(table, True, 1000)  # the adjoint has its own tally
    assert other is not choice and threaded and other.decided is None


def test_threads_win_early_only_clearly_and_serial_never_early():
    ways, choice = _tally([1.0, 2.0])  # threaded twice as fast: decided after one run each
    assert ways == [True, False] and choice.decided is True
    ways, choice = _tally([1.0, 1.2])  # not clear: still timing
    assert choice.decided is None
    ways, choice = _tally([9.0, 1.0])  # serial far faster: still timed to the end
    assert choice.decided is None


def test_a_choice_is_timed_again_after_recheck_launches():
    table = {}
    _, choice = _tally([1.0, 3.0], table)
    assert choice.decided is True
    for followed in range(1, thread_choice.RECHECK + 1):
        chosen, threaded = thread_choice.choose(table, False, 1000)
        assert chosen is choice and threaded == (followed not in thread_choice.PROBES)
        # the chosen way's launch right before a probe is timed, its time kept
        assert choice.timing() == (followed in thread_choice.PROBES
                                   or followed + 1 in thread_choice.PROBES)
        if threaded and choice.timing():
            choice.record(True, 1.0)
        if not threaded:  # a probe of the serial way, slower than threads: the choice stays
            choice.record(False, 2.5)  # one run (threads' probes run PROBE_RUNS times)
            assert choice.decided is True and not choice.timing()
    again, threaded = thread_choice.choose(table, False, 1000)
    assert again is choice and choice.decided is None and threaded and choice.runs == [0, 0]


def test_a_probe_of_the_other_way_that_wins_changes_the_choice():
    """Trials on a busy host kept a launch serial (threaded runs 1.3 s, serial 1.2 s); the
    probe of threads four launches later runs in 0.7 s: threads from then on."""
    table = {}
    ways, choice = _tally([1.3, 1.2] * thread_choice.TRIALS, table)
    assert choice.decided is False
    ways, _ = _tally([1.2] * (min(thread_choice.PROBES) - 1), table)  # the last one timed
    assert ways == [False] * (min(thread_choice.PROBES) - 1) and not choice.timing()
    chosen, threaded = thread_choice.choose(table, False, 1000)
    assert threaded and choice.timing()
    # asked again before it reported (the fast launcher's question, then the general path's):
    # the same probe, not counted twice
    assert not thread_choice.stays_serial(table, False, 1000)
    assert thread_choice.choose(table, False, 1000) == (choice, True)
    assert choice.followed == min(thread_choice.PROBES)
    choice.record(True, 0.9)  # the first run woke the workers
    assert choice.decided is False and choice.timing()  # the probe's second run is due
    assert thread_choice.choose(table, False, 1000) == (choice, True)
    choice.record(True, 0.7)
    assert choice.decided is True and not choice.timing()
    assert thread_choice.choose(table, False, 1000) == (choice, True)
    assert choice.followed == min(thread_choice.PROBES) + 1


def test_a_probe_is_compared_with_the_chosen_way_timed_just_before_it():
    """Threads won the trials on a cold start (0.88 s; serial 1.4 s) and run 0.38 s warm: the
    launch before each probe times them again, and a serial probe of 0.71 s (faster than the
    trials' threads) leaves threads chosen."""
    table = {}
    _, choice = _tally([0.88, 1.4], table)
    assert choice.decided is True
    for followed in range(1, max(thread_choice.PROBES) + 1):
        _, threaded = thread_choice.choose(table, False, 1000)
        if choice.timing():
            choice.record(threaded, 0.38 if threaded else 0.71)
    assert choice.decided is True and choice.threaded == 0.38 and choice.serial == 0.71


def test_a_probe_that_cannot_be_timed_is_dropped():
    table = {}
    _, choice = _tally([1.3, 1.2] * thread_choice.TRIALS, table)
    _tally([1.2] * (min(thread_choice.PROBES) - 1), table)
    assert thread_choice.choose(table, False, 1000) == (choice, True)  # the probe
    choice.skip()
    assert thread_choice.choose(table, False, 1000) == (choice, False)
    assert choice.decided is False and not choice.timing()


@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 3.0 * x[i]


@pytest.fixture
def auto_everywhere(monkeypatch):
    monkeypatch.setattr(wp.config, "cpu_parallel", "auto")
    monkeypatch.setattr(wp.config, "parallel_threshold", 1)
    monkeypatch.setattr("numba.get_num_threads", lambda: 2)
    threaded_runs = []
    run = chunks.run

    def spy(*args, **kwargs):
        threaded_runs.append(True)
        return run(*args, **kwargs)

    monkeypatch.setattr(chunks, "run", spy)
    return threaded_runs


@pytest.mark.parametrize("threads_faster", [True, False])
def test_launches_follow_the_timed_choice(auto_everywhere, monkeypatch, threads_faster):
    record = thread_choice.Choice.record

    def staged(self, threaded, seconds):  # the clock says what the test wants (no clear win)
        return record(self, threaded, 1.0 if threaded == threads_faster else 1.2)

    monkeypatch.setattr(thread_choice.Choice, "record", staged)
    n = 1000
    x = wp.array(np.arange(n, dtype=np.float32))
    y = wp.zeros(n, dtype=float)
    wp.launch(scale, 1, inputs=[x, y])  # compiled: the program exists
    scale.program(1, False, True, None).thread_choices.clear()  # no tally from another test
    ways = []
    for _ in range(2 * thread_choice.TRIALS + 3):
        before = len(auto_everywhere)
        y.zero_()
        wp.launch(scale, n, inputs=[x, y])
        ways.append(len(auto_everywhere) > before)
        np.testing.assert_array_equal(y.numpy(), 3 * x.numpy())
    assert ways == [True, False] * thread_choice.TRIALS + [threads_faster] * 3
    # another size starts its own tally, threaded first
    m = 999
    before = len(auto_everywhere)
    wp.launch(scale, m, inputs=[x[:m], y[:m]])
    assert len(auto_everywhere) == before + 1


def test_launches_switch_to_threads_when_their_probe_wins(auto_everywhere, monkeypatch):
    """Serial wins the trials (as on a host whose other core was busy); the probe of threads
    is faster, and the launches after it run threaded. The serial launches in between take the
    fast launcher, which counts them as the general path would."""
    record = thread_choice.Choice.record

    def staged(self, threaded, seconds):
        if self.decided is None:  # trials
            return record(self, threaded, 1.3 if threaded else 1.2)
        return record(self, threaded, 0.7 if threaded else 1.2)  # the probe; the launch before

    monkeypatch.setattr(thread_choice.Choice, "record", staged)
    n = 1000
    x = wp.array(np.arange(n, dtype=np.float32))
    y = wp.zeros(n, dtype=float)
    wp.launch(scale, 1, inputs=[x, y])
    choices = scale.program(1, False, True, None).thread_choices
    choices.clear()
    first = min(thread_choice.PROBES)
    ways = []
    for _ in range(2 * thread_choice.TRIALS + first + 3):
        before = len(auto_everywhere)
        y.zero_()
        wp.launch(scale, n, inputs=[x, y])
        ways.append(len(auto_everywhere) > before)
        np.testing.assert_array_equal(y.numpy(), 3 * x.numpy())
    assert ways == ([True, False] * thread_choice.TRIALS + [False] * (first - 1)
                    + [True] * 4)
    # the probe's two runs count as one launch
    assert choices[(False, n)].decided is True and choices[(False, n)].followed == first + 2


def test_launches_that_cannot_use_threads_do_not_count(auto_everywhere, monkeypatch):
    """Deterministic mode and overlapping arrays run serially without touching the tally."""
    monkeypatch.setattr(wp.config, "deterministic", True)
    x = wp.array(np.ones(100, dtype=np.float32))
    y = wp.zeros(100, dtype=float)
    program = scale.program(1, False, True, None)
    program.thread_choices.clear()
    wp.launch(scale, 100, inputs=[x, y])
    monkeypatch.setattr(wp.config, "deterministic", False)
    wp.launch(scale, 100, inputs=[x, x])  # overlapping
    assert not auto_everywhere and not program.thread_choices
