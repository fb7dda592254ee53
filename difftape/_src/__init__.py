"""difftape internals; the public API is re-exported by difftape/__init__.py."""
