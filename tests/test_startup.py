"""What ``import difftape`` leaves behind in Python's garbage collector (``_src/startup.py``)."""

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
