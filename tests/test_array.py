"""Tests for arrays (SPEC §2.5, §2.7 forward part), devices and config flags."""

from __future__ import annotations

import importlib
import os

import numpy as np
import pytest

import difftape as wp
from difftape._src import array as array_module
from difftape._src import config, dtypes
from difftape._src import device as device_module
from difftape._src.array import array, array1d, array2d, array3d, array4d, copy
from difftape._src.array_ops import (
    clone,
    empty,
    empty_like,
    from_numpy,
    full,
    full_like,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from difftape._src.device import Device, get_device
from difftape._src.errors import ArrayError, DiffTapeError, LaunchError


def f32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


# -- devices -------------------------------------------------------------------------------


def test_device_cpu_is_default_and_compares_to_string():
    dev = get_device()
    assert isinstance(dev, Device)
    assert dev == "cpu" and "cpu" == dev
    assert str(dev) == "cpu" and repr(dev) == "'cpu'"
    assert dev.is_cpu and not dev.is_cuda
    assert get_device("cpu") is dev and get_device(dev) is dev
    assert hash(dev) == hash(get_device("cpu"))


@pytest.mark.parametrize("ident", ["cuda", "cuda:0", "cuda:1"])
def test_device_cuda_raises_runtime_error_naming_device(ident):
    with pytest.raises(LaunchError, match=f"CUDA is not available.*'{ident}'") as info:
        get_device(ident)
    assert isinstance(info.value, RuntimeError)


def test_device_invalid_identifier_raises():
    with pytest.raises(RuntimeError, match="Invalid device identifier: 'tpu'"):
        get_device("tpu")


def test_device_queries_and_noops():
    assert device_module.is_cuda_available() is False
    assert device_module.get_cuda_device_count() == 0
    assert device_module.get_preferred_device() == "cpu"
    assert device_module.get_devices() == ["cpu"]
    device_module.init()
    device_module.init()
    device_module.synchronize()
    device_module.synchronize_device()
    device_module.synchronize_device("cpu")
    with pytest.raises(LaunchError):
        device_module.synchronize_device("cuda:0")


def test_device_set_device_and_scoped_device():
    device_module.set_device("cpu")
    assert get_device() == "cpu"
    with pytest.raises(LaunchError):
        device_module.set_device("cuda:0")
    with device_module.ScopedDevice("cpu") as dev:
        assert dev == "cpu" and get_device() is dev
    assert get_device() == "cpu"


# -- config --------------------------------------------------------------------------------


def test_config_defaults():
    assert config.verify_autograd_array_access is False
    assert config.enable_backward is True
    assert config.max_unroll == 16
    assert config.mode == "release"
    assert config.verbose is False and config.print_source is False
    assert config.enable_vector_component_overwrites is False
    assert config.deterministic is False and config.fast_math is False
    assert config.cpu_parallel in ("serial", "parallel", "auto")
    assert config.parallel_threshold == 10_000
    assert config.log_level <= config.LOG_WARNING


def test_config_cache_dir_from_environment(monkeypatch, tmp_path):
    saved = dict(vars(config))  # reloading resets every flag; put the session's values back
    try:
        monkeypatch.setenv("DIFFTAPE_CACHE_DIR", str(tmp_path))
        assert importlib.reload(config).cache_dir == str(tmp_path)
        monkeypatch.delenv("DIFFTAPE_CACHE_DIR")
        expected = os.path.join(os.path.expanduser("~"), ".cache", "difftape")
        assert importlib.reload(config).cache_dir == expected
    finally:
        vars(config).update(saved)


# -- construction --------------------------------------------------------------------------


def test_array_infers_dtype_from_data_like_warp():
    assert array([1.0, 2.0]).dtype is dtypes.float64  # Python floats are float64, as in Warp
    assert array([1, 2]).dtype is dtypes.int64
    assert array([True, False]).dtype is dtypes.bool_
    assert array(np.zeros(3, np.float16)).dtype is dtypes.float16
    assert array(np.zeros(3, np.uint8)).dtype is dtypes.uint8


@pytest.mark.parametrize(
    "spelling, expected",
    [
        (float, dtypes.float32), (int, dtypes.int32), (bool, dtypes.bool_),
        (np.float64, dtypes.float64), (np.dtype("int8"), dtypes.int8),
        (dtypes.uint32, dtypes.uint32), (dtypes.float16, dtypes.float16),
    ],
)  # fmt: skip
def test_array_dtype_spellings_convert_data(spelling, expected):
    a = array([1, 0, 1], dtype=spelling)
    assert a.dtype is expected
    assert a.numpy().dtype == dtypes.numpy_dtype(expected)
    assert a.numpy().tolist() == [1, 0, 1]


def test_array_unknown_dtype_raises():
    with pytest.raises(ArrayError, match="array dtype must be"):
        array([1.0], dtype="complex64")
    with pytest.raises(RuntimeError, match="Unsupported input data dtype: complex128"):
        array(np.zeros(2, np.complex128))


def test_array_copy_false_shares_numpy_memory_copy_true_does_not():
    data = f32([1, 2, 3])
    shared = array(data, dtype=dtypes.float32, copy=False)
    copied = array(data, dtype=dtypes.float32)
    data[0] = 10.0
    assert shared.numpy()[0] == 10.0
    assert copied.numpy()[0] == 1.0
    assert shared.numpy() is data


def test_array_copy_false_with_other_dtype_converts():
    data = np.arange(3, dtype=np.float64)
    a = array(data, dtype=float, copy=False)
    assert a.numpy().dtype == np.float32 and not np.shares_memory(a.numpy(), data)


def test_array_from_difftape_array_copies_values():
    src = array([1.0, 2.0], dtype=float)
    dst = array(src)
    assert dst.dtype is dtypes.float32 and dst.numpy().tolist() == [1.0, 2.0]
    assert not np.shares_memory(dst.numpy(), src.numpy())


def test_large_storage_starts_on_a_cache_line_and_owns_its_memory():
    """Storage of ALIGNED_MIN_BYTES or more starts on a 64-byte boundary, whichever way it was
    made (numpy's own start 16-byte aligned: vector loops then split cache lines); it counts as
    owning its memory (the launcher's fast path and overlap check), a view of it does not."""
    from difftape._src.array_storage import ALIGNED_MIN_BYTES, ALIGNMENT, owns_memory

    n = ALIGNED_MIN_BYTES // 4 + 3
    values = np.arange(n, dtype=np.float32)
    made = {
        "zeros": zeros(n, dtype=float), "empty": empty(n, dtype=float),
        "ones": ones(n, dtype=float), "full": full(n, 2.5, dtype=float),
        "array(numpy)": array(values, dtype=float), "array(list)": array(values.tolist()),
        "array(float64 numpy)": array(values.astype(np.float64), dtype=float),
        "zeros_like": zeros_like(array(values)), "clone": clone(array(values)),
        "2d": zeros((n, 3), dtype=float), "vec3": zeros(n, dtype=wp.vec3),
        "grad": zeros(n, dtype=float, requires_grad=True).grad,
        "strided": array(shape=(n,), dtype=float, strides=(8,)),
    }
    for name, a in made.items():
        assert a.ptr % ALIGNMENT == 0, name
        if name != "strided":
            assert owns_memory(a.numpy()), name
    np.testing.assert_array_equal(made["array(numpy)"].numpy(), values)
    np.testing.assert_array_equal(made["array(list)"].numpy(), values)
    np.testing.assert_array_equal(made["clone"].numpy(), values)
    assert not made["zeros"].numpy().any() and not made["grad"].numpy().any()
    assert (made["full"].numpy() == 2.5).all()
    view = made["zeros"][1:]
    assert not owns_memory(view.numpy()) and not owns_memory(made["zeros"].numpy()[:5])
    assert not owns_memory(made["strided"].numpy())
    # Small storage stays numpy's (aligning it would cost more than it saves).
    small = zeros(ALIGNED_MIN_BYTES // 8, dtype=float)
    assert small.numpy().base is None and owns_memory(small.numpy())


def test_overlap_check_sees_views_of_aligned_storage():
    from difftape._src.launch import _overlapping

    a, b = zeros(5000, dtype=float).numpy(), zeros(5000, dtype=float).numpy()
    assert not _overlapping([a, b]) and not _overlapping([a, b, a[:0]])
    assert _overlapping([a, a]) and _overlapping([a, a[1:]]) and _overlapping([a[10:], b, a[:20]])
    assert not _overlapping([a[:10], a[10:]]) and not _overlapping([a[:10], b[10:], a[20:]])


def test_array_shape_int_tuple_and_reshaped_data():
    assert array(shape=5).shape == (5,)
    assert array(shape=(2, 3)).shape == (2, 3)
    assert array(shape=[1, 2, 3, 4], dtype=int).ndim == 4
    a = array(np.arange(6), dtype=float, shape=(2, 3))
    assert a.shape == (2, 3) and a.numpy()[1, 2] == 5.0
    with pytest.raises(RuntimeError, match="Failed to reshape"):
        array([1.0, 2.0, 3.0], shape=(2, 2))


@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1), ()])
def test_array_bad_number_of_dims_raises(shape):
    with pytest.raises(ArrayError, match="number of dimensions must be between 1 and 4"):
        array(shape=shape)


def test_array_more_than_four_dims_of_data_raises():
    with pytest.raises(ArrayError) as info:
        array(np.zeros((1, 1, 1, 1, 2)))
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ValueError)


def test_array_bad_data_raises():
    with pytest.raises(RuntimeError, match="Data must be a sequence or array, got scalar 3.0"):
        array(3.0)
    with pytest.raises(ArrayError, match="negative dimensions"):
        array(shape=(2, -1))
    with pytest.raises(RuntimeError, match="either `data` or `ptr`"):
        array([1.0], ptr=1)


def test_array_zero_dim_numpy_becomes_one_element():
    a = array(np.array(2.5, dtype=np.float32))
    assert a.shape == (1,) and a.numpy()[0] == 2.5


def test_array_ptr_aliases_memory():
    data = f32([[1, 2], [3, 4]])
    a = array(ptr=data.ctypes.data, dtype=dtypes.float32, shape=(2, 2))
    data[1, 1] = 9.0
    assert a.numpy()[1, 1] == 9.0 and a.ptr == data.ctypes.data


def test_array_strides_argument_allocates_that_layout():
    a = array(shape=(2, 3), dtype=float, strides=(4, 8))
    assert a.strides == (4, 8) and not a.is_contiguous
    assert a.numpy().tolist() == [[0, 0, 0], [0, 0, 0]]


def test_array_cuda_device_raises():
    with pytest.raises(LaunchError, match="cuda:0"):
        array([1.0], device="cuda:0")
    with pytest.raises(LaunchError):
        zeros(3, device="cuda")


# -- annotations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, ndim",
    [
        (lambda: array(dtype=float), 1), (lambda: array2d(dtype=float), 2),
        (lambda: array3d(dtype=float), 3), (lambda: array4d(dtype=float), 4),
        (lambda: array[float], 1), (lambda: array2d[float], 2), (lambda: array1d[float], 1),
        (lambda: array3d[float], 3), (lambda: array(dtype=dtypes.float32, ndim=2), 2),
    ],
)  # fmt: skip
def test_annotation_spellings(make, ndim):
    ann = make()
    assert type(ann) is array
    assert ann.is_annotation
    assert ann.dtype is dtypes.float32 and ann.ndim == ndim
    assert ann.type_name() == f"array(dtype=float32, ndim={ndim})"
    assert str(ann) == ann.type_name() and repr(ann) == ann.type_name()


def test_annotation_defaults_and_other_dtypes():
    ann = array()
    assert (ann.dtype, ann.ndim, ann.shape) == (dtypes.float32, 1, (0,))
    assert ann.device is None and ann.ptr is None and ann.size == 0
    assert array[dtypes.float64].type_name() == "array(dtype=float64, ndim=1)"
    assert array2d[int].type_name() == "array(dtype=int32, ndim=2)"
    assert not ann.requires_grad and ann.grad is None
    with pytest.raises(ArrayError, match="type annotation"):
        ann.zero_()
    with pytest.raises(ArrayError, match="ndim must be between 1 and 4"):
        array(dtype=float, ndim=5)


def test_array2d_with_shape_or_data_is_a_real_array():
    a = array2d(dtype=float, shape=(2, 3))
    assert type(a) is array and not a.is_annotation and a.shape == (2, 3)
    assert a.type_name() == "array(dtype=float32, ndim=2)"
    b = array2d(np.ones((2, 2)), dtype=float)
    assert b.shape == (2, 2) and b.numpy().sum() == 4.0


# -- properties ----------------------------------------------------------------------------


def test_array_properties():
    a = zeros((3, 4), dtype=dtypes.float64)
    assert a.shape == (3, 4) and a.ndim == 2 and a.size == 12
    assert a.strides == (32, 8)
    assert a.device == "cpu" and isinstance(a.device, Device)
    assert a.ptr == a.numpy().ctypes.data
    assert a.is_contiguous and not a.is_annotation
    assert len(a) == 3 and bool(a)
    assert not zeros(0) and len(zeros(0)) == 0 and zeros(0).ptr is None
    assert a.type_name() == "array(dtype=float64, ndim=2)"


def test_numpy_is_zero_copy():
    a = array([1.0, 2.0, 3.0], dtype=float)
    a.numpy()[1] = 7.0
    assert a.numpy() is a.numpy() is a._data
    assert np.asarray(a) is a._data
    assert a.list() == [1.0, 7.0, 3.0]
    assert np.asarray(a, dtype=np.float64).dtype == np.float64


def test_str_and_repr():
    a = array([1.0, 2.5], dtype=float)
    assert str(a) == str(f32([1.0, 2.5])) == "[1.  2.5]"
    assert repr(a) == "array([1. , 2.5], dtype=float32)"


def test_list_flattens():
    assert array([[1, 2], [3, 4]], dtype=int).list() == [1, 2, 3, 4]


# -- gradients (SPEC §2.5) -----------------------------------------------------------------


def test_requires_grad_allocates_zero_grad_eagerly():
    for a in (array([1.0, 2.0], dtype=float, requires_grad=True),
              zeros(2, requires_grad=True), ones(2, requires_grad=True),
              full(2, 3.0, requires_grad=True), empty(2, requires_grad=True)):  # fmt: skip
        assert a.requires_grad and a.grad is not None
        assert a.grad.numpy().tolist() == [0.0, 0.0]
        assert a.grad.shape == a.shape and a.grad.dtype is a.dtype
        assert a.grad.strides == a.strides and a.grad.device == a.device
        assert not a.grad.requires_grad
    assert zeros(2).grad is None and not zeros(2).requires_grad


def test_grad_keyword_validates_and_sets_requires_grad():
    g = array([5.0, 6.0], dtype=float)
    a = array([1.0, 2.0], dtype=float, grad=g)
    assert a.grad is g and a.requires_grad


@pytest.mark.parametrize(
    "grad, message",
    [
        (zeros(2, dtype=dtypes.float64), "expected dtype float32, got float64"),
        (zeros(3), r"expected shape \(2,\), got \(3,\)"),
        (zeros((2, 2))[:, 0], r"expected strides \(4,\), got \(8,\)"),
        (np.zeros(2, np.float32), "expected a difftape array, got ndarray"),
    ],
)
def test_grad_setter_rejects_incompatible_buffer(grad, message):
    a = zeros(2)
    expected = f"The given gradient array is incompatible: {message}"
    with pytest.raises(ArrayError, match=expected) as e:
        a.grad = grad
    assert isinstance(e.value, ValueError) and isinstance(e.value, DiffTapeError)
    assert a.grad is None and not a.requires_grad
    with pytest.raises(ValueError, match="incompatible"):
        array([0.0, 0.0], dtype=float, grad=grad)


def test_grad_setter_and_none():
    a = zeros(2)
    g = ones(2)
    a.grad = g
    assert a.grad is g and a.requires_grad
    a.retain_grad = True
    a.grad = None
    assert a.grad is None and not a.requires_grad and not a.retain_grad


def test_requires_grad_setter():
    a = zeros(3)
    a.requires_grad = True
    g = a.grad
    assert g.numpy().tolist() == [0, 0, 0]
    a.requires_grad = True
    assert a.grad is g  # an existing grad is kept
    a.retain_grad = True
    a.requires_grad = False
    assert a.grad is None and not a.requires_grad and not a.retain_grad


def test_requires_grad_on_strided_view_copies_strides():
    v = zeros((2, 4))[:, 1:3]
    v.requires_grad = True
    assert v.grad.strides == v.strides and v.grad.shape == (2, 2)


def test_retain_grad_requires_requires_grad():
    with pytest.raises(ValueError, match=r"^retain_grad=True requires requires_grad=True$"):
        zeros(2, retain_grad=True)
    with pytest.raises(ArrayError, match="retain_grad=True requires requires_grad=True"):
        array([1.0], retain_grad=True)
    a = zeros(2)
    with pytest.raises(ArrayError, match="retain_grad=True requires requires_grad=True"):
        a.retain_grad = True
    a.retain_grad = False
    assert not a.retain_grad


@pytest.mark.parametrize(
    "make",
    [
        lambda: zeros(2, requires_grad=True, retain_grad=True),
        lambda: empty(2, requires_grad=True, retain_grad=True),
        lambda: ones(2, requires_grad=True, retain_grad=True),
        lambda: full(2, 1.0, requires_grad=True, retain_grad=True),
        lambda: array([1.0, 2.0], requires_grad=True, retain_grad=True),
        lambda: clone(zeros(2), requires_grad=True, retain_grad=True),
        lambda: zeros_like(zeros(2), requires_grad=True, retain_grad=True),
        lambda: ones_like(zeros(2), requires_grad=True, retain_grad=True),
        lambda: full_like(zeros(2), 2.0, requires_grad=True, retain_grad=True),
        lambda: empty_like(zeros(2), requires_grad=True, retain_grad=True),
    ],
)
def test_retain_grad_keyword(make):
    a = make()
    assert a.retain_grad and a.requires_grad and a.grad is not None


@pytest.mark.parametrize("like", [zeros_like, ones_like, empty_like, clone,
                                  lambda s, **kw: full_like(s, 2.0, **kw)])  # fmt: skip
def test_like_and_clone_inherit_requires_grad(like):
    with_grad = zeros((2, 3), requires_grad=True)
    without = zeros((2, 3))
    assert like(with_grad).requires_grad and like(with_grad).grad.shape == (2, 3)
    assert not like(without).requires_grad and like(without).grad is None
    assert not like(with_grad, requires_grad=False).requires_grad
    assert like(without, requires_grad=True).requires_grad
    assert like(with_grad).shape == (2, 3) and like(with_grad).dtype is dtypes.float32


def test_like_inherits_retain_grad_only_with_requires_grad():
    src = zeros(2, requires_grad=True, retain_grad=True)
    assert zeros_like(src).retain_grad
    assert not zeros_like(src, requires_grad=False).retain_grad
    assert not zeros_like(src, retain_grad=False).retain_grad


def test_like_values():
    src = array([[1, 2], [3, 4]], dtype=dtypes.float64)
    assert zeros_like(src).numpy().tolist() == [[0, 0], [0, 0]]
    assert ones_like(src).numpy().tolist() == [[1, 1], [1, 1]]
    assert full_like(src, 2.5).numpy().tolist() == [[2.5, 2.5], [2.5, 2.5]]
    assert full_like(src, 2.5).dtype is dtypes.float64


def test_clone_detach_idiom():
    x = array([1.0, 2.0], dtype=float, requires_grad=True)
    y = clone(x, requires_grad=False)
    assert y.grad is None and not y.requires_grad
    assert y.numpy().tolist() == [1.0, 2.0]
    y.numpy()[0] = 5.0
    assert x.numpy()[0] == 1.0


def test_clone_copies_grad_when_both_have_one():
    x = array([1.0, 2.0], dtype=float, requires_grad=True)
    x.grad.fill_(3.0)
    c = clone(x)
    assert c.grad.numpy().tolist() == [3.0, 3.0]
    assert not np.shares_memory(c.grad.numpy(), x.grad.numpy())
    m = x.clone()
    assert m.requires_grad and m.numpy().tolist() == [1.0, 2.0]
    assert not x.clone(requires_grad=False).requires_grad


def test_clone_of_non_contiguous_view_is_contiguous():
    base = array(np.arange(6).reshape(2, 3), dtype=float)
    c = clone(base.transpose())
    assert c.is_contiguous and c.numpy().tolist() == [[0, 3], [1, 4], [2, 5]]


# -- views ---------------------------------------------------------------------------------


def test_row_view_grad_lands_in_base():
    base = zeros((2, 3), requires_grad=True)
    row = base[1]
    assert row.requires_grad and row._ref is base and row.grad._ref is base.grad
    row.grad.assign([6.0, 8.0, 10.0])
    assert base.grad.numpy().tolist() == [[0, 0, 0], [6, 8, 10]]


def test_views_share_memory_and_grad():
    base = array(np.arange(12).reshape(3, 4), dtype=float, requires_grad=True)
    cases = {
        "slice": (base[1:3], (2, 4)),
        "column": (base[:, 1], (3,)),
        "row": (base[2], (4,)),
        "mixed": (base[0:2, 1:3], (2, 2)),
        "ellipsis": (base[..., 0], (3,)),
    }
    for name, (view, shape) in cases.items():
        assert view.shape == shape, name
        assert view._ref is base and view.requires_grad, name
        assert np.shares_memory(view.numpy(), base.numpy()), name
        assert np.shares_memory(view.grad.numpy(), base.grad.numpy()), name
        assert view.grad.strides == view.strides, name
    base[:, 1].numpy()[:] = -1.0
    assert base.numpy()[:, 1].tolist() == [-1, -1, -1]
    assert base[1:3].is_contiguous and not base[:, 1].is_contiguous


def test_view_of_array_without_grad_has_none():
    base = zeros((2, 2))
    view = base[0]
    assert view.grad is None and not view.requires_grad and view._ref is base


def test_view_inherits_retain_grad():
    base = zeros((2, 2), requires_grad=True, retain_grad=True)
    assert base[0].retain_grad and base.flatten().retain_grad


def test_full_integer_index_returns_element():
    a = array([[1.0, 2.0], [3.0, 4.0]], dtype=float)
    assert a[1, 0] == 3.0 and isinstance(a[1, 0], np.float32)
    assert a[-1, -1] == 4.0
    b = array([5, 6], dtype=int)
    assert b[1] == 6 and isinstance(b[1], np.int32)
    assert a[..., 1, 1] == 4.0


def test_bad_indices_raise():
    a = zeros((2, 2))
    with pytest.raises(ArrayError, match="ints or slices; got list"):
        a[[0, 1]]
    with pytest.raises(ArrayError, match="got bool"):
        a[True]
    with pytest.raises(IndexError):
        a[2]
    with pytest.raises(IndexError):
        a[0, 0, 0]


def test_setitem_writes_through():
    a = zeros((2, 3))
    a[1] = [1.0, 2.0, 3.0]
    a[0, 2] = 5.0
    a[:, 0] = array([7.0, 8.0], dtype=float)
    assert a.numpy().tolist() == [[7, 0, 5], [8, 2, 3]]
    row = a[1]
    row[0] = 9.0
    assert a.numpy()[1, 0] == 9.0


def test_iteration_yields_elements_and_rows():
    assert [float(v) for v in array([1.0, 2.0], dtype=float)] == [1.0, 2.0]
    rows = list(zeros((3, 2)))
    assert len(rows) == 3 and rows[0].shape == (2,)


def test_flatten_reshape_transpose_view_share_memory_and_grads():
    base = array(np.arange(6).reshape(2, 3), dtype=float, requires_grad=True)
    flat = base.flatten()
    assert flat.shape == (6,) and flat._ref is base
    flat.grad.numpy()[4] = 1.0
    assert base.grad.numpy()[1, 1] == 1.0
    r = base.reshape((3, -1))
    assert r.shape == (3, 2) and r.grad.shape == (3, 2)
    assert np.shares_memory(r.grad.numpy(), base.grad.numpy())
    assert base.reshape(6).shape == (6,)
    t = base.transpose()
    assert t.shape == (3, 2) and t.strides == (4, 12) and t.grad.strides == (4, 12)
    assert t.is_transposed and not t.is_contiguous
    assert t.numpy()[2, 1] == base.numpy()[1, 2]
    v = base.view(dtypes.int32)
    assert v.dtype is dtypes.int32 and v.grad.dtype is dtypes.int32
    assert v.numpy()[0, 1] == np.float32(1.0).view(np.int32)
    assert base.flatten().flatten().shape == (6,)


def test_transpose_with_axes_and_one_dim():
    a = zeros((2, 3, 4))
    assert a.transpose((1, 0, 2)).shape == (3, 2, 4)
    assert a.transpose().shape == (4, 3, 2)
    one = zeros(3)
    assert one.transpose() is one and one.flatten() is one
    with pytest.raises(RuntimeError, match="permutation"):
        a.transpose((0, 0, 1))


def test_view_errors():
    a = zeros((2, 3))
    with pytest.raises(RuntimeError, match="Flattening non-contiguous arrays is unsupported."):
        a.transpose().flatten()
    with pytest.raises(RuntimeError, match="Reshaping non-contiguous arrays is unsupported."):
        a[:, 1:].reshape(4)
    with pytest.raises(RuntimeError, match="same total size"):
        a.reshape((4, 2))
    with pytest.raises(RuntimeError, match="same total size"):
        a.reshape((4, -1))
    with pytest.raises(RuntimeError, match="more than one index is -1"):
        a.reshape((-1, -1))
    with pytest.raises(RuntimeError, match="1 to 4 dimensions"):
        zeros(32).reshape((2, 2, 2, 2, 2))
    with pytest.raises(RuntimeError, match="Cannot cast dtypes of unequal byte size"):
        a.view(dtypes.float64)


def test_contiguous():
    a = array(np.arange(6).reshape(2, 3), dtype=float, requires_grad=True)
    assert a.contiguous() is a
    a.grad.numpy()[:] = np.arange(6).reshape(2, 3)
    c = a.transpose().contiguous()
    assert c.is_contiguous and c.numpy().tolist() == [[0, 3], [1, 4], [2, 5]]
    assert c.grad.numpy().tolist() == [[0, 3], [1, 4], [2, 5]]


def test_to_cpu_returns_self():
    a = zeros(2)
    assert a.to("cpu") is a
    with pytest.raises(LaunchError):
        a.to("cuda:0")


# -- values and bookkeeping ----------------------------------------------------------------


def test_zero_and_fill():
    a = array([1.0, 2.0], dtype=float)
    a.fill_(3.5)
    assert a.numpy().tolist() == [3.5, 3.5]
    a.zero_()
    assert a.numpy().tolist() == [0.0, 0.0]
    b = zeros(3, dtype=int)
    b.fill_(7)
    b.fill_(np.int64(8))
    assert b.numpy().tolist() == [8, 8, 8]
    view = zeros((2, 2))[:, 1]
    view.fill_(1.0)
    assert view._ref.numpy().tolist() == [[0, 1], [0, 1]]
    zeros(0).fill_(1.0)


@pytest.mark.parametrize(
    "dtype, value, message",
    [
        (int, 1.5, "expects an integer"),
        (float, "1", "expects a scalar, got str"),
        (float, [1.0, 2.0], "expects a scalar, got list"),
        (dtypes.uint8, -1, "Failed to convert"),
        (dtypes.int32, 2**40, "Failed to convert"),
    ],
)
def test_fill_rejects_unconvertible_values(dtype, value, message):
    with pytest.raises(ValueError, match=message):
        zeros(2, dtype=dtype).fill_(value)


def test_write_count_counts_python_writes():
    a = zeros((2, 2))
    src = ones((2, 2))
    assert a._write_count == 0 and src._write_count == 0
    a.zero_()
    a.fill_(1.0)
    a.assign(src)
    a[0] = [1.0, 1.0]
    copy(a, src)
    assert a._write_count == 5 and src._write_count == 0
    row = a[1]
    row[0] = 2.0
    assert row._write_count == 1 and a._write_count == 6


def test_read_flags():
    base = zeros((2, 2))
    row = base[0]
    row.mark_read()
    assert row._is_read and base._is_read
    assert not base[1]._is_read  # new index views start cleared
    assert base.flatten()._is_read and base.reshape(4)._is_read and base.transpose()._is_read
    assert base.view(dtypes.int32)._is_read
    with pytest.warns(UserWarning, match="passed to argument x in kernel k at f.py:1 is being "
                      "written to but has already been read from in a previous launch"):
        base.mark_write(arg_name="x", kernel_name="k", filename="f.py", lineno=1)
    with pytest.warns(UserWarning, match="is being written to but has already been read"):
        base.mark_write()
    base.mark_init()
    assert not base._is_read
    base.mark_read()
    base.zero_()
    assert not base._is_read
    base.mark_read()
    base.fill_(2.0)
    assert not base._is_read


def test_assign_from_list_numpy_and_array():
    a = zeros((2, 2))
    a.assign([[1, 2], [3, 4]])
    assert a.numpy().tolist() == [[1, 2], [3, 4]]
    a.assign(np.full((2, 2), 5.0))
    assert a.numpy().tolist() == [[5, 5], [5, 5]]
    a.assign(ones((2, 2)))
    assert a.numpy().tolist() == [[1, 1], [1, 1]]
    a.assign([9, 8, 7, 6])  # same size, both contiguous: Warp's flat copy
    assert a.numpy().tolist() == [[9, 8], [7, 6]]


def test_assign_shape_mismatch_raises():
    a = zeros((2, 2))
    with pytest.raises(ArrayError, match=r"expects data of shape \(2, 2\).*got shape \(3,\)"):
        a.assign([1.0, 2.0, 3.0])
    with pytest.raises(ArrayError, match=r"got shape \(2, 2\)"):
        zeros((4, 4))[:, 0].assign(np.zeros((2, 2)))


def test_assign_copies_grad_when_both_have_one():
    a = zeros(2, requires_grad=True)
    b = array([1.0, 2.0], dtype=float, requires_grad=True)
    b.grad.fill_(4.0)
    a.assign(b)
    assert a.grad.numpy().tolist() == [4.0, 4.0]


# -- constructors --------------------------------------------------------------------------


def test_zeros_ones_empty_defaults():
    z = zeros()
    assert z.shape == (0,) and z.dtype is dtypes.float32
    assert zeros((2, 3), dtype=int).numpy().tolist() == [[0, 0, 0], [0, 0, 0]]
    assert ones(3).numpy().tolist() == [1.0, 1.0, 1.0]
    assert ones(2, dtype=bool).numpy().tolist() == [True, True]
    assert empty((2, 2), dtype=dtypes.float64).shape == (2, 2)


@pytest.mark.parametrize(
    "value, dtype",
    [(2.5, dtypes.float32), (3, dtypes.int32), (True, dtypes.bool_),
     (np.float64(1.5), dtypes.float64), (np.int8(2), dtypes.int8)],
)  # fmt: skip
def test_full_infers_dtype_like_warp(value, dtype):
    a = full((2, 2), value)
    assert a.dtype is dtype and a.numpy()[1, 1] == value


def test_full_with_dtype_and_errors():
    a = full(3, 2, dtype=dtypes.float64)
    assert a.dtype is dtypes.float64 and a.numpy().tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(ArrayError, match="cannot infer a dtype"):
        full(3, "x")
    with pytest.raises(ArrayError, match="expects an integer"):
        full(3, 1.5, dtype=int)


@pytest.mark.parametrize("dtype", dtypes.SCALAR_TYPES, ids=lambda t: t.__name__)
def test_every_scalar_dtype_is_storable(dtype):
    a = zeros((2, 3), dtype=dtype, requires_grad=True)
    itemsize = dtypes.numpy_dtype(dtype).itemsize
    assert a.numpy().dtype == dtypes.numpy_dtype(dtype)
    assert a.strides == (3 * itemsize, itemsize)
    assert a.type_name() == f"array(dtype={dtype.__name__}, ndim=2)"
    b = ones(2, dtype=dtype)
    assert b.numpy().tolist() == [1, 1]


def test_from_numpy_copies():
    data = np.arange(4, dtype=np.float64)
    a = from_numpy(data)
    assert a.dtype is dtypes.float64 and not np.shares_memory(a.numpy(), data)
    b = from_numpy(data, dtype=dtypes.float32, shape=(2, 2), requires_grad=True)
    assert b.dtype is dtypes.float32 and b.shape == (2, 2) and b.grad is not None


def test_like_requires_an_array():
    with pytest.raises(ArrayError, match="expects a difftape array"):
        zeros_like(np.zeros(2))


# -- copy (SPEC §2.7, forward part) --------------------------------------------------------


def test_copy_values_and_offsets():
    dest = zeros(5)
    copy(dest, array([1.0, 2.0, 3.0], dtype=float))
    assert dest.numpy().tolist() == [1, 2, 3, 0, 0]
    copy(dest, array([7.0, 8.0, 9.0], dtype=float), dest_offset=3, src_offset=1, count=2)
    assert dest.numpy().tolist() == [1, 2, 3, 8, 9]


def test_copy_flat_between_shapes():
    dest = zeros((2, 3))
    copy(dest, array(np.arange(6), dtype=float))
    assert dest.numpy().tolist() == [[0, 1, 2], [3, 4, 5]]


def test_copy_size_errors_use_warp_text():
    with pytest.raises(RuntimeError) as info:
        copy(zeros(3), zeros(4))
    assert str(info.value) == (
        "Trying to copy source buffer with size (16) to offset (0) is larger than destination "
        "size (12)"
    )
    with pytest.raises(RuntimeError, match=r"size \(8\) from offset \(8\) is larger than source"):
        copy(zeros(4), zeros(3), src_offset=2, count=2)
    with pytest.raises(RuntimeError, match=r"size \(8\) to offset \(8\) is larger than dest"):
        copy(zeros(3), zeros(4), dest_offset=2, count=2)


def test_copy_grads_when_both_have_grad():
    a = array([1.0, 2.0], dtype=float, requires_grad=True)
    b = zeros(2, requires_grad=True)
    a.grad.fill_(7.0)
    copy(b, a)
    assert b.numpy().tolist() == [1.0, 2.0]
    assert b.grad.numpy().tolist() == [7.0, 7.0]
    assert a.grad.numpy().tolist() == [7.0, 7.0]


def test_copy_grad_window_and_one_sided_grads():
    src = array([1.0, 2.0, 3.0], dtype=float, requires_grad=True)
    src.grad.assign([10.0, 20.0, 30.0])
    dest = zeros(4, requires_grad=True)
    copy(dest, src, dest_offset=1, src_offset=1, count=2)
    assert dest.grad.numpy().tolist() == [0, 20, 30, 0]
    plain = zeros(3)
    copy(plain, src)
    assert plain.grad is None
    dest2 = zeros(3, requires_grad=True)
    copy(dest2, array([1.0, 1.0, 1.0], dtype=float))
    assert dest2.grad.numpy().tolist() == [0, 0, 0]


def test_copy_observers_see_every_copy():
    seen = []

    def observer(dest, src, dest_offset, src_offset, count):
        seen.append((dest, src, dest_offset, src_offset, count))

    array_module._copy_observers.append(observer)
    try:
        a, b = zeros(4), ones(4)
        copy(a, b)
        copy(a, b, dest_offset=1, src_offset=2, count=2)
        copy(a, zeros(0))  # nothing to copy: not reported
        a.assign(b)
        c = clone(b)
    finally:
        array_module._copy_observers.remove(observer)
    assert [s[2:] for s in seen] == [(0, 0, 4), (1, 2, 2), (0, 0, 4), (0, 0, 4)]
    assert seen[0][0] is a and seen[0][1] is b and seen[3][0] is c


def test_copy_non_contiguous():
    base = zeros((3, 3))
    copy(base[:, 1], array([1.0, 2.0, 3.0], dtype=float))
    assert base.numpy()[:, 1].tolist() == [1, 2, 3]
    out = zeros(3)
    copy(out, base[:, 1])
    assert out.numpy().tolist() == [1, 2, 3]
    # 1-D strided views take logical element windows, as Warp's copy does
    copy(base[:, 1], array([7.0, 8.0], dtype=float), dest_offset=1)
    assert base.numpy()[:, 1].tolist() == [1, 7, 8]
    with pytest.raises(RuntimeError, match=r"exceeds the destination size \(3\)"):
        copy(base[:, 1], zeros(3), dest_offset=2, count=2)
    with pytest.raises(RuntimeError, match="Incompatible array shapes"):
        copy(zeros((3, 3))[:, 0:2], zeros((2, 2)))
    with pytest.raises(RuntimeError, match="offsets or a partial count needs contiguous"):
        copy(zeros((3, 3))[:, 0:2], zeros((3, 2)), dest_offset=1, count=2)


def test_copy_dtype_rules():
    dest = zeros(2, dtype=dtypes.int32)
    copy(dest, array([1.0, 2.0], dtype=float))  # same byte size: the bits are copied, as Warp does
    assert dest.numpy().tolist() == f32([1.0, 2.0]).view(np.int32).tolist()
    with pytest.raises(RuntimeError, match="Incompatible array data types"):
        copy(zeros(2, dtype=dtypes.float64), zeros(2))


def test_copy_rejects_non_arrays():
    with pytest.raises(RuntimeError, match="must be arrays; the source is ndarray"):
        copy(zeros(2), np.zeros(2))
    with pytest.raises(RuntimeError, match="must be arrays; the destination is array"):
        copy(array(dtype=float), zeros(2))
    with pytest.raises(RuntimeError, match="non-negative"):
        copy(zeros(2), zeros(2), src_offset=-1)


def test_copy_overlapping_self_copy():
    a = array([1.0, 2.0, 3.0, 4.0], dtype=float)
    copy(a, a, dest_offset=1, src_offset=0, count=3)
    assert a.numpy().tolist() == [1, 1, 2, 3]
