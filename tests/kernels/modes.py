"""Helpers shared by the kernel-level tests."""

import difftape as wp


def debug_reference(run):
    """``run()``'s result in debug mode, which compiles kernels without loop interchange, strips
    or splits: the plain per-thread code the optimized variants must agree with."""
    saved = wp.config.mode
    wp.config.mode = "debug"
    try:
        return run()
    finally:
        wp.config.mode = saved


def assert_matches_debug(got, run, mode: str, tolerance: float) -> None:
    """``got`` (``run()``'s result in ``mode``) equals the per-thread code's: bit for bit when
    serial, within ``tolerance`` (relative and absolute) when chunks add in another order."""
    import numpy as np

    want = debug_reference(run)
    if mode == "serial":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
