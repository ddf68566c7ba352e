/* complex.h - how calls with complex operands are lowered (internal to
 * ops/). Most lowerings were written for real dtypes; a call with a
 * complex tensor, a complex result type or a complex Scalar runs the
 * complex lowering its record names (complex_fn, one of those below), or
 * the op's own lowering where the record says it is right for complex
 * values (TTPU_OP_COMPLEX_AS_IS: pure data movement), and fails with
 * NotImplementedError otherwise: never a silently wrong answer. */
#ifndef TTPU_OPS_COMPLEX_H_
#define TTPU_OPS_COMPLEX_H_

#include "ttpu_lower.h"

/* The complex lowerings (ops/complex.c). They read the record's param
 * (ttpu_l_param) where noted; a record pairs them with a real lowering
 * that reads the same param the same way, or none. */
/* self (op) alpha * other: param a ttpu_binop (ADD, SUB, MUL), with
 * TTPU_EW_REVERSED (ops/elementwise.h) swapping self and other (rsub). */
ttpu_status* ttpu_complex_arith(ttpu_lower* L);
/* true division (a rounding mode fails as the CPU's) */
ttpu_status* ttpu_complex_div(ttpu_lower* L);
/* param a ttpu_unop, in the result dtype: neg, sgn, exp, log, sqrt ... */
ttpu_status* ttpu_complex_unary(ttpu_lower* L);
/* exp with C99's special values (inf + NaN i, 0 + 0 i, exact zero imaginary). */
ttpu_status* ttpu_complex_exp(ttpu_lower* L);
/* The same on a value (complex dtype). */
ttpu_val ttpu_complex_exp_v(ttpu_hlo* b, ttpu_val x);
/* log1p, expm1, log2, log10, sigmoid, tan, rsqrt, exp2 and the inverse
 * trigonometric and hyperbolic functions (param a TTPU_CX_ value below) */
ttpu_status* ttpu_complex_special(ttpu_lower* L);
/* sigmoid_backward and its grad_input form */
ttpu_status* ttpu_complex_sigmoid_backward(ttpu_lower* L);
/* pow.Tensor_Tensor / .Scalar / .Tensor_Scalar and their in-place forms */
ttpu_status* ttpu_complex_pow(ttpu_lower* L);
ttpu_status* ttpu_complex_abs(ttpu_lower* L);
ttpu_status* ttpu_complex_angle(ttpu_lower* L);
/* param a ttpu_cmp (EQ, NE) */
ttpu_status* ttpu_complex_compare(ttpu_lower* L);
ttpu_status* ttpu_complex_isnan(ttpu_lower* L);
ttpu_status* ttpu_complex_reciprocal(ttpu_lower* L);
/* maximum/minimum/fmax/fmin: the CPU's RuntimeError */
ttpu_status* ttpu_complex_unordered(ttpu_lower* L);
/* mm, bmm, mv, dot */
ttpu_status* ttpu_complex_product(ttpu_lower* L);
/* uniform_ (param 0) / normal_ (TTPU_CX_NORMAL) */
ttpu_status* ttpu_complex_random(ttpu_lower* L);
/* sum/mean over dims; param TTPU_CX_MEAN for mean, TTPU_CX_ALL for the
 * overloads without a dim list */
ttpu_status* ttpu_complex_reduce(ttpu_lower* L);
enum {
  TTPU_CX_MEAN = 1,
  TTPU_CX_ALL = 2,
  TTPU_CX_NORMAL = 1,
  TTPU_CX_LOG1P = 1,
  TTPU_CX_EXPM1 = 2,
  TTPU_CX_LOG2 = 3,
  TTPU_CX_LOG10 = 4,
  TTPU_CX_SIGMOID = 5,
  TTPU_CX_TAN = 6,
  TTPU_CX_RSQRT = 7,
  TTPU_CX_EXP2 = 8,
  TTPU_CX_ASIN = 9,
  TTPU_CX_ACOS = 10,
  TTPU_CX_ATAN = 11,
  TTPU_CX_ASINH = 12,
  TTPU_CX_ACOSH = 13,
  TTPU_CX_ATANH = 14,
};

/* 1 when the call has a complex tensor, result type or Scalar. */
int ttpu_complex_call(const ttpu_op_call* call);
/* The dtype of the call's first tensor that is not one of its outputs
 * (TTPU_DTYPE_NONE when every tensor is an output). */
ttpu_dtype ttpu_call_input_dtype(const ttpu_op_call* call);
/* The lowering for a complex call of def's op, or NULL when none. */
ttpu_lower_fn ttpu_complex_lowering(const ttpu_op_def* def,
                                    const ttpu_op_call* call);

#endif /* TTPU_OPS_COMPLEX_H_ */
