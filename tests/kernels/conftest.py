"""Fixtures shared by the kernel-level tests."""

import pytest

import difftape as wp


@pytest.fixture
def threading():
    """``threading(mode)`` runs the test's launches with ``wp.config.cpu_parallel = mode``, every
    launch large enough to be split across threads; the configuration is restored after."""
    saved = (wp.config.cpu_parallel, wp.config.parallel_threshold, wp.config.mode)

    def use(mode):
        wp.config.cpu_parallel, wp.config.parallel_threshold = mode, 1

    yield use
    wp.config.cpu_parallel, wp.config.parallel_threshold, wp.config.mode = saved
