"""SIMD vectors of small integers as numba values (LLVM ``<W x iN>``), for the striped kernel.

numba has no vector type: a loop over lanes of an array is vectorised by LLVM, but state
carried from one iteration to the next (Farrar's F, the diagonal, the running maximum) then
goes through memory, which puts a store-to-load round trip on the critical path. These
intrinsics make a vector a plain SSA value that lives in a register. A vector fills 256 bits
(:data:`BITS`): 32 lanes of 8-bit, 16 of 16-bit, 8 of 32-bit integers (:func:`vlanes`).
:func:`vload` / :func:`vstore` move a vector's worth of consecutive elements of an array (at a
flat element offset), :func:`vsplat` broadcasts a scalar. Arithmetic keeps the element type:
signed types wrap (two's complement, as the kernels' overflow checks assume), unsigned types
saturate at 0 and at their maximum (``vpaddusb`` / ``vpsubusb``, Farrar's and SSW's 8-bit
kernels) and compare unsigned.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, models, register_model

__all__ = [
    "BITS",
    "vlanes",
    "vsigned",
    "vload",
    "vstore",
    "vsplat",
    "vadd",
    "vsub",
    "vsubs",
    "vmax",
    "vshift",
    "vshift2",
    "vshift4",
    "vshift8",
    "vshift16",
    "vany_gt",
    "vhmax",
]

BITS = 256  # one AVX2 register


def _count(dtype: types.Integer) -> int:
    return BITS // dtype.bitwidth


class Vector(types.Type):
    """``BITS // bitwidth`` integers of one type, held in a SIMD register."""

    def __init__(self, dtype: types.Integer) -> None:
        self.dtype = dtype
        self.count = _count(dtype)
        super().__init__(name=f"Vector({dtype}x{self.count})")


@register_model(Vector)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        be_type = ir.VectorType(dmm.lookup(fe_type.dtype).get_value_type(), fe_type.count)
        super().__init__(dmm, fe_type, be_type)


def _gt(builder, signed: bool, x, y):
    return builder.icmp_signed(">", x, y) if signed else builder.icmp_unsigned(">", x, y)


def _i32(k: int) -> ir.Constant:
    return ir.Constant(ir.IntType(32), k)


def _mask(values: list[int]) -> ir.Constant:
    return ir.Constant(ir.VectorType(ir.IntType(32), len(values)), values)


def _pointer(context, builder, arr_type, arr, offset, count):
    data = cgutils.create_struct_proxy(arr_type)(context, builder, value=arr).data
    ptr = builder.gep(data, [offset])
    elem = context.get_value_type(arr_type.dtype)
    return builder.bitcast(ptr, ir.PointerType(ir.VectorType(elem, count)))


@intrinsic
def vlanes(typingctx, arr):
    """Lanes of a vector of ``arr``'s element type (a constant: LLVM folds it)."""
    if not isinstance(arr, types.Array) or not isinstance(arr.dtype, types.Integer):
        return None
    count = _count(arr.dtype)

    def codegen(context, builder, sig, args):
        return ir.Constant(ir.IntType(64), count)

    return types.int64(arr), codegen


@intrinsic
def vsigned(typingctx, arr):
    """Whether ``arr``'s element type is signed (a constant: LLVM folds branches on it)."""
    if not isinstance(arr, types.Array) or not isinstance(arr.dtype, types.Integer):
        return None
    signed = arr.dtype.signed

    def codegen(context, builder, sig, args):
        return ir.Constant(ir.IntType(1), int(signed))

    return types.boolean(arr), codegen


@intrinsic
def vload(typingctx, arr, offset):
    """A vector of C-contiguous ``arr``'s elements from flat index ``offset``."""
    if not isinstance(arr, types.Array) or not isinstance(offset, types.Integer):
        return None
    vt = Vector(arr.dtype)

    def codegen(context, builder, sig, args):
        off = context.cast(builder, args[1], sig.args[1], types.intp)
        ptr = _pointer(context, builder, sig.args[0], args[0], off, vt.count)
        return builder.load(ptr, align=1)

    return vt(arr, offset), codegen


@intrinsic
def vstore(typingctx, arr, offset, vec):
    """Store ``vec`` into ``arr``'s data from flat index ``offset``."""
    if not isinstance(arr, types.Array) or not isinstance(vec, Vector):
        return None

    def codegen(context, builder, sig, args):
        off = context.cast(builder, args[1], sig.args[1], types.intp)
        ptr = _pointer(context, builder, sig.args[0], args[0], off, sig.args[2].count)
        builder.store(args[2], ptr, align=1)
        return context.get_dummy_value()

    return types.none(arr, offset, vec), codegen


def _splat(builder, x, count):
    ty = ir.VectorType(x.type, count)
    undef = ir.Constant(ty, ir.Undefined)
    one = builder.insert_element(undef, x, _i32(0))
    return builder.shuffle_vector(one, undef, _mask([0] * count))


@intrinsic
def vsplat(typingctx, x):
    """A vector of ``x`` in every element (of ``x``'s integer type)."""
    if not isinstance(x, types.Integer):
        return None
    vt = Vector(x)

    def codegen(context, builder, sig, args):
        return _splat(builder, args[0], vt.count)

    return vt(x), codegen


def _saturating(builder, name, x, y):
    fnty = ir.FunctionType(x.type, [x.type, x.type])
    bits = x.type.element.width
    fn = cgutils.get_or_insert_function(
        builder.module, fnty, f"llvm.{name}.sat.v{x.type.count}i{bits}"
    )
    return builder.call(fn, [x, y])


def _elementwise(name):
    @intrinsic
    def op(typingctx, a, b):
        if not isinstance(a, Vector) or a != b:
            return None
        signed = a.dtype.signed

        def codegen(context, builder, sig, args):
            x, y = args
            if name == "max":
                gt = _gt(builder, signed, x, y)
                return builder.select(gt, x, y)
            if signed:
                return builder.add(x, y) if name == "add" else builder.sub(x, y)
            return _saturating(builder, "uadd" if name == "add" else "usub", x, y)

        return a(a, b), codegen

    op.__doc__ = f"Element-wise {name} (unsigned: saturating)."
    return op


vadd = _elementwise("add")
vsub = _elementwise("sub")
vmax = _elementwise("max")


@intrinsic
def vsubs(typingctx, a, b):
    """Element-wise saturating subtraction (signed or unsigned after the element type)."""
    if not isinstance(a, Vector) or a != b:
        return None
    name = "ssub" if a.dtype.signed else "usub"

    def codegen(context, builder, sig, args):
        return _saturating(builder, name, args[0], args[1])

    return a(a, b), codegen


def _shift(by: int):
    @intrinsic
    def shift(typingctx, vec, x):
        if not isinstance(vec, Vector) or not isinstance(x, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            v = args[0]
            count = sig.args[0].count
            x = context.cast(builder, args[1], sig.args[1], sig.args[0].dtype)
            fill = _splat(builder, x, count)
            k = min(by, count)
            # lanes below ``by`` from the fill vector, the others from v moved up
            return builder.shuffle_vector(v, fill, _mask([count] * k + list(range(count - k))))

        return vec(vec, x), codegen

    shift.__doc__ = f"Elements moved up {by} lane(s) (lane ``l`` gets ``l - {by}``), ``x`` below."
    return shift


vshift = _shift(1)
vshift2 = _shift(2)
vshift4 = _shift(4)
vshift8 = _shift(8)
vshift16 = _shift(16)


@intrinsic
def vany_gt(typingctx, a, b):
    """Whether any element of ``a`` is greater than ``b``'s."""
    if not isinstance(a, Vector) or a != b:
        return None
    signed = a.dtype.signed

    def codegen(context, builder, sig, args):
        x, y = args
        bits = _gt(builder, signed, x, y)
        count = sig.args[0].count
        packed = builder.bitcast(bits, ir.IntType(count))
        return builder.icmp_unsigned("!=", packed, ir.Constant(ir.IntType(count), 0))

    return types.boolean(a, b), codegen


@intrinsic
def vhmax(typingctx, vec):
    """The largest element (as int64)."""
    if not isinstance(vec, Vector):
        return None
    signed = vec.dtype.signed

    def codegen(context, builder, sig, args):
        v = args[0]
        best = builder.extract_element(v, _i32(0))
        for k in range(1, sig.args[0].count):
            x = builder.extract_element(v, _i32(k))
            gt = _gt(builder, signed, x, best)
            best = builder.select(gt, x, best)
        ext = builder.sext if signed else builder.zext
        return ext(best, ir.IntType(64))

    return types.int64(vec), codegen
