"""Where the user's code is: the first stack frame outside difftape, and the names its variables give arrays.

Warnings and graph labels use these to speak in the user's terms. This module only reads frames;
it never keeps a frame alive and never changes a variable.
"""

from __future__ import annotations

import os
import sys
import types

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_MAX_ITEMS = 256  # longest list/tuple searched for arrays, so a huge list costs nothing


def user_frame(depth: int = 1) -> types.FrameType | None:
    """The innermost frame, ``depth`` levels above the caller or further out, not in difftape."""
    frame = sys._getframe(depth + 1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return frame


def user_location() -> tuple[str | None, int | None]:
    """``(filename, lineno)`` of the user's line that led here, or ``(None, None)``."""
    frame = user_frame(2)
    if frame is None:
        return None, None
    return frame.f_code.co_filename, frame.f_lineno


def _is_array(value: object) -> bool:
    return hasattr(value, "_write_count") and hasattr(value, "_data")


def _holds_attributes(value: object) -> bool:
    """Plain objects whose attributes may hold arrays (a simulation state, ``self``)."""
    return (hasattr(value, "__dict__") and not isinstance(value, (type, types.ModuleType,
            types.FunctionType, types.MethodType)) and not _is_array(value)
            and not callable(getattr(value, "backward", None)))


def _children(name: str, value: object):
    """Arrays one level inside ``value``: list/tuple items and plain-object attributes."""
    if isinstance(value, (list, tuple)) and len(value) <= _MAX_ITEMS:
        for i, item in enumerate(value):
            yield f"{name}[{i}]", item
    elif isinstance(value, dict) and len(value) <= _MAX_ITEMS:
        for key, item in value.items():
            if isinstance(key, str):
                yield f"{name}[{key!r}]", item
    elif _holds_attributes(value):
        for attr, item in list(vars(value).items())[:_MAX_ITEMS]:
            if not attr.startswith("_"):
                yield f"{name}.{attr}", item


def variable_names(frame: types.FrameType | None) -> dict[int, str]:
    """``id(array) → name`` for arrays the frame's variables reach (``x``, ``xs[3]``, ``self.x``).

    Plain names win over derived ones, locals over globals; the first name found is kept.
    """
    names: dict[int, str] = {}
    if frame is None:
        return names
    scopes = [dict(frame.f_locals), dict(frame.f_globals)]
    for scope in scopes:
        for name, value in scope.items():
            if _is_array(value) and not name.startswith("_"):
                names.setdefault(id(value), name)
    for depth in range(2):  # two levels: self.states[3]
        for scope in scopes:
            nested: dict[str, object] = {}
            for name, value in scope.items():
                if name.startswith("__"):
                    continue
                for child_name, child in _children(name, value):
                    if _is_array(child):
                        names.setdefault(id(child), child_name)
                    elif depth == 0:
                        nested[child_name] = child
            scope.clear()
            scope.update(nested)
    return names
