/* elementwise.c - binary arithmetic, comparisons, logical and bitwise ops,
 * selection (where, clamp, masked_fill) and the fused ternaries (lerp,
 * addcmul, addcdiv), with PyTorch's type promotion and CPU semantics:
 * Python-style remainder, C-style fmod, floor division as CPU rounds it,
 * NaN-propagating maximum/minimum/clamp, integer division by zero raising
 * ZeroDivisionError (a data-dependent check). Also the helpers of
 * elementwise.h shared with unary.c and activation.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "complex.h"
#include "elementwise.h"

/* ------------------------------------------------------------ helpers */

ttpu_dtype ttpu_ew_opmath(ttpu_dtype dt) {
  return dt == TTPU_BF16 || dt == TTPU_F16 ? TTPU_F32 : dt;
}

ttpu_dtype ttpu_ew_common(ttpu_lower* L) {
  ttpu_dtype dt = ttpu_l_common_dtype(L);
  return dt == TTPU_DTYPE_NONE ? ttpu_l_out_type(L, 0).dtype : dt;
}

ttpu_dtype ttpu_ew_float(ttpu_lower* L) {
  ttpu_dtype dt = ttpu_ew_common(L);
  if (ttpu_dtype_is_float(dt)) return dt;
  dt = ttpu_l_out_type(L, 0).dtype;
  return ttpu_dtype_is_float(dt) ? dt : TTPU_F32;
}

int ttpu_ew_accepts(ttpu_lower* L, ttpu_dtype dt, int kinds, const char* op) {
  int kind = dt == TTPU_BOOL ? TTPU_EW_BOOL
             : ttpu_dtype_is_float(dt) ? TTPU_EW_FLOAT
                                       : TTPU_EW_INT;
  if (kinds & kind) return 1;
  ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_UNIMPLEMENTED,
                "\"%s\" not implemented for '%s'", op, ttpu_dtype_torch_title(dt));
  return 0;
}

void ttpu_ew_set(ttpu_lower* L, ttpu_val v, ttpu_dtype dt) {
  const ttpu_type* t = ttpu_hlo_type(ttpu_l_hlo(L), v);
  if (t && t->dtype != dt && ttpu_l_out_type(L, 0).dtype != dt)
    v = ttpu_hlo_convert(ttpu_l_hlo(L), v, dt);
  ttpu_l_set_out(L, 0, v);
}

ttpu_val ttpu_ew_fit(ttpu_lower* L, ttpu_val v, ttpu_dtype dt) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type o = ttpu_l_out_type(L, 0);
  const ttpu_type* t = ttpu_hlo_type(b, v);
  /* XLA rewrites x * convert(pred) as select(pred, x, 0), which turns
   * False * NaN into 0; a detour through uint8 keeps IEEE's NaN */
  if (t && t->dtype == TTPU_BOOL && ttpu_dtype_is_float(dt))
    v = ttpu_hlo_convert(b, v, TTPU_U8);
  return ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, v, dt), o.ndim, o.dims);
}

ttpu_val ttpu_ew_in(ttpu_lower* L, int arg, ttpu_dtype dt) {
  ttpu_val v;
  switch (ttpu_l_kind(L, arg)) {
    case TTPU_ARG_TENSOR:
      v = ttpu_l_tensor(L, arg);
      break;
    case TTPU_ARG_NONE:
      return ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INTERNAL,
                           "%s: argument %d is None",
                           ttpu_op_name(ttpu_l_call(L)->op), arg);
    default: /* Scalar, or a CPU 0-d tensor the glue passed as one */
      v = ttpu_l_scalar(L, arg, dt);
      break;
  }
  return ttpu_ew_fit(L, v, dt);
}

ttpu_val ttpu_ew_round(ttpu_hlo* b, ttpu_val v, ttpu_dtype dt) {
  const ttpu_type* t = ttpu_hlo_type(b, v);
  if (!t) return TTPU_VAL_ERROR;
  if (t->dtype == dt) return v;
  ttpu_dtype own = t->dtype;
  return ttpu_hlo_convert(b, ttpu_hlo_convert(b, v, dt), own);
}

ttpu_val ttpu_ew_k(ttpu_hlo* b, ttpu_val like, double v) {
  const ttpu_type* t = ttpu_hlo_type(b, like);
  if (!t) return TTPU_VAL_ERROR;
  ttpu_type c = *t;
  /* (int64_t)inf is undefined: integral constants come from finite v */
  return ttpu_hlo_const(b, c, v, ttpu_dtype_is_float(c.dtype) ? 0 : (int64_t)v);
}

static int is_unsigned(ttpu_dtype dt) {
  return dt == TTPU_U8 || dt == TTPU_U16 || dt == TTPU_U32 || dt == TTPU_U64;
}

static int is_float_val(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* t = ttpu_hlo_type(b, x);
  return t && ttpu_dtype_is_float(t->dtype);
}

static ttpu_dtype dtype_of(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* t = ttpu_hlo_type(b, x);
  return t ? t->dtype : TTPU_DTYPE_NONE;
}

ttpu_val ttpu_ew_isnan(ttpu_hlo* b, ttpu_val x) {
  if (is_float_val(b, x)) return ttpu_hlo_compare(b, TTPU_NE, x, x);
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t) return TTPU_VAL_ERROR;
  ttpu_type r = *t;
  r.dtype = TTPU_BOOL;
  return ttpu_hlo_const(b, r, 0, 0);
}

/* select(x is NaN, x, select(y is NaN, y, op(x, y))): the plugin's own
 * maximum need not propagate NaN (fast-min-max modes). */
static ttpu_val nan_prop(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  ttpu_val r = ttpu_hlo_binary(b, op, x, y);
  if (!is_float_val(b, x)) return r;
  r = ttpu_hlo_select(b, ttpu_ew_isnan(b, y), y, r);
  return ttpu_hlo_select(b, ttpu_ew_isnan(b, x), x, r);
}

ttpu_val ttpu_ew_max(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  return nan_prop(b, TTPU_MAX, x, y);
}

ttpu_val ttpu_ew_min(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  return nan_prop(b, TTPU_MIN, x, y);
}

void ttpu_ew_check(ttpu_lower* L, ttpu_val flags, const char* msg) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  const ttpu_type* tp = ttpu_hlo_type(b, flags);
  if (!tp) return;
  ttpu_type t = *tp;
  int64_t n = ttpu_type_numel(&t), zero_dim = 0, three = 3, one = 1;
  if (n == 0) return;
  ttpu_val flat = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, flags, TTPU_BOOL), 1, &n);
  ttpu_val any = ttpu_hlo_reduce(b, flat, TTPU_RED_OR, &zero_dim, 1);
  ttpu_val flag = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, any, TTPU_I64), 1, &one);
  ttpu_val rest = ttpu_hlo_const(b, ttpu_type_make(TTPU_I64, 1, &three), 0, 0);
  ttpu_val parts[2] = {flag, rest};
  ttpu_l_check(L, ttpu_hlo_concat(b, parts, 2, 0), TTPU_INVALID_ARGUMENT, msg);
}

void ttpu_ew_check_int_divisor(ttpu_lower* L, ttpu_val divisor) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  const ttpu_type* t = ttpu_hlo_type(b, divisor);
  if (!t || !ttpu_dtype_is_int(t->dtype)) return;
  ttpu_ew_check(L, ttpu_ew_cmpk(b, TTPU_EQ, divisor, 0), "ZeroDivisionError");
}

/* ------------------------------------------------------------ arithmetic */

/* The dtype of argument `arg` as PyTorch sees it (a Scalar's own type). */
static ttpu_dtype arg_dtype(ttpu_lower* L, int arg) {
  if (ttpu_l_kind(L, arg) == TTPU_ARG_TENSOR) {
    const ttpu_tensor* t = ttpu_l_tensor_desc(L, arg, -1);
    return t ? t->dtype : TTPU_DTYPE_NONE;
  }
  return ttpu_l_scalar_dtype(L, arg);
}

/* The two operands of a binary op (args 0 and 1) in opmath of dt. */
static void operands(ttpu_lower* L, ttpu_dtype dt, ttpu_val* x, ttpu_val* y) {
  ttpu_dtype md = ttpu_ew_opmath(dt);
  *x = ttpu_ew_in(L, 0, md);
  *y = ttpu_ew_in(L, 1, md);
}

/* self (op) alpha * other; rsub swaps self and other. alpha is arg 2. */
static ttpu_status* add_like(ttpu_lower* L) {
  ttpu_binop op = (ttpu_binop)(ttpu_l_param(L) & ~TTPU_EW_REVERSED);
  int reverse = (ttpu_l_param(L) & TTPU_EW_REVERSED) != 0;
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x, y;
  operands(L, dt, &x, &y);
  if (reverse) {
    ttpu_val t = x;
    x = y;
    y = t;
  }
  if (op == TTPU_SUB && (arg_dtype(L, 0) == TTPU_BOOL || arg_dtype(L, 1) == TTPU_BOOL)) {
    /* CPU's sub_check, which the meta kernel skips for scalar operands.
     * NotImplementedError, as torch 2.14 raises it (2.11-2.13 raise its
     * base class, RuntimeError). */
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED,
                  "Subtraction, the `-` operator, with a bool tensor is not "
                  "supported. If you are trying to invert a mask, use the `~` "
                  "or `logical_not()` operator instead.");
    return NULL;
  }
  int is_bool = dt == TTPU_BOOL;
  if (!ttpu_l_is_none(L, 2)) { /* the CPU kernel's alpha_check */
    ttpu_dtype at = arg_dtype(L, 2);
    if (at == TTPU_BOOL && !is_bool) {
      ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "Boolean alpha only supported for Boolean results.");
      return NULL;
    }
    if ((ttpu_dtype_is_float(at) || ttpu_dtype_is_complex(at)) &&
        !ttpu_dtype_is_float(dt) && !ttpu_dtype_is_complex(dt)) {
      ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                    "For integral input tensors, argument alpha must not be a "
                    "floating point number.");
      return NULL;
    }
    ttpu_val a = ttpu_ew_in(L, 2, ttpu_ew_opmath(dt));
    y = ttpu_hlo_binary(b, is_bool ? TTPU_AND : TTPU_MUL, y, a);
  }
  if (is_bool) op = TTPU_OR;
  ttpu_ew_set(L, ttpu_hlo_binary(b, op, x, y), dt);
  return NULL;
}

static ttpu_status* lower_mul(ttpu_lower* L) {
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x, y;
  operands(L, dt, &x, &y);
  ttpu_ew_set(L, ttpu_hlo_binary(ttpu_l_hlo(L), dt == TTPU_BOOL ? TTPU_AND : TTPU_MUL, x, y),
              dt);
  return NULL;
}

static ttpu_val trunc_float(ttpu_hlo* b, ttpu_val q) {
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, q, 0),
                         ttpu_hlo_unary(b, TTPU_CEIL, q),
                         ttpu_hlo_unary(b, TTPU_FLOOR, q));
}

/* Floor division of floats exactly as CPU's div_floor_floating: from the
 * fmod remainder rather than floor(a / b), which rounds 1 // 0.1 up to 10. */
static ttpu_val floordiv_float(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  ttpu_val mod = ttpu_hlo_binary(b, TTPU_REM, x, y);
  ttpu_val div = ttpu_ew_div(b, ttpu_ew_sub(b, x, mod), y);
  ttpu_val fix = ttpu_ew_and(
      b, ttpu_ew_cmpk(b, TTPU_NE, mod, 0),
      ttpu_hlo_compare(b, TTPU_NE, ttpu_ew_cmpk(b, TTPU_LT, y, 0),
                       ttpu_ew_cmpk(b, TTPU_LT, mod, 0)));
  div = ttpu_hlo_select(b, fix, ttpu_ew_addk(b, div, -1), div);
  ttpu_val fl = ttpu_hlo_unary(b, TTPU_FLOOR, div);
  fl = ttpu_hlo_select(b,
                       ttpu_ew_cmpk(b, TTPU_GT, ttpu_ew_sub(b, div, fl), 0.5),
                       ttpu_ew_addk(b, fl, 1), fl);
  /* a zero quotient keeps the sign of a / b */
  ttpu_val q = ttpu_ew_div(b, x, y);
  ttpu_val zero = ttpu_ew_k(b, q, 0);
  ttpu_val signed_zero = ttpu_hlo_select(
      b, ttpu_ew_cmpk(b, TTPU_LT, q, 0), ttpu_ew_k(b, q, -0.0), zero);
  fl = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, div, 0), signed_zero, fl);
  /* division by zero: the IEEE quotient */
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, y, 0), q, fl);
}

/* Integer floor division: truncation corrected when the signs differ. */
static ttpu_val floordiv_int(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  ttpu_val q = ttpu_ew_div(b, x, y);
  ttpu_val r = ttpu_hlo_binary(b, TTPU_REM, x, y);
  ttpu_val fix = ttpu_ew_and(
      b, ttpu_ew_cmpk(b, TTPU_NE, r, 0),
      ttpu_hlo_compare(b, TTPU_NE, ttpu_ew_cmpk(b, TTPU_LT, r, 0),
                       ttpu_ew_cmpk(b, TTPU_LT, y, 0)));
  return ttpu_hlo_select(b, fix, ttpu_ew_addk(b, q, -1), q);
}

/* Where div_mode's rounding mode comes from (its param). */
enum { DIV_TRUE, DIV_FLOOR, DIV_MODE_ARG };

/* div with rounding mode NULL (true division), "trunc" or "floor": none
 * (div), "floor" (floor_divide) or arg 2 (div.Tensor_mode / Scalar_mode,
 * None: true division). */
static ttpu_status* div_mode(ttpu_lower* L) {
  int from = (int)ttpu_l_param(L);
  const char* mode = from == DIV_FLOOR      ? "floor"
                     : from == DIV_MODE_ARG ? ttpu_l_str(L, 2, NULL)
                                            : NULL;
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x, y;
  if (!mode) {
    ttpu_dtype dt = ttpu_ew_float(L);
    operands(L, dt, &x, &y);
    ttpu_ew_set(L, ttpu_ew_div(b, x, y), dt);
    return NULL;
  }
  int floor = mode[0] == 'f';
  ttpu_dtype dt = ttpu_ew_common(L);
  if (!ttpu_ew_accepts(L, dt, TTPU_EW_NUM, floor ? "div_floor_cpu" : "div_trunc_cpu"))
    return NULL;
  /* CPU rounds a / b to half/bfloat16 before truncating or flooring it,
   * so these run in the narrow type itself, not in opmath */
  x = ttpu_ew_in(L, 0, dt);
  y = ttpu_ew_in(L, 1, dt);
  ttpu_val q;
  if (ttpu_dtype_is_float(dt)) {
    q = floor ? floordiv_float(b, x, y) : trunc_float(b, ttpu_ew_div(b, x, y));
  } else {
    ttpu_ew_check_int_divisor(L, y);
    q = floor ? floordiv_int(b, x, y) : ttpu_ew_div(b, x, y);
  }
  ttpu_l_set_out(L, 0, q);
  return NULL;
}


/* remainder (Python's %, sign of the divisor) and fmod (C's, sign of the
 * dividend). */
static ttpu_status* rem_like(ttpu_lower* L) {
  int python = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x, y;
  operands(L, dt, &x, &y);
  if (!ttpu_dtype_is_float(dt)) ttpu_ew_check_int_divisor(L, y);
  ttpu_val m = ttpu_hlo_binary(b, TTPU_REM, x, y);
  if (python) {
    ttpu_val fix = ttpu_ew_and(
        b, ttpu_ew_cmpk(b, TTPU_NE, m, 0),
        ttpu_hlo_compare(b, TTPU_NE, ttpu_ew_cmpk(b, TTPU_LT, y, 0),
                         ttpu_ew_cmpk(b, TTPU_LT, m, 0)));
    m = ttpu_hlo_select(b, fix, ttpu_ew_add(b, m, y), m);
  }
  ttpu_l_set_out(L, 0, m);
  return NULL;
}

/* Integer power as CPU's powi: exponentiation by squaring, wrapping, over
 * every bit of the exponent (the plugin's own integer power is not exact
 * modulo 2^bits for large exponents); for e < 0: 1 for base 1, +-1 for
 * base -1, else 0. */
static ttpu_val pow_int(ttpu_hlo* b, ttpu_val x, ttpu_val e) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_dtype dt = tp->dtype;
  int is_signed = !is_unsigned(dt);
  int bits = (int)ttpu_dtype_size(dt) * 8 - is_signed;
  ttpu_val one = ttpu_ew_k(b, x, 1), zero = ttpu_ew_k(b, x, 0);
  ttpu_val acc = one, base = x, rest = e;
  for (int k = 0; k < bits; ++k) {
    ttpu_val bit = ttpu_ew_cmpk(b, TTPU_NE, ttpu_hlo_binary(b, TTPU_AND, rest, one), 0);
    acc = ttpu_hlo_select(b, bit, ttpu_ew_mul(b, acc, base), acc);
    if (k + 1 < bits) {
      base = ttpu_ew_mul(b, base, base);
      rest = ttpu_hlo_binary(b, TTPU_SHR_L, rest, one);
    }
  }
  if (!is_signed) return acc;
  ttpu_val odd = ttpu_ew_cmpk(b, TTPU_NE, ttpu_hlo_binary(b, TTPU_AND, e, one), 0);
  ttpu_val inv = ttpu_hlo_select(
      b, ttpu_ew_cmpk(b, TTPU_EQ, x, 1), one,
      ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, x, -1),
                      ttpu_hlo_select(b, odd, ttpu_ew_k(b, x, -1), one), zero));
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, e, 0), inv, acc);
}

static ttpu_val pow_values(ttpu_hlo* b, ttpu_val x, ttpu_val e) {
  if (!is_float_val(b, x)) return pow_int(b, x, e);
  return ttpu_hlo_binary(b, TTPU_POW, x, e);
}

/* pow.Tensor_Tensor / pow.Scalar / pow_.Tensor */
static ttpu_status* lower_pow(ttpu_lower* L) {
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x, e;
  operands(L, dt, &x, &e);
  ttpu_l_set_out(L, 0, pow_values(ttpu_l_hlo(L), x, e));
  return NULL;
}

/* pow.Tensor_Scalar / pow_.Scalar: CPU answers exponents 2, +-0.5 and -1
 * (among others) with x*x, sqrt, rsqrt and 1/x, which are exact where pow()
 * need not be (and differ at -0.0 and -inf); the exponent is runtime data,
 * so each is a select. Integer tensors refuse negative integer exponents. */
static ttpu_status* lower_pow_scalar(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x, e;
  operands(L, dt, &x, &e);
  if (!ttpu_dtype_is_float(dt)) {
    ttpu_val ek = ttpu_l_scalar(L, 1, TTPU_I64);
    ttpu_ew_check(L, ttpu_ew_cmpk(b, TTPU_LT, ek, 0),
                  "Integers to negative integer powers are not allowed.");
    ttpu_l_set_out(L, 0, pow_int(b, x, e));
    return NULL;
  }
  if (dt == TTPU_F16) {
    /* CPU's half kernel: plain pow, with the exponent rounded to half */
    e = ttpu_hlo_convert(b, ttpu_hlo_convert(b, e, TTPU_F16), TTPU_F32);
    ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, TTPU_POW, x, e));
    return NULL;
  }
  double k;
  if (ttpu_l_scalar_static(L, 1, &k) && !ttpu_dtype_is_complex(ttpu_l_scalar_dtype(L, 1))) {
    /* the exponent as the value itself: the one branch the selects below
     * would take (compared after the exponent's conversion to dt, as they
     * compare it) */
    float kf = (float)k;
    double kd = dt == TTPU_F64 ? k : (double)kf;
    ttpu_val r;
    if (kd == 2) r = ttpu_ew_mul(b, x, x);
    else if (kd == 0.5) r = ttpu_hlo_unary(b, TTPU_SQRT, x);
    else if (kd == -1) r = ttpu_ew_kdiv(b, 1, x);
    else if (kd == -0.5) r = ttpu_hlo_unary(b, TTPU_RSQRT, x);
    else r = ttpu_hlo_binary(b, TTPU_POW, x, e);
    ttpu_l_set_out(L, 0, r);
    return NULL;
  }
  ttpu_val r = ttpu_hlo_binary(b, TTPU_POW, x, e);
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, e, 2), ttpu_ew_mul(b, x, x), r);
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, e, 0.5), ttpu_hlo_unary(b, TTPU_SQRT, x), r);
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, e, -1), ttpu_ew_kdiv(b, 1, x), r);
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, e, -0.5), ttpu_hlo_unary(b, TTPU_RSQRT, x), r);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

static ttpu_status* lower_atan2(ttpu_lower* L) {
  ttpu_val x, y;
  operands(L, ttpu_ew_float(L), &x, &y);
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(ttpu_l_hlo(L), TTPU_ATAN2, x, y));
  return NULL;
}

static ttpu_status* lower_maximum(ttpu_lower* L) {
  ttpu_val x, y;
  operands(L, ttpu_ew_common(L), &x, &y);
  ttpu_l_set_out(L, 0, ttpu_ew_max(ttpu_l_hlo(L), x, y));
  return NULL;
}

static ttpu_status* lower_minimum(ttpu_lower* L) {
  ttpu_val x, y;
  operands(L, ttpu_ew_common(L), &x, &y);
  ttpu_l_set_out(L, 0, ttpu_ew_min(ttpu_l_hlo(L), x, y));
  return NULL;
}

/* fmax/fmin: a NaN loses to a number. */
static ttpu_status* fmax_like(ttpu_lower* L) {
  ttpu_binop op = (ttpu_binop)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x, y;
  operands(L, ttpu_ew_common(L), &x, &y);
  ttpu_val r = ttpu_hlo_binary(b, op, x, y);
  if (is_float_val(b, x)) {
    r = ttpu_hlo_select(b, ttpu_ew_isnan(b, y), x, r);
    r = ttpu_hlo_select(b, ttpu_ew_isnan(b, x), y, r);
  }
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* hypot as std::hypot: scaled so that neither square overflows, and an
 * infinity wins over a NaN. */
static ttpu_status* lower_hypot(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x, y;
  operands(L, dt, &x, &y);
  x = ttpu_hlo_unary(b, TTPU_ABS, x);
  y = ttpu_hlo_unary(b, TTPU_ABS, y);
  ttpu_val hi = ttpu_hlo_binary(b, TTPU_MAX, x, y);
  ttpu_val lo = ttpu_hlo_binary(b, TTPU_MIN, x, y);
  ttpu_val ratio = ttpu_ew_div(b, lo, hi);
  ttpu_val r = ttpu_ew_mul(
      b, hi, ttpu_hlo_unary(b, TTPU_SQRT, ttpu_ew_addk(b, ttpu_ew_mul(b, ratio, ratio), 1)));
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, hi, 0), ttpu_ew_k(b, r, 0), r);
  ttpu_val nan = ttpu_ew_or(b, ttpu_ew_isnan(b, x), ttpu_ew_isnan(b, y));
  r = ttpu_hlo_select(b, nan, ttpu_ew_k(b, r, NAN), r);
  ttpu_val inf = ttpu_ew_or(b, ttpu_ew_cmpk(b, TTPU_EQ, x, INFINITY),
                            ttpu_ew_cmpk(b, TTPU_EQ, y, INFINITY));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, inf, ttpu_ew_k(b, r, INFINITY), r));
  return NULL;
}

ttpu_val ttpu_ew_sign_bit(ttpu_hlo* b, ttpu_val x) {
  ttpu_type t = *ttpu_hlo_type(b, x);
  ttpu_dtype it = ttpu_dtype_size(t.dtype) == 8   ? TTPU_I64
                  : ttpu_dtype_size(t.dtype) == 4 ? TTPU_I32
                                                  : TTPU_I16;
  ttpu_type bt = t;
  bt.dtype = it;
  return ttpu_ew_cmpk(b, TTPU_LT, ttpu_hlo_bitcast(b, x, bt), 0);
}

ttpu_val ttpu_ew_copysign(ttpu_hlo* b, ttpu_val v, ttpu_val s) {
  ttpu_val a = ttpu_hlo_unary(b, TTPU_ABS, v);
  return ttpu_hlo_select(b, ttpu_ew_sign_bit(b, s), ttpu_hlo_unary(b, TTPU_NEG, a), a);
}

static ttpu_status* lower_copysign(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x, y;
  operands(L, ttpu_ew_float(L), &x, &y);
  ttpu_l_set_out(L, 0, ttpu_ew_copysign(b, x, y));
  return NULL;
}

/* xlogy: 0 where x == 0 (unless y is NaN). */
static ttpu_status* lower_xlogy(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x, y;
  operands(L, ttpu_ew_float(L), &x, &y);
  ttpu_val r = ttpu_ew_mul(b, x, ttpu_hlo_unary(b, TTPU_LOG, y));
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, x, 0), ttpu_ew_k(b, r, 0), r);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_ew_isnan(b, y), y, r));
  return NULL;
}

/* logaddexp(2): max + log1p(exp(-|x - y|)), equal infinities kept. */
static ttpu_status* logaddexp_like(ttpu_lower* L) {
  int base2 = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x, y;
  operands(L, dt, &x, &y);
  const double ln2 = 0.693147180559945309417232121458176568;
  ttpu_val m = ttpu_hlo_binary(b, TTPU_MAX, x, y);
  ttpu_val d = ttpu_hlo_unary(b, TTPU_NEG, ttpu_hlo_unary(b, TTPU_ABS, ttpu_ew_sub(b, x, y)));
  ttpu_val r;
  if (base2) {
    ttpu_val p = ttpu_hlo_unary(b, TTPU_EXP, ttpu_ew_mulk(b, d, ln2));
    r = ttpu_ew_add(b, m, ttpu_ew_mulk(b, ttpu_hlo_unary(b, TTPU_LOG1P, p), 1 / ln2));
  } else {
    r = ttpu_ew_add(b, m, ttpu_hlo_unary(b, TTPU_LOG1P, ttpu_hlo_unary(b, TTPU_EXP, d)));
  }
  ttpu_val same_inf = ttpu_ew_and(
      b, ttpu_hlo_compare(b, TTPU_EQ, x, y),
      ttpu_ew_cmpk(b, TTPU_EQ, ttpu_hlo_unary(b, TTPU_ABS, x), INFINITY));
  r = ttpu_hlo_select(b, same_inf, x, r);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* heaviside(x, values): values where x == 0, else x > 0. */
static ttpu_status* lower_heaviside(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  const ttpu_tensor* a = ttpu_l_tensor_desc(L, 0, -1);
  const ttpu_tensor* c = ttpu_l_tensor_desc(L, 1, -1);
  if (a && c && a->dtype != c->dtype) /* the CPU kernel's check */
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "heaviside is not yet implemented for tensors with "
                            "different dtypes.");
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x, v;
  operands(L, dt, &x, &v);
  ttpu_val pos = ttpu_hlo_convert(b, ttpu_ew_cmpk(b, TTPU_GT, x, 0), dtype_of(b, x));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, x, 0), v, pos));
  return NULL;
}

/* ------------------------------------------------------------ bitwise */

static ttpu_status* bitwise(ttpu_lower* L, ttpu_binop op) {
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x, y;
  operands(L, dt, &x, &y);
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(ttpu_l_hlo(L), op, x, y));
  return NULL;
}

static ttpu_status* lower_bitwise_and(ttpu_lower* L) {
  return bitwise(L, TTPU_AND);
}
static ttpu_status* lower_bitwise_or(ttpu_lower* L) {
  return bitwise(L, TTPU_OR);
}
static ttpu_status* lower_bitwise_xor(ttpu_lower* L) {
  return bitwise(L, TTPU_XOR);
}

static ttpu_status* lower_bitwise_not(ttpu_lower* L) {
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_l_set_out(L, 0, ttpu_hlo_unary(ttpu_l_hlo(L), TTPU_NOT, ttpu_ew_in(L, 0, dt)));
  return NULL;
}

/* Shifts: StableHLO's out-of-range rules are CPU's (a shift by >= the bit
 * width or by a negative amount gives 0, or the sign for arithmetic right
 * shifts). */
static ttpu_status* shift(ttpu_lower* L) {
  int left = (int)ttpu_l_param(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x, y;
  operands(L, dt, &x, &y);
  ttpu_binop op = left ? TTPU_SHL : is_unsigned(dt) ? TTPU_SHR_L : TTPU_SHR_A;
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(ttpu_l_hlo(L), op, x, y));
  return NULL;
}

/* ------------------------------------------------------------ logical */

static ttpu_status* logical(ttpu_lower* L) {
  int which = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_ew_in(L, 0, TTPU_BOOL);
  ttpu_val r;
  if (which == 3) {
    r = ttpu_hlo_unary(b, TTPU_NOT, x);
  } else {
    ttpu_val y = ttpu_ew_in(L, 1, TTPU_BOOL);
    r = ttpu_hlo_binary(b, which == 0 ? TTPU_AND : which == 1 ? TTPU_OR : TTPU_XOR,
                        x, y);
  }
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* ------------------------------------------------------------ comparison */

static ttpu_status* compare(ttpu_lower* L) {
  ttpu_cmp c = (ttpu_cmp)ttpu_l_param(L);
  ttpu_val x, y;
  operands(L, ttpu_ew_common(L), &x, &y);
  ttpu_l_set_out(L, 0, ttpu_hlo_compare(ttpu_l_hlo(L), c, x, y));
  return NULL;
}

/* z (c + 0i), z = re + im i, as the CPU's complex product with a real
 * Scalar: (re c - im 0, re 0 + im c), so a NaN or infinite part spreads
 * to both parts. */
static ttpu_val times_real(ttpu_hlo* b, ttpu_val re, ttpu_val im, double c) {
  return ttpu_hlo_complex(b, ttpu_ew_sub(b, ttpu_ew_mulk(b, re, c), ttpu_ew_mulk(b, im, 0)),
                          ttpu_ew_add(b, ttpu_ew_mulk(b, re, 0), ttpu_ew_mulk(b, im, c)));
}

/* isclose(self, other, rtol, atol, equal_nan) for floating and complex
 * operands of one dtype (the glue decomposes the others, as PyTorch's
 * composite form does): one program where the composite form runs a
 * dozen (eq, isnan, mul, abs, add, sub, isfinite's three, le, and, or).
 * The same steps in the same order, each half/bfloat16 result rounded as
 * its own op would store it, the tolerances in the opmath type as the
 * CPU's kernels read a Scalar:
 *   close = self == other | (equal_nan & isnan(self) & isnan(other))
 *         | isfinite(|self - other|) & |self - other| <= atol + |rtol * other|
 * (with both tolerances zero, the equality alone). */
static ttpu_status* lower_isclose(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_l_type(L, ttpu_l_tensor(L, 0)).dtype;
  double rtol = ttpu_l_float(L, 2, 1e-5), atol = ttpu_l_float(L, 3, 1e-8);
  int equal_nan = ttpu_l_bool(L, 4, 0);
  int cx = ttpu_dtype_is_complex(dt);
  ttpu_dtype rdt = cx ? ttpu_dtype_real(dt) : dt;
  ttpu_dtype op = ttpu_ew_opmath(rdt);
  ttpu_val x = ttpu_ew_in(L, 0, dt), y = ttpu_ew_in(L, 1, dt);
  ttpu_val close = ttpu_hlo_compare(b, TTPU_EQ, x, y);
  if (equal_nan) {
    ttpu_val nx = cx ? ttpu_ew_or(b, ttpu_ew_isnan(b, ttpu_hlo_real(b, x)), ttpu_ew_isnan(b, ttpu_hlo_imag(b, x)))
                     : ttpu_ew_isnan(b, x);
    ttpu_val ny = cx ? ttpu_ew_or(b, ttpu_ew_isnan(b, ttpu_hlo_real(b, y)), ttpu_ew_isnan(b, ttpu_hlo_imag(b, y)))
                     : ttpu_ew_isnan(b, y);
    close = ttpu_ew_or(b, close, ttpu_ew_and(b, nx, ny));
  }
  if (rtol == 0 && atol == 0) {
    ttpu_l_set_out(L, 0, close);
    return NULL;
  }
  ttpu_val allowed, actual;
  if (cx) {
    /* rtol * other, and self - other as the CPU's self + (-1 + 0i) other */
    ttpu_val yr = ttpu_hlo_real(b, y), yi = ttpu_hlo_imag(b, y);
    allowed = ttpu_hlo_unary(b, TTPU_ABS, times_real(b, yr, yi, rtol));
    actual = ttpu_hlo_unary(b, TTPU_ABS, ttpu_ew_add(b, x, times_real(b, yr, yi, -1)));
  } else {
    ttpu_val xo = ttpu_hlo_convert(b, x, op), yo = ttpu_hlo_convert(b, y, op);
    allowed = ttpu_hlo_unary(b, TTPU_ABS, ttpu_ew_round(b, ttpu_ew_mulk(b, yo, rtol), rdt));
    actual = ttpu_hlo_unary(b, TTPU_ABS, ttpu_ew_round(b, ttpu_ew_sub(b, xo, yo), rdt));
  }
  allowed = ttpu_ew_round(b, ttpu_ew_addk(b, allowed, atol), rdt);
  ttpu_val finite = ttpu_ew_cmpk(b, TTPU_LT, actual, INFINITY); /* false for NaN too */
  ttpu_val within = ttpu_hlo_compare(b, TTPU_LE, actual, allowed);
  ttpu_l_set_out(L, 0, ttpu_ew_or(b, close, ttpu_ew_and(b, finite, within)));
  return NULL;
}

/* ------------------------------------------------------------ selection */

/* where.self(condition, self, other): in the result type of self/other
 * (the condition takes no part in promotion). */
static ttpu_status* lower_where(ttpu_lower* L) {
  ttpu_dtype dt = ttpu_l_out_type(L, 0).dtype;
  ttpu_val c = ttpu_ew_in(L, 0, TTPU_BOOL);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(ttpu_l_hlo(L), c, ttpu_ew_in(L, 1, dt),
                                       ttpu_ew_in(L, 2, dt)));
  return NULL;
}

/* clamp(self, min?, max?) for Scalar and Tensor bounds alike:
 * min(max(x, lo), hi), so lo > hi gives hi; NaN anywhere gives NaN. */
static ttpu_status* clamp_args(ttpu_lower* L) {
  int lo_arg = (int)ttpu_l_param_at(L, 0);
  int hi_arg = (int)ttpu_l_param_at(L, 1);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  int tensor_bounds = ttpu_l_kind(L, lo_arg) == TTPU_ARG_TENSOR ||
                      ttpu_l_kind(L, hi_arg) == TTPU_ARG_TENSOR;
  if (!ttpu_ew_accepts(L, dt, tensor_bounds ? TTPU_EW_ALL : TTPU_EW_NUM,
                       "clamp_scalar_cpu"))
    return NULL;
  ttpu_dtype md = ttpu_ew_opmath(dt);
  ttpu_val x = ttpu_ew_in(L, 0, md);
  if (lo_arg >= 0 && !ttpu_l_is_none(L, lo_arg))
    x = ttpu_ew_max(b, x, ttpu_ew_in(L, lo_arg, md));
  if (hi_arg >= 0 && !ttpu_l_is_none(L, hi_arg))
    x = ttpu_ew_min(b, x, ttpu_ew_in(L, hi_arg, md));
  ttpu_l_set_out(L, 0, x);
  return NULL;
}

/* masked_fill(self, mask, value): value converted to self's dtype as CPU
 * does (a float truncated into an integer tensor). */
static ttpu_status* lower_masked_fill(ttpu_lower* L) {
  ttpu_dtype dt = ttpu_l_out_type(L, 0).dtype;
  ttpu_val m = ttpu_ew_in(L, 1, TTPU_BOOL);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(ttpu_l_hlo(L), m, ttpu_ew_in(L, 2, dt),
                                       ttpu_ew_in(L, 0, dt)));
  return NULL;
}

/* ------------------------------------------------------------ ternary */

/* lerp as CPU: from the nearer end, so weight 1 gives `end` exactly. */
static ttpu_status* lower_lerp(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  /* lerp does not promote: the weight Scalar must not make an integer
   * self look floating */
  ttpu_dtype dt = ttpu_l_out_type(L, 0).dtype;
  /* the CPU's kernel for a weight tensor and the one for a Scalar */
  const char* kernel = strstr(ttpu_op_name(ttpu_l_call(L)->op), ".Tensor")
                           ? "lerp_kernel_tensor" : "lerp_kernel_scalar";
  if (!ttpu_ew_accepts(L, dt, TTPU_EW_FLOAT, kernel)) return NULL;
  ttpu_dtype md = ttpu_ew_opmath(dt);
  ttpu_val s = ttpu_ew_in(L, 0, md), e = ttpu_ew_in(L, 1, md);
  ttpu_val w = ttpu_ew_in(L, 2, md);
  ttpu_val d = ttpu_ew_sub(b, e, s);
  ttpu_val small = ttpu_ew_cmpk(b, TTPU_LT, ttpu_hlo_unary(b, TTPU_ABS, w), 0.5);
  ttpu_val near = ttpu_ew_add(b, s, ttpu_ew_mul(b, w, d));
  ttpu_val far = ttpu_ew_sub(b, e, ttpu_ew_mul(b, d, ttpu_ew_ksub(b, 1, w)));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, small, near, far));
  return NULL;
}

/* The C++ name of the type a CPU kernel converts a Scalar to, as its
 * overflow message names it. */
static const char* c_type_name(ttpu_dtype dt) {
  switch (dt) {
    case TTPU_F64: return "double";
    case TTPU_I64: return "int64_t";
    case TTPU_I32: return "int";
    case TTPU_I16: return "int16_t";
    case TTPU_I8: return "int8_t";
    case TTPU_U8: return "uint8_t";
    case TTPU_BF16: return "c10::BFloat16";
    case TTPU_F16: return "c10::Half";
    default: return "float";
  }
}

ttpu_val ttpu_ew_scalar_to(ttpu_lower* L, int arg, ttpu_dtype dt, ttpu_dtype cpu_type) {
  ttpu_dtype vt = ttpu_l_scalar_dtype(L, arg);
  if (ttpu_dtype_is_complex(dt) || !ttpu_dtype_is_complex(vt))
    return ttpu_l_scalar(L, arg, dt);
  /* a complex value converts to a real type only without an imaginary
   * part (the CPU's checked conversion) */
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val z = ttpu_l_scalar(L, arg, vt);
  char msg[80];
  snprintf(msg, sizeof msg, "value cannot be converted to type %s without overflow",
           c_type_name(cpu_type));
  ttpu_ew_check(L, ttpu_ew_cmpk(b, TTPU_NE, ttpu_hlo_imag(b, z), 0), msg);
  return ttpu_hlo_convert(b, ttpu_hlo_real(b, z), dt);
}

/* addcmul: self + value * t1 * t2; addcdiv: self + value * t1 / t2 (in
 * CPU's order of evaluation), complex tensors too. */
static ttpu_status* addc(ttpu_lower* L) {
  int divide = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  /* `value` takes no part in promotion (2.5 is 2 for integer tensors) */
  ttpu_dtype dt = ttpu_l_out_type(L, 0).dtype;
  int cx = ttpu_dtype_is_complex(dt);
  if (!cx && !ttpu_ew_accepts(L, dt, divide ? TTPU_EW_FLOAT : TTPU_EW_NUM,
                              divide ? "addcdiv_cpu" : "addcmul_cpu_out"))
    return NULL;
  ttpu_dtype md = ttpu_ew_opmath(dt);
  ttpu_val s = ttpu_ew_in(L, 0, md), t1 = ttpu_ew_in(L, 1, md);
  ttpu_val t2 = ttpu_ew_in(L, 2, md), v;
  if (!cx && ttpu_dtype_is_complex(ttpu_l_scalar_dtype(L, 3)))
    v = ttpu_ew_fit(L, ttpu_ew_scalar_to(L, 3, md, md), md);
  else
    v = ttpu_ew_in(L, 3, md);
  ttpu_val p = ttpu_ew_mul(b, v, t1);
  p = ttpu_hlo_binary(b, divide ? TTPU_DIV : TTPU_MUL, p, t2);
  ttpu_l_set_out(L, 0, ttpu_ew_add(b, s, p));
  return NULL;
}

/* Functional, in-place and out= overloads share a lowering: the operands
 * are the same leading arguments, and the framework writes output 0
 * wherever it lives. */
const ttpu_op_def ttpu_ops_elementwise[] = {
    {"add.Tensor", add_like, .param = TTPU_ADD, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .complex_fn = ttpu_complex_arith},
    {"add.Scalar", add_like, .param = TTPU_ADD, .variants = TTPU_V_INPLACE, .complex_fn = ttpu_complex_arith},
    {"add.Scalar_out", add_like, .param = TTPU_ADD},
    {"sub.Tensor", add_like, .param = TTPU_SUB, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .complex_fn = ttpu_complex_arith},
    {"sub.Scalar", add_like, .param = TTPU_SUB, .variants = TTPU_V_INPLACE, .complex_fn = ttpu_complex_arith},
    {"sub.Scalar_out", add_like, .param = TTPU_SUB},
    {"rsub.Tensor", add_like, .param = TTPU_SUB | TTPU_EW_REVERSED, .complex_fn = ttpu_complex_arith},
    {"rsub.Scalar", add_like, .param = TTPU_SUB | TTPU_EW_REVERSED, .complex_fn = ttpu_complex_arith},
    {"rsub.Tensor_out", add_like, .param = TTPU_SUB | TTPU_EW_REVERSED},
    {"rsub.Scalar_out", add_like, .param = TTPU_SUB | TTPU_EW_REVERSED},
    {"mul.Tensor", lower_mul, .param = TTPU_MUL, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .complex_fn = ttpu_complex_arith},
    {"mul.Scalar", lower_mul, .param = TTPU_MUL, .variants = TTPU_V_INPLACE, .complex_fn = ttpu_complex_arith},
    {"mul.Scalar_out", lower_mul, .param = TTPU_MUL},
    {"div.Tensor", div_mode, .param = DIV_TRUE, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .complex_fn = ttpu_complex_div},
    {"div.Scalar", div_mode, .param = DIV_TRUE, .variants = TTPU_V_INPLACE, .complex_fn = ttpu_complex_div},
    {"div.Scalar_out", div_mode, .param = DIV_TRUE},
    {"div.Tensor_mode", div_mode, .param = DIV_MODE_ARG, .variants = TTPU_V_INPLACE, .complex_fn = ttpu_complex_div},
    {"div.out_mode", div_mode, .param = DIV_MODE_ARG, .complex_fn = ttpu_complex_div},
    {"div.Scalar_mode", div_mode, .param = DIV_MODE_ARG, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT},
    {"floor_divide", div_mode, .param = DIV_FLOOR, .variants = TTPU_V_OUT},
    {"floor_divide_.Tensor", div_mode, .param = DIV_FLOOR},
    {"floor_divide.Scalar", div_mode, .param = DIV_FLOOR, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT},
    {"remainder.Tensor", rem_like, .param = 1, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_NUM, .kernel = "remainder_cpu"},
    {"remainder.Scalar", rem_like, .param = 1, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_NUM, .kernel = "remainder_cpu"},
    {"remainder.Scalar_Tensor", rem_like, .param = 1, .variants = TTPU_V_OV_OUT, .kinds = TTPU_K_NUM, .kernel = "remainder_cpu"},
    {"fmod.Tensor", rem_like, .param = 0, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_NUM, .kernel = "fmod_cpu"},
    {"fmod.Scalar", rem_like, .param = 0, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_NUM, .kernel = "fmod_cpu"},
    {"pow.Tensor_Tensor", lower_pow, .variants = TTPU_V_OV_OUT, .kinds = TTPU_K_NUM, .kernel = "pow", .complex_fn = ttpu_complex_pow},
    {"pow_.Tensor", lower_pow, .kinds = TTPU_K_NUM, .kernel = "pow", .complex_fn = ttpu_complex_pow},
    {"pow.Scalar", lower_pow, .variants = TTPU_V_OV_OUT, .kinds = TTPU_K_NUM, .kernel = "pow", .complex_fn = ttpu_complex_pow},
    {"pow.Tensor_Scalar", lower_pow_scalar, .variants = TTPU_V_OV_OUT, .kinds = TTPU_K_NUM, .kernel = "pow", .complex_fn = ttpu_complex_pow,
     .flags = TTPU_OP_STATIC_SCALARS},
    {"pow_.Scalar", lower_pow_scalar, .kinds = TTPU_K_NUM, .kernel = "pow", .complex_fn = ttpu_complex_pow},
    {"atan2", lower_atan2, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"maximum", lower_maximum, .variants = TTPU_V_OUT, .complex_fn = ttpu_complex_unordered},
    {"minimum", lower_minimum, .variants = TTPU_V_OUT, .complex_fn = ttpu_complex_unordered},
    {"fmax", fmax_like, .param = TTPU_MAX, .variants = TTPU_V_OUT, .complex_fn = ttpu_complex_unordered},
    {"fmin", fmax_like, .param = TTPU_MIN, .variants = TTPU_V_OUT, .complex_fn = ttpu_complex_unordered},
    {"hypot", lower_hypot, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .kinds = TTPU_K_FLOAT, .kernel = "hypot_cpu"},
    {"copysign.Tensor", lower_copysign, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"copysign.Scalar", lower_copysign, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT},
    {"xlogy.Tensor", lower_xlogy, .variants = TTPU_V_INPLACE},
    {"xlogy.OutTensor", lower_xlogy, .flags = 0},
    {"xlogy.Scalar_Self", lower_xlogy, .flags = 0},
    {"xlogy.OutScalar_Self", lower_xlogy, .flags = 0},
    {"xlogy.Scalar_Other", lower_xlogy, .variants = TTPU_V_INPLACE},
    {"xlogy.OutScalar_Other", lower_xlogy, .flags = 0},
    {"logaddexp", logaddexp_like, .param = 0, .variants = TTPU_V_OUT, .kinds = TTPU_K_FLOAT, .kernel = "logaddexp_cpu"},
    {"logaddexp2", logaddexp_like, .param = 1, .variants = TTPU_V_OUT, .kinds = TTPU_K_FLOAT, .kernel = "logaddexp2_cpu"},
    {"heaviside", lower_heaviside, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"bitwise_and.Tensor", lower_bitwise_and, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_BOOL | TTPU_K_INT, .kernel = "bitwise_and_cpu"},
    {"bitwise_and.Scalar", lower_bitwise_and, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_BOOL | TTPU_K_INT, .kernel = "bitwise_and_cpu"},
    {"bitwise_and.Scalar_Tensor", lower_bitwise_and, .variants = TTPU_V_OV_OUT, .kinds = TTPU_K_BOOL | TTPU_K_INT, .kernel = "bitwise_and_cpu"},
    {"bitwise_or.Tensor", lower_bitwise_or, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_BOOL | TTPU_K_INT, .kernel = "bitwise_or_cpu"},
    {"bitwise_or.Scalar", lower_bitwise_or, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_BOOL | TTPU_K_INT, .kernel = "bitwise_or_cpu"},
    {"bitwise_or.Scalar_Tensor", lower_bitwise_or, .variants = TTPU_V_OV_OUT, .kinds = TTPU_K_BOOL | TTPU_K_INT, .kernel = "bitwise_or_cpu"},
    {"bitwise_xor.Tensor", lower_bitwise_xor, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_BOOL | TTPU_K_INT, .kernel = "bitwise_xor_cpu"},
    {"bitwise_xor.Scalar", lower_bitwise_xor, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_BOOL | TTPU_K_INT, .kernel = "bitwise_xor_cpu"},
    {"bitwise_xor.Scalar_Tensor", lower_bitwise_xor, .variants = TTPU_V_OV_OUT, .kinds = TTPU_K_BOOL | TTPU_K_INT, .kernel = "bitwise_xor_cpu"},
    {"bitwise_not", lower_bitwise_not, .flags = TTPU_OP_SAME_DTYPE_OUT, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .kinds = TTPU_K_BOOL | TTPU_K_INT, .kernel = "bitwise_not_cpu"},
    {"bitwise_left_shift.Tensor", shift, .param = 1, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_INT, .kernel = "lshift_cpu"},
    {"bitwise_left_shift.Tensor_Scalar", shift, .param = 1, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_INT, .kernel = "lshift_cpu"},
    {"bitwise_left_shift.Scalar_Tensor", shift, .param = 1, .variants = TTPU_V_OV_OUT, .kinds = TTPU_K_INT, .kernel = "lshift_cpu"},
    {"bitwise_right_shift.Tensor", shift, .param = 0, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_INT, .kernel = "rshift_cpu"},
    {"bitwise_right_shift.Tensor_Scalar", shift, .param = 0, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_INT, .kernel = "rshift_cpu"},
    {"bitwise_right_shift.Scalar_Tensor", shift, .param = 0, .variants = TTPU_V_OV_OUT, .kinds = TTPU_K_INT, .kernel = "rshift_cpu"},
    {"__lshift__.Tensor", shift, .param = 1, .kinds = TTPU_K_INT, .kernel = "lshift_cpu"},
    {"__lshift__.Scalar", shift, .param = 1, .kinds = TTPU_K_INT, .kernel = "lshift_cpu"},
    {"__ilshift__.Tensor", shift, .param = 1, .kinds = TTPU_K_INT, .kernel = "lshift_cpu"},
    {"__ilshift__.Scalar", shift, .param = 1, .kinds = TTPU_K_INT, .kernel = "lshift_cpu"},
    {"__rshift__.Tensor", shift, .param = 0, .kinds = TTPU_K_INT, .kernel = "rshift_cpu"},
    {"__rshift__.Scalar", shift, .param = 0, .kinds = TTPU_K_INT, .kernel = "rshift_cpu"},
    {"__irshift__.Tensor", shift, .param = 0, .kinds = TTPU_K_INT, .kernel = "rshift_cpu"},
    {"__irshift__.Scalar", shift, .param = 0, .kinds = TTPU_K_INT, .kernel = "rshift_cpu"},
    {"logical_and", logical, .flags = TTPU_OP_COMPLEX_AS_IS, .param = 0, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"logical_or", logical, .flags = TTPU_OP_COMPLEX_AS_IS, .param = 1, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"logical_xor", logical, .flags = TTPU_OP_COMPLEX_AS_IS, .param = 2, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"logical_not", logical, .flags = TTPU_OP_COMPLEX_AS_IS, .param = 3, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
#define TTPU_CMP_DEFS(name, cmp, ...)                                   \
  {#name ".Tensor", compare, .param = cmp, .variants = TTPU_V_OV_OUT,   \
   __VA_ARGS__},                                                        \
  {#name "_.Tensor", compare, .param = cmp},                            \
  {#name ".Scalar", compare, .param = cmp, .variants = TTPU_V_OV_OUT,   \
   __VA_ARGS__},                                                        \
  {#name "_.Scalar", compare, .param = cmp}
    TTPU_CMP_DEFS(eq, TTPU_EQ, .complex_fn = ttpu_complex_compare),
    TTPU_CMP_DEFS(ne, TTPU_NE, .complex_fn = ttpu_complex_compare),
    TTPU_CMP_DEFS(lt, TTPU_LT, .flags = 0),
    TTPU_CMP_DEFS(le, TTPU_LE, .flags = 0),
    TTPU_CMP_DEFS(gt, TTPU_GT, .flags = 0),
    TTPU_CMP_DEFS(ge, TTPU_GE, .flags = 0),
#undef TTPU_CMP_DEFS
    /* a CompositeImplicitAutograd op: the glue's own kernel runs this for
     * floating and complex operands (composite_kernels.cpp) */
    {"isclose", lower_isclose, .kinds = TTPU_K_FLOAT, .kernel = "isclose", .complex_fn = lower_isclose},
    {"where.self", lower_where, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_OV_OUT},
    {"clamp", clamp_args, .param = TTPU_PARAMS(1, 2, 0), .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"clamp.Tensor", clamp_args, .param = TTPU_PARAMS(1, 2, 0), .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT},
    {"clamp_min", clamp_args, .param = TTPU_PARAMS(1, -1, 0), .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"clamp_min.Tensor", clamp_args, .param = TTPU_PARAMS(1, -1, 0), .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT},
    {"clamp_max", clamp_args, .param = TTPU_PARAMS(-1, 1, 0), .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"clamp_max.Tensor", clamp_args, .param = TTPU_PARAMS(-1, 1, 0), .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT},
    {"masked_fill.Scalar", lower_masked_fill, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT},
    {"masked_fill.Tensor", lower_masked_fill, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT},
    {"lerp.Scalar", lower_lerp, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT},
    {"lerp.Tensor", lower_lerp, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT},
    {"addcmul", addc, .param = 0, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .complex_fn = addc},
    {"addcdiv", addc, .param = 1, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .complex_fn = addc},
    {0},
};
