/* hlo_elementwise.c - binary/unary/compare/select/clamp/convert/bitcast. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "hlo_internal.h"
#include "ttpu_hlo.h"

static const char* binop_name(ttpu_binop op) {
  switch (op) {
    case TTPU_ADD: return "stablehlo.add";
    case TTPU_SUB: return "stablehlo.subtract";
    case TTPU_MUL: return "stablehlo.multiply";
    case TTPU_DIV: return "stablehlo.divide";
    case TTPU_REM: return "stablehlo.remainder";
    case TTPU_POW: return "stablehlo.power";
    case TTPU_MAX: return "stablehlo.maximum";
    case TTPU_MIN: return "stablehlo.minimum";
    case TTPU_AND: return "stablehlo.and";
    case TTPU_OR: return "stablehlo.or";
    case TTPU_XOR: return "stablehlo.xor";
    case TTPU_ATAN2: return "stablehlo.atan2";
    case TTPU_SHL: return "stablehlo.shift_left";
    case TTPU_SHR_A: return "stablehlo.shift_right_arithmetic";
    case TTPU_SHR_L: return "stablehlo.shift_right_logical";
    case TTPU_ZETA: return "chlo.zeta";
    case TTPU_NEXT_AFTER: return "chlo.next_after";
  }
  return NULL;
}

/* Which element kinds an op accepts, so a bad call fails here with the op's
 * name instead of deep inside the plugin's verifier. */
static int binop_accepts(ttpu_binop op, ttpu_dtype dt) {
  int fl = ttpu_hloi_is_floatlike(dt), in = ttpu_hloi_is_intlike(dt);
  int bo = dt == TTPU_BOOL, cx = ttpu_hloi_is_complex(dt);
  switch (op) {
    case TTPU_ADD: case TTPU_MUL:
      return fl || in || bo || cx; /* on i1: or / and */
    case TTPU_MAX: case TTPU_MIN:
      return fl || in || bo;
    case TTPU_SUB: case TTPU_DIV: case TTPU_POW:
      return fl || in || cx;
    case TTPU_REM:
      return fl || in;
    case TTPU_AND: case TTPU_OR: case TTPU_XOR:
      return in || bo;
    case TTPU_ATAN2: case TTPU_ZETA: case TTPU_NEXT_AFTER:
      return fl;
    case TTPU_SHL: case TTPU_SHR_A: case TTPU_SHR_L:
      return in;
  }
  return 0;
}

static ttpu_val type_mismatch(ttpu_hlo* b, const char* what,
                              const ttpu_type* x, const ttpu_type* y) {
  char dx[160], dy[160];
  ttpu_hloi_type_desc(x, dx, sizeof dx);
  ttpu_hloi_type_desc(y, dy, sizeof dy);
  return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                       "%s: operand types differ (%s vs %s)", what, dx, dy);
}

ttpu_val ttpu_hlo_binary(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  const char* name = binop_name(op);
  if (!name)
    return ttpu_hlo_fail(b, TTPU_INTERNAL, "binary: unknown op %d", (int)op);
  const ttpu_type* tx = ttpu_hloi_check(b, x, name);
  const ttpu_type* ty = ttpu_hloi_check(b, y, name);
  if (!tx || !ty) return TTPU_VAL_ERROR;
  if (!ttpu_hloi_same_type(tx, ty)) return type_mismatch(b, name, tx, ty);
  if (!binop_accepts(op, tx->dtype))
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s: dtype %s not supported",
                         name, ttpu_dtype_name(tx->dtype));
  ttpu_type t = *tx;
  ttpu_val ops[2] = {x, y};
  return ttpu_hloi_op(b, name, ops, 2, NULL, t);
}

static const char* unop_name(ttpu_unop op) {
  switch (op) {
    case TTPU_NEG: return "stablehlo.negate";
    case TTPU_ABS: return "stablehlo.abs";
    case TTPU_EXP: return "stablehlo.exponential";
    case TTPU_EXPM1: return "stablehlo.exponential_minus_one";
    case TTPU_LOG: return "stablehlo.log";
    case TTPU_LOG1P: return "stablehlo.log_plus_one";
    case TTPU_SQRT: return "stablehlo.sqrt";
    case TTPU_RSQRT: return "stablehlo.rsqrt";
    case TTPU_CBRT: return "stablehlo.cbrt";
    case TTPU_SIN: return "stablehlo.sine";
    case TTPU_COS: return "stablehlo.cosine";
    case TTPU_TAN: return "stablehlo.tan";
    case TTPU_TANH: return "stablehlo.tanh";
    case TTPU_LOGISTIC: return "stablehlo.logistic";
    case TTPU_FLOOR: return "stablehlo.floor";
    case TTPU_CEIL: return "stablehlo.ceil";
    case TTPU_ROUND_EVEN: return "stablehlo.round_nearest_even";
    case TTPU_SIGN: return "stablehlo.sign";
    case TTPU_NOT: return "stablehlo.not";
    case TTPU_IS_FINITE: return "stablehlo.is_finite";
    /* The CPU plugin (and libtpu) legalize chlo.erf with XLA's own
     * rational approximation; it is both exact to ~1 ulp and what JAX
     * emits, so it is the safest choice over a home-made polynomial. */
    case TTPU_ERF: return "chlo.erf";
    case TTPU_LGAMMA: return "chlo.lgamma";
    case TTPU_DIGAMMA: return "chlo.digamma";
    case TTPU_BESSEL_I1E: return "chlo.bessel_i1e";
    case TTPU_ERF_INV: return "chlo.erf_inv";
    case TTPU_ASIN: return "chlo.asin";
    case TTPU_ACOS: return "chlo.acos";
    case TTPU_ATAN: return "chlo.atan";
    case TTPU_ASINH: return "chlo.asinh";
    case TTPU_ACOSH: return "chlo.acosh";
    case TTPU_ATANH: return "chlo.atanh";
  }
  return NULL;
}

ttpu_val ttpu_hlo_unary(ttpu_hlo* b, ttpu_unop op, ttpu_val x) {
  const char* name = unop_name(op);
  if (!name)
    return ttpu_hlo_fail(b, TTPU_INTERNAL, "unary: unknown op %d", (int)op);
  const ttpu_type* tx = ttpu_hloi_check(b, x, name);
  if (!tx) return TTPU_VAL_ERROR;
  ttpu_type t = *tx;
  ttpu_dtype dt = t.dtype;
  int fl = ttpu_hloi_is_floatlike(dt);
  int bo = dt == TTPU_BOOL, un = ttpu_hloi_is_unsigned(dt);
  if (ttpu_hloi_is_complex(dt)) {
    switch (op) {
      case TTPU_ABS: { /* |x| is real */
        ttpu_type r = t;
        r.dtype = dt == TTPU_C64 ? TTPU_F32 : TTPU_F64;
        ttpu_val m = ttpu_hloi_op(b, name, &x, 1, NULL, r);
        /* as C's hypot of the parts: inf when a part is infinite, else
         * NaN when one is NaN; stablehlo.abs on XLA drops a NaN part
         * beside a finite one (|1 + NaN i| = 1) */
        ttpu_val re = ttpu_hlo_real(b, x), im = ttpu_hlo_imag(b, x);
        ttpu_val inf = ttpu_hlo_const(b, r, INFINITY, 0);
        ttpu_val nan = ttpu_hlo_binary(b, TTPU_OR, ttpu_hlo_compare(b, TTPU_NE, re, re),
                                       ttpu_hlo_compare(b, TTPU_NE, im, im));
        ttpu_val big = ttpu_hlo_binary(
            b, TTPU_OR, ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_unary(b, TTPU_ABS, re), inf),
            ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_unary(b, TTPU_ABS, im), inf));
        m = ttpu_hlo_select(b, nan, ttpu_hlo_const(b, r, NAN, 0), m);
        return ttpu_hlo_select(b, big, inf, m);
      }
      case TTPU_SIGN: { /* x / |x|; NaN + NaN i where a part is not
                         * finite, as the CPU's complex division by an
                         * infinite or NaN |x| (XLA's sign gives 1 + NaN i
                         * for its abs of 1 + NaN i) */
        ttpu_val sg = ttpu_hloi_op(b, name, &x, 1, NULL, t);
        ttpu_val re = ttpu_hlo_real(b, x), im = ttpu_hlo_imag(b, x);
        ttpu_val finite = ttpu_hlo_binary(b, TTPU_AND, ttpu_hlo_unary(b, TTPU_IS_FINITE, re),
                                          ttpu_hlo_unary(b, TTPU_IS_FINITE, im));
        const ttpu_type* tr = ttpu_hloi_check(b, re, name);
        if (!tr) return TTPU_VAL_ERROR;
        ttpu_val nan = ttpu_hlo_const(b, *tr, NAN, 0);
        return ttpu_hlo_select(b, finite, sg, ttpu_hlo_complex(b, nan, nan));
      }
      case TTPU_IS_FINITE: /* stablehlo.is_finite takes real values only */
        return ttpu_hlo_binary(
            b, TTPU_AND, ttpu_hlo_unary(b, op, ttpu_hlo_real(b, x)),
            ttpu_hlo_unary(b, op, ttpu_hlo_imag(b, x)));
      case TTPU_NEG: case TTPU_EXP: case TTPU_EXPM1: case TTPU_LOG:
      case TTPU_LOG1P: case TTPU_SQRT: case TTPU_RSQRT: case TTPU_SIN:
      case TTPU_COS: case TTPU_TAN: case TTPU_TANH: case TTPU_LOGISTIC:
      case TTPU_ASIN: case TTPU_ACOS: case TTPU_ATAN:
      case TTPU_ASINH: case TTPU_ACOSH: case TTPU_ATANH:
        return ttpu_hloi_op(b, name, &x, 1, NULL, t);
      default:
        return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                             "%s: dtype %s not supported", name,
                             ttpu_dtype_name(dt));
    }
  }
  switch (op) {
    case TTPU_NEG:
      if (bo) break;
      return ttpu_hloi_op(b, name, &x, 1, NULL, t);
    case TTPU_ABS:
      /* stablehlo.abs rejects unsigned and bool; both are their own abs. */
      if (un || bo) return x;
      return ttpu_hloi_op(b, name, &x, 1, NULL, t);
    case TTPU_SIGN:
      if (bo) return x;
      if (un) { /* sign of an unsigned value is x != 0 */
        ttpu_val z = ttpu_hlo_const(b, t, 0.0, 0);
        ttpu_val ne = ttpu_hlo_compare(b, TTPU_NE, x, z);
        return ttpu_hlo_convert(b, ne, dt);
      }
      return ttpu_hloi_op(b, name, &x, 1, NULL, t);
    case TTPU_FLOOR: case TTPU_CEIL: case TTPU_ROUND_EVEN:
      /* Integers are already integral; PyTorch returns them unchanged. */
      if (!fl) return x;
      return ttpu_hloi_op(b, name, &x, 1, NULL, t);
    case TTPU_NOT:
      if (fl) break;
      return ttpu_hloi_op(b, name, &x, 1, NULL, t);
    case TTPU_IS_FINITE: {
      ttpu_type r = t;
      r.dtype = TTPU_BOOL;
      if (!fl) return ttpu_hlo_const(b, r, 0.0, 1);
      return ttpu_hloi_op(b, name, &x, 1, NULL, r);
    }
    default:
      if (!fl) break;
      return ttpu_hloi_op(b, name, &x, 1, NULL, t);
  }
  return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s: dtype %s not supported",
                       name, ttpu_dtype_name(dt));
}

static const char* cmp_dir(ttpu_cmp c) {
  switch (c) {
    case TTPU_EQ: return "EQ";
    case TTPU_NE: return "NE";
    case TTPU_LT: return "LT";
    case TTPU_LE: return "LE";
    case TTPU_GT: return "GT";
    case TTPU_GE: return "GE";
  }
  return NULL;
}

ttpu_val ttpu_hlo_compare(ttpu_hlo* b, ttpu_cmp dir, ttpu_val x, ttpu_val y) {
  const char* d = cmp_dir(dir);
  if (!d)
    return ttpu_hlo_fail(b, TTPU_INTERNAL, "compare: bad direction %d",
                         (int)dir);
  const ttpu_type* tx = ttpu_hloi_check(b, x, "stablehlo.compare");
  const ttpu_type* ty = ttpu_hloi_check(b, y, "stablehlo.compare");
  if (!tx || !ty) return TTPU_VAL_ERROR;
  if (!ttpu_hloi_same_type(tx, ty))
    return type_mismatch(b, "stablehlo.compare", tx, ty);
  if (ttpu_hloi_is_complex(tx->dtype) && dir != TTPU_EQ && dir != TTPU_NE)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "stablehlo.compare: complex values are unordered");
  const char* kind = ttpu_hloi_is_floatlike(tx->dtype) ||
                             ttpu_hloi_is_complex(tx->dtype)
                         ? "FLOAT"
                     : ttpu_hloi_is_signed_int(tx->dtype) ? "SIGNED"
                                                          : "UNSIGNED";
  char attrs[200];
  snprintf(attrs, sizeof attrs,
           "comparison_direction = #stablehlo<comparison_direction %s>, "
           "compare_type = #stablehlo<comparison_type %s>",
           d, kind);
  ttpu_type r = *tx;
  r.dtype = TTPU_BOOL;
  ttpu_val ops[2] = {x, y};
  return ttpu_hloi_op(b, "stablehlo.compare", ops, 2, attrs, r);
}

ttpu_val ttpu_hlo_select(ttpu_hlo* b, ttpu_val pred, ttpu_val on_true,
                         ttpu_val on_false) {
  const ttpu_type* tp = ttpu_hloi_check(b, pred, "stablehlo.select");
  const ttpu_type* tt = ttpu_hloi_check(b, on_true, "stablehlo.select");
  const ttpu_type* tf = ttpu_hloi_check(b, on_false, "stablehlo.select");
  if (!tp || !tt || !tf) return TTPU_VAL_ERROR;
  if (tp->dtype != TTPU_BOOL)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "stablehlo.select: predicate must be bool, got %s",
                         ttpu_dtype_name(tp->dtype));
  if (!ttpu_hloi_same_type(tt, tf))
    return type_mismatch(b, "stablehlo.select", tt, tf);
  /* StableHLO also allows a 0-d predicate choosing whole tensors. */
  if (tp->ndim != 0 && !ttpu_hloi_same_dims(tp, tt))
    return type_mismatch(b, "stablehlo.select (predicate)", tp, tt);
  ttpu_type r = *tt;
  ttpu_val ops[3] = {pred, on_true, on_false};
  return ttpu_hloi_op(b, "stablehlo.select", ops, 3, NULL, r);
}

ttpu_val ttpu_hlo_clamp(ttpu_hlo* b, ttpu_val lo, ttpu_val x, ttpu_val hi) {
  const ttpu_type* tl = ttpu_hloi_check(b, lo, "stablehlo.clamp");
  const ttpu_type* tx = ttpu_hloi_check(b, x, "stablehlo.clamp");
  const ttpu_type* th = ttpu_hloi_check(b, hi, "stablehlo.clamp");
  if (!tl || !tx || !th) return TTPU_VAL_ERROR;
  const ttpu_type* bounds[2] = {tl, th};
  for (int i = 0; i < 2; i++) {
    if (bounds[i]->dtype != tx->dtype ||
        (bounds[i]->ndim != 0 && !ttpu_hloi_same_dims(bounds[i], tx)))
      return type_mismatch(b, "stablehlo.clamp", bounds[i], tx);
  }
  if (tx->dtype == TTPU_BOOL)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "stablehlo.clamp: bool not supported");
  ttpu_type r = *tx;
  ttpu_val ops[3] = {lo, x, hi};
  return ttpu_hloi_op(b, "stablehlo.clamp", ops, 3, NULL, r);
}

/* 1 when every value of dtype a is exactly representable in b (so a
 * convert a -> b loses nothing). */
static int convert_is_exact(ttpu_dtype a, ttpu_dtype b) {
  if (ttpu_hloi_is_complex(a) || ttpu_hloi_is_complex(b)) return 0;
  if (a == TTPU_BOOL) return b != TTPU_BOOL;
  int ba = ttpu_hloi_bits(a), bb = ttpu_hloi_bits(b);
  if (ttpu_hloi_is_floatlike(a))
    return ttpu_hloi_is_floatlike(b) && ba < bb;
  if (ttpu_hloi_is_intlike(b)) {
    if (ttpu_hloi_is_signed_int(a))
      return ttpu_hloi_is_signed_int(b) && ba < bb;
    return ba < bb || (ttpu_hloi_is_unsigned(b) && ba == bb);
  }
  if (!ttpu_hloi_is_floatlike(b)) return 0;
  /* integer -> float: the float's significand holds every value */
  int significand = b == TTPU_F64 ? 53 : b == TTPU_F32 ? 24 : b == TTPU_F16 ? 11 : 8;
  return (ttpu_hloi_is_signed_int(a) ? ba - 1 : ba) <= significand;
}

ttpu_val ttpu_hlo_convert(ttpu_hlo* b, ttpu_val x, ttpu_dtype to) {
  const ttpu_type* tx = ttpu_hloi_check(b, x, "stablehlo.convert");
  if (!tx) return TTPU_VAL_ERROR;
  if (!ttpu_hloi_dtype_valid(to))
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "convert: bad dtype %d",
                         (int)to);
  if (tx->dtype == to) return x;
  ttpu_val src;
  if (ttpu_hloi_def(b, x, &src, NULL) == TTPU_HLOI_DEF_CONVERT) {
    /* x holds exactly src's values: convert src instead */
    ttpu_dtype a = ttpu_hlo_type(b, src)->dtype;
    if (convert_is_exact(a, tx->dtype))
      return a == to ? src : ttpu_hlo_convert(b, src, to);
  }
  ttpu_type r = *tx;
  int cx_in = ttpu_hloi_is_complex(tx->dtype), cx_out = ttpu_hloi_is_complex(to);
  if (cx_in && to == TTPU_BOOL)
    return ttpu_hlo_binary(b, TTPU_OR,
                           ttpu_hlo_convert(b, ttpu_hlo_real(b, x), to),
                           ttpu_hlo_convert(b, ttpu_hlo_imag(b, x), to));
  if (cx_in && !cx_out) /* PyTorch keeps the real part */
    return ttpu_hlo_convert(b, ttpu_hlo_real(b, x), to);
  if (cx_out) {
    ttpu_dtype comp = to == TTPU_C64 ? TTPU_F32 : TTPU_F64;
    ttpu_val re, im;
    if (cx_in) {
      re = ttpu_hlo_convert(b, ttpu_hlo_real(b, x), comp);
      im = ttpu_hlo_convert(b, ttpu_hlo_imag(b, x), comp);
    } else {
      /* bool goes through uint8 (a convert from i1 is 0/1 everywhere,
       * but keep one rule for every source) */
      ttpu_val v = tx->dtype == TTPU_BOOL ? ttpu_hlo_convert(b, x, TTPU_U8) : x;
      re = ttpu_hlo_convert(b, v, comp);
      const ttpu_type* rt = ttpu_hlo_type(b, re);
      if (!rt) return TTPU_VAL_ERROR;
      im = ttpu_hlo_const(b, *rt, 0.0, 0);
    }
    return ttpu_hlo_complex(b, re, im);
  }
  if (to == TTPU_BOOL) {
    /* A plain convert to i1 truncates to the low bit on some backends;
     * PyTorch's bool() is x != 0 (NaN is true). */
    ttpu_val z = ttpu_hlo_const(b, r, 0.0, 0);
    return ttpu_hlo_compare(b, TTPU_NE, x, z);
  }
  if (ttpu_hloi_is_floatlike(tx->dtype) &&
      (to == TTPU_U8 || to == TTPU_I8 || to == TTPU_I16)) {
    /* XLA saturates a float converted to a narrow integer (-1.0 -> uint8
     * 0); PyTorch's CPU casts truncate through int32 and keep the low bits
     * (-1.0 -> 255, 300.0 -> int8 44), the behaviour users see. */
    x = ttpu_hlo_convert(b, x, TTPU_I32);
    tx = ttpu_hlo_type(b, x);
    if (!tx) return TTPU_VAL_ERROR;
    r = *tx;
  }
  r.dtype = to;
  ttpu_val v = ttpu_hloi_op(b, "stablehlo.convert", &x, 1, NULL, r);
  ttpu_hloi_set_def(b, v, TTPU_HLOI_DEF_CONVERT, x, NULL);
  return v;
}

ttpu_val ttpu_hlo_bitcast(ttpu_hlo* b, ttpu_val x, ttpu_type to) {
  const ttpu_type* tx = ttpu_hloi_check(b, x, "stablehlo.bitcast_convert");
  if (!tx || !ttpu_hloi_type_ok(b, &to, "stablehlo.bitcast_convert"))
    return TTPU_VAL_ERROR;
  if (tx->dtype == TTPU_BOOL || to.dtype == TTPU_BOOL)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "stablehlo.bitcast_convert: bool has no bit layout");
  if (ttpu_hloi_is_complex(tx->dtype) || ttpu_hloi_is_complex(to.dtype))
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "stablehlo.bitcast_convert: complex types cannot be "
                         "reinterpreted (use real/imag/complex)");
  int bi = ttpu_hloi_bits(tx->dtype), bo = ttpu_hloi_bits(to.dtype);
  int ok;
  if (bi == bo) {
    ok = ttpu_hloi_same_dims(tx, &to);
  } else if (bi > bo) { /* a trailing dim of bi/bo appears */
    ok = to.ndim == tx->ndim + 1 && to.dims[to.ndim - 1] == bi / bo;
    for (int i = 0; ok && i < tx->ndim; i++) ok = tx->dims[i] == to.dims[i];
  } else { /* the trailing dim of bo/bi disappears */
    ok = tx->ndim == to.ndim + 1 && tx->dims[tx->ndim - 1] == bo / bi;
    for (int i = 0; ok && i < to.ndim; i++) ok = tx->dims[i] == to.dims[i];
  }
  if (!ok) {
    char a[160], c[160];
    ttpu_hloi_type_desc(tx, a, sizeof a);
    ttpu_hloi_type_desc(&to, c, sizeof c);
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "stablehlo.bitcast_convert: cannot reinterpret %s "
                         "as %s",
                         a, c);
  }
  if (ttpu_hloi_same_type(tx, &to)) return x;
  return ttpu_hloi_op(b, "stablehlo.bitcast_convert", &x, 1, NULL, to);
}
