"""A kernel that copies array elements stays a vectorized loop, not ``memcpy`` calls
(``cpu_llvm.py``: ``-disable-loop-idiom-memcpy``).

LLVM's loop-idiom pass made each row of a 2-D copy kernel one ``memcpy`` call; glibc's
``rep movsb`` copied 1024x1024 float32 in 2.6 ms on AMD Zen 3 against 0.2 ms for the loop,
because two large numpy arrays sit 16 bytes apart modulo 4096.
"""

import textwrap

import numpy as np

import difftape as wp
from difftape._src.backends import cpu_llvm
from tests.fresh_process import IR_OF, run_fresh


@wp.kernel
def _copy_rows(u: wp.array2d(dtype=wp.float32), u1: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    u1[i, j] = u[i, j]


def test_copies_and_their_gradient():
    u = wp.array(np.arange(12, dtype=np.float32).reshape(3, 4), dtype=wp.float32,
                 requires_grad=True)
    u1 = wp.zeros_like(u)
    tape = wp.Tape()
    with tape:
        wp.launch(_copy_rows, dim=(3, 4), inputs=[u], outputs=[u1])
    seed = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    tape.backward(grads={u1: wp.array(seed, dtype=wp.float32)})
    np.testing.assert_array_equal(u1.numpy(), u.numpy())
    np.testing.assert_array_equal(u.grad.numpy(), seed)


def test_the_option_is_in_the_stamp():
    assert "-disable-loop-idiom-memcpy" in cpu_llvm.OPTIONS
    assert "-disable-loop-idiom-memcpy" in cpu_llvm.stamp()


_SCRIPT = IR_OF + textwrap.dedent("""
    import re
    import numpy as np
    import difftape as wp

    @wp.kernel
    def copy_rows(u: wp.array2d(dtype=wp.float32), u1: wp.array2d(dtype=wp.float32)):
        i, j = wp.tid()
        u1[i, j] = u[i, j]

    u = wp.array(np.ones((64, 64), np.float32), dtype=wp.float32)
    wp.launch(copy_rows, dim=(64, 64), inputs=[u], outputs=[wp.zeros_like(u)])
    ir = ir_of(copy_rows)
    print("memcpy" in ir, bool(re.search(r"store <\\d+ x float>", ir)))
""")


def test_a_copy_kernel_is_a_vectorized_loop(tmp_path):
    """No memcpy call in the forward, and vector stores (a fresh cache: Numba cannot inspect
    cached code). Without the option the forward called llvm.memcpy once per row."""
    assert run_fresh(tmp_path, _SCRIPT) == ["False", "True"]
