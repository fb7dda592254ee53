"""Runnable examples: `python -m examples.<name>`."""
