"""Helpers that generated CPU kernels call: stack growth, atomic read-modify-write, and the
float32 sine and cosine of one angle together.

Atomics are LLVM ``atomicrmw`` instructions (x86 lowers float ones to compare-exchange loops);
they are used only by parallel kernel variants at accumulation sites that threads can share.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from llvmlite import ir

from .cpu_cache import load_only
from .cpu_trig import sincos32

# (sin(x), cos(x)) of a float32 from one argument reduction: generated code spells every float32
# wp.sin, wp.cos and their derivatives with it (codegen/inline_rules.py FLOAT32_ONLY).
rt_sincos = sincos32


@intrinsic
def rt_empty(typingctx, size, dtype):
    """An uninitialised 1-D array of ``size`` ``dtype`` elements on the heap, as ``np.empty``.

    Code that calls ``np.empty`` refers to Numba's ``numba.np.arrayobj``, and loading it from the
    cache imports that module and the ones it needs: 60-80 ms of a warm process's first launch.
    This allocates through Numba's runtime (NRT) directly, which loading sets up anyway. A size
    whose bytes overflow, or an allocation that fails, raises MemoryError."""
    if not isinstance(size, types.Integer) or not isinstance(dtype, (types.NumberClass,
                                                                      types.DType)):
        return None
    element = dtype.dtype if isinstance(dtype, types.DType) else dtype.instance_type
    array_type = types.Array(element, 1, "C")

    def codegen(context, builder, signature, args):
        count = context.cast(builder, args[0], signature.args[0], types.intp)
        data_type = context.get_data_type(element)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(data_type))
        product = builder.smul_with_overflow(count, itemsize)
        nbytes = builder.extract_value(product, 0)
        bad = builder.or_(builder.extract_value(product, 1),
                          builder.icmp_signed("<", count, count.type(0)))
        with builder.if_then(bad, likely=False):
            context.call_conv.return_user_exc(builder, MemoryError,
                                              ("difftape: a stack size overflows",))
        meminfo = context.nrt.meminfo_alloc_aligned(builder, size=nbytes, align=64)
        with builder.if_then(cgutils.is_null(builder, meminfo), likely=False):
            context.call_conv.return_user_exc(builder, MemoryError,
                                              ("difftape: cannot allocate a stack",))
        data = builder.bitcast(context.nrt.meminfo_data(builder, meminfo),
                               data_type.as_pointer())
        # a new reference: the array owns the allocation
        return _array_1d(context, builder, array_type, data, count, itemsize, meminfo)

    return array_type(size, dtype), codegen


def _array_1d(context, builder, array_type, data, count, itemsize, meminfo):
    """A C-contiguous 1-D array value of ``count`` elements at ``data``."""
    array = context.make_array(array_type)(context, builder)
    context.populate_array(array, data=data, shape=[count], strides=[itemsize],
                           itemsize=itemsize, meminfo=meminfo)
    return array._getvalue()


@njit(cache=True)
def rt_reserve(stack, size):
    """``stack`` with room for ``size`` values (grown to at least twice its length, data kept).

    Generated adjoints call it before each loop with the room the loop's iterations need, so
    no push inside a loop ever checks or grows the stack."""
    bigger = rt_empty(max(size, stack.shape[0] * 2), stack.dtype)
    for k in range(stack.shape[0]):  # a loop: slice assignment costs ~4 s of first compile
        bigger[k] = stack[k]
    return bigger


@njit(cache=True)
def rt_check_index(i, size, axis, where):
    """Debug-mode bounds check: ``i`` if ``0 <= i < size``, else IndexError(where, i, axis, size)."""
    if i < 0 or i >= size:
        raise IndexError(where, i, axis, size)
    return i


@njit(cache=True)
def rt_check_component(i, size, where):
    """Debug-mode check of a vector or matrix component index known only at run time: ``i``
    if ``-size <= i < size`` (negative ones count from the end), else IndexError(where, i)."""
    if i < -size or i >= size:
        raise IndexError(where, i)
    return i


def _indices(idx) -> bool:
    """Whether ``idx`` (a tuple type) holds integer indices only."""
    return isinstance(idx, types.BaseTuple) and all(isinstance(t, types.Integer) for t in idx)


def _element_pointer(context, builder, array_type, array_value, idx_type, idx_value,
                     shift_last: int = 0):
    """The address of ``array[idx]`` (its last index plus ``shift_last``): indices cast to
    intp, wrapped around (``a[-1]``) only when one of them is signed, so an index the
    generated code spells unsigned costs no select (``signs.py``)."""
    array = context.make_array(array_type)(context, builder, array_value)
    indices = [context.cast(builder, value, t, types.intp)
               for value, t in zip(cgutils.unpack_tuple(builder, idx_value, len(idx_type)),
                                   idx_type)]
    if shift_last:
        indices[-1] = builder.add(indices[-1], context.get_constant(types.intp, shift_last))
    signed = any(t.signed for t in idx_type)
    return cgutils.get_item_pointer(context, builder, array_type, array, indices,
                                    wraparound=signed)


def _atomic(float_op: str, int_op: str):
    @intrinsic
    def atomic(typingctx, arr, idx, val):
        if not isinstance(arr, types.Array) or not _indices(idx):
            return None
        sig = arr.dtype(arr, idx, arr.dtype)

        def codegen(context, builder, signature, args):
            ptr = _element_pointer(context, builder, signature.args[0], args[0],
                                   signature.args[1], args[1])
            op = float_op if isinstance(signature.args[0].dtype, types.Float) else int_op
            return builder.atomic_rmw(op, ptr, args[2], "monotonic")

        return sig, codegen

    return atomic


@intrinsic
def rt_prefetch(typingctx, arr, idx):
    """Ask the CPU to bring ``arr[idx]``'s cache line in, for writing (a hint: never faults)."""
    if not isinstance(arr, types.Array) or not _indices(idx):
        return None
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        ptr = _element_pointer(context, builder, signature.args[0], args[0],
                               signature.args[1], args[1])
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        prefetch = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32]),
            "llvm.prefetch.p0i8")
        # write, high temporal locality, data cache
        builder.call(prefetch, [builder.bitcast(ptr, byte_ptr), i32(1), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


def _pair(op: str):
    @intrinsic
    def pair(typingctx, arr, idx, a, b):
        """``arr[idx]`` and the element after it along the last axis (``idx`` ends with a
        component index) op= ``a`` and ``b``. In a C-contiguous array they are neighbours:
        one two-lane load, op and store, touching those two elements only; otherwise two
        scalar ones."""
        if not isinstance(arr, types.Array) or not isinstance(arr.dtype, types.Float) \
                or not _indices(idx):
            return None
        sig = types.void(arr, idx, arr.dtype, arr.dtype)

        def update(builder, old, value):
            return builder.fadd(old, value) if op == "+" else builder.fsub(old, value)

        def codegen(context, builder, signature, args):
            array_type, idx_type = signature.args[0], signature.args[1]
            ptr = _element_pointer(context, builder, array_type, args[0], idx_type, args[1])
            align = context.get_abi_sizeof(ptr.type.pointee)
            if array_type.layout != "C":
                second = _element_pointer(context, builder, array_type, args[0], idx_type,
                                          args[1], shift_last=1)
                for p, value in ((ptr, args[2]), (second, args[3])):
                    builder.store(update(builder, builder.load(p, align=align), value), p,
                                  align=align)
                return context.get_dummy_value()
            pair_type = ir.VectorType(ptr.type.pointee, 2)
            pair_ptr = builder.bitcast(ptr, pair_type.as_pointer())
            value = ir.Constant(pair_type, ir.Undefined)
            for k, x in enumerate(args[2:]):
                value = builder.insert_element(value, x, ir.IntType(32)(k))
            old = builder.load(pair_ptr, align=align)
            builder.store(update(builder, old, value), pair_ptr, align=align)
            return context.get_dummy_value()

        return sig, codegen

    return pair


rt_add_pair = _pair("+")
rt_sub_pair = _pair("-")


@intrinsic
def rt_load_pair(typingctx, arr, idx):
    """``(arr[idx], the element after it along the last axis)`` of a float32 array, read by
    one 64-bit integer load split in two: a vectorized loop gathers them with one 64-bit gather
    instead of two 32-bit ones (mass-spring forces: 8% of the forward). Two reads of the pair
    are one load after LLVM's redundancy elimination; scalar code gets two 32-bit loads back
    from the backend. Arrays that are not C-contiguous get two loads."""
    if not isinstance(arr, types.Array) or arr.dtype != types.float32 or not _indices(idx):
        return None
    sig = types.UniTuple(arr.dtype, 2)(arr, idx)

    def codegen(context, builder, signature, args):
        array_type, idx_type = signature.args[0], signature.args[1]
        ptr = _element_pointer(context, builder, array_type, args[0], idx_type, args[1])
        if array_type.layout != "C":
            second = _element_pointer(context, builder, array_type, args[0], idx_type, args[1],
                                      shift_last=1)
            pair = [builder.load(ptr, align=4), builder.load(second, align=4)]
        else:
            i32, i64 = ir.IntType(32), ir.IntType(64)
            word = builder.load(builder.bitcast(ptr, i64.as_pointer()), align=4)
            pair = [builder.bitcast(builder.trunc(half, i32), ptr.type.pointee)
                    for half in (word, builder.lshr(word, i64(32)))]
        return context.make_tuple(builder, signature.return_type, pair)

    return sig, codegen


@intrinsic
def rt_stack_array(typingctx, size, dtype):
    """An uninitialised 1-D array of ``size`` (a literal) ``dtype`` elements in the calling
    function's stack frame: no allocation at run time, no ``np.empty`` to type when compiling
    (its first use costs a process 0.25 s), and LLVM knows it overlaps no argument."""
    if not isinstance(size, types.IntegerLiteral) or not isinstance(dtype, types.NumberClass):
        return None
    element = dtype.instance_type

    def codegen(context, builder, signature, args):
        return _on_stack(context, builder, element, size.literal_value)[0]

    return types.Array(element, 1, "C")(size, dtype), codegen


# Bytes allocated past the end of each stack array. Generated code keeps many strip arrays of
# 512 elements (2 KiB of float32) side by side in one frame, and arrays a multiple of 4 KiB
# apart, read and written at the same index, made the CPU wait on stores that only share an
# address's low 12 bits ("4K aliasing"): a 16-output layer's adjoint (62,500 x 16 threads, 16
# buffers of 16 products) ran 89 ms on one core, 17 ms with each array one cache line longer.
STACK_PADDING = 64


def _on_stack(context, builder, element, length: int):
    """A C-contiguous 1-D array of ``length`` ``element`` values allocated in the function's
    entry block (``STACK_PADDING`` bytes longer); and its data pointer and item size."""
    data_type = context.get_data_type(element)
    padding = -(-STACK_PADDING // context.get_abi_sizeof(data_type))
    data = cgutils.alloca_once(builder, data_type, size=length + padding)
    itemsize = context.get_constant(types.intp, context.get_abi_sizeof(data_type))
    array = _array_1d(context, builder, types.Array(element, 1, "C"), data,
                      context.get_constant(types.intp, length), itemsize, None)
    return array, data, itemsize


@intrinsic
def rt_stack_zeros(typingctx, size, dtype, count):
    """``rt_stack_array(size, dtype)`` with its first ``count`` (at most ``size``) elements zero.

    Generated code keeps a lane array per thread-invariant accumulation (``codegen/activity``):
    zeroing each with a loop of its own, and summing it with another, made a kernel with 24
    such arrays a function of ~100 more blocks, and Numba's compile time grows with blocks (its
    SSA pass runs once per variable a loop reassigns): the rigid chain's adjoint compiled in
    5.6 s, 4.1 s with these two intrinsics, which are no Numba functions to compile."""
    if not (isinstance(size, types.IntegerLiteral) and isinstance(dtype, types.NumberClass)
            and isinstance(count, types.Integer)):
        return None
    element = dtype.instance_type

    def codegen(context, builder, signature, args):
        array, data, itemsize = _on_stack(context, builder, element, size.literal_value)
        n = context.cast(builder, args[2], signature.args[2], types.intp)
        cgutils.memset(builder, data, builder.mul(n, itemsize), 0)  # zero: all bits 0
        return array

    return types.Array(element, 1, "C")(size, dtype, count), codegen


@intrinsic
def rt_tiny(typingctx, value):
    """1 where float32 ``value`` is nonzero and below 2**-64 in magnitude, else 0, from its
    bits: integer operations that vectorize as an or-reduction (``interchange.widened``)."""
    if value != types.float32:
        return None
    i32 = ir.IntType(32)

    def codegen(context, builder, signature, args):
        magnitude = builder.and_(builder.bitcast(args[0], i32), i32(0x7FFFFFFF))
        # magnitude - 1 wraps zero around to the top: one unsigned compare for both bounds
        tiny = builder.icmp_unsigned("<", builder.sub(magnitude, i32(1)), i32(0x1F800000 - 1))
        return builder.zext(tiny, i32)

    return types.int32(value), codegen


@intrinsic
def rt_stack_filled(typingctx, size, dtype, count, value):
    """``rt_stack_array(size, dtype)`` with its first ``count`` elements ``value``: lane arrays
    of extrema start from the op's identity, +-inf (``rt_stack_zeros``' loop-free reason)."""
    if not (isinstance(size, types.IntegerLiteral) and isinstance(dtype, types.NumberClass)
            and isinstance(count, types.Integer) and isinstance(value, types.Float)):
        return None
    element = dtype.instance_type

    def codegen(context, builder, signature, args):
        array, data, _ = _on_stack(context, builder, element, size.literal_value)
        n = context.cast(builder, args[2], signature.args[2], types.intp)
        fill = context.cast(builder, args[3], signature.args[3], element)
        with cgutils.for_range(builder, n) as loop:
            builder.store(fill, builder.gep(data, [loop.index]))
        return array

    return types.Array(element, 1, "C")(size, dtype, count, value), codegen


@intrinsic
def rt_lane_extremum(typingctx, values, count, maximum):
    """The maximum (``maximum`` a literal True) or minimum of ``values[0:count]`` (``count`` >=
    1), taken in lane order as ``max``/``min`` take two: the first of equals, and a NaN after
    the first lane ignored, as in the thread-by-thread updates the lanes stand for."""
    if not (isinstance(values, types.Array) and values.ndim == 1
            and isinstance(values.dtype, types.Float) and isinstance(count, types.Integer)
            and isinstance(maximum, types.BooleanLiteral)):
        return None
    element, above = values.dtype, maximum.literal_value

    def codegen(context, builder, signature, args):
        data = context.make_array(values)(context, builder, value=args[0]).data
        n = context.cast(builder, args[1], signature.args[1], types.intp)
        best = cgutils.alloca_once_value(builder, builder.load(data))
        with cgutils.for_range(builder, n, start=context.get_constant(types.intp, 1)) as loop:
            value, current = builder.load(builder.gep(data, [loop.index])), builder.load(best)
            wins = builder.fcmp_ordered(">" if above else "<", value, current)
            builder.store(builder.select(wins, value, current), best)
        return builder.load(best)

    return element(values, count, maximum), codegen


@intrinsic
def rt_lane_total(typingctx, values, count):
    """``values[0] + values[1] + ... + values[count - 1]``, added in that order (``count`` >= 1):
    the same sum, bit for bit, whatever the vector width (see ``rt_stack_zeros``)."""
    if not (isinstance(values, types.Array) and values.ndim == 1
            and isinstance(values.dtype, (types.Float, types.Integer))
            and isinstance(count, types.Integer)):
        return None
    element = values.dtype

    def codegen(context, builder, signature, args):
        data = context.make_array(values)(context, builder, value=args[0]).data
        n = context.cast(builder, args[1], signature.args[1], types.intp)
        total = cgutils.alloca_once_value(builder, builder.load(data))
        add = builder.fadd if isinstance(element, types.Float) else builder.add
        with cgutils.for_range(builder, n, start=context.get_constant(types.intp, 1)) as loop:
            value = builder.load(builder.gep(data, [loop.index]))
            builder.store(add(builder.load(total), value), total)
        return builder.load(total)

    return element(values, count), codegen


# Lanes ``rt_lane_flush`` adds as one vector: 8 partial sums, each in lane order.
FLUSH_WIDTH = 8


@intrinsic
def rt_lane_flush(typingctx, values, count):
    """The sum of ``values[0:count]``, which become 0: a lane array of adds at one address,
    summed once per loop iteration or row (``ForwardWriter.loop_lane``). Partial sums of
    every ``FLUSH_WIDTH``-th lane, then those in order: a fixed order, bit for bit the same in
    every run, and a vector add per ``FLUSH_WIDTH`` lanes instead of a chain of scalar adds
    (``rt_lane_total``), which a flush per iteration of a 64-iteration loop over 1M threads
    would have waited on for ~100 ms."""
    if not (isinstance(values, types.Array) and values.ndim == 1
            and isinstance(values.dtype, types.Float) and isinstance(count, types.Integer)):
        return None
    element = values.dtype

    def codegen(context, builder, signature, args):
        data = context.make_array(values)(context, builder, value=args[0]).data
        n = context.cast(builder, args[1], signature.args[1], types.intp)
        scalar = context.get_data_type(element)
        vector = ir.VectorType(scalar, FLUSH_WIDTH)
        align = context.get_abi_sizeof(scalar)
        zero = ir.Constant(vector, None)
        partial = cgutils.alloca_once_value(builder, zero)
        width = context.get_constant(types.intp, FLUSH_WIDTH)
        blocks = builder.udiv(n, width)
        with cgutils.for_range(builder, blocks) as loop:
            at = builder.bitcast(builder.gep(data, [builder.mul(loop.index, width)]),
                                 vector.as_pointer())
            builder.store(builder.fadd(builder.load(partial), builder.load(at, align=align)),
                          partial)
            builder.store(zero, at, align=align)
        sums = builder.load(partial)
        total = builder.extract_element(sums, ir.Constant(ir.IntType(32), 0))
        for lane in range(1, FLUSH_WIDTH):
            total = builder.fadd(total, builder.extract_element(sums, ir.Constant(
                ir.IntType(32), lane)))
        total_slot = cgutils.alloca_once_value(builder, total)
        with cgutils.for_range(builder, builder.sub(n, builder.mul(blocks, width))) as loop:
            at = builder.gep(data, [builder.add(builder.mul(blocks, width), loop.index)])
            builder.store(builder.fadd(builder.load(total_slot), builder.load(at)), total_slot)
            builder.store(ir.Constant(scalar, None), at)
        return builder.load(total_slot)

    return element(values, count), codegen


rt_atomic_add = _atomic("fadd", "add")
rt_atomic_sub = _atomic("fsub", "sub")
rt_atomic_min = _atomic("fmin", "min")
rt_atomic_max = _atomic("fmax", "max")
rt_atomic_exch = _atomic("xchg", "xchg")


@intrinsic
def rt_atomic_cas(typingctx, arr, idx, compare, val):
    """Atomically replace ``arr[idx]`` by ``val`` where it equals ``compare`` (for floats by
    value, as Warp's CPU code compares: -0.0 equals 0.0, NaN nothing); return the old value."""
    if not isinstance(arr, types.Array) or not _indices(idx):
        return None
    sig = arr.dtype(arr, idx, arr.dtype, arr.dtype)

    def codegen(context, builder, signature, args):
        ptr = _element_pointer(context, builder, signature.args[0], args[0],
                               signature.args[1], args[1])
        element = ptr.type.pointee
        compare, value = args[2], args[3]
        if isinstance(element, ir.IntType):
            pair = builder.cmpxchg(ptr, compare, value, "monotonic", "monotonic")
            return builder.extract_value(pair, 0)
        # Floats: LLVM's compare-exchange takes integers and compares bits. Swap the bits
        # seen while they stand for a value equal to ``compare``; retry if they changed.
        bits = ir.IntType(context.get_abi_sizeof(element) * 8)
        word = builder.bitcast(ptr, bits.as_pointer())
        seen = cgutils.alloca_once_value(builder, builder.load_atomic(
            word, "monotonic", context.get_abi_sizeof(element)))
        loop, done = builder.append_basic_block("cas_loop"), builder.append_basic_block("cas_done")
        builder.branch(loop)
        builder.position_at_end(loop)
        old_bits = builder.load(seen)
        old = builder.bitcast(old_bits, element)
        with builder.if_then(builder.fcmp_ordered("==", old, compare)):
            pair = builder.cmpxchg(word, old_bits, builder.bitcast(value, bits), "monotonic",
                                   "monotonic")
            builder.store(builder.extract_value(pair, 0), seen)
            builder.cbranch(builder.extract_value(pair, 1), done, loop)
        builder.branch(done)
        builder.position_at_end(done)
        return builder.bitcast(builder.load(seen), element)

    return sig, codegen


# ----------------------------------------------------------------------------- x86 FP control

# MXCSR bits: FTZ (results that would be denormal become 0) and DAZ (denormal inputs read as 0).
FLUSH_DENORMALS = 0x8040


def _mxcsr_call(builder, name: str, slot) -> None:
    fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer()])
    fn = cgutils.get_or_insert_function(builder.module, fnty, name)
    builder.call(fn, [builder.bitcast(slot, ir.IntType(8).as_pointer())])


@intrinsic
def rt_fp_control(typingctx):
    """The calling thread's x86 MXCSR register (rounding, exception masks, FTZ/DAZ)."""
    def codegen(context, builder, signature, args):
        slot = cgutils.alloca_once(builder, ir.IntType(32))
        _mxcsr_call(builder, "llvm.x86.sse.stmxcsr", slot)
        return builder.load(slot)

    return types.uint32(), codegen


@intrinsic
def rt_set_fp_control(typingctx, value):
    """Load ``value`` into the calling thread's MXCSR register."""
    if not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        slot = cgutils.alloca_once(builder, ir.IntType(32))
        builder.store(builder.trunc(args[0], ir.IntType(32)) if value.bitwidth > 32
                      else builder.zext(args[0], ir.IntType(32)) if value.bitwidth < 32
                      else args[0], slot)
        _mxcsr_call(builder, "llvm.x86.sse.ldmxcsr", slot)
        return context.get_dummy_value()

    return types.void(value), codegen


@load_only
@njit(cache=True)
def fp_control() -> int:
    """The calling thread's MXCSR (x86 only), e.g. to see whether a library set FTZ."""
    return rt_fp_control()


@load_only
@njit(cache=True)
def set_fp_control(value) -> None:
    """Set the calling thread's MXCSR (x86 only)."""
    rt_set_fp_control(np.uint32(value))


@intrinsic
def rt_printf(typingctx, fmt, values):
    """C's ``printf(fmt, values...)`` (``wp.printf``), then ``fflush``: floats passed as double
    and small integers as int, as C's variadic calls promote them."""
    if not isinstance(fmt, types.StringLiteral) or not isinstance(values, types.BaseTuple):
        return None
    text = fmt.literal_value

    def codegen(context, builder, signature, args):
        promoted = []
        for t, value in zip(signature.args[1], cgutils.unpack_tuple(builder, args[1])):
            if isinstance(t, types.Float):
                promoted.append(builder.fpext(value, ir.DoubleType()) if t.bitwidth < 64
                                else value)
            elif isinstance(t, (types.Integer, types.Boolean)) and \
                    getattr(t, "bitwidth", 1) < 32:
                extend = builder.sext if getattr(t, "signed", False) else builder.zext
                promoted.append(extend(value, ir.IntType(32)))
            else:
                promoted.append(value)
        cgutils.printf(builder, text, *promoted)
        flush = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(32), [cgutils.voidptr_t]), "fflush")
        builder.call(flush, [cgutils.voidptr_t(None)])  # all streams: output in call order
        return context.get_dummy_value()

    return types.void(fmt, values), codegen
