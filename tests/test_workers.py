"""The launch thread pool (``workers.py``): calls handed over through polled flags, with
sleeping as the fallback on both sides, errors, concurrent launching threads, interruption,
and CPUs without polling (``cpu_spin.Unpolled``)."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import difftape as wp
from difftape._src import chunks, workers as workers_module
from difftape._src.backends import cpu_spin


@pytest.fixture(params=["polled", "unpolled"])
def make_workers(request, monkeypatch):
    if request.param == "unpolled":
        monkeypatch.setattr(cpu_spin, "polling", cpu_spin.Unpolled)
    return workers_module.Workers


def _record(log, key):
    log.append((key, threading.current_thread()))


def test_every_call_runs_once_on_its_own_thread(make_workers):
    pool = make_workers(2)
    for _ in range(50):
        log = []
        pool.run([(_record, (log, k)) for k in range(3)])
        assert sorted(key for key, _ in log) == [0, 1, 2]
        threads = {key: thread for key, thread in log}
        assert threads[0] is threading.current_thread()
        assert {threads[1], threads[2]} == set(pool.threads)


def test_a_worker_that_slept_is_woken_and_a_long_call_is_waited_for(make_workers):
    pool = make_workers(1)
    pool.run([(lambda: None, ()), (lambda: None, ())])
    time.sleep(50 * workers_module.SPIN_S)  # the worker stops polling and sleeps
    assert pool._flags[workers_module._ASLEEP] == 1
    log = []
    pool.run([(_record, (log, 0)), (lambda: (time.sleep(0.05), _record(log, 1)), ())])
    assert sorted(key for key, _ in log) == [0, 1]  # returned only after the 50 ms call
    assert pool._flags[workers_module._WAITING] == 0


def test_errors_reach_the_launching_thread_and_the_pool_keeps_working(make_workers):
    pool = make_workers(1)

    def fail():
        raise ValueError("in the worker")

    with pytest.raises(ValueError, match="in the worker"):
        pool.run([(lambda: None, ()), (fail, ())])
    finished = []

    def slow():
        time.sleep(0.02)
        finished.append(True)

    with pytest.raises(KeyError):  # the launching thread's own error, after the worker's call
        pool.run([({}.__getitem__, ("missing",)), (slow, ())])
    assert finished == [True]
    log = []
    pool.run([(_record, (log, 0)), (_record, (log, 1))])
    assert len(log) == 2 and not pool.broken


def test_concurrent_launching_threads_each_get_every_call_made(make_workers):
    pool = make_workers(1)
    counts = np.zeros(4, np.int64)
    lock = threading.Lock()

    def count(k):
        with lock:
            counts[k] += 1

    def launcher(base):
        for _ in range(200):
            pool.run([(count, (base,)), (count, (base + 1,))])

    threads = [threading.Thread(target=launcher, args=(b,)) for b in (0, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counts.tolist() == [200, 200, 200, 200]


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
def test_an_interrupted_wait_retires_the_pool(monkeypatch):
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        pool = workers_module.Workers(1)
        monkeypatch.setattr(chunks, "_workers", pool)
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(KeyboardInterrupt):
            pool.run([(lambda: None, ()), (time.sleep, (0.3,))])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert pool.broken
    assert chunks._thread_workers() is not pool  # the next launch starts new workers


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_launches_on_workers_of_its_own(monkeypatch):
    @wp.kernel
    def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = 2.0 * x[i]

    n = 100_000
    x = wp.array(np.arange(n, dtype=np.float32))
    y = wp.zeros(n, dtype=float)
    monkeypatch.setattr(wp.config, "cpu_parallel", "replicate")
    wp.launch(double, n, inputs=[x, y])  # the parent's workers exist
    parent_threads = chunks.pool_threads()
    assert parent_threads
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if it launched on new workers
        ok = False
        try:
            y.zero_()
            wp.launch(double, n, inputs=[x, y])
            ok = (np.array_equal(y.numpy(), 2 * x.numpy())
                  and chunks.pool_threads()
                  and chunks.pool_threads().isdisjoint(parent_threads))
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
