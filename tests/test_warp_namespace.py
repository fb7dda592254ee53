"""Module-level names Warp programs use besides kernels and arrays: the math constants, and the
cache and loading calls (``wp.clear_kernel_cache``, ``wp.load_module``, ``wp.force_load``)."""

import math
import os

import numpy as np
import pytest

import difftape as wp

CONSTANTS = {"e": math.e, "log2e": math.log2(math.e), "log10e": math.log10(math.e),
             "ln2": math.log(2.0), "ln10": math.log(10.0), "phi": (1.0 + math.sqrt(5.0)) / 2.0,
             "pi": math.pi, "half_pi": math.pi / 2.0, "tau": 2.0 * math.pi, "inf": math.inf}


@pytest.mark.parametrize("name", CONSTANTS)
def test_warps_constants_under_both_spellings(name):
    for spelling in (name, name.upper()):
        assert getattr(wp, spelling) == pytest.approx(CONSTANTS[name], rel=1e-15)
    assert math.isnan(wp.nan) and math.isnan(wp.NAN)


@wp.kernel
def circle(out32: wp.array(dtype=wp.float32), out64: wp.array(dtype=wp.float64)):
    i = wp.tid()
    out32[i] = wp.cos(wp.float32(i) * wp.half_pi) + wp.min(wp.inf, 0.0)
    out64[i] = wp.float64(i) * wp.tau


def test_constants_in_kernels_take_the_type_beside_them():
    out32, out64 = wp.zeros(3, dtype=wp.float32), wp.zeros(3, dtype=wp.float64)
    wp.launch(circle, 3, inputs=[out32, out64])
    np.testing.assert_allclose(out32.numpy(), [1.0, 0.0, -1.0], atol=1e-7)
    assert out64.numpy().tolist() == [0.0, 2.0 * math.pi, 4.0 * math.pi]  # float64 exactly


def test_clear_kernel_cache_removes_difftape_files_only(tmp_path, monkeypatch):
    monkeypatch.setattr(wp.config, "cache_dir", str(tmp_path))
    (tmp_path / "notes.txt").write_text("mine")
    out32, out64 = wp.zeros(2, dtype=wp.float32), wp.zeros(2, dtype=wp.float64)

    @wp.kernel
    def fresh(out32: wp.array(dtype=wp.float32), out64: wp.array(dtype=wp.float64)):
        i = wp.tid()
        out32[i] = wp.pi
        out64[i] = wp.e

    wp.launch(fresh, 2, inputs=[out32, out64])
    written = [n for n in os.listdir(tmp_path) if n.startswith("difftape_gen_")]
    assert written
    assert wp.clear_kernel_cache() >= len(written)
    left = [n for n in os.listdir(tmp_path) if n != "__pycache__"]
    cached = os.listdir(tmp_path / "__pycache__") if (tmp_path / "__pycache__").exists() else []
    assert left == ["notes.txt"] and not cached
    wp.launch(fresh, 2, inputs=[out32, out64])  # the loaded kernel still runs
    assert out64.numpy().tolist() == [math.e, math.e]


def test_load_module_and_force_load_accept_warps_arguments():
    assert wp.load_module() is None and wp.load_module(None, "cpu", recursive=True) is None
    assert wp.force_load() is None and wp.force_load("cpu") is None
    with pytest.raises(wp.LaunchError, match="cuda:7"):
        wp.force_load("cuda:7")


def test_types_module_builds_and_describes_types():
    vec5d = wp.types.vector(length=5, dtype=wp.float64)
    assert vec5d is wp.vec(5, wp.float64) and wp.types.matrix((2, 3), float) is wp.mat((2, 3), float)
    assert wp.types.type_length(vec5d) == 5 and wp.types.type_scalar_type(vec5d) is wp.float64
    assert wp.types.type_size_in_bytes(wp.vec3) == 12 and wp.types.type_size_in_bytes(float) == 4
    assert wp.types.type_size_in_bytes(wp.mat33d) == 72
    assert wp.types.type_is_vector(wp.vec3) and not wp.types.type_is_vector(wp.mat22)
    assert wp.types.type_is_matrix(wp.spatial_matrix) and wp.types.type_is_quaternion(wp.quat)
    assert wp.types.type_is_transformation(wp.types.transformation(wp.float64))
    assert wp.types.types_equal(float, wp.float32) and not wp.types.types_equal(wp.vec3, wp.vec3d)


def test_array_cast_converts_like_c_scalar_by_scalar():
    points = wp.array(np.arange(6, dtype=np.float32).reshape(2, 3) + 0.5, dtype=wp.vec3)
    flat = wp.zeros(6, dtype=wp.float64)
    wp.utils.array_cast(points, flat)
    assert flat.numpy().tolist() == [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]
    ints = wp.full(4, 7, dtype=wp.int32)
    wp.utils.array_cast(wp.array([1.7, -2.7, 3.2, 9.9], dtype=float), ints, count=3)
    assert ints.numpy().tolist() == [1, -2, 3, 7]  # toward zero; the fourth left as it was
    grid = wp.zeros((2, 2), dtype=wp.float16)
    wp.utils.array_cast(wp.array(np.ones((2, 2)), dtype=wp.float64), grid)
    assert grid.numpy().tolist() == [[1.0, 1.0], [1.0, 1.0]]
    with pytest.raises(ValueError, match="Partial cast"):
        wp.utils.array_cast(grid, wp.zeros((2, 2)), count=1)


OFFSET = 3.0


def _scaled(mode: str):
    @wp.kernel
    def scaled(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        if wp.static(mode == "double"):  # the other branch is never compiled
            y[i] = x[i] * wp.static(OFFSET - 1.0)
        else:
            y[i] = wp.not_a_builtin(x)
    return scaled


@wp.kernel
def static_of_a_local(y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.static(i * 2.0)


def test_static_evaluates_when_the_kernel_compiles():
    x, y = wp.array([1.0, 2.0], dtype=float), wp.zeros(2, dtype=float)
    wp.launch(_scaled("double"), 2, inputs=[x, y])
    assert y.numpy().tolist() == [2.0, 4.0] and wp.static(5) == 5
    with pytest.raises(wp.KernelNameError, match="not_a_builtin"):
        wp.launch(_scaled("other"), 2, inputs=[x, y])
    with pytest.raises(wp.KernelNameError, match="wp.static.. evaluates its expression when"):
        wp.launch(static_of_a_local, 2, inputs=[y])


@wp.kernel
def report(x: wp.array(dtype=float), n: wp.array(dtype=wp.int8)):
    i = wp.tid()
    wp.printf("thread %d: x = %.3f, n = %d, %lld\n", i, x[i], n[i], wp.int64(i) * wp.int64(10000000000))


def test_printf_formats_like_c(capfd, monkeypatch):
    monkeypatch.setattr(wp.config, "cpu_parallel", "serial")
    wp.launch(report, 2, inputs=[wp.array([1.5, -2.25], dtype=float),
                                 wp.array([3, -4], dtype=wp.int8)])
    wp.printf("python %d\n", 7)
    assert capfd.readouterr().out.splitlines() == [
        "thread 0: x = 1.500, n = 3, 0", "thread 1: x = -2.250, n = -4, 10000000000", "python 7"]


def test_cuda_device_queries_say_there_is_none():
    assert wp.get_cuda_devices() == [] and wp.get_cuda_device_count() == 0
    with pytest.raises(wp.LaunchError, match="CUDA is not available"):
        wp.get_cuda_device()
    with pytest.raises(wp.LaunchError, match="cuda:1"):
        wp.get_cuda_device(1)
