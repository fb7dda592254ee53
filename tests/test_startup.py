"""What ``import difftape`` leaves behind in Python's garbage collector, and the compiled code of
its dataclasses it keeps (``_src/startup.py``, ``_src/dataclass_code.py``)."""

import subprocess
import sys

import pytest

_PROBE = """
import gc
{before}
import difftape
print(gc.isenabled(), gc.get_freeze_count() > 10_000)
"""


@pytest.mark.parametrize("before, enabled", [("", "True"), ("gc.disable()", "False")])
def test_import_freezes_its_objects_and_restores_the_collectors_state(before, enabled):
    """The import's objects are frozen (later full collections skip them), and the collector
    is left enabled or disabled as the program had it."""
    words = subprocess.run([sys.executable, "-c", _PROBE.format(before=before)],
                           capture_output=True, text=True, check=True).stdout.split()
    assert words == [enabled, "True"]


def test_garbage_made_after_the_import_is_still_collected():
    script = _PROBE.format(before="") + """
import weakref
class Node:
    pass
a, b = Node(), Node()
a.other, b.other = b, a  # a reference cycle: only the collector can free it
probe = weakref.ref(a)
del a, b
gc.collect()
print(probe() is None)
"""
    words = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True).stdout.split()
    assert words[-1] == "True"


def test_an_import_that_failed_part_way_is_retried_with_the_collectors_state():
    script = """
import gc, sys

class Refuse:  # fails the first import of one of difftape's late modules
    armed = True
    def find_spec(self, name, path=None, target=None):
        if name == "difftape._src.interop.torch_bridge" and Refuse.armed:
            Refuse.armed = False
            raise ImportError("refused once")

sys.meta_path.insert(0, Refuse())
try:
    import difftape
except ImportError:
    print("failed", gc.isenabled())
import difftape
print("retried", gc.isenabled())
"""
    words = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True).stdout.split()
    assert words == ["failed", "False", "retried", "True"]


_DATACLASS_PROBE = """
import dataclasses, json
import difftape
from difftape._src import dataclass_code
from difftape._src.backends.cpu import Variant
from difftape._src.frontend import ir
from difftape._src.ops.registry import TypeVar

fresh = dataclasses.make_dataclass("Fresh", [("line", int), ("text", str)])  # plain exec
print(json.dumps({
    "compiled": dataclass_code.compiled,
    "exec_restored": "exec" not in vars(dataclasses),
    "flags_as_plain": ir.Assign.__init__.__code__.co_flags == fresh.__init__.__code__.co_flags,
    "repr": repr(ir.Assign(line=3, text="x = 1", target="x")),
    "eq": Variant(1, False, False, False, True) == Variant(1, False, False, False, True),
    "frozen_hash": hash(TypeVar("T", (float,))) == hash(TypeVar("T", (float,))),
}))
"""


def _dataclass_runs(tmp_path, count: int) -> list[dict]:
    import json
    import os

    env = dict(os.environ, DIFFTAPE_CACHE_DIR=str(tmp_path))
    return [json.loads(subprocess.run([sys.executable, "-c", _DATACLASS_PROBE], env=env,
                                      capture_output=True, text=True, check=True).stdout)
            for _ in range(count)]


def test_a_second_import_runs_the_kept_code_of_its_dataclasses(tmp_path):
    first, second = _dataclass_runs(tmp_path, 2)
    assert first["compiled"] > 40 and second["compiled"] == 0
    for run in (first, second):
        assert run["exec_restored"] and run["flags_as_plain"]
        assert run["eq"] is True and run["frozen_hash"] is True
    assert second["repr"] == first["repr"] == (
        "Assign(line=3, text='x = 1', file='', target='x', value=None)")


def test_an_unreadable_dataclass_code_file_is_compiled_again(tmp_path):
    _dataclass_runs(tmp_path, 1)
    (kept,) = tmp_path.glob("dataclass_code_*.marshal")
    kept.write_bytes(b"not marshal data")
    again, after = _dataclass_runs(tmp_path, 2)
    assert again["compiled"] > 40 and after["compiled"] == 0


def test_changed_source_text_is_compiled_and_known_text_reused():
    from difftape._src import dataclass_code

    source = "def __create_fn__():\n def f(self): return 42\n return f"
    before = dataclass_code.compiled
    namespaces = [{}, {}]
    for ns in namespaces:
        dataclass_code._exec(source, {}, ns)
    assert dataclass_code.compiled == before + 1
    assert namespaces[0]["__create_fn__"]()(None) == namespaces[1]["__create_fn__"]()(None) == 42
    dataclass_code._known.clear()
    dataclass_code._used.clear()
