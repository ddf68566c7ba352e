/* elementwise.c - binary arithmetic, comparisons, logical and bitwise ops,
 * selection (where, clamp, masked_fill) and the fused ternaries (lerp,
 * addcmul, addcdiv), with PyTorch's type promotion and CPU semantics:
 * Python-style remainder, C-style fmod, floor division as CPU rounds it,
 * NaN-propagating maximum/minimum/clamp, integer division by zero raising
 * ZeroDivisionError (a data-dependent check). Also the helpers of
 * elementwise.h shared with unary.c and activation.c. */
#include <math.h>

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
static ttpu_status* add_like(ttpu_lower* L, ttpu_binop op, int reverse) {
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
  if (!ttpu_l_is_none(L, 2)) {
    ttpu_val a = ttpu_ew_in(L, 2, ttpu_ew_opmath(dt));
    y = ttpu_hlo_binary(b, is_bool ? TTPU_AND : TTPU_MUL, y, a);
  }
  if (is_bool) op = TTPU_OR;
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, op, x, y));
  return NULL;
}

static ttpu_status* lower_add(ttpu_lower* L) { return add_like(L, TTPU_ADD, 0); }
static ttpu_status* lower_sub(ttpu_lower* L) { return add_like(L, TTPU_SUB, 0); }
static ttpu_status* lower_rsub(ttpu_lower* L) { return add_like(L, TTPU_SUB, 1); }

static ttpu_status* lower_mul(ttpu_lower* L) {
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x, y;
  operands(L, dt, &x, &y);
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(ttpu_l_hlo(L),
                                       dt == TTPU_BOOL ? TTPU_AND : TTPU_MUL,
                                       x, y));
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

/* div with rounding mode NULL (true division), "trunc" or "floor". */
static ttpu_status* div_mode(ttpu_lower* L, const char* mode) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x, y;
  if (!mode) {
    operands(L, ttpu_ew_float(L), &x, &y);
    ttpu_l_set_out(L, 0, ttpu_ew_div(b, x, y));
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

static ttpu_status* lower_div(ttpu_lower* L) { return div_mode(L, NULL); }
/* div.Tensor_mode / Scalar_mode: rounding_mode is arg 2 (None: true div) */
static ttpu_status* lower_div_mode(ttpu_lower* L) {
  return div_mode(L, ttpu_l_str(L, 2, NULL));
}
static ttpu_status* lower_floor_divide(ttpu_lower* L) {
  return div_mode(L, "floor");
}

/* remainder (Python's %, sign of the divisor) and fmod (C's, sign of the
 * dividend). */
static ttpu_status* rem_like(ttpu_lower* L, int python) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  if (!ttpu_ew_accepts(L, dt, TTPU_EW_NUM, python ? "remainder_cpu" : "fmod_cpu"))
    return NULL;
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

static ttpu_status* lower_remainder(ttpu_lower* L) { return rem_like(L, 1); }
static ttpu_status* lower_fmod(ttpu_lower* L) { return rem_like(L, 0); }

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
  if (!ttpu_ew_accepts(L, dt, TTPU_EW_NUM, "pow")) return NULL;
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
  if (!ttpu_ew_accepts(L, dt, TTPU_EW_NUM, "pow")) return NULL;
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
static ttpu_status* fmax_like(ttpu_lower* L, ttpu_binop op) {
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

static ttpu_status* lower_fmax(ttpu_lower* L) { return fmax_like(L, TTPU_MAX); }
static ttpu_status* lower_fmin(ttpu_lower* L) { return fmax_like(L, TTPU_MIN); }

/* hypot as std::hypot: scaled so that neither square overflows, and an
 * infinity wins over a NaN. */
static ttpu_status* lower_hypot(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  if (!ttpu_ew_accepts(L, dt, TTPU_EW_FLOAT, "hypot_cpu")) return NULL;
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

/* The sign bit of a float value (set for -0.0 and negative NaNs). */
static ttpu_val sign_bit(ttpu_hlo* b, ttpu_val x) {
  ttpu_type t = *ttpu_hlo_type(b, x);
  ttpu_dtype it = ttpu_dtype_size(t.dtype) == 8   ? TTPU_I64
                  : ttpu_dtype_size(t.dtype) == 4 ? TTPU_I32
                                                  : TTPU_I16;
  ttpu_type bt = t;
  bt.dtype = it;
  return ttpu_ew_cmpk(b, TTPU_LT, ttpu_hlo_bitcast(b, x, bt), 0);
}

static ttpu_status* lower_copysign(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x, y;
  operands(L, ttpu_ew_float(L), &x, &y);
  ttpu_val a = ttpu_hlo_unary(b, TTPU_ABS, x);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, sign_bit(b, y),
                                       ttpu_hlo_unary(b, TTPU_NEG, a), a));
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
static ttpu_status* logaddexp_like(ttpu_lower* L, int base2) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  if (!ttpu_ew_accepts(L, dt, TTPU_EW_FLOAT, base2 ? "logaddexp2_cpu" : "logaddexp_cpu"))
    return NULL;
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

static ttpu_status* lower_logaddexp(ttpu_lower* L) { return logaddexp_like(L, 0); }
static ttpu_status* lower_logaddexp2(ttpu_lower* L) { return logaddexp_like(L, 1); }

/* heaviside(x, values): values where x == 0, else x > 0. */
static ttpu_status* lower_heaviside(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x, v;
  operands(L, dt, &x, &v);
  ttpu_val pos = ttpu_hlo_convert(b, ttpu_ew_cmpk(b, TTPU_GT, x, 0), dtype_of(b, x));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, x, 0), v, pos));
  return NULL;
}

/* ------------------------------------------------------------ bitwise */

static ttpu_status* bitwise(ttpu_lower* L, ttpu_binop op, const char* name) {
  ttpu_dtype dt = ttpu_ew_common(L);
  if (!ttpu_ew_accepts(L, dt, TTPU_EW_BOOL | TTPU_EW_INT, name)) return NULL;
  ttpu_val x, y;
  operands(L, dt, &x, &y);
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(ttpu_l_hlo(L), op, x, y));
  return NULL;
}

static ttpu_status* lower_bitwise_and(ttpu_lower* L) {
  return bitwise(L, TTPU_AND, "bitwise_and_cpu");
}
static ttpu_status* lower_bitwise_or(ttpu_lower* L) {
  return bitwise(L, TTPU_OR, "bitwise_or_cpu");
}
static ttpu_status* lower_bitwise_xor(ttpu_lower* L) {
  return bitwise(L, TTPU_XOR, "bitwise_xor_cpu");
}

static ttpu_status* lower_bitwise_not(ttpu_lower* L) {
  ttpu_dtype dt = ttpu_ew_common(L);
  if (!ttpu_ew_accepts(L, dt, TTPU_EW_BOOL | TTPU_EW_INT, "bitwise_not_cpu"))
    return NULL;
  ttpu_l_set_out(L, 0, ttpu_hlo_unary(ttpu_l_hlo(L), TTPU_NOT, ttpu_ew_in(L, 0, dt)));
  return NULL;
}

/* Shifts: StableHLO's out-of-range rules are CPU's (a shift by >= the bit
 * width or by a negative amount gives 0, or the sign for arithmetic right
 * shifts). */
static ttpu_status* shift(ttpu_lower* L, int left) {
  ttpu_dtype dt = ttpu_ew_common(L);
  if (!ttpu_ew_accepts(L, dt, TTPU_EW_INT, left ? "lshift_cpu" : "rshift_cpu"))
    return NULL;
  ttpu_val x, y;
  operands(L, dt, &x, &y);
  ttpu_binop op = left ? TTPU_SHL : is_unsigned(dt) ? TTPU_SHR_L : TTPU_SHR_A;
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(ttpu_l_hlo(L), op, x, y));
  return NULL;
}

static ttpu_status* lower_lshift(ttpu_lower* L) { return shift(L, 1); }
static ttpu_status* lower_rshift(ttpu_lower* L) { return shift(L, 0); }

/* ------------------------------------------------------------ logical */

static ttpu_status* logical(ttpu_lower* L, int which) {
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

static ttpu_status* lower_logical_and(ttpu_lower* L) { return logical(L, 0); }
static ttpu_status* lower_logical_or(ttpu_lower* L) { return logical(L, 1); }
static ttpu_status* lower_logical_xor(ttpu_lower* L) { return logical(L, 2); }
static ttpu_status* lower_logical_not(ttpu_lower* L) { return logical(L, 3); }

/* ------------------------------------------------------------ comparison */

static ttpu_status* compare(ttpu_lower* L, ttpu_cmp c) {
  ttpu_val x, y;
  operands(L, ttpu_ew_common(L), &x, &y);
  ttpu_l_set_out(L, 0, ttpu_hlo_compare(ttpu_l_hlo(L), c, x, y));
  return NULL;
}

static ttpu_status* lower_eq(ttpu_lower* L) { return compare(L, TTPU_EQ); }
static ttpu_status* lower_ne(ttpu_lower* L) { return compare(L, TTPU_NE); }
static ttpu_status* lower_lt(ttpu_lower* L) { return compare(L, TTPU_LT); }
static ttpu_status* lower_le(ttpu_lower* L) { return compare(L, TTPU_LE); }
static ttpu_status* lower_gt(ttpu_lower* L) { return compare(L, TTPU_GT); }
static ttpu_status* lower_ge(ttpu_lower* L) { return compare(L, TTPU_GE); }

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
static ttpu_status* clamp_args(ttpu_lower* L, int lo_arg, int hi_arg) {
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

static ttpu_status* lower_clamp(ttpu_lower* L) { return clamp_args(L, 1, 2); }
static ttpu_status* lower_clamp_min(ttpu_lower* L) { return clamp_args(L, 1, -1); }
static ttpu_status* lower_clamp_max(ttpu_lower* L) { return clamp_args(L, -1, 1); }

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
  if (!ttpu_ew_accepts(L, dt, TTPU_EW_FLOAT, "lerp_kernel_scalar")) return NULL;
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

/* addcmul: self + value * t1 * t2; addcdiv: self + value * t1 / t2 (in
 * CPU's order of evaluation). */
static ttpu_status* addc(ttpu_lower* L, int divide) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  /* `value` takes no part in promotion (2.5 is 2 for integer tensors) */
  ttpu_dtype dt = ttpu_l_out_type(L, 0).dtype;
  if (!ttpu_ew_accepts(L, dt, divide ? TTPU_EW_FLOAT : TTPU_EW_NUM,
                       divide ? "addcdiv_cpu" : "addcmul_cpu_out"))
    return NULL;
  ttpu_dtype md = ttpu_ew_opmath(dt);
  ttpu_val s = ttpu_ew_in(L, 0, md), t1 = ttpu_ew_in(L, 1, md);
  ttpu_val t2 = ttpu_ew_in(L, 2, md), v = ttpu_ew_in(L, 3, md);
  ttpu_val p = ttpu_ew_mul(b, v, t1);
  p = ttpu_hlo_binary(b, divide ? TTPU_DIV : TTPU_MUL, p, t2);
  ttpu_l_set_out(L, 0, ttpu_ew_add(b, s, p));
  return NULL;
}

static ttpu_status* lower_addcmul(ttpu_lower* L) { return addc(L, 0); }
static ttpu_status* lower_addcdiv(ttpu_lower* L) { return addc(L, 1); }

/* Functional, in-place and out= overloads share a lowering: the operands
 * are the same leading arguments, and the framework writes output 0
 * wherever it lives. */
const ttpu_op_def ttpu_ops_elementwise[] = {
    {"add.Tensor", lower_add, 0},
    {"add_.Tensor", lower_add, 0},
    {"add.out", lower_add, 0},
    {"add.Scalar", lower_add, 0},
    {"add_.Scalar", lower_add, 0},
    {"add.Scalar_out", lower_add, 0},
    {"sub.Tensor", lower_sub, 0},
    {"sub_.Tensor", lower_sub, 0},
    {"sub.out", lower_sub, 0},
    {"sub.Scalar", lower_sub, 0},
    {"sub_.Scalar", lower_sub, 0},
    {"sub.Scalar_out", lower_sub, 0},
    {"rsub.Tensor", lower_rsub, 0},
    {"rsub.Scalar", lower_rsub, 0},
    {"rsub.Tensor_out", lower_rsub, 0},
    {"rsub.Scalar_out", lower_rsub, 0},
    {"mul.Tensor", lower_mul, 0},
    {"mul_.Tensor", lower_mul, 0},
    {"mul.out", lower_mul, 0},
    {"mul.Scalar", lower_mul, 0},
    {"mul_.Scalar", lower_mul, 0},
    {"mul.Scalar_out", lower_mul, 0},
    {"div.Tensor", lower_div, 0},
    {"div_.Tensor", lower_div, 0},
    {"div.out", lower_div, 0},
    {"div.Scalar", lower_div, 0},
    {"div_.Scalar", lower_div, 0},
    {"div.Scalar_out", lower_div, 0},
    {"div.Tensor_mode", lower_div_mode, 0},
    {"div_.Tensor_mode", lower_div_mode, 0},
    {"div.out_mode", lower_div_mode, 0},
    {"div.Scalar_mode", lower_div_mode, 0},
    {"div_.Scalar_mode", lower_div_mode, 0},
    {"div.Scalar_mode_out", lower_div_mode, 0},
    {"floor_divide", lower_floor_divide, 0},
    {"floor_divide_.Tensor", lower_floor_divide, 0},
    {"floor_divide.out", lower_floor_divide, 0},
    {"floor_divide.Scalar", lower_floor_divide, 0},
    {"floor_divide_.Scalar", lower_floor_divide, 0},
    {"floor_divide.Scalar_out", lower_floor_divide, 0},
    {"remainder.Tensor", lower_remainder, 0},
    {"remainder_.Tensor", lower_remainder, 0},
    {"remainder.Tensor_out", lower_remainder, 0},
    {"remainder.Scalar", lower_remainder, 0},
    {"remainder_.Scalar", lower_remainder, 0},
    {"remainder.Scalar_out", lower_remainder, 0},
    {"remainder.Scalar_Tensor", lower_remainder, 0},
    {"remainder.Scalar_Tensor_out", lower_remainder, 0},
    {"fmod.Tensor", lower_fmod, 0},
    {"fmod_.Tensor", lower_fmod, 0},
    {"fmod.Tensor_out", lower_fmod, 0},
    {"fmod.Scalar", lower_fmod, 0},
    {"fmod_.Scalar", lower_fmod, 0},
    {"fmod.Scalar_out", lower_fmod, 0},
    {"pow.Tensor_Tensor", lower_pow, 0},
    {"pow_.Tensor", lower_pow, 0},
    {"pow.Tensor_Tensor_out", lower_pow, 0},
    {"pow.Scalar", lower_pow, 0},
    {"pow.Scalar_out", lower_pow, 0},
    {"pow.Tensor_Scalar", lower_pow_scalar, 0},
    {"pow_.Scalar", lower_pow_scalar, 0},
    {"pow.Tensor_Scalar_out", lower_pow_scalar, 0},
    {"atan2", lower_atan2, 0},
    {"atan2_", lower_atan2, 0},
    {"atan2.out", lower_atan2, 0},
    {"maximum", lower_maximum, 0},
    {"maximum.out", lower_maximum, 0},
    {"minimum", lower_minimum, 0},
    {"minimum.out", lower_minimum, 0},
    {"fmax", lower_fmax, 0},
    {"fmax.out", lower_fmax, 0},
    {"fmin", lower_fmin, 0},
    {"fmin.out", lower_fmin, 0},
    {"hypot", lower_hypot, 0},
    {"hypot_", lower_hypot, 0},
    {"hypot.out", lower_hypot, 0},
    {"copysign.Tensor", lower_copysign, 0},
    {"copysign_.Tensor", lower_copysign, 0},
    {"copysign.out", lower_copysign, 0},
    {"copysign.Scalar", lower_copysign, 0},
    {"copysign_.Scalar", lower_copysign, 0},
    {"copysign.Scalar_out", lower_copysign, 0},
    {"xlogy.Tensor", lower_xlogy, 0},
    {"xlogy_.Tensor", lower_xlogy, 0},
    {"xlogy.OutTensor", lower_xlogy, 0},
    {"xlogy.Scalar_Self", lower_xlogy, 0},
    {"xlogy.OutScalar_Self", lower_xlogy, 0},
    {"xlogy.Scalar_Other", lower_xlogy, 0},
    {"xlogy_.Scalar_Other", lower_xlogy, 0},
    {"xlogy.OutScalar_Other", lower_xlogy, 0},
    {"logaddexp", lower_logaddexp, 0},
    {"logaddexp.out", lower_logaddexp, 0},
    {"logaddexp2", lower_logaddexp2, 0},
    {"logaddexp2.out", lower_logaddexp2, 0},
    {"heaviside", lower_heaviside, 0},
    {"heaviside_", lower_heaviside, 0},
    {"heaviside.out", lower_heaviside, 0},
    {"bitwise_and.Tensor", lower_bitwise_and, 0},
    {"bitwise_and_.Tensor", lower_bitwise_and, 0},
    {"bitwise_and.Tensor_out", lower_bitwise_and, 0},
    {"bitwise_and.Scalar", lower_bitwise_and, 0},
    {"bitwise_and_.Scalar", lower_bitwise_and, 0},
    {"bitwise_and.Scalar_out", lower_bitwise_and, 0},
    {"bitwise_and.Scalar_Tensor", lower_bitwise_and, 0},
    {"bitwise_and.Scalar_Tensor_out", lower_bitwise_and, 0},
    {"bitwise_or.Tensor", lower_bitwise_or, 0},
    {"bitwise_or_.Tensor", lower_bitwise_or, 0},
    {"bitwise_or.Tensor_out", lower_bitwise_or, 0},
    {"bitwise_or.Scalar", lower_bitwise_or, 0},
    {"bitwise_or_.Scalar", lower_bitwise_or, 0},
    {"bitwise_or.Scalar_out", lower_bitwise_or, 0},
    {"bitwise_or.Scalar_Tensor", lower_bitwise_or, 0},
    {"bitwise_or.Scalar_Tensor_out", lower_bitwise_or, 0},
    {"bitwise_xor.Tensor", lower_bitwise_xor, 0},
    {"bitwise_xor_.Tensor", lower_bitwise_xor, 0},
    {"bitwise_xor.Tensor_out", lower_bitwise_xor, 0},
    {"bitwise_xor.Scalar", lower_bitwise_xor, 0},
    {"bitwise_xor_.Scalar", lower_bitwise_xor, 0},
    {"bitwise_xor.Scalar_out", lower_bitwise_xor, 0},
    {"bitwise_xor.Scalar_Tensor", lower_bitwise_xor, 0},
    {"bitwise_xor.Scalar_Tensor_out", lower_bitwise_xor, 0},
    {"bitwise_not", lower_bitwise_not, 0},
    {"bitwise_not_", lower_bitwise_not, 0},
    {"bitwise_not.out", lower_bitwise_not, 0},
    {"bitwise_left_shift.Tensor", lower_lshift, 0},
    {"bitwise_left_shift_.Tensor", lower_lshift, 0},
    {"bitwise_left_shift.Tensor_out", lower_lshift, 0},
    {"bitwise_left_shift.Tensor_Scalar", lower_lshift, 0},
    {"bitwise_left_shift_.Tensor_Scalar", lower_lshift, 0},
    {"bitwise_left_shift.Tensor_Scalar_out", lower_lshift, 0},
    {"bitwise_left_shift.Scalar_Tensor", lower_lshift, 0},
    {"bitwise_left_shift.Scalar_Tensor_out", lower_lshift, 0},
    {"bitwise_right_shift.Tensor", lower_rshift, 0},
    {"bitwise_right_shift_.Tensor", lower_rshift, 0},
    {"bitwise_right_shift.Tensor_out", lower_rshift, 0},
    {"bitwise_right_shift.Tensor_Scalar", lower_rshift, 0},
    {"bitwise_right_shift_.Tensor_Scalar", lower_rshift, 0},
    {"bitwise_right_shift.Tensor_Scalar_out", lower_rshift, 0},
    {"bitwise_right_shift.Scalar_Tensor", lower_rshift, 0},
    {"bitwise_right_shift.Scalar_Tensor_out", lower_rshift, 0},
    {"__lshift__.Tensor", lower_lshift, 0},
    {"__lshift__.Scalar", lower_lshift, 0},
    {"__ilshift__.Tensor", lower_lshift, 0},
    {"__ilshift__.Scalar", lower_lshift, 0},
    {"__rshift__.Tensor", lower_rshift, 0},
    {"__rshift__.Scalar", lower_rshift, 0},
    {"__irshift__.Tensor", lower_rshift, 0},
    {"__irshift__.Scalar", lower_rshift, 0},
    {"logical_and", lower_logical_and, 0},
    {"logical_and_", lower_logical_and, 0},
    {"logical_and.out", lower_logical_and, 0},
    {"logical_or", lower_logical_or, 0},
    {"logical_or_", lower_logical_or, 0},
    {"logical_or.out", lower_logical_or, 0},
    {"logical_xor", lower_logical_xor, 0},
    {"logical_xor_", lower_logical_xor, 0},
    {"logical_xor.out", lower_logical_xor, 0},
    {"logical_not", lower_logical_not, 0},
    {"logical_not_", lower_logical_not, 0},
    {"logical_not.out", lower_logical_not, 0},
#define TTPU_CMP_DEFS(name)                           \
  {#name ".Tensor", lower_##name, 0},                 \
  {#name "_.Tensor", lower_##name, 0},                \
  {#name ".Tensor_out", lower_##name, 0},             \
  {#name ".Scalar", lower_##name, 0},                 \
  {#name "_.Scalar", lower_##name, 0},                \
  {#name ".Scalar_out", lower_##name, 0}
    TTPU_CMP_DEFS(eq),
    TTPU_CMP_DEFS(ne),
    TTPU_CMP_DEFS(lt),
    TTPU_CMP_DEFS(le),
    TTPU_CMP_DEFS(gt),
    TTPU_CMP_DEFS(ge),
#undef TTPU_CMP_DEFS
    {"where.self", lower_where, 0},
    {"where.self_out", lower_where, 0},
    {"clamp", lower_clamp, 0},
    {"clamp_", lower_clamp, 0},
    {"clamp.out", lower_clamp, 0},
    {"clamp.Tensor", lower_clamp, 0},
    {"clamp_.Tensor", lower_clamp, 0},
    {"clamp.Tensor_out", lower_clamp, 0},
    {"clamp_min", lower_clamp_min, 0},
    {"clamp_min_", lower_clamp_min, 0},
    {"clamp_min.out", lower_clamp_min, 0},
    {"clamp_min.Tensor", lower_clamp_min, 0},
    {"clamp_min_.Tensor", lower_clamp_min, 0},
    {"clamp_min.Tensor_out", lower_clamp_min, 0},
    {"clamp_max", lower_clamp_max, 0},
    {"clamp_max_", lower_clamp_max, 0},
    {"clamp_max.out", lower_clamp_max, 0},
    {"clamp_max.Tensor", lower_clamp_max, 0},
    {"clamp_max_.Tensor", lower_clamp_max, 0},
    {"clamp_max.Tensor_out", lower_clamp_max, 0},
    {"masked_fill.Scalar", lower_masked_fill, 0},
    {"masked_fill_.Scalar", lower_masked_fill, 0},
    {"masked_fill.Scalar_out", lower_masked_fill, 0},
    {"masked_fill.Tensor", lower_masked_fill, 0},
    {"masked_fill_.Tensor", lower_masked_fill, 0},
    {"masked_fill.Tensor_out", lower_masked_fill, 0},
    {"lerp.Scalar", lower_lerp, 0},
    {"lerp_.Scalar", lower_lerp, 0},
    {"lerp.Scalar_out", lower_lerp, 0},
    {"lerp.Tensor", lower_lerp, 0},
    {"lerp_.Tensor", lower_lerp, 0},
    {"lerp.Tensor_out", lower_lerp, 0},
    {"addcmul", lower_addcmul, 0},
    {"addcmul_", lower_addcmul, 0},
    {"addcmul.out", lower_addcmul, 0},
    {"addcdiv", lower_addcdiv, 0},
    {"addcdiv_", lower_addcdiv, 0},
    {"addcdiv.out", lower_addcdiv, 0},
    {NULL, NULL, 0},
};
