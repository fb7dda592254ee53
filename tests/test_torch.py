"""PyTorch interop: zero-copy conversion, shared gradients, DLPack and the autograd adapter.

Skipped as a whole when PyTorch is not installed.
"""

import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import difftape as wp  # noqa: E402
import difftape.torch  # noqa: E402
from difftape.torch import tape_function  # noqa: E402


@wp.kernel
def scale_sin(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64),
              y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = wp.sin(x[i]) * w[i] * w[i]


@wp.kernel
def loop_product(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    p = wp.float64(1.0)
    for _ in range(n):
        p = p * x[i] + wp.sin(p)
    y[i] = p


@wp.kernel
def vec_energy(x: wp.array(dtype=wp.vec3d), v: wp.array(dtype=wp.vec3d),
               moved: wp.array(dtype=wp.vec3d), energy: wp.array(dtype=wp.float64)):
    i = wp.tid()
    p = x[i] + 0.5 * v[i]
    moved[i] = p
    wp.atomic_add(energy, 0, wp.dot(p, p) * wp.length(v[i]))


@wp.kernel
def square_f32(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@tape_function
def sin_scaled(x, w):
    y = wp.zeros(len(x), dtype=wp.float64, requires_grad=True)
    wp.launch(scale_sin, dim=len(x), inputs=[x, w], outputs=[y])
    return y


@tape_function
def product_loop(x, n):
    y = wp.zeros(len(x), dtype=wp.float64, requires_grad=True)
    wp.launch(loop_product, dim=len(x), inputs=[x, n], outputs=[y])
    return y


@tape_function(dtypes=[wp.vec3d, wp.vec3d])
def moved_and_energy(x, v):
    moved = wp.zeros_like(x, requires_grad=True)
    energy = wp.zeros(1, dtype=wp.float64, requires_grad=True)
    wp.launch(vec_energy, dim=len(x), inputs=[x, v], outputs=[moved, energy])
    return moved, energy


def f64(*shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=gen, dtype=torch.float64) + 0.1).requires_grad_(True)


# ---------------------------------------------------------------- from_torch / to_torch


def test_from_torch_shares_memory_and_grad():
    t = torch.zeros(4, 3, requires_grad=True)
    a = wp.from_torch(t, dtype=wp.vec3)
    assert a.shape == (4,) and a.dtype is wp.vec3
    assert t.grad is not None and a.grad.shape == (4,)
    a.numpy()[1] = (1.0, 2.0, 3.0)
    a.grad.numpy()[2, 1] = 5.0
    assert t[1].tolist() == [1.0, 2.0, 3.0]
    assert t.grad[2, 1].item() == 5.0


def test_from_torch_uses_existing_grad_and_infers_dtype():
    t = torch.ones(3, dtype=torch.float64, requires_grad=True)
    t.grad = torch.full((3,), 7.0, dtype=torch.float64)
    a = wp.from_torch(t)
    assert a.dtype is wp.float64
    assert a.grad.numpy().tolist() == [7.0, 7.0, 7.0]
    a.grad.numpy()[0] = 1.0
    assert t.grad[0].item() == 1.0


def test_from_torch_requires_grad_false_and_explicit_grad():
    t = torch.ones(3, requires_grad=True)
    assert wp.from_torch(t, requires_grad=False).grad is None
    g = torch.zeros(3)
    a = wp.from_torch(torch.ones(3), grad=g)
    a.grad.numpy()[0] = 2.0
    assert g[0].item() == 2.0


def test_from_torch_strided_tensor_gets_matching_grad():
    base = torch.arange(12.0).reshape(3, 4)
    view = base[:, 1:]
    a = wp.from_torch(view, requires_grad=True)
    assert a.shape == (3, 3) and a.strides == (16, 4)
    assert a.grad.strides == a.strides and view.grad.shape == (3, 3)


def test_from_torch_errors():
    with pytest.raises(RuntimeError, match="Incompatible data types"):
        wp.from_torch(torch.ones(3, dtype=torch.float64), dtype=wp.float32)
    with pytest.raises(RuntimeError, match="inner shape is"):
        wp.from_torch(torch.ones(4, 2), dtype=wp.vec3)
    with pytest.raises(TypeError, match="Invalid or unsupported data type"):
        wp.from_torch(torch.ones(2, dtype=torch.bfloat16))
    ints = wp.from_torch(torch.arange(3, dtype=torch.int32), dtype=wp.uint32)
    assert ints.dtype is wp.uint32


def test_to_torch_shares_memory_and_grad():
    x = wp.array(np.array([1.0, 2.0, 3.0]), dtype=wp.float32, requires_grad=True)
    t = wp.to_torch(x)
    assert t.requires_grad and t.dtype == torch.float32
    (t * t).sum().backward()
    assert x.grad.numpy().tolist() == [2.0, 4.0, 6.0]  # torch accumulated into x.grad
    t.detach()[0] = 9.0
    assert x.numpy()[0] == 9.0
    v = wp.zeros(5, dtype=wp.vec3)
    assert tuple(wp.to_torch(v).shape) == (5, 3)
    assert not wp.to_torch(x, requires_grad=False).requires_grad


def test_difftape_backward_fills_shared_torch_grad():
    t = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = wp.from_torch(t)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square_f32, dim=3, inputs=[x, y])
    tape.backward(grads={y: wp.ones(3, dtype=float)})
    assert t.grad.tolist() == [2.0, 4.0, 6.0]


def test_device_and_dtype_helpers():
    assert wp.device_from_torch(torch.device("cpu")) == "cpu"
    assert wp.device_to_torch("cpu") == "cpu"
    assert wp.dtype_from_torch(torch.float16) is wp.float16
    assert wp.dtype_to_torch(wp.vec3d) == torch.float64


def test_dlpack_with_torch():
    x = wp.array(np.arange(6.0), dtype=wp.float64)
    t = torch.from_dlpack(x)
    t[0] = 42.0
    assert x.numpy()[0] == 42.0
    capsule_tensor = torch.ones(2, 3)
    a = wp.from_dlpack(torch.utils.dlpack.to_dlpack(capsule_tensor), dtype=wp.vec3)
    a.numpy()[0, 0] = 5.0  # legacy capsules import writable
    assert a.shape == (2,) and capsule_tensor[0, 0].item() == 5.0
    b = wp.from_dlpack(torch.zeros(4))
    b.numpy()[3] = 1.0
    assert torch.utils.dlpack.from_dlpack(wp.to_dlpack(b))[3].item() == 1.0


# ---------------------------------------------------------------- tape_function


def test_gradcheck_float64():
    assert torch.autograd.gradcheck(sin_scaled, (f64(6, seed=1), f64(6, seed=2)))


def test_gradcheck_dynamic_loop_float64():
    x = (0.5 * f64(4, seed=3)).detach().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: product_loop(t, 5), (x,))


def test_gradcheck_vec3_tuple_outputs():
    assert torch.autograd.gradcheck(moved_and_energy, (f64(5, 3, seed=4), f64(5, 3, seed=5)))


def test_retain_graph_backward_twice_gives_same_answer():
    x, w = f64(5, seed=6), f64(5, seed=7)
    y = sin_scaled(x, w)
    seed = torch.linspace(0.5, 1.5, 5, dtype=torch.float64)
    y.backward(seed, retain_graph=True)
    first = (x.grad.clone(), w.grad.clone())
    x.grad, w.grad = None, None
    y.backward(seed, retain_graph=True)
    assert torch.equal(x.grad, first[0]) and torch.equal(w.grad, first[1])
    y.backward(seed)  # third time accumulates in torch, exactly 2x
    assert torch.allclose(x.grad, 2 * first[0])


def test_grad_output_is_never_modified_or_aliased():
    x, w = f64(4, seed=8), f64(4, seed=9)
    y = sin_scaled(x, w)
    seed = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    keep = seed.clone()
    (grad_x,) = torch.autograd.grad(y, x, seed, retain_graph=True)
    assert torch.equal(seed, keep)
    grad_x.mul_(100.0)  # mutating a returned gradient must not change the next answer
    seed.mul_(0.0)  # nor may the caller's seed tensor be referenced after the call
    (again,) = torch.autograd.grad(y, x, keep)
    assert torch.allclose(again, grad_x / 100.0)


def test_interleaved_calls_are_independent():
    x1, w1 = f64(3, seed=10), f64(3, seed=11)
    x2, w2 = f64(3, seed=12), f64(3, seed=13)
    y1 = sin_scaled(x1, w1)
    y2 = sin_scaled(x2, w2)
    y2.sum().backward()
    y1.sum().backward()
    for x, w in ((x1, w1), (x2, w2)):
        expected_x = torch.cos(x.detach()) * w.detach() ** 2
        assert torch.allclose(x.grad, expected_x)


def test_concurrent_backward_threads():
    x, w = f64(8, seed=14), f64(8, seed=15)
    y = sin_scaled(x, w)
    results = []

    def run():
        results.append(torch.autograd.grad(y.sum(), (x, w), retain_graph=True))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for gx, gw in results:
        assert torch.equal(gx, results[0][0]) and torch.equal(gw, results[0][1])


def test_composes_with_torch_and_leaves_leaf_grads_alone():
    x = f64(4, seed=16)
    w = torch.ones(4, dtype=torch.float64)  # no grad: gets None, is not touched
    out = (sin_scaled(x * 2.0, w) ** 2).sum()
    out.backward()
    xd = x.detach()
    expected = 2 * torch.sin(2 * xd) * torch.cos(2 * xd) * 2
    assert torch.allclose(x.grad, expected)
    assert w.grad is None


def test_tape_function_errors():
    @tape_function
    def returns_input(x):
        return x

    with pytest.raises(wp.TapeError, match="returned one of its input arrays"):
        returns_input(torch.ones(2, requires_grad=True))
    with pytest.raises(wp.TapeError, match="inside `with wp.Tape"):
        with wp.Tape():
            sin_scaled(f64(2), f64(2))


def test_training_example_reduces_loss():
    from examples import torch_training

    losses = torch_training.main(iterations=30, particles=32)
    assert losses[-1] < 0.5 * losses[0]
