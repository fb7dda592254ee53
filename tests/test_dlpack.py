"""DLPack exchange through numpy (no PyTorch needed), and interop imports without PyTorch."""

import sys

import numpy as np
import pytest

import difftape as wp


def test_numpy_from_difftape_shares_memory():
    x = wp.array(np.arange(4.0), dtype=wp.float32)
    assert x.__dlpack_device__() == (1, 0)
    view = np.from_dlpack(x)
    view[1] = 10.0
    assert x.numpy()[1] == 10.0


def test_from_dlpack_numpy_vectors_and_scalars():
    data = np.arange(12.0).reshape(4, 3)
    a = wp.from_dlpack(data, dtype=wp.vec3d)
    assert a.shape == (4,) and a.dtype is wp.vec3d
    a.numpy()[0, 0] = -1.0
    assert data[0, 0] == -1.0
    b = wp.from_dlpack(np.ones((2, 2), dtype=np.int32))
    assert b.dtype is wp.int32 and b.shape == (2, 2)


def test_to_dlpack_capsule_roundtrip():
    x = wp.array(np.array([1.0, 2.0]), dtype=wp.float64)
    y = wp.from_dlpack(wp.to_dlpack(x))
    y.numpy()[0] = 5.0  # a bare capsule still imports writable, sharing memory
    assert x.numpy()[0] == 5.0


def test_roundtrip_strided_view():
    base = wp.array(np.arange(12.0).reshape(3, 4), dtype=wp.float64)
    view = base[:, 1:]
    again = wp.from_dlpack(view)
    assert again.shape == (3, 3) and again.strides == view.strides
    again.numpy()[2, 2] = 99.0
    assert base.numpy()[2, 3] == 99.0


def test_from_dlpack_errors():
    with pytest.raises(RuntimeError, match="Incompatible data types"):
        wp.from_dlpack(np.ones(3), dtype=wp.float32)
    with pytest.raises(RuntimeError, match="contiguous"):
        wp.from_dlpack(np.ones((3, 2)), dtype=wp.vec3d)


def test_interop_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    import difftape.torch as dtt

    with pytest.raises(ImportError, match="pip install torch"):
        dtt.to_torch(wp.zeros(3))
    with pytest.raises(ImportError, match="pip install torch"):
        wp.from_torch(object())
