"""An ``exp`` that LLVM vectorises, for the log-sum-exp of PyTensor's Numba backend.

PyTensor's Numba backend lowers ``exp`` to a call of the C library's scalar ``exp``, which LLVM
cannot vectorise: in a softmax or log-sum-exp over many rows (a classifier's output layer
evaluated on a grid of SFP's line, ``pm.Categorical`` with ``logit_p``, a mixture's
log-density) that call is most of the work. :func:`polynomial_exp` computes the same function
from arithmetic alone, so that a loop over an array of it is vectorised.

The rewrite :data:`POLYNOMIAL_EXP` (included by :mod:`pymc_sfp.compile` in every function it
compiles with the Numba linker) swaps it in only for the ``exp(x - c)`` of a float64 log-sum-exp
or softmax (an ``exp`` of an elementwise difference): where the libm call is not in a loop
LLVM can vectorise (a sigmoid, a loop with a reduction in it) the scalar polynomial is slower
than the call. Every other backend keeps the C code of :class:`~pytensor.scalar.basic.Exp`,
which :class:`PolynomialExp` inherits. A mode that excludes the tag
(``compile_kwargs={"mode": get_mode(None).excluding(POLYNOMIAL_EXP)}``) keeps PyTensor's own
``exp`` throughout.

PyTensor's Numba backend also fuses a reduction into the loop of the elementwise operation it
reads (``FusedElemwise``: the ``sum`` of a softmax's ``exp`` in the same loop), and such a loop is
not vectorised either. The rewrite :data:`UNFUSED_EXP_REDUCTION` (included alongside) puts a
copy between a loop that holds the polynomial and a reduction of its output, so that the
polynomial's loop is a map and the copy's takes the reduction: on the structured line of glass
9-6-4 (a softmax over 4 outputs of ``(G, n, 4)`` logits) a sweep took 37 → 25 ms at ``L = 100``;
on the tempered and SFP lines of the mixtures it changed nothing measurable.

Accuracy: within one unit in the last place of NumPy's ``exp`` on all of ``[-745.2, 709.8]``,
and equal to it at ``0`` (``1``), past the overflow threshold (``inf``), past the underflow
threshold (``0``), at ``±inf`` and ``nan``.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytensor.scalar as ps
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic
from pytensor.compile import optdb
from pytensor.graph.rewriting.basic import dfs_rewriter, in2out, node_rewriter
from pytensor.link.numba.dispatch.scalar import register_scalar_funcify, scalar_op_cache_key
from pytensor.tensor.elemwise import CAReduce, Elemwise
from pytensor.tensor.rewriting.elemwise import fuse_seqopt

__all__ = ["POLYNOMIAL_EXP", "UNFUSED_EXP_REDUCTION", "PolynomialExp", "polynomial_exp"]

#: The tag of the rewrite that swaps :class:`PolynomialExp` in (``mode.including(POLYNOMIAL_EXP)``).
POLYNOMIAL_EXP = "pymc_sfp_polynomial_exp"

_LOG2_E = 1.4426950408889634
# ln 2 in two parts (fdlibm's): the high part has trailing zero bits, so that k · _LN2_HIGH is
# exact for every |k| < 2048 and the reduction x − k ln 2 loses nothing to cancellation.
_LN2_HIGH = 6.93147180369123816490e-01
_LN2_LOW = 1.90821492927058770002e-10
# exp's Taylor coefficients 1/n!, n = 0…13: on |r| ≤ ln(2)/2 the first term left out is below
# 4e-18, a fiftieth of float64's unit round-off.
_TAYLOR = tuple(1.0 / math.factorial(n) for n in range(14))
_HORNER = _TAYLOR[-2::-1]
# Past this, exp(x) rounds to inf; below -746, the reduction's 2^k scaling gives 0.
_OVERFLOW = 709.782712893384
_UNDERFLOW = -746.0


@intrinsic
def _power_of_two(typingctx, exponent):
    """``2.0 ** exponent`` for an int64 ``exponent`` in [-1022, 1023], from its IEEE-754 bits
    (a shift and a bit cast, which vectorise, where ``ldexp`` is a library call)."""

    def codegen(context, builder, signature, args):
        biased = builder.add(args[0], ir.Constant(ir.IntType(64), 1023))
        bits = builder.shl(biased, ir.Constant(ir.IntType(64), 52))
        return builder.bitcast(bits, ir.DoubleType())

    return types.float64(types.int64), codegen


@intrinsic
def _multiply_add(typingctx, a, b, c):
    """``a · b + c``, fused where the processor can (LLVM's ``fmuladd``): one rounding in each
    step of Horner's scheme."""

    def codegen(context, builder, signature, args):
        double = ir.DoubleType()
        fmuladd = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(double, [double] * 3), "llvm.fmuladd.f64"
        )
        return builder.call(fmuladd, args)

    return types.float64(types.float64, types.float64, types.float64), codegen


# No fast-math: reassociation would undo the two-part reduction. LLVM inlines the function into
# its callers with its own (strict) flags.
@numba.njit(fastmath=False)
def polynomial_exp(x: float) -> float:
    """``exp(x)`` for a float64 ``x``, without a library call.

    Cody and Waite's reduction ``x = k ln 2 + r`` with ``|r| ≤ ln(2)/2``, ``exp(r)`` by its
    degree-13 Taylor polynomial, and ``2^k`` applied as two powers of two built from their bits
    (so that neither over- nor underflows before the product does).
    """
    clamped = min(max(x, _UNDERFLOW), 710.0)
    k = np.floor(clamped * _LOG2_E + 0.5)
    r = (clamped - k * _LN2_HIGH) - k * _LN2_LOW
    p = _TAYLOR[-1]
    for coefficient in _HORNER:
        p = _multiply_add(p, r, coefficient)
    power = np.int64(k)
    half = power >> 1
    y = p * _power_of_two(half) * _power_of_two(power - half)
    y = np.inf if x > _OVERFLOW else y
    return x if x != x else y


class PolynomialExp(ps.Exp):
    """``exp``, lowered by PyTensor's Numba backend to :func:`polynomial_exp` (float64) and by
    the C backend to ``exp`` (its C code is :class:`~pytensor.scalar.basic.Exp`'s)."""


polynomial_exp_op = PolynomialExp(ps.upgrade_to_float, name="polynomial_exp")


@register_scalar_funcify(PolynomialExp)
def _numba_polynomial_exp(op, node, **kwargs):
    # PyTensor's disk cache keys a fused loop by this key, not by polynomial_exp's source: a
    # change of polynomial_exp must raise cache_version.
    return polynomial_exp, scalar_op_cache_key(op, cache_version=1)


@node_rewriter([Elemwise])
def _exp_of_difference(fgraph, node):
    """``exp(a - b)`` (float64) → the polynomial ``exp``: the pattern of a softmax or
    log-sum-exp, whose loop LLVM vectorises."""
    if type(node.op.scalar_op) is not ps.Exp or node.inputs[0].type.dtype != "float64":
        return None
    (argument,) = node.inputs
    owner = argument.owner
    if (
        owner is None
        or not isinstance(owner.op, Elemwise)
        or type(owner.op.scalar_op) is not ps.Sub
    ):
        return None
    return [Elemwise(polynomial_exp_op)(argument)]


# Before elementwise fusion (position 1), so that the fused loops hold the polynomial.
fuse_seqopt.register(
    "pymc_sfp_exp_of_difference", in2out(_exp_of_difference), POLYNOMIAL_EXP, position=0.25
)


#: The tag of the rewrite that keeps a reduction out of the loop of the polynomial ``exp`` it sums
#: (``mode.including(UNFUSED_EXP_REDUCTION)``).
UNFUSED_EXP_REDUCTION = "pymc_sfp_unfused_exp_reduction"


def _holds_polynomial_exp(scalar_op: ps.ScalarOp) -> bool:
    if isinstance(scalar_op, PolynomialExp):
        return True
    return isinstance(scalar_op, ps.Composite) and any(
        isinstance(node.op, PolynomialExp) for node in scalar_op.fgraph.apply_nodes
    )


@node_rewriter([CAReduce])
def _reduction_apart_from_exp(fgraph, node):
    """``reduce(f(…))``, ``f`` holding the polynomial ``exp`` → ``reduce(identity(f(…)))``.

    PyTensor's Numba backend fuses a reduction into the loop of the elementwise operation it
    reads (``FusedElemwise``), and a loop with a reduction in it is not vectorised: the polynomial
    is then slower than the C library's scalar ``exp``. Behind the copy, ``f``'s loop is a map,
    and the copy's loop takes the reduction."""
    (argument,) = node.inputs
    owner = argument.owner
    if (
        owner is None
        or not isinstance(owner.op, Elemwise)
        or not _holds_polynomial_exp(owner.op.scalar_op)
    ):
        return None
    return [node.op(Elemwise(ps.identity)(argument))]


# After the elementwise fusion and the in-place rewrites, before PyTensor fuses reductions into
# loops (``fuse_indexed_into_elemwise``, position 100).
optdb.register(
    "pymc_sfp_reduction_apart_from_exp",
    dfs_rewriter(_reduction_apart_from_exp),
    UNFUSED_EXP_REDUCTION,
    position=99.5,
)
