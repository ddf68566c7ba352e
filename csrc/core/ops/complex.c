/* complex.c - complex64/complex128 arithmetic as PyTorch's CPU kernels do
 * it: + - * / (Tensor and Scalar, complex Scalars too), neg, conj, abs,
 * angle, complex(), polar(), eq/ne, isnan, sum and mean over dims; and the
 * list of real-dtype lowerings that are right for complex values as they
 * are (copies, fills, concatenation, gathers: they only move elements)
 * carry TTPU_OP_COMPLEX_AS_IS in their records. See complex.h for how a
 * complex call finds its lowering. */
#include <math.h>
#include <string.h>

#include "complex.h"
#include "elementwise.h"

int ttpu_complex_call(const ttpu_op_call* call) {
  if (ttpu_dtype_is_complex(call->common_dtype)) return 1;
  for (int i = 0; i < call->n_tensors; ++i)
    if (ttpu_dtype_is_complex(call->tensors[i].dtype)) return 1;
  for (int i = 0; i < call->n_outputs; ++i)
    if (ttpu_dtype_is_complex(call->outputs[i].dtype)) return 1;
  for (int i = 0; i < call->n_args; ++i)
    if ((call->args[i].kind == TTPU_ARG_SCALAR ||
         call->args[i].kind == TTPU_ARG_SCALARS) &&
        ttpu_dtype_is_complex(call->args[i].scalar_dtype))
      return 1;
  return 0;
}

/* 1 when tensor i of the call is one of its outputs (an out= tensor, or an
 * in-place self, whose dtype is then in the result type). */
static int is_output(const ttpu_op_call* call, int i) {
  for (int k = 0; k < call->n_outputs; ++k)
    if (call->outputs[k].buffer == call->tensors[i].buffer) return 1;
  return 0;
}

ttpu_dtype ttpu_call_input_dtype(const ttpu_op_call* call) {
  for (int i = 0; i < call->n_tensors; ++i)
    if (call->tensors[i].buffer && !is_output(call, i)) return call->tensors[i].dtype;
  return TTPU_DTYPE_NONE;
}

/* 1 when only an out= tensor of the call is complex: its operands, read
 * tensors and Scalars, are real and so is their result type. */
static int only_out_complex(const ttpu_op_call* call) {
  if (call->common_dtype == TTPU_DTYPE_NONE ||
      ttpu_dtype_is_complex(call->common_dtype))
    return 0;
  int operands = 0;
  for (int i = 0; i < call->n_tensors; ++i) {
    if (!call->tensors[i].buffer || is_output(call, i)) continue;
    if (ttpu_dtype_is_complex(call->tensors[i].dtype)) return 0;
    ++operands;
  }
  for (int i = 0; i < call->n_args; ++i)
    if ((call->args[i].kind == TTPU_ARG_SCALAR ||
         call->args[i].kind == TTPU_ARG_SCALARS) &&
        ttpu_dtype_is_complex(call->args[i].scalar_dtype))
      return 0;
  return operands > 0;
}

/* ------------------------------------------------------------ arithmetic */

/* The dtype the op computes in: output 0's (PyTorch's result type, which
 * the meta kernel already gave the output). */
static ttpu_dtype out_dtype(ttpu_lower* L) { return ttpu_l_out_type(L, 0).dtype; }

ttpu_status* ttpu_complex_arith(ttpu_lower* L) {
  ttpu_binop op = (ttpu_binop)(ttpu_l_param(L) & ~TTPU_EW_REVERSED);
  int reverse = (ttpu_l_param(L) & TTPU_EW_REVERSED) != 0;
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  if (!ttpu_dtype_is_complex(dt)) dt = out_dtype(L);
  ttpu_val x = ttpu_ew_in(L, 0, dt), y = ttpu_ew_in(L, 1, dt);
  if (reverse) {
    ttpu_val t = x;
    x = y;
    y = t;
  }
  if ((op == TTPU_ADD || op == TTPU_SUB) && !ttpu_l_is_none(L, 2))
    y = ttpu_ew_mul(b, y, ttpu_ew_in(L, 2, dt));
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, op, x, y));
  return NULL;
}

ttpu_status* ttpu_complex_div(ttpu_lower* L) {
  /* a rounding mode is not defined for complex values (CPU: "div_floor_cpu"
   * / "div_trunc_cpu" not implemented for 'ComplexFloat') */
  const char* mode = ttpu_l_str(L, 2, NULL);
  if (mode && ttpu_l_kind(L, 2) == TTPU_ARG_STR) {
    ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_UNIMPLEMENTED,
                  "\"%s\" not implemented for '%s'",
                  mode[0] == 'f' ? "div_floor_cpu" : "div_trunc_cpu",
                  ttpu_dtype_torch_title(out_dtype(L)));
    return NULL;
  }
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  if (!ttpu_dtype_is_complex(dt)) dt = out_dtype(L);
  ttpu_val x = ttpu_ew_in(L, 0, dt), y = ttpu_ew_in(L, 1, dt);
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, TTPU_DIV, x, y));
  return NULL;
}

/* r with the sign of its imaginary part (negated: the opposite sign) taken
 * from z's: where z lies on a branch cut along the real axis, the sign of
 * a zero imaginary part picks the side, as C99 does; XLA's complex
 * functions take +0 for both. */
static ttpu_val imag_sign_of(ttpu_hlo* b, ttpu_val z, ttpu_val r, int negated) {
  ttpu_val y = ttpu_hlo_imag(b, z);
  if (negated) y = ttpu_hlo_unary(b, TTPU_NEG, y);
  return ttpu_hlo_complex(b, ttpu_hlo_real(b, r),
                          ttpu_ew_copysign(b, ttpu_hlo_imag(b, r), y));
}

ttpu_status* ttpu_complex_unary(ttpu_lower* L) {
  ttpu_unop op = (ttpu_unop)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val z = ttpu_ew_in(L, 0, out_dtype(L));
  ttpu_val r = ttpu_hlo_unary(b, op, z);
  /* sqrt's cut is the negative real axis: sqrt(-x - 0i) = -i sqrt(x) */
  if (op == TTPU_SQRT) r = imag_sign_of(b, z, r, 0);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* exp with C99's special values, as the CPU's: a zero imaginary part
 * stays exactly (exp(x) + 0i, NaN + 0i too), and an infinite real part
 * with a NaN or infinite imaginary part gives inf + NaN i (+inf) or 0 + 0i
 * (-inf), where the formula exp(x) (cos y + i sin y) gives NaN. */
ttpu_val ttpu_complex_exp_v(ttpu_hlo* b, ttpu_val x) {
  ttpu_val re = ttpu_hlo_real(b, x), im = ttpu_hlo_imag(b, x);
  ttpu_val r = ttpu_hlo_unary(b, TTPU_EXP, x);
  ttpu_val bad_im = ttpu_hlo_unary(b, TTPU_NOT, ttpu_hlo_unary(b, TTPU_IS_FINITE, im));
  ttpu_val pinf = ttpu_hlo_binary(b, TTPU_AND, bad_im, ttpu_ew_cmpk(b, TTPU_EQ, re, INFINITY));
  ttpu_val ninf = ttpu_hlo_binary(b, TTPU_AND, bad_im, ttpu_ew_cmpk(b, TTPU_EQ, re, -INFINITY));
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, im, 0),
                      ttpu_hlo_complex(b, ttpu_hlo_unary(b, TTPU_EXP, re), im), r);
  r = ttpu_hlo_select(b, pinf,
                      ttpu_hlo_complex(b, re, ttpu_hlo_binary(b, TTPU_SUB, im, im)), r);
  return ttpu_hlo_select(b, ninf, ttpu_hlo_complex(b, ttpu_ew_k(b, re, 0), ttpu_ew_k(b, re, 0)), r);
}

ttpu_status* ttpu_complex_exp(ttpu_lower* L) {
  ttpu_l_set_out(L, 0, ttpu_complex_exp_v(ttpu_l_hlo(L), ttpu_ew_in(L, 0, out_dtype(L))));
  return NULL;
}

/* The CPU's formulas for the rest of the complex unary functions (c10's
 * complex math, and its vectorized kernels where they differ). */
static ttpu_val complex_log1p_v(ttpu_hlo* b, ttpu_val z) {
  /* u = 1 + z; z where u rounds to 1, log(u) where u - 1 is z exactly,
   * else log(u) z / (u - 1), which restores the digits 1 + z lost */
  ttpu_val one = ttpu_ew_k(b, z, 1);
  /* behind a barrier, or XLA folds (z + 1) - 1 back into z */
  ttpu_val u = ttpu_hlo_opaque(b, ttpu_ew_add(b, z, one));
  ttpu_val um1 = ttpu_ew_sub(b, u, one);
  ttpu_val log_u = ttpu_hlo_unary(b, TTPU_LOG, u);
  ttpu_val r = ttpu_ew_mul(b, log_u, ttpu_ew_div(b, z, um1));
  r = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, um1, z), log_u, r);
  return ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, u, one), z, r);
}

static ttpu_val complex_expm1_v(ttpu_hlo* b, ttpu_val z) {
  /* (expm1(x) cos y - 2 sin(y/2)^2) + i exp(x) sin y */
  ttpu_val x = ttpu_hlo_real(b, z), y = ttpu_hlo_imag(b, z);
  ttpu_val a = ttpu_hlo_unary(b, TTPU_SIN, ttpu_ew_mulk(b, y, 0.5));
  ttpu_val re = ttpu_ew_sub(b, ttpu_ew_mul(b, ttpu_hlo_unary(b, TTPU_EXPM1, x),
                                           ttpu_hlo_unary(b, TTPU_COS, y)),
                            ttpu_ew_mulk(b, ttpu_ew_mul(b, a, a), 2));
  ttpu_val im = ttpu_ew_mul(b, ttpu_hlo_unary(b, TTPU_EXP, x),
                            ttpu_hlo_unary(b, TTPU_SIN, y));
  return ttpu_hlo_complex(b, re, im);
}

/* r with z's imaginary part where that is zero: f(x + 0i) = f(x) + 0i for
 * the functions real on the real axis, NaN and infinite x included (C99). */
static ttpu_val keep_zero_imag(ttpu_hlo* b, ttpu_val z, ttpu_val r) {
  ttpu_val y = ttpu_hlo_imag(b, z);
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, y, 0),
                         ttpu_hlo_complex(b, ttpu_hlo_real(b, r), y), r);
}

/* C99's catanh special values on r = atanh(x + iy): an infinite x with a
 * NaN y gives 0 + NaN i, a zero x with a NaN y gives x + NaN i, a NaN
 * part with the other finite gives NaN + NaN i. */
static ttpu_val atanh_specials(ttpu_hlo* b, ttpu_val x, ttpu_val y, ttpu_val r) {
  ttpu_val nx = ttpu_ew_isnan(b, x), ny = ttpu_ew_isnan(b, y);
  ttpu_val fx = ttpu_hlo_unary(b, TTPU_IS_FINITE, x);
  ttpu_val fy = ttpu_hlo_unary(b, TTPU_IS_FINITE, y);
  ttpu_val nan = ttpu_ew_k(b, x, NAN);
  ttpu_val both_nan = ttpu_hlo_binary(b, TTPU_OR, ttpu_hlo_binary(b, TTPU_AND, nx, fy),
                                      ttpu_hlo_binary(b, TTPU_AND, ny, fx));
  r = ttpu_hlo_select(b, both_nan, ttpu_hlo_complex(b, nan, nan), r);
  ttpu_val inf_x = ttpu_ew_cmpk(b, TTPU_EQ, ttpu_hlo_unary(b, TTPU_ABS, x), INFINITY);
  r = ttpu_hlo_select(b, ttpu_hlo_binary(b, TTPU_AND, inf_x, ny),
                      ttpu_hlo_complex(b, ttpu_ew_k(b, x, 0), y), r);
  return ttpu_hlo_select(
      b, ttpu_hlo_binary(b, TTPU_AND, ttpu_ew_cmpk(b, TTPU_EQ, x, 0), ny),
      ttpu_hlo_complex(b, x, y), r);
}

ttpu_status* ttpu_complex_special(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val z = ttpu_ew_in(L, 0, out_dtype(L)), r = TTPU_VAL_ERROR;
  switch (ttpu_l_param(L)) {
    case TTPU_CX_LOG1P:
      r = complex_log1p_v(b, z);
      break;
    case TTPU_CX_EXPM1:
      r = complex_expm1_v(b, z);
      break;
    case TTPU_CX_LOG2:
    case TTPU_CX_LOG10: {
      /* log(z) with both parts divided by log(base) */
      double k = ttpu_l_param(L) == TTPU_CX_LOG2 ? log(2.0) : log(10.0);
      ttpu_val l = ttpu_hlo_unary(b, TTPU_LOG, z), re = ttpu_hlo_real(b, l);
      ttpu_val kk = ttpu_ew_k(b, re, k);
      r = ttpu_hlo_complex(b, ttpu_ew_div(b, re, kk),
                           ttpu_ew_div(b, ttpu_hlo_imag(b, l), kk));
      break;
    }
    case TTPU_CX_SIGMOID:
      /* 1 / (1 + exp(-z)) */
      r = ttpu_ew_kdiv(b, 1, ttpu_ew_addk(b, ttpu_complex_exp_v(
                                                 b, ttpu_hlo_unary(b, TTPU_NEG, z)),
                                          1));
      break;
    case TTPU_CX_TAN:
      r = keep_zero_imag(b, z, ttpu_hlo_unary(b, TTPU_TAN, z));
      break;
    case TTPU_CX_RSQRT:
      /* 1 / sqrt(z) by complex division, as the CPU (which gives NaN, not
       * 0, for infinite z) */
      r = ttpu_ew_kdiv(b, 1, imag_sign_of(b, z, ttpu_hlo_unary(b, TTPU_SQRT, z), 0));
      break;
    case TTPU_CX_EXP2: {
      /* pow(2, z) = exp(z ln 2), each part scaled alone (a complex product
       * makes inf * 0 = NaN of a zero imaginary part), with exp's special
       * values */
      ttpu_val re = ttpu_hlo_real(b, z), im = ttpu_hlo_imag(b, z);
      ttpu_val k = ttpu_ew_k(b, re, log(2.0));
      r = ttpu_complex_exp_v(
          b, ttpu_hlo_complex(b, ttpu_ew_mul(b, re, k), ttpu_ew_mul(b, im, k)));
      break;
    }
    case TTPU_CX_ASIN:
      r = imag_sign_of(b, z, ttpu_hlo_unary(b, TTPU_ASIN, z), 0);
      break;
    case TTPU_CX_ACOS:
      r = imag_sign_of(b, z, ttpu_hlo_unary(b, TTPU_ACOS, z), 1);
      break;
    case TTPU_CX_ATAN: {
      /* atan(z) = -i atanh(iz), so atanh's special values turned by i */
      ttpu_val x = ttpu_hlo_real(b, z);
      ttpu_val ny = ttpu_hlo_unary(b, TTPU_NEG, ttpu_hlo_imag(b, z));
      ttpu_val a = atanh_specials(
          b, ny, x, ttpu_hlo_unary(b, TTPU_ATANH, ttpu_hlo_complex(b, ny, x)));
      r = ttpu_hlo_complex(b, ttpu_hlo_imag(b, a),
                           ttpu_hlo_unary(b, TTPU_NEG, ttpu_hlo_real(b, a)));
      break;
    }
    case TTPU_CX_ASINH: {
      /* the cut is the imaginary axis past +-i: the real part takes the
       * sign of z's (a zero's too) */
      ttpu_val a = ttpu_hlo_unary(b, TTPU_ASINH, z);
      a = ttpu_hlo_complex(b, ttpu_ew_copysign(b, ttpu_hlo_real(b, a), ttpu_hlo_real(b, z)),
                           ttpu_hlo_imag(b, a));
      r = keep_zero_imag(b, z, a);
      break;
    }
    case TTPU_CX_ACOSH: {
      /* the principal branch has a non-negative real part; XLA's algorithm
       * may return the other sign of the same value */
      ttpu_val a = ttpu_hlo_unary(b, TTPU_ACOSH, z);
      a = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, ttpu_hlo_real(b, a), 0),
                          ttpu_hlo_unary(b, TTPU_NEG, a), a);
      /* the cut is the real axis below 1: the imaginary part takes z's sign */
      r = imag_sign_of(b, z, a, 0);
      break;
    }
    case TTPU_CX_ATANH:
      r = atanh_specials(b, ttpu_hlo_real(b, z), ttpu_hlo_imag(b, z),
                         ttpu_hlo_unary(b, TTPU_ATANH, z));
      break;
    default:
      ttpu_hlo_fail(b, TTPU_INTERNAL, "complex special function %lld",
                    (long long)ttpu_l_param(L));
      return NULL;
  }
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* sigmoid_backward(grad_output, output): g conj((1 - y) y), as the CPU. */
ttpu_status* ttpu_complex_sigmoid_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = out_dtype(L);
  ttpu_val g = ttpu_ew_in(L, 0, dt), y = ttpu_ew_in(L, 1, dt);
  ttpu_val d = ttpu_ew_mul(b, ttpu_ew_ksub(b, 1, y), y);
  d = ttpu_hlo_complex(b, ttpu_hlo_real(b, d),
                       ttpu_hlo_unary(b, TTPU_NEG, ttpu_hlo_imag(b, d)));
  ttpu_l_set_out(L, 0, ttpu_ew_mul(b, g, d));
  return NULL;
}

/* p * q, rounded before any add that uses it (see ttpu_complex_pow) */
static ttpu_val product_alone(ttpu_hlo* b, ttpu_val p, ttpu_val q) {
  ttpu_val v = ttpu_ew_mul(b, p, q);
  return ttpu_hlo_select(b, ttpu_hlo_unary(b, TTPU_IS_FINITE, v), v, ttpu_ew_add(b, v, v));
}

/* pow of complex values, as the CPU: exp(y log x) with exp's special
 * values (pow(0, 0j) is NaN, as there), and for a real Scalar exponent
 * the CPU's shortcuts: 0 -> 1, 1, 2, 3 as products, +-0.5 through sqrt,
 * -1 and -2 as reciprocals. */
ttpu_status* ttpu_complex_pow(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = out_dtype(L);
  ttpu_val x = ttpu_ew_in(L, 0, dt), y = ttpu_ew_in(L, 1, dt);
  double k;
  int real_k = ttpu_l_kind(L, 0) == TTPU_ARG_TENSOR && ttpu_l_scalar_static(L, 1, &k);
  if (real_k && ttpu_dtype_is_complex(ttpu_l_scalar_dtype(L, 1))) {
    /* a complex exponent: only 0 (0j) has a shortcut */
    real_k = k == 0 && ttpu_l_call(L)->args[1].fi == 0;
  }
  if (real_k) {
    ttpu_val r = TTPU_VAL_ERROR, one = ttpu_ew_k(b, x, 1);
    if (k == 0) r = one;
    else if (k == 1) r = x;
    else if (k == 2) r = ttpu_ew_mul(b, x, x);
    else if (k == 3) r = ttpu_ew_mul(b, ttpu_ew_mul(b, x, x), x);
    else if (k == 0.5) r = ttpu_hlo_unary(b, TTPU_SQRT, x);
    else if (k == -0.5) r = ttpu_ew_div(b, one, ttpu_hlo_unary(b, TTPU_SQRT, x));
    else if (k == -1) r = ttpu_ew_div(b, one, x);
    else if (k == -2) r = ttpu_ew_div(b, one, ttpu_ew_mul(b, x, x));
    if (r != TTPU_VAL_ERROR) {
      ttpu_l_set_out(L, 0, r);
      return NULL;
    }
  }
  /* y log x as the C library's cpow forms it (the CPU's pow): the log's
   * real part as log(|x|) and each of the four products rounded alone.
   * A fused multiply-add there moves the last bit, and for large
   * exponents that bit decides the sign of the result's infinities. XLA's
   * CPU code generator fuses a multiply feeding an add whatever HLO lies
   * between them, barriers included; a select it cannot fold (its two
   * sides are equal: p + p is p where p is not finite) keeps them apart. */
  ttpu_val lr = ttpu_hlo_unary(b, TTPU_LOG, ttpu_hlo_unary(b, TTPU_ABS, x));
  ttpu_val li = ttpu_hlo_binary(b, TTPU_ATAN2, ttpu_hlo_imag(b, x), ttpu_hlo_real(b, x));
  ttpu_val yr = ttpu_hlo_real(b, y), yi = ttpu_hlo_imag(b, y);
  ttpu_val re = ttpu_ew_sub(b, product_alone(b, yr, lr), product_alone(b, yi, li));
  ttpu_val im = ttpu_ew_add(b, product_alone(b, yr, li), product_alone(b, yi, lr));
  ttpu_l_set_out(L, 0, ttpu_complex_exp_v(b, ttpu_hlo_complex(b, re, im)));
  return NULL;
}

/* conj_physical: re - im*i (a real input is its own conjugate) */
static ttpu_status* lower_conj(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_ew_in(L, 0, out_dtype(L));
  if (ttpu_dtype_is_complex(out_dtype(L)))
    x = ttpu_hlo_complex(b, ttpu_hlo_real(b, x),
                         ttpu_hlo_unary(b, TTPU_NEG, ttpu_hlo_imag(b, x)));
  ttpu_l_set_out(L, 0, x);
  return NULL;
}

/* abs of a complex value is its (real) magnitude, hypot(re, im) */
ttpu_status* ttpu_complex_abs(ttpu_lower* L) {
  ttpu_l_set_out(L, 0, ttpu_hlo_unary(ttpu_l_hlo(L), TTPU_ABS, ttpu_l_tensor(L, 0)));
  return NULL;
}

/* angle = atan2(im, re) */
ttpu_status* ttpu_complex_angle(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  if (ttpu_dtype_is_complex(ttpu_l_type(L, x).dtype)) {
    ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, TTPU_ATAN2, ttpu_hlo_imag(b, x),
                                         ttpu_hlo_real(b, x)));
    return NULL;
  }
  /* real: pi below zero, else 0 (-0.0 too), NaN kept, as the CPU kernel */
  x = ttpu_ew_in(L, 0, ttpu_ew_opmath(out_dtype(L)));
  ttpu_val r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, x, 0),
                               ttpu_ew_k(b, x, M_PI), ttpu_ew_k(b, x, 0));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_ew_isnan(b, x), x, r));
  return NULL;
}

/* complex()/polar() take two tensors of one float dtype; the CPU kernel
 * checks what the meta kernel does not. */
static int parts_ok(ttpu_lower* L) {
  const ttpu_tensor* a = ttpu_l_tensor_desc(L, 0, -1);
  const ttpu_tensor* c = ttpu_l_tensor_desc(L, 1, -1);
  if (!a || !c) return 1;
  if (a->dtype != c->dtype) {
    ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INVALID_ARGUMENT,
                  "Expected object of scalar type %s but got scalar type %s "
                  "for second argument",
                  ttpu_dtype_torch_title(a->dtype),
                  ttpu_dtype_torch_title(c->dtype));
    return 0;
  }
  return 1;
}

static ttpu_status* lower_complex(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (!parts_ok(L)) return NULL;
  ttpu_dtype comp = ttpu_dtype_real(out_dtype(L));
  ttpu_l_set_out(L, 0, ttpu_hlo_complex(b, ttpu_ew_in(L, 0, comp),
                                        ttpu_ew_in(L, 1, comp)));
  return NULL;
}

/* polar(abs, angle) = abs*cos(angle) + abs*sin(angle)*i, as std::polar */
static ttpu_status* lower_polar(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (!parts_ok(L)) return NULL;
  ttpu_dtype comp = ttpu_dtype_real(out_dtype(L));
  ttpu_val r = ttpu_ew_in(L, 0, comp), t = ttpu_ew_in(L, 1, comp);
  ttpu_l_set_out(L, 0, ttpu_hlo_complex(
                           b, ttpu_ew_mul(b, r, ttpu_hlo_unary(b, TTPU_COS, t)),
                           ttpu_ew_mul(b, r, ttpu_hlo_unary(b, TTPU_SIN, t))));
  return NULL;
}

ttpu_status* ttpu_complex_compare(ttpu_lower* L) {
  ttpu_cmp c = (ttpu_cmp)ttpu_l_param(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_l_set_out(L, 0, ttpu_hlo_compare(ttpu_l_hlo(L), c, ttpu_ew_in(L, 0, dt),
                                        ttpu_ew_in(L, 1, dt)));
  return NULL;
}
ttpu_status* ttpu_complex_isnan(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_l_set_out(L, 0, ttpu_ew_or(b, ttpu_ew_isnan(b, ttpu_hlo_real(b, x)),
                                  ttpu_ew_isnan(b, ttpu_hlo_imag(b, x))));
  return NULL;
}

ttpu_status* ttpu_complex_reciprocal(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_ew_in(L, 0, out_dtype(L));
  ttpu_l_set_out(L, 0, ttpu_ew_div(b, ttpu_ew_k(b, x, 1), x));
  return NULL;
}

/* Comparisons PyTorch refuses for complex values with a RuntimeError (the
 * gate's NotImplementedError would be another exception type). */
ttpu_status* ttpu_complex_unordered(ttpu_lower* L) {
  const char* name = ttpu_op_name(ttpu_l_call(L)->op);
  size_t n = strcspn(name, ".");
  ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INVALID_ARGUMENT,
                "%.*s not implemented for complex tensors.", (int)n, name);
  return NULL;
}

/* ------------------------------------------------------------ products */

/* mm / bmm / mv / dot: one dot_general contracting self's last dim with
 * the other's first non-batch dim (lazy conjugates arrive resolved: the
 * glue passes values); bmm's operands (3-d) have one batch dim.
 * float32's precision setting covers complex64. */
ttpu_status* ttpu_complex_product(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  const ttpu_tensor* ta = ttpu_l_tensor_desc(L, 0, -1);
  const ttpu_tensor* tb = ttpu_l_tensor_desc(L, 1, -1);
  if (ta && tb && ta->dtype != tb->dtype) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                  "expected m1 and m2 to have the same dtype, but got: %s != %s",
                  ttpu_dtype_name(ta->dtype), ttpu_dtype_name(tb->dtype));
    return NULL;
  }
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), ot.dtype);
  ttpu_val y = ttpu_hlo_convert(b, ttpu_l_tensor(L, 1), ot.dtype);
  int nx = ttpu_l_type(L, x).ndim;
  int batch = nx == 3;
  int64_t zero = 0, cx = nx - 1, cy = batch;
  ttpu_l_set_out(L, 0, ttpu_hlo_dot_general(
                           b, x, y, &zero, &zero, batch, &cx, &cy, 1, ot.dtype,
                           ttpu_l_precision(L, ttpu_dtype_real(ot.dtype))));
  return NULL;
}


/* ------------------------------------------------------------ random */

/* uniform_(self, from, to) and normal_(self, mean, std) of a complex
 * tensor: as the CPU, each of the real and imaginary parts is drawn like
 * a real tensor's elements (normal_ with std/sqrt(2), so E|z - mean|^2 is
 * std^2); the normals come from Box-Muller on the device's random bits. */
ttpu_status* ttpu_complex_random(ttpu_lower* L) {
  int normal = (ttpu_l_param(L) & TTPU_CX_NORMAL) != 0;
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type t = ttpu_l_out_type(L, 0);
  t.dtype = ttpu_dtype_real(t.dtype);
  double p = ttpu_l_float(L, 1, 0.0), q = ttpu_l_float(L, 2, 1.0);
  if (normal && !(q >= 0.0))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "normal expects std >= 0.0, but found std %g", q);
  if (!normal && !(p <= q))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "uniform_ expects to return a [from, to) range, "
                            "but found from=%g > to=%g", p, q);
  ttpu_val u1 = ttpu_l_random_uniform(L, t), u2 = ttpu_l_random_uniform(L, t);
  ttpu_val re, im;
  if (normal) {
    ttpu_val r = ttpu_hlo_unary(
        b, TTPU_SQRT,
        ttpu_ew_mulk(b, ttpu_hlo_unary(b, TTPU_LOG, ttpu_ew_ksub(b, 1, u1)), -2));
    r = ttpu_ew_mulk(b, r, q / sqrt(2.0));
    ttpu_val a = ttpu_ew_mulk(b, u2, 2 * M_PI);
    re = ttpu_ew_addk(b, ttpu_ew_mul(b, r, ttpu_hlo_unary(b, TTPU_COS, a)), p);
    im = ttpu_ew_addk(b, ttpu_ew_mul(b, r, ttpu_hlo_unary(b, TTPU_SIN, a)), p);
  } else {
    re = ttpu_ew_addk(b, ttpu_ew_mulk(b, u1, q - p), p);
    im = ttpu_ew_addk(b, ttpu_ew_mulk(b, u2, q - p), p);
    if (p < q) { /* rounding must not reach `to` */
      ttpu_val below = ttpu_hlo_binary(b, TTPU_NEXT_AFTER, ttpu_ew_k(b, re, q),
                                       ttpu_ew_k(b, re, p));
      re = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_GE, re, q), below, re);
      im = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_GE, im, q), below, im);
    }
  }
  ttpu_l_set_out(L, 0, ttpu_hlo_complex(b, re, im));
  return NULL;
}


/* ------------------------------------------------------------ reductions */

/* sum / mean(self, int[1]? dim, bool keepdim, *, ScalarType? dtype) and
 * their out= forms: an empty or absent dim list reduces every dim. */
ttpu_status* ttpu_complex_reduce(ttpu_lower* L) {
  int mean = (ttpu_l_param(L) & TTPU_CX_MEAN) != 0;
  int all = (ttpu_l_param(L) & TTPU_CX_ALL) != 0;
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), ot.dtype);
  ttpu_type tx = ttpu_l_type(L, x);
  int n = 0; /* sum(self, *, dtype) / mean(...): every dim */
  const int64_t* dims =
      all ? NULL : ttpu_l_ints(L, 1, &n);
  int mask[TTPU_MAX_DIMS] = {0};
  for (int i = 0; i < n; ++i) {
    int64_t d = ttpu_l_dim(L, dims[i], tx.ndim);
    if (tx.ndim > 0 && d >= 0 && d < tx.ndim) mask[d] = 1;
  }
  int64_t count = 1;
  for (int d = 0; d < tx.ndim; ++d) {
    if (n == 0) mask[d] = 1;
    if (mask[d]) count *= tx.dims[d];
  }
  ttpu_val r = ttpu_l_reduce_mask(L, x, TTPU_RED_SUM, mask);
  if (mean) /* CPU divides the sum by the count (0/0 is NaN) */
    r = ttpu_ew_div(b, r, ttpu_ew_k(b, r, (double)count));
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}


/* ------------------------------------------------------------ tables */

/* New ops (complex-only math, or ops whose real case is trivial). */
const ttpu_op_def ttpu_ops_complex[] = {
    {"complex.out", lower_complex, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"polar.out", lower_polar, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"conj_physical.out", lower_conj, .flags = TTPU_OP_COMPLEX_AS_IS | TTPU_OP_SAME_DTYPE_OUT},
    {0},
};

/* The complex lowering of def's op, before a complex out= of real
 * operands is considered. */
static ttpu_lower_fn complex_lowering_of(const ttpu_op_def* def) {
  if (def->flags & TTPU_OP_COMPLEX_AS_IS) return def->fn;
  return def->complex_fn;
}

ttpu_lower_fn ttpu_complex_lowering(const ttpu_op_def* def,
                                    const ttpu_op_call* call) {
  ttpu_lower_fn fn = complex_lowering_of(def);
  /* A complex out= of real operands only receives the result: PyTorch
   * computes in the operands' result type and casts (uint8 3 - 9 into a
   * complex64 out= is 250, not -6), which is the real lowering followed
   * by the framework's conversion. Ops without a complex lowering take
   * that path only where their record says the CPU casts so
   * (TTPU_OP_REAL_INTO_COMPLEX): a dtype= argument (nansum's) makes the
   * CPU compute in complex, and some kernels refuse any other out dtype
   * (TTPU_OP_SAME_DTYPE_OUT, refused before this). */
  if ((fn || (def->flags & TTPU_OP_REAL_INTO_COMPLEX)) && only_out_complex(call))
    return def->fn;
  return fn;
}
