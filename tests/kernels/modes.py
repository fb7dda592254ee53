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
