/* special.c - special functions: gamma family (lgamma, digamma,
 * polygamma), Hurwitz zeta, Bessel i1/i1e, nextafter, xlog1py, entr,
 * angle of real numbers, frexp. The gamma family, zeta and i1e build on XLA's chlo
 * implementations (the plugin legalizes them, as it does chlo.erf); the
 * points where PyTorch defines a value those leave open are fixed here.
 * Integer and bool inputs compute in the default float type, as PyTorch
 * promotes them. */
#include <math.h>

#include "complex.h"
#include "elementwise.h"

static const double kPi = 3.14159265358979323846264338327950288;

/* Input `arg` in the opmath of the op's float result type. */
static ttpu_val float_in(ttpu_lower* L, int arg) {
  return ttpu_ew_in(L, arg, ttpu_ew_opmath(ttpu_ew_float(L)));
}

static ttpu_val is_int_valued(ttpu_hlo* b, ttpu_val x) {
  return ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_unary(b, TTPU_FLOOR, x), x);
}

/* lgamma: +inf at the poles (0, negative integers) and at -inf, as the
 * CPU's std::lgamma. */
static ttpu_status* lower_lgamma(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = float_in(L, 0);
  ttpu_val r = ttpu_hlo_unary(b, TTPU_LGAMMA, x);
  ttpu_val pole = ttpu_ew_and(b, ttpu_ew_cmpk(b, TTPU_LE, x, 0), is_int_valued(b, x));
  pole = ttpu_ew_or(b, pole, ttpu_ew_cmpk(b, TTPU_EQ, x, -INFINITY));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, pole, ttpu_ew_k(b, x, INFINITY), r));
  return NULL;
}

/* digamma(+-0) is -+inf (PyTorch follows the limit from the other side of
 * the sign), NaN at negative integers and at -inf. Below zero it uses the
 * reflection digamma(x) = digamma(1 - x) - pi / tan(pi x) with the
 * argument of tan reduced exactly first, to x - round(x) in [-1/2, 1/2]
 * (exact, where x - floor(x) would round away the digits of a small x
 * near a pole): XLA's own reflection loses digits near the poles. */
static ttpu_val digamma_v(ttpu_hlo* b, ttpu_val x) {
  ttpu_val neg = ttpu_ew_cmpk(b, TTPU_LT, x, 0);
  ttpu_val pos_x = ttpu_hlo_select(b, neg, ttpu_ew_ksub(b, 1, x), x);
  ttpu_val r = ttpu_hlo_unary(b, TTPU_DIGAMMA, pos_x);
  ttpu_val frac = ttpu_ew_sub(b, x, ttpu_hlo_unary(b, TTPU_ROUND_EVEN, x));
  ttpu_val t = ttpu_hlo_unary(b, TTPU_TAN, ttpu_ew_mulk(b, frac, kPi));
  ttpu_val refl = ttpu_ew_sub(b, r, ttpu_ew_div(b, ttpu_ew_k(b, x, kPi), t));
  r = ttpu_hlo_select(b, neg, refl, r);
  ttpu_val neg_int = ttpu_ew_and(b, neg, is_int_valued(b, x));
  r = ttpu_hlo_select(b, neg_int, ttpu_ew_k(b, x, NAN), r);
  /* the sign of zero: 1/x is +inf for +0 and -inf for -0 */
  ttpu_val inv = ttpu_ew_kdiv(b, 1, x);
  ttpu_val zero = ttpu_ew_cmpk(b, TTPU_EQ, x, 0);
  return ttpu_hlo_select(b, zero, ttpu_hlo_unary(b, TTPU_NEG, inv), r);
}

/* How far below zero zeta's q (and polygamma's x) is shifted by summing
 * terms explicitly: XLA's zeta assumes q > 0. Beyond -kShift the result
 * is NaN rather than a wrong number. */
enum { kShift = 32 };

/* Hurwitz zeta(s, q) for any q not a non-positive integer:
 * zeta(s, q) = sum_{k<K} (q + k)^-s + zeta(s, q + K) when q < 0. */
static ttpu_val zeta_v(ttpu_hlo* b, ttpu_val s, ttpu_val q) {
  ttpu_val neg = ttpu_ew_cmpk(b, TTPU_LT, q, 0);
  ttpu_val qs = ttpu_hlo_select(b, neg, ttpu_ew_addk(b, q, kShift), q);
  ttpu_val r = ttpu_hlo_binary(b, TTPU_ZETA, s, qs);
  ttpu_val ms = ttpu_hlo_unary(b, TTPU_NEG, s), sum = ttpu_ew_k(b, q, 0);
  for (int k = 0; k < kShift; ++k)
    sum = ttpu_ew_add(b, sum, ttpu_hlo_binary(b, TTPU_POW, ttpu_ew_addk(b, q, k), ms));
  r = ttpu_hlo_select(b, neg, ttpu_ew_add(b, r, sum), r);
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, q, -kShift), ttpu_ew_k(b, q, NAN), r);
}

static ttpu_status* lower_digamma(ttpu_lower* L) {
  ttpu_l_set_out(L, 0, digamma_v(ttpu_l_hlo(L), float_in(L, 0)));
  return NULL;
}

/* polygamma(int n, Tensor self) and polygamma_(Tensor self, int n). */
static ttpu_status* polygamma_common(ttpu_lower* L) {
  int n_arg = (int)ttpu_l_param_at(L, 0);
  int x_arg = (int)ttpu_l_param_at(L, 1);
  ttpu_hlo* b = ttpu_l_hlo(L);
  int64_t n = ttpu_l_int(L, n_arg, 0);
  ttpu_val x = float_in(L, x_arg);
  if (n == 0) {
    ttpu_l_set_out(L, 0, digamma_v(b, x));
    return NULL;
  }
  /* (-1)^(n+1) n! zeta(n+1, x) */
  double fact = 1;
  for (int64_t k = 2; k <= n; ++k) fact *= (double)k;
  ttpu_val r = ttpu_ew_mulk(b, zeta_v(b, ttpu_ew_k(b, x, (double)(n + 1)), x),
                            n % 2 ? fact : -fact);
  /* The poles (0 and the negative integers) of (-1)^(n+1) n! zeta(n+1, x):
   * +inf for odd n, -inf for even n, as the CPU's kernel. */
  ttpu_val pole = ttpu_ew_and(b, ttpu_ew_cmpk(b, TTPU_LE, x, 0), is_int_valued(b, x));
  r = ttpu_hlo_select(b, pole, ttpu_ew_k(b, x, n % 2 ? INFINITY : -INFINITY), r);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* Hurwitz zeta(x, q) = sum_k (k + q)^-x, as the CPU's Cephes-based
 * kernel: x == 1 is +inf, x < 1 is NaN, and q a non-positive integer
 * is +inf. */
static ttpu_status* lower_zeta(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_float(L);
  /* the CPU kernel has no half-precision instance */
  if (dt == TTPU_BF16 || dt == TTPU_F16) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"zeta_cpu\" not implemented for '%s'",
                  ttpu_dtype_torch_title(dt));
    return NULL;
  }
  ttpu_val x = float_in(L, 0), q = float_in(L, 1);
  ttpu_val r = zeta_v(b, x, q);
  ttpu_val q_pole = ttpu_ew_and(b, ttpu_ew_cmpk(b, TTPU_LE, q, 0), is_int_valued(b, q));
  r = ttpu_hlo_select(b, q_pole, ttpu_ew_k(b, r, INFINITY), r);
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, x, 1), ttpu_ew_k(b, r, NAN), r);
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, x, 1), ttpu_ew_k(b, r, INFINITY), r);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* i1e(x) = exp(-|x|) I1(x); i1(x) = i1e(x) exp(|x|). */
static ttpu_status* lower_i1e(ttpu_lower* L) {
  ttpu_l_set_out(L, 0, ttpu_hlo_unary(ttpu_l_hlo(L), TTPU_BESSEL_I1E, float_in(L, 0)));
  return NULL;
}

static ttpu_status* lower_i1(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = float_in(L, 0);
  ttpu_val e = ttpu_hlo_unary(b, TTPU_EXP, ttpu_hlo_unary(b, TTPU_ABS, x));
  ttpu_l_set_out(L, 0, ttpu_ew_mul(b, ttpu_hlo_unary(b, TTPU_BESSEL_I1E, x), e));
  return NULL;
}

/* nextafter keeps the common dtype (float only on the CPU). The chlo op
 * works on the value's own bits, so half types stay in their dtype. */
static ttpu_status* lower_nextafter(ttpu_lower* L) {
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_val x = ttpu_ew_in(L, 0, dt), y = ttpu_ew_in(L, 1, dt);
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(ttpu_l_hlo(L), TTPU_NEXT_AFTER, x, y));
  return NULL;
}

/* xlog1py(x, y) = x * log1p(y), 0 where x == 0 unless y is NaN. A NaN y
 * is selected last, explicitly: XLA turns x * v for a boolean x converted
 * to float into select(x, v, 0), which drops 0 * NaN. */
static ttpu_status* lower_xlog1py(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = float_in(L, 0), y = float_in(L, 1);
  ttpu_val r = ttpu_ew_mul(b, x, ttpu_hlo_unary(b, TTPU_LOG1P, y));
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, x, 0), ttpu_ew_k(b, x, 0), r);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_ew_isnan(b, y), y, r));
  return NULL;
}

/* entr(x) = -x log x for x > 0, 0 at 0, -inf below 0, NaN kept. */
static ttpu_status* lower_entr(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = float_in(L, 0);
  ttpu_val r = ttpu_hlo_unary(b, TTPU_NEG, ttpu_ew_mul(b, x, ttpu_hlo_unary(b, TTPU_LOG, x)));
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, x, 0), ttpu_ew_k(b, x, 0), r);
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, x, 0), ttpu_ew_k(b, x, -INFINITY), r);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* angle of a real number: pi below zero, else 0; NaN stays NaN. */
static ttpu_status* lower_angle(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  /* An integer input's angle is a float (the default dtype), which the
   * CPU will not cast into an integer out=. */
  const ttpu_tensor* in = ttpu_l_tensor_desc(L, 0, -1);
  ttpu_dtype out = ttpu_l_out_type(L, 0).dtype;
  if (in && !ttpu_dtype_is_float(in->dtype) && !ttpu_dtype_is_complex(in->dtype) &&
      !ttpu_dtype_is_float(out) && !ttpu_dtype_is_complex(out))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "result type Float can't be cast to the desired output type %s",
                            ttpu_dtype_torch_title(out));
  ttpu_val x = float_in(L, 0);
  ttpu_val r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, x, 0), ttpu_ew_k(b, x, kPi),
                               ttpu_ew_k(b, x, 0));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_ew_isnan(b, x), x, r));
  return NULL;
}

/* frexp(self) -> (mantissa, exponent): x = mantissa * 2^exponent with
 * |mantissa| in [0.5, 1), read from the float's bits with integer ops only
 * (XLA's CPU backend flushes subnormal floats to zero in arithmetic): a
 * subnormal's significand is converted to a (normal) float first and its
 * exponent offset added back. 0, inf and NaN give (x, 0) as std::frexp.
 * Half types go through float32, where their values are exact. */
static void frexp_bits(ttpu_hlo* b, ttpu_val bits, ttpu_type ti, int mbits, int64_t emask,
                       int64_t bias, ttpu_val* m_bits, ttpu_val* e) {
  ttpu_val field = ttpu_hlo_binary(b, TTPU_AND, ttpu_hlo_binary(b, TTPU_SHR_L, bits, ttpu_hlo_const(b, ti, 0, mbits)),
                                   ttpu_hlo_const(b, ti, 0, emask));
  *e = ttpu_hlo_binary(b, TTPU_SUB, field, ttpu_hlo_const(b, ti, 0, bias));
  ttpu_val cleared = ttpu_hlo_binary(b, TTPU_AND, bits, ttpu_hlo_const(b, ti, 0, ~(emask << mbits)));
  *m_bits = ttpu_hlo_binary(b, TTPU_OR, cleared, ttpu_hlo_const(b, ti, 0, bias << mbits));
}

static ttpu_status* lower_frexp(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type om = ttpu_l_out_type(L, 0), oe = ttpu_l_out_type(L, 1);
  if (!ttpu_dtype_is_float(om.dtype)) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "torch.frexp() only supports floating-point dtypes");
    return NULL;
  }
  int f64 = om.dtype == TTPU_F64;
  ttpu_dtype fd = f64 ? TTPU_F64 : TTPU_F32, id = f64 ? TTPU_I64 : TTPU_I32;
  int mbits = f64 ? 52 : 23, sub_shift = f64 ? 1074 : 149;
  int64_t emask = f64 ? 0x7ff : 0xff, bias = f64 ? 1022 : 126;
  int64_t sig = ((int64_t)1 << mbits) - 1;
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), fd);
  ttpu_type tf = ttpu_l_type(L, x), ti = tf;
  ti.dtype = id;
  ttpu_val bits = ttpu_hlo_bitcast(b, x, ti);
  ttpu_val field = ttpu_hlo_binary(b, TTPU_AND, ttpu_hlo_binary(b, TTPU_SHR_L, bits, ttpu_hlo_const(b, ti, 0, mbits)),
                                   ttpu_hlo_const(b, ti, 0, emask));
  ttpu_val frac = ttpu_hlo_binary(b, TTPU_AND, bits, ttpu_hlo_const(b, ti, 0, sig));
  ttpu_val mb, e;
  frexp_bits(b, bits, ti, mbits, emask, bias, &mb, &e);
  /* subnormal: significand * 2^-sub_shift, the significand a normal float */
  ttpu_val sf = ttpu_hlo_bitcast(b, ttpu_hlo_convert(b, ttpu_hlo_convert(b, frac, fd), fd), ti);
  ttpu_val smb, se;
  frexp_bits(b, sf, ti, mbits, emask, bias, &smb, &se);
  ttpu_val sign = ttpu_hlo_binary(b, TTPU_AND, bits, ttpu_hlo_const(b, ti, 0, (int64_t)1 << (f64 ? 63 : 31)));
  smb = ttpu_hlo_binary(b, TTPU_OR, smb, sign);
  se = ttpu_hlo_binary(b, TTPU_SUB, se, ttpu_hlo_const(b, ti, 0, sub_shift));
  ttpu_val zero_field = ttpu_hlo_compare(b, TTPU_EQ, field, ttpu_hlo_const(b, ti, 0, 0));
  ttpu_val nz_frac = ttpu_hlo_compare(b, TTPU_NE, frac, ttpu_hlo_const(b, ti, 0, 0));
  ttpu_val subn = ttpu_hlo_binary(b, TTPU_AND, zero_field, nz_frac);
  mb = ttpu_hlo_select(b, subn, smb, mb);
  e = ttpu_hlo_select(b, subn, se, e);
  ttpu_val m = ttpu_hlo_bitcast(b, mb, tf);
  ttpu_val zero = ttpu_hlo_binary(b, TTPU_AND, zero_field, ttpu_hlo_unary(b, TTPU_NOT, nz_frac));
  ttpu_val special = ttpu_hlo_binary(b, TTPU_OR, zero,
                                     ttpu_hlo_compare(b, TTPU_EQ, field, ttpu_hlo_const(b, ti, 0, emask)));
  m = ttpu_hlo_select(b, special, x, m);
  e = ttpu_hlo_select(b, special, ttpu_hlo_const(b, ti, 0, 0), e);
  ttpu_l_set_out(L, 0, m);
  ttpu_l_set_out(L, 1, ttpu_hlo_convert(b, e, oe.dtype));
  return NULL;
}

/* ------------------------------------------------------------ normal
 * distribution helpers, computed in float64 (f32 results then round once),
 * with the asymptotic series where float64 itself would underflow. */

static const double kSqrt2 = 1.41421356237309504880168872420969808;

/* The op's input in float64. */
static ttpu_val f64_in(ttpu_lower* L, int arg) {
  return ttpu_hlo_convert(ttpu_l_hlo(L), ttpu_ew_in(L, arg, ttpu_ew_float(L)), TTPU_F64);
}

/* log(Phi(x)): log1p(-erfc(x/sqrt2)/2) above -1, log(erfc(-x/sqrt2)/2)
 * below, and for x < -37 (erfc underflows) the series
 * -x^2/2 - log(-x) - log(2 pi)/2 + log1p(-1/x^2 + 3/x^4 - 15/x^6). */
static ttpu_val log_ndtr_v(ttpu_hlo* b, ttpu_val x) {
  ttpu_val hi = ttpu_hlo_unary(b, TTPU_LOG1P,
                               ttpu_ew_mulk(b, ttpu_ew_erfc(b, ttpu_ew_mulk(b, x, 1 / kSqrt2)), -0.5));
  ttpu_val mid = ttpu_hlo_unary(b, TTPU_LOG,
                                ttpu_ew_mulk(b, ttpu_ew_erfc(b, ttpu_ew_mulk(b, x, -1 / kSqrt2)), 0.5));
  ttpu_val x2 = ttpu_ew_mul(b, x, x), ix2 = ttpu_ew_kdiv(b, 1, x2);
  ttpu_val series = ttpu_ew_mul(b, ix2, ttpu_ew_addk(b, ttpu_ew_mul(b, ix2, ttpu_ew_addk(b, ttpu_ew_mulk(b, ix2, -15), 3)), -1));
  ttpu_val lo = ttpu_ew_add(b, ttpu_ew_mulk(b, x2, -0.5),
                            ttpu_ew_sub(b, ttpu_hlo_unary(b, TTPU_LOG1P, series),
                                        ttpu_ew_addk(b, ttpu_hlo_unary(b, TTPU_LOG, ttpu_hlo_unary(b, TTPU_NEG, x)),
                                                     0.918938533204672741780329736405617640)));
  ttpu_val r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, x, -1), mid, hi);
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, x, -37), lo, r);
}

static ttpu_status* lower_log_ndtr(ttpu_lower* L) {
  ttpu_l_set_out(L, 0, log_ndtr_v(ttpu_l_hlo(L), f64_in(L, 0)));
  return NULL;
}

/* erfcx(x) = exp(x^2) erfc(x); from x = 25 on (where exp(x^2) overflows)
 * the series (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6)) / (x sqrt(pi)). */
static ttpu_status* lower_erfcx(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = f64_in(L, 0);
  ttpu_val x2 = ttpu_ew_mul(b, x, x);
  ttpu_val direct = ttpu_ew_mul(b, ttpu_hlo_unary(b, TTPU_EXP, x2), ttpu_ew_erfc(b, x));
  ttpu_val h = ttpu_ew_kdiv(b, 0.5, x2); /* 1/(2x^2) */
  ttpu_val poly = ttpu_ew_addk(b, ttpu_ew_mul(b, h, ttpu_ew_addk(b, ttpu_ew_mul(b, h, ttpu_ew_addk(b, ttpu_ew_mulk(b, h, -15), 3)), -1)), 1);
  ttpu_val series = ttpu_ew_div(b, poly, ttpu_ew_mulk(b, x, 1.77245385090551602729816748334114518));
  ttpu_val r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_GE, x, 25), series, direct);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, x, INFINITY), ttpu_ew_k(b, x, 0), r));
  return NULL;
}

/* ndtri(p), the standard normal quantile: sqrt(2) erfinv(2p - 1); below
 * p = 1e-10 (where 2p - 1 rounds to -1) the Abramowitz-Stegun 26.2.23
 * start refined by Newton steps on log Phi. 0 -> -inf, 1 -> inf, outside
 * [0, 1] NaN. */
static ttpu_status* lower_ndtri(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val p = f64_in(L, 0);
  ttpu_val r = ttpu_ew_mulk(b, ttpu_hlo_unary(b, TTPU_ERF_INV, ttpu_ew_addk(b, ttpu_ew_mulk(b, p, 2), -1)), kSqrt2);
  ttpu_val tiny = ttpu_ew_cmpk(b, TTPU_LT, p, 1e-10);
  ttpu_val ps = ttpu_hlo_select(b, tiny, p, ttpu_ew_k(b, p, 1e-20)); /* keeps the branch finite */
  ttpu_val lp = ttpu_hlo_unary(b, TTPU_LOG, ps);
  ttpu_val t = ttpu_hlo_unary(b, TTPU_SQRT, ttpu_ew_mulk(b, lp, -2));
  ttpu_val num = ttpu_ew_addk(b, ttpu_ew_mul(b, t, ttpu_ew_addk(b, ttpu_ew_mulk(b, t, 0.010328), 0.802853)), 2.515517);
  ttpu_val den = ttpu_ew_addk(b, ttpu_ew_mul(b, t, ttpu_ew_addk(b, ttpu_ew_mul(b, t, ttpu_ew_addk(b, ttpu_ew_mulk(b, t, 0.001308), 0.189269)), 1.432788)), 1);
  ttpu_val z = ttpu_hlo_unary(b, TTPU_NEG, ttpu_ew_sub(b, t, ttpu_ew_div(b, num, den)));
  for (int i = 0; i < 4; ++i) {
    /* f = log Phi(z) - log p, f' = phi(z) / Phi(z) */
    ttpu_val lphi = log_ndtr_v(b, z);
    ttpu_val dens = ttpu_ew_addk(b, ttpu_ew_mulk(b, ttpu_ew_mul(b, z, z), -0.5), -0.918938533204672741780329736405617640);
    ttpu_val slope = ttpu_hlo_unary(b, TTPU_EXP, ttpu_ew_sub(b, dens, lphi));
    z = ttpu_ew_sub(b, z, ttpu_ew_div(b, ttpu_ew_sub(b, lphi, lp), slope));
  }
  r = ttpu_hlo_select(b, tiny, z, r);
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, p, 0), ttpu_ew_k(b, p, -INFINITY), r);
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_EQ, p, 1), ttpu_ew_k(b, p, INFINITY), r);
  ttpu_val out = ttpu_ew_or(b, ttpu_ew_cmpk(b, TTPU_LT, p, 0), ttpu_ew_cmpk(b, TTPU_GT, p, 1));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, out, ttpu_ew_k(b, p, NAN), r));
  return NULL;
}

/* spherical j0(x) = sin(x)/x, by its series below |x| = 0.5 (as the CPU),
 * 0 at the infinities. */
static ttpu_status* lower_spherical_j0(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = float_in(L, 0);
  ttpu_val x2 = ttpu_ew_mul(b, x, x);
  static const double c[] = {1.0, -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800,
                             1.0 / 6227020800.0};
  ttpu_val s = ttpu_ew_k(b, x, c[6]);
  for (int i = 5; i >= 0; --i) s = ttpu_ew_addk(b, ttpu_ew_mul(b, s, x2), c[i]);
  ttpu_val r = ttpu_ew_div(b, ttpu_hlo_unary(b, TTPU_SIN, x), x);
  r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, ttpu_hlo_unary(b, TTPU_ABS, x), 0.5), s, r);
  ttpu_val inf = ttpu_ew_cmpk(b, TTPU_EQ, ttpu_hlo_unary(b, TTPU_ABS, x), INFINITY);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, inf, ttpu_ew_k(b, x, 0), r));
  return NULL;
}

const ttpu_op_def ttpu_ops_special[] = {
    {"special_log_ndtr", lower_log_ndtr, .flags = TTPU_OP_REAL_INTO_COMPLEX, .variants = TTPU_V_OUT},
    {"special_erfcx", lower_erfcx, .flags = TTPU_OP_REAL_INTO_COMPLEX, .variants = TTPU_V_OUT},
    {"special_ndtri", lower_ndtri, .flags = TTPU_OP_REAL_INTO_COMPLEX, .variants = TTPU_V_OUT},
    {"special_spherical_bessel_j0", lower_spherical_j0, .flags = TTPU_OP_REAL_INTO_COMPLEX, .variants = TTPU_V_OUT},
    {"special_modified_bessel_i1", lower_i1, .flags = TTPU_OP_REAL_INTO_COMPLEX, .variants = TTPU_V_OUT},
    {"frexp.Tensor", lower_frexp, .variants = TTPU_V_OV_OUT},
    {"lgamma", lower_lgamma, .flags = TTPU_OP_REAL_INTO_COMPLEX, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"digamma", lower_digamma, .flags = TTPU_OP_REAL_INTO_COMPLEX, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"polygamma", polygamma_common, .param = TTPU_PARAMS(0, 1, 0), .variants = TTPU_V_OUT},
    {"polygamma_", polygamma_common, .param = TTPU_PARAMS(1, 0, 0)},
    {"special_zeta", lower_zeta, .variants = TTPU_V_OUT},
    {"special_zeta.self_scalar", lower_zeta, .variants = TTPU_V_OV_OUT},
    {"special_zeta.other_scalar", lower_zeta, .variants = TTPU_V_OV_OUT},
    {"special_i1e", lower_i1e, .flags = TTPU_OP_REAL_INTO_COMPLEX, .variants = TTPU_V_OUT},
    {"special_i1", lower_i1, .flags = TTPU_OP_REAL_INTO_COMPLEX, .variants = TTPU_V_OUT},
    {"nextafter", lower_nextafter, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .kinds = TTPU_K_FLOAT, .kernel = "nextafter_cpu"},
    {"special_xlog1py", lower_xlog1py, .variants = TTPU_V_OUT},
    {"special_xlog1py.self_scalar", lower_xlog1py, .variants = TTPU_V_OV_OUT},
    {"special_xlog1py.other_scalar", lower_xlog1py, .variants = TTPU_V_OV_OUT},
    {"special_entr", lower_entr, .flags = TTPU_OP_REAL_INTO_COMPLEX, .variants = TTPU_V_OUT},
    {"angle", lower_angle, .variants = TTPU_V_OUT, .complex_fn = ttpu_complex_angle},
    {0},
};
