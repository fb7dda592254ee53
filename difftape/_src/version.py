"""The difftape version, in one place (generated-code cache keys include it)."""

__version__ = "0.1.0"
