/* unary.c - elementwise math of one tensor: exp/log family, roots,
 * trigonometric and hyperbolic functions (composed where StableHLO has no
 * op, in forms accurate at both ends of the range), erf family, rounding,
 * sign and classification, nan_to_num, logit. Float-valued functions of
 * integer or bool tensors compute in the result's float type, as PyTorch
 * promotes them. */
#include <math.h>

#include "complex.h"
#include "elementwise.h"

typedef ttpu_val (*unary_fn)(ttpu_hlo* b, ttpu_val x);

/* A float-valued function: input in opmath of the result's float type. */
static ttpu_status* float_unary(ttpu_lower* L, unary_fn f) {
  ttpu_dtype dt = ttpu_ew_float(L);
  ttpu_ew_set(L, f(ttpu_l_hlo(L), ttpu_ew_in(L, 0, ttpu_ew_opmath(dt))), dt);
  return NULL;
}

/* A function that keeps the input's dtype (neg, abs, floor ...); the
 * records name the kinds the CPU kernel dispatches. */
static ttpu_status* same_unary(ttpu_lower* L, unary_fn f) {
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_ew_set(L, f(ttpu_l_hlo(L), ttpu_ew_in(L, 0, ttpu_ew_opmath(dt))), dt);
  return NULL;
}

#define FLOAT_UNARY(name, expr)                                  \
  static ttpu_val f_##name(ttpu_hlo* b, ttpu_val x) {            \
    (void)b;                                                     \
    return expr;                                                 \
  }                                                              \
  static ttpu_status* lower_##name(ttpu_lower* L) {              \
    return float_unary(L, f_##name);                             \
  }

#define SAME_UNARY(name, expr)                                   \
  static ttpu_val f_##name(ttpu_hlo* b, ttpu_val x) {            \
    (void)b;                                                     \
    return expr;                                                 \
  }                                                              \
  static ttpu_status* lower_##name(ttpu_lower* L) {              \
    return same_unary(L, f_##name);                              \
  }

static const double kLn2 = 0.693147180559945309417232121458176568;
static const double kLn10 = 2.30258509299404568401799145468436421;
static const double kPi = 3.14159265358979323846264338327950288;

static ttpu_val un(ttpu_hlo* b, ttpu_unop op, ttpu_val x) {
  return ttpu_hlo_unary(b, op, x);
}

/* -x where x < 0 (NaN and -0.0 keep r): gives odd functions their sign. */
static ttpu_val odd(ttpu_hlo* b, ttpu_val x, ttpu_val r) {
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, x, 0),
                         un(b, TTPU_NEG, r), r);
}

/* Integers are their own truncation (floor/ceil pass them through). */
static ttpu_val trunc_v(ttpu_hlo* b, ttpu_val x) {
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, x, 0), un(b, TTPU_CEIL, x),
                         un(b, TTPU_FLOOR, x));
}

/* sign as CPU: (0 < x) - (x < 0), so NaN gives 0. */
static ttpu_val sign_v(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t || !ttpu_dtype_is_float(t->dtype)) return un(b, TTPU_SIGN, x);
  ttpu_dtype dt = t->dtype;
  return ttpu_ew_sub(b, ttpu_hlo_convert(b, ttpu_ew_cmpk(b, TTPU_GT, x, 0), dt),
                     ttpu_hlo_convert(b, ttpu_ew_cmpk(b, TTPU_LT, x, 0), dt));
}

/* sqrt((1 - x)(1 + x)): 1 - x^2 without cancellation near |x| = 1. */
static ttpu_val one_minus_sq_root(ttpu_hlo* b, ttpu_val x) {
  return un(b, TTPU_SQRT, ttpu_ew_mul(b, ttpu_ew_ksub(b, 1, x), ttpu_ew_addk(b, x, 1)));
}

static ttpu_val asin_v(ttpu_hlo* b, ttpu_val x) {
  return ttpu_hlo_binary(b, TTPU_ATAN2, x, one_minus_sq_root(b, x));
}

static ttpu_val acos_v(ttpu_hlo* b, ttpu_val x) {
  return ttpu_hlo_binary(b, TTPU_ATAN2, one_minus_sq_root(b, x), x);
}

/* sinh from expm1 (exact near 0); far out as (e/2) * e with e = exp(|x|/2)
 * so that sinh stays finite where exp(|x|) alone would overflow. */
static ttpu_val sinh_v(ttpu_hlo* b, ttpu_val x) {
  ttpu_val a = un(b, TTPU_ABS, x);
  ttpu_val s = un(b, TTPU_EXPM1, a);
  ttpu_val near = ttpu_ew_mulk(
      b, ttpu_ew_add(b, s, ttpu_ew_div(b, s, ttpu_ew_addk(b, s, 1))), 0.5);
  ttpu_val e = un(b, TTPU_EXP, ttpu_ew_mulk(b, a, 0.5));
  ttpu_val far = ttpu_ew_mul(b, ttpu_ew_mulk(b, e, 0.5), e);
  ttpu_val r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_GT, a, 20), far, near);
  return odd(b, x, r);
}

static ttpu_val cosh_v(ttpu_hlo* b, ttpu_val x) {
  ttpu_val a = un(b, TTPU_ABS, x);
  ttpu_val e1 = un(b, TTPU_EXP, a);
  ttpu_val near = ttpu_ew_mulk(b, ttpu_ew_add(b, e1, ttpu_ew_kdiv(b, 1, e1)), 0.5);
  ttpu_val e = un(b, TTPU_EXP, ttpu_ew_mulk(b, a, 0.5));
  ttpu_val far = ttpu_ew_mul(b, ttpu_ew_mulk(b, e, 0.5), e);
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_GT, a, 20), far, near);
}

/* Complex sinh (param 0) and cosh (param 1) of x + iy, from the real ones:
 * sinh = sinh x cos y + i cosh x sin y, cosh = cosh x cos y + i sinh x sin y.
 * A zero imaginary part stays zero (signed as C99's csinh/ccosh), where
 * the formula gives inf * 0 = NaN for an infinite x. */
static ttpu_status* complex_sinh_cosh(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  int is_cosh = ttpu_l_param(L) == 1;
  ttpu_val z = ttpu_ew_in(L, 0, ttpu_l_out_type(L, 0).dtype);
  ttpu_val x = ttpu_hlo_real(b, z), y = ttpu_hlo_imag(b, z);
  ttpu_val sh = sinh_v(b, x), ch = cosh_v(b, x);
  ttpu_val re = ttpu_ew_mul(b, is_cosh ? ch : sh, un(b, TTPU_COS, y));
  ttpu_val im = ttpu_ew_mul(b, is_cosh ? sh : ch, un(b, TTPU_SIN, y));
  ttpu_val zero_im = is_cosh ? odd(b, x, y) : y;
  im = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, y, 0), zero_im, im);
  /* on the imaginary axis: sinh(iy) = 0 + i sin y, cosh(iy) = cos y + 0i
   * (NaN for an infinite y, where the formula's 0 * NaN spreads) */
  ttpu_val x0 = ttpu_ew_cmpk(b, TTPU_EQ, x, 0);
  if (is_cosh)
    im = ttpu_hlo_select(b, x0, ttpu_ew_k(b, x, 0), im);
  else
    re = ttpu_hlo_select(b, x0, x, re);
  /* an infinite x with a NaN or infinite y: inf + NaN i */
  ttpu_val inf_x = ttpu_ew_cmpk(b, TTPU_EQ, un(b, TTPU_ABS, x), INFINITY);
  ttpu_val bad = ttpu_hlo_binary(b, TTPU_AND, inf_x,
                                 un(b, TTPU_NOT, un(b, TTPU_IS_FINITE, y)));
  re = ttpu_hlo_select(b, bad, ttpu_ew_k(b, x, INFINITY), re);
  im = ttpu_hlo_select(b, bad, ttpu_ew_k(b, x, NAN), im);
  ttpu_l_set_out(L, 0, ttpu_hlo_complex(b, re, im));
  return NULL;
}

/* sinc(z) = sin(pi z) / (pi z), 1 at 0, as the CPU's complex kernel
 * (pi is a complex constant there too) */
static ttpu_status* complex_sinc(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val z = ttpu_ew_in(L, 0, ttpu_l_out_type(L, 0).dtype);
  ttpu_val pz = ttpu_ew_mul(b, ttpu_ew_k(b, z, kPi), z);
  ttpu_val r = ttpu_ew_div(b, un(b, TTPU_SIN, pz), pz);
  ttpu_val zero = ttpu_hlo_binary(b, TTPU_AND, ttpu_ew_cmpk(b, TTPU_EQ, ttpu_hlo_real(b, z), 0),
                                  ttpu_ew_cmpk(b, TTPU_EQ, ttpu_hlo_imag(b, z), 0));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, zero, ttpu_ew_k(b, z, 1), r));
  return NULL;
}

/* asinh(|x|) = log1p(a + a^2 / (1 + sqrt(1 + a^2))); log(2a) past 1e8,
 * where a^2 would lose 1 or overflow. */
static ttpu_val asinh_v(ttpu_hlo* b, ttpu_val x) {
  ttpu_val a = un(b, TTPU_ABS, x);
  ttpu_val a2 = ttpu_ew_mul(b, a, a);
  ttpu_val q = ttpu_ew_div(b, a2, ttpu_ew_addk(b, un(b, TTPU_SQRT, ttpu_ew_addk(b, a2, 1)), 1));
  ttpu_val near = un(b, TTPU_LOG1P, ttpu_ew_add(b, a, q));
  ttpu_val far = ttpu_ew_addk(b, un(b, TTPU_LOG, a), kLn2);
  return odd(b, x, ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_GT, a, 1e8), far, near));
}

/* acosh(x) = log1p(t + sqrt(t (x + 1))), t = x - 1; NaN below 1. */
static ttpu_val acosh_v(ttpu_hlo* b, ttpu_val x) {
  ttpu_val t = ttpu_ew_addk(b, x, -1);
  ttpu_val near = un(b, TTPU_LOG1P, ttpu_ew_add(
      b, t, un(b, TTPU_SQRT, ttpu_ew_mul(b, t, ttpu_ew_addk(b, x, 1)))));
  ttpu_val far = ttpu_ew_addk(b, un(b, TTPU_LOG, x), kLn2);
  ttpu_val r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_GT, x, 1e8), far, near);
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, x, 1), ttpu_ew_k(b, x, NAN), r);
}

/* atanh(|x|) = log1p(2|x| / (1 - |x|)) / 2, odd: near -1 the direct form
 * would take log1p of a value next to -1. */
static ttpu_val atanh_v(ttpu_hlo* b, ttpu_val x) {
  ttpu_val a = un(b, TTPU_ABS, x);
  ttpu_val q = ttpu_ew_div(b, ttpu_ew_mulk(b, a, 2), ttpu_ew_ksub(b, 1, a));
  return odd(b, x, ttpu_ew_mulk(b, un(b, TTPU_LOG1P, q), 0.5));
}

/* erfc(z) for z >= 0 as t exp(-z^2 + P(t)), t = 1 / (1 + z/2), with the
 * Chebyshev-fitted coefficients of Press et al., Numerical Recipes, 2nd ed.,
 * sec. 6.2 (fractional error < 1.2e-7 everywhere): no cancellation in the
 * tail, where 1 - erf(z) would be all rounding error. */
static ttpu_val erfc_tail(ttpu_hlo* b, ttpu_val z) {
  static const double c[] = {-1.26551223, 1.00002368, 0.37409196, 0.09678418,
                             -0.18628806, 0.27886807, -1.13520398, 1.48851587,
                             -0.82215223, 0.17087277};
  ttpu_val t = ttpu_ew_kdiv(b, 1, ttpu_ew_addk(b, ttpu_ew_mulk(b, z, 0.5), 1));
  ttpu_val p = ttpu_ew_k(b, t, c[9]);
  for (int i = 8; i >= 0; --i) p = ttpu_ew_addk(b, ttpu_ew_mul(b, p, t), c[i]);
  return ttpu_ew_mul(b, t, un(b, TTPU_EXP, ttpu_ew_sub(b, p, ttpu_ew_mul(b, z, z))));
}

static int is_f64(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* t = ttpu_hlo_type(b, x);
  return t && t->dtype == TTPU_F64;
}

ttpu_val ttpu_ew_erf(ttpu_hlo* b, ttpu_val x) {
  ttpu_val e = un(b, TTPU_ERF, x);
  if (is_f64(b, x)) return e;
  ttpu_val tail = ttpu_ew_ksub(b, 1, erfc_tail(b, un(b, TTPU_ABS, x)));
  ttpu_val far = ttpu_ew_cmpk(b, TTPU_GT, un(b, TTPU_ABS, x), 2);
  return ttpu_hlo_select(b, far, odd(b, x, tail), e);
}

/* erfc: 1 - erf(x) where that loses nothing (x < 0.5), else the tail fit,
 * which keeps the tiny values erfc is used for. */
ttpu_val ttpu_ew_erfc(ttpu_hlo* b, ttpu_val x) {
  ttpu_val z = un(b, TTPU_ABS, x);
  ttpu_val tail = erfc_tail(b, z);
  tail = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, x, 0), ttpu_ew_ksub(b, 2, tail), tail);
  ttpu_val small = ttpu_ew_ksub(b, 1, ttpu_ew_erf(b, x));
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, z, 0.5), small, tail);
}

/* erfinv: Giles' single-precision approximation ("Approximating the erfinv
 * function", GPU Computing Gems, 2010), relative error ~3e-7; for float64
 * refined by Newton steps on erf. */
static ttpu_val erfinv_v(ttpu_hlo* b, ttpu_val x) {
  static const double lo[] = {2.81022636e-08, 3.43273939e-07, -3.5233877e-06,
                              -4.39150654e-06, 0.00021858087, -0.00125372503,
                              -0.00417768164, 0.246640727, 1.50140941};
  static const double hi[] = {-0.000200214257, 0.000100950558, 0.00134934322,
                              -0.00367342844, 0.00573950773, -0.0076224613,
                              0.00943887047, 1.00167406, 2.83297682};
  ttpu_val w = un(b, TTPU_NEG, un(b, TTPU_LOG, ttpu_ew_mul(
      b, ttpu_ew_ksub(b, 1, x), ttpu_ew_addk(b, x, 1))));
  ttpu_val wl = ttpu_ew_addk(b, w, -2.5);
  ttpu_val wh = ttpu_ew_addk(b, un(b, TTPU_SQRT, w), -3);
  ttpu_val pl = ttpu_ew_k(b, x, lo[0]), ph = ttpu_ew_k(b, x, hi[0]);
  for (int i = 1; i < 9; ++i) {
    pl = ttpu_ew_addk(b, ttpu_ew_mul(b, pl, wl), lo[i]);
    ph = ttpu_ew_addk(b, ttpu_ew_mul(b, ph, wh), hi[i]);
  }
  ttpu_val r = ttpu_ew_mul(b, ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, w, 5), pl, ph), x);
  if (is_f64(b, x)) {
    const double two_over_sqrt_pi = 1.12837916709551257389615890312154517;
    for (int i = 0; i < 3; ++i) {
      ttpu_val f = ttpu_ew_sub(b, un(b, TTPU_ERF, r), x);
      ttpu_val d = ttpu_ew_mulk(
          b, un(b, TTPU_EXP, un(b, TTPU_NEG, ttpu_ew_mul(b, r, r))), two_over_sqrt_pi);
      /* where the slope is tiny, erf's own rounding would dominate */
      r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_GT, d, 1e-8),
                          ttpu_ew_sub(b, r, ttpu_ew_div(b, f, d)), r);
    }
  }
  ttpu_val a = un(b, TTPU_ABS, x);
  ttpu_val inf = ttpu_ew_mulk(b, x, INFINITY);
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, a, 1), inf, r);
}

/* round(x, decimals) as CPU: scale by 10^|decimals|, round half to even,
 * scale back (multiplying or dividing as CPU does, for the same rounding). */
static ttpu_val round_decimals(ttpu_hlo* b, ttpu_val x, int64_t decimals) {
  if (decimals == 0) return un(b, TTPU_ROUND_EVEN, x);
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t) return TTPU_VAL_ERROR;
  double p = pow(10.0, (double)(decimals > 0 ? decimals : -decimals));
  /* in opmath, like CPU's ten_pow_decimals */
  ttpu_val pk = ttpu_ew_k(b, x, p);
  if (decimals > 0)
    return ttpu_ew_div(b, un(b, TTPU_ROUND_EVEN, ttpu_ew_mul(b, x, pk)), pk);
  return ttpu_ew_mul(b, un(b, TTPU_ROUND_EVEN, ttpu_ew_div(b, x, pk)), pk);
}

static ttpu_val sinc_v(ttpu_hlo* b, ttpu_val x) {
  ttpu_val px = ttpu_ew_mulk(b, x, kPi);
  ttpu_val r = ttpu_ew_div(b, un(b, TTPU_SIN, px), px);
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, x, 0), ttpu_ew_k(b, x, 1), r);
}

/* ---- float-valued functions */
FLOAT_UNARY(exp, un(b, TTPU_EXP, x))
FLOAT_UNARY(exp2, ttpu_hlo_binary(b, TTPU_POW, ttpu_ew_k(b, x, 2), x))
FLOAT_UNARY(expm1, un(b, TTPU_EXPM1, x))
FLOAT_UNARY(log, un(b, TTPU_LOG, x))
FLOAT_UNARY(log2, ttpu_ew_mulk(b, un(b, TTPU_LOG, x), 1 / kLn2))
FLOAT_UNARY(log10, ttpu_ew_mulk(b, un(b, TTPU_LOG, x), 1 / kLn10))
FLOAT_UNARY(log1p, un(b, TTPU_LOG1P, x))
FLOAT_UNARY(sqrt, un(b, TTPU_SQRT, x))
FLOAT_UNARY(rsqrt, un(b, TTPU_RSQRT, x))
FLOAT_UNARY(reciprocal, ttpu_ew_kdiv(b, 1, x))
FLOAT_UNARY(sin, un(b, TTPU_SIN, x))
FLOAT_UNARY(cos, un(b, TTPU_COS, x))
FLOAT_UNARY(tan, un(b, TTPU_TAN, x))
FLOAT_UNARY(asin, asin_v(b, x))
FLOAT_UNARY(acos, acos_v(b, x))
FLOAT_UNARY(atan, ttpu_hlo_binary(b, TTPU_ATAN2, x, ttpu_ew_k(b, x, 1)))
FLOAT_UNARY(sinh, sinh_v(b, x))
FLOAT_UNARY(cosh, cosh_v(b, x))
FLOAT_UNARY(tanh, un(b, TTPU_TANH, x))
FLOAT_UNARY(asinh, asinh_v(b, x))
FLOAT_UNARY(acosh, acosh_v(b, x))
FLOAT_UNARY(atanh, atanh_v(b, x))
FLOAT_UNARY(erf, ttpu_ew_erf(b, x))
FLOAT_UNARY(erfc, ttpu_ew_erfc(b, x))
FLOAT_UNARY(erfinv, erfinv_v(b, x))
FLOAT_UNARY(sigmoid, un(b, TTPU_LOGISTIC, x))
FLOAT_UNARY(deg2rad, ttpu_ew_mulk(b, x, kPi / 180))
FLOAT_UNARY(rad2deg, ttpu_ew_mulk(b, x, 180 / kPi))
FLOAT_UNARY(sinc, sinc_v(b, x))

/* ---- dtype-preserving functions */
SAME_UNARY(neg, un(b, TTPU_NEG, x))
SAME_UNARY(abs, un(b, TTPU_ABS, x))
SAME_UNARY(sign, sign_v(b, x))
SAME_UNARY(floor, un(b, TTPU_FLOOR, x))
SAME_UNARY(ceil, un(b, TTPU_CEIL, x))
SAME_UNARY(round, un(b, TTPU_ROUND_EVEN, x))
SAME_UNARY(trunc, trunc_v(b, x))
SAME_UNARY(frac, ttpu_ew_sub(b, x, trunc_v(b, x)))

/* round.decimals(self, *, decimals): float tensors only on CPU. */
static ttpu_status* lower_round_decimals(ttpu_lower* L) {
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x = ttpu_ew_in(L, 0, ttpu_ew_opmath(dt));
  ttpu_l_set_out(L, 0, round_decimals(ttpu_l_hlo(L), x, ttpu_l_int(L, 1, 0)));
  return NULL;
}

/* ---- classification: bool results, read in the input's own dtype */

static ttpu_val input_as_is(ttpu_lower* L) {
  return ttpu_ew_in(L, 0, ttpu_ew_common(L));
}

static ttpu_val all_false(ttpu_hlo* b, ttpu_val x) {
  ttpu_type t = *ttpu_hlo_type(b, x);
  t.dtype = TTPU_BOOL;
  return ttpu_hlo_const(b, t, 0, 0);
}

/* which: 0 isinf, 1 isposinf, 2 isneginf */
static ttpu_status* isinf_like(ttpu_lower* L) {
  int which = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = input_as_is(L);
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t) return NULL;
  ttpu_val r;
  if (!ttpu_dtype_is_float(t->dtype)) {
    r = all_false(b, x);
  } else if (which == 0) {
    r = ttpu_ew_cmpk(b, TTPU_EQ, un(b, TTPU_ABS, x), INFINITY);
  } else {
    r = ttpu_ew_cmpk(b, TTPU_EQ, x, which == 1 ? INFINITY : -INFINITY);
  }
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

static ttpu_status* lower_isnan(ttpu_lower* L) {
  ttpu_l_set_out(L, 0, ttpu_ew_isnan(ttpu_l_hlo(L), input_as_is(L)));
  return NULL;
}

/* signbit: the float sign bit (set for -0.0 and negative NaNs). */
static ttpu_status* lower_signbit(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = input_as_is(L);
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return NULL;
  ttpu_type t = *tp;
  ttpu_val r;
  if (ttpu_dtype_is_float(t.dtype)) {
    size_t n = ttpu_dtype_size(t.dtype);
    t.dtype = n == 8 ? TTPU_I64 : n == 4 ? TTPU_I32 : TTPU_I16;
    r = ttpu_ew_cmpk(b, TTPU_LT, ttpu_hlo_bitcast(b, x, t), 0);
  } else if (t.dtype == TTPU_BOOL) {
    r = all_false(b, x);
  } else {
    r = ttpu_ew_cmpk(b, TTPU_LT, x, 0); /* an unsigned compare: never */
  }
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* nan_to_num(self, nan?, posinf?, neginf?): None means 0 and the dtype's
 * largest/lowest finite value; integer and bool tensors are unchanged. */
static ttpu_status* lower_nan_to_num(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = input_as_is(L);
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t) return NULL;
  ttpu_dtype dt = t->dtype;
  ttpu_dtype out = ttpu_l_out_type(L, 0).dtype;
  if (out != dt) /* the CPU kernel's own check, which its meta lacks */
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "nan_to_num: dtype of out: %s should be same as input: %s",
                            ttpu_dtype_torch_title(out), ttpu_dtype_torch_title(dt));
  if (!ttpu_dtype_is_float(dt)) {
    ttpu_l_set_out(L, 0, x);
    return NULL;
  }
  double big = dt == TTPU_F64    ? 1.7976931348623157e308
               : dt == TTPU_F32  ? 3.4028234663852886e38
               : dt == TTPU_BF16 ? 3.3895313892515355e38
                                 : 65504.0;
  double nanv = ttpu_l_float(L, 1, 0.0);
  double posv = ttpu_l_float(L, 2, big);
  double negv = ttpu_l_float(L, 3, -big);
  ttpu_val r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, x, INFINITY),
                               ttpu_ew_k(b, x, posv), x);
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, x, -INFINITY),
                      ttpu_ew_k(b, x, negv), r);
  r = ttpu_hlo_select(b, ttpu_ew_isnan(b, x), ttpu_ew_k(b, x, nanv), r);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* logit(self, eps?): log(x / (1 - x)), x first clamped to [eps, 1 - eps]
 * when eps is given (and not negative, which CPU treats as None). */
static ttpu_status* lower_logit(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_ew_in(L, 0, ttpu_ew_opmath(ttpu_ew_float(L)));
  double eps = ttpu_l_float(L, 1, -1.0);
  if (eps >= 0) {
    ttpu_val lo = ttpu_ew_k(b, x, eps);
    ttpu_val hi = ttpu_ew_ksub(b, 1, lo);
    x = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_LT, x, lo), lo,
                        ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, x, hi), hi, x));
  }
  ttpu_l_set_out(L, 0, un(b, TTPU_LOG, ttpu_ew_div(b, x, ttpu_ew_ksub(b, 1, x))));
  return NULL;
}

/* logit_backward(grad_output, self, eps?) */
static ttpu_status* lower_logit_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md = ttpu_ew_opmath(ttpu_ew_float(L));
  ttpu_val dy = ttpu_ew_in(L, 0, md), x = ttpu_ew_in(L, 1, md);
  double eps = ttpu_l_float(L, 2, -1.0);
  ttpu_val edge = ttpu_ew_or(b, ttpu_ew_cmpk(b, TTPU_EQ, x, 0), ttpu_ew_cmpk(b, TTPU_EQ, x, 1));
  ttpu_val r = ttpu_ew_div(b, dy, ttpu_ew_mul(b, x, ttpu_ew_ksub(b, 1, x)));
  r = ttpu_hlo_select(b, edge, ttpu_ew_mulk(b, dy, INFINITY), r);
  ttpu_val lo = ttpu_ew_k(b, x, eps < 0 ? 0 : eps);
  ttpu_val hi = ttpu_ew_ksub(b, 1, lo);
  ttpu_val out = ttpu_ew_or(b, ttpu_hlo_compare(b, TTPU_LT, x, lo),
                            ttpu_hlo_compare(b, TTPU_GT, x, hi));
  r = ttpu_hlo_select(b, out, ttpu_ew_k(b, x, eps < 0 ? NAN : 0), r);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

#define UNARY_DEFS(name, ...) \
  {#name, lower_##name, .variants = TTPU_V_INPLACE | TTPU_V_OUT, __VA_ARGS__}

const ttpu_op_def ttpu_ops_unary[] = {
    UNARY_DEFS(exp, .param = TTPU_EXP, .complex_fn = ttpu_complex_exp),
    UNARY_DEFS(exp2, .param = TTPU_CX_EXP2, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(expm1, .param = TTPU_CX_EXPM1, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(log, .param = TTPU_LOG, .complex_fn = ttpu_complex_unary),
    UNARY_DEFS(log2, .param = TTPU_CX_LOG2, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(log10, .param = TTPU_CX_LOG10, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(log1p, .param = TTPU_CX_LOG1P, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(sqrt, .param = TTPU_SQRT, .complex_fn = ttpu_complex_unary),
    UNARY_DEFS(rsqrt, .param = TTPU_CX_RSQRT, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(reciprocal, .complex_fn = ttpu_complex_reciprocal),
    UNARY_DEFS(sin, .param = TTPU_SIN, .complex_fn = ttpu_complex_unary),
    UNARY_DEFS(cos, .param = TTPU_COS, .complex_fn = ttpu_complex_unary),
    UNARY_DEFS(tan, .param = TTPU_CX_TAN, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(asin, .param = TTPU_CX_ASIN, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(acos, .param = TTPU_CX_ACOS, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(atan, .param = TTPU_CX_ATAN, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(sinh, .param = 0, .complex_fn = complex_sinh_cosh),
    UNARY_DEFS(cosh, .param = 1, .complex_fn = complex_sinh_cosh),
    UNARY_DEFS(tanh, .param = TTPU_TANH, .complex_fn = ttpu_complex_unary),
    UNARY_DEFS(asinh, .param = TTPU_CX_ASINH, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(acosh, .param = TTPU_CX_ACOSH, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(atanh, .param = TTPU_CX_ATANH, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(erf, .flags = TTPU_OP_REAL_INTO_COMPLEX),
    UNARY_DEFS(erfc, .flags = TTPU_OP_REAL_INTO_COMPLEX),
    UNARY_DEFS(erfinv, .flags = TTPU_OP_REAL_INTO_COMPLEX),
    UNARY_DEFS(sigmoid, .param = TTPU_CX_SIGMOID, .complex_fn = ttpu_complex_special),
    UNARY_DEFS(deg2rad, .flags = TTPU_OP_REAL_INTO_COMPLEX),
    UNARY_DEFS(rad2deg, .flags = TTPU_OP_REAL_INTO_COMPLEX),
    UNARY_DEFS(sinc, .complex_fn = complex_sinc),
    UNARY_DEFS(neg, .param = TTPU_NEG, .flags = TTPU_OP_SAME_DTYPE_OUT, .complex_fn = ttpu_complex_unary, .kinds = TTPU_K_NUM, .kernel = "neg_cpu"),
    {"abs", lower_abs, .variants = TTPU_V_OUT, .kinds = TTPU_K_NUM, .kernel = "abs_cpu",
     .complex_fn = ttpu_complex_abs},
    {"abs_", lower_abs, .kinds = TTPU_K_NUM, .kernel = "abs_cpu"},
    UNARY_DEFS(sign, .flags = 0),
    {"sgn", lower_sign, .param = TTPU_SIGN, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .complex_fn = ttpu_complex_unary},
    UNARY_DEFS(floor, .kinds = TTPU_K_NUM, .kernel = "floor_vml_cpu"),
    UNARY_DEFS(ceil, .kinds = TTPU_K_NUM, .kernel = "ceil_vml_cpu"),
    UNARY_DEFS(round, .flags = TTPU_OP_SAME_DTYPE_OUT, .kinds = TTPU_K_NUM, .kernel = "round_vml_cpu"),
    {"round.decimals", lower_round_decimals, .flags = TTPU_OP_SAME_DTYPE_OUT, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT, .kinds = TTPU_K_FLOAT, .kernel = "round_cpu"},
    UNARY_DEFS(trunc, .kinds = TTPU_K_NUM, .kernel = "trunc_vml_cpu"),
    UNARY_DEFS(frac, .kinds = TTPU_K_FLOAT, .kernel = "frac_cpu"),
    {"isnan", lower_isnan, .complex_fn = ttpu_complex_isnan},
    {"isnan.out", lower_isnan, .flags = 0},
    {"isinf", isinf_like, .param = 0, .variants = TTPU_V_OUT},
    {"isposinf", isinf_like, .param = 1, .variants = TTPU_V_OUT},
    {"isneginf", isinf_like, .param = 2, .variants = TTPU_V_OUT},
    {"signbit", lower_signbit, .variants = TTPU_V_OUT},
    UNARY_DEFS(nan_to_num, .flags = TTPU_OP_REAL_INTO_COMPLEX),
    UNARY_DEFS(logit, .flags = TTPU_OP_REAL_INTO_COMPLEX),
    {"logit_backward", lower_logit_backward, .flags = 0},
    {"logit_backward.grad_input", lower_logit_backward, .flags = 0},
    {0},
};
