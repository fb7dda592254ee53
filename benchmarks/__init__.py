"""difftape's benchmark harness (issue 5): ``make bench`` or ``python -m benchmarks.run``."""
