/* polynomial.c - the orthogonal polynomials of torch.special (Chebyshev
 * T/U/V/W and their shifted forms, Hermite H/He, Laguerre, Legendre) of a
 * tensor degree n.
 *
 * They follow the CPU kernels step for step: n is truncated to an integer,
 * n < 0 gives 0, |x| == 1 (or the shifted equivalents) has its closed
 * value, Chebyshev of a large degree inside (-1, 1) uses the trigonometric
 * form, and everything else runs the three-term recurrence. The degree is
 * a runtime value, so the recurrence is unrolled up to kMaxDegree steps
 * and each element picks the step equal to its degree; a larger degree
 * fails the call (a data-dependent check) rather than giving a wrong
 * number. */
#include <math.h>

#include "elementwise.h"

enum { kMaxDegree = 64 };

typedef enum {
  CHEB_T, CHEB_U, CHEB_V, CHEB_W, HERMITE_H, HERMITE_HE, LAGUERRE, LEGENDRE,
} poly_kind;

static ttpu_val sel(ttpu_hlo* b, ttpu_val c, ttpu_val t, ttpu_val f) {
  return ttpu_hlo_select(b, c, t, f);
}

/* p_0 and p_1 of the recurrence. */
static void first_two(ttpu_hlo* b, poly_kind k, ttpu_val x, ttpu_val* p0, ttpu_val* p1) {
  *p0 = ttpu_ew_k(b, x, 1);
  switch (k) {
    case CHEB_T: case HERMITE_HE: case LEGENDRE: *p1 = x; break;
    case CHEB_U: case HERMITE_H: *p1 = ttpu_ew_add(b, x, x); break;
    case CHEB_V: *p1 = ttpu_ew_addk(b, ttpu_ew_add(b, x, x), -1); break;
    case CHEB_W: *p1 = ttpu_ew_addk(b, ttpu_ew_add(b, x, x), 1); break;
    case LAGUERRE: *p1 = ttpu_ew_ksub(b, 1, x); break;
  }
}

/* p_{m+1} from p_m (q) and p_{m-1} (p), m >= 1, in the CPU's order of
 * operations. */
static ttpu_val next(ttpu_hlo* b, poly_kind k, ttpu_val x, ttpu_val p, ttpu_val q, int m) {
  switch (k) {
    case CHEB_T: case CHEB_U: case CHEB_V: case CHEB_W:
      return ttpu_ew_sub(b, ttpu_ew_mul(b, ttpu_ew_add(b, x, x), q), p);
    case HERMITE_H:
      return ttpu_ew_sub(b, ttpu_ew_mul(b, ttpu_ew_add(b, x, x), q), ttpu_ew_mulk(b, p, 2.0 * m));
    case HERMITE_HE:
      return ttpu_ew_sub(b, ttpu_ew_mul(b, x, q), ttpu_ew_mulk(b, p, (double)m));
    case LAGUERRE: {
      ttpu_val c = ttpu_ew_addk(b, ttpu_ew_ksub(b, 1, x), 2.0 * m);
      ttpu_val r = ttpu_ew_sub(b, ttpu_ew_mul(b, c, q), ttpu_ew_mulk(b, p, (double)m));
      return ttpu_ew_mulk(b, r, 1.0 / (m + 1));
    }
    case LEGENDRE: {
      ttpu_val r = ttpu_ew_sub(b, ttpu_ew_mul(b, ttpu_ew_mulk(b, x, 2.0 * m + 1), q),
                               ttpu_ew_mulk(b, p, (double)m));
      return ttpu_ew_mulk(b, r, 1.0 / (m + 1));
    }
  }
  return TTPU_VAL_ERROR;
}

/* -v where n is odd, v where even (n integral, as a float value). */
static ttpu_val by_parity(ttpu_hlo* b, ttpu_val n, ttpu_val v) {
  ttpu_val odd = ttpu_hlo_compare(b, TTPU_NE, ttpu_hlo_binary(b, TTPU_REM, n, ttpu_ew_k(b, n, 2)),
                                  ttpu_ew_k(b, n, 0));
  return sel(b, odd, ttpu_hlo_unary(b, TTPU_NEG, v), v);
}

static ttpu_status* poly(ttpu_lower* L, poly_kind kind, int shifted) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md = ttpu_ew_opmath(ttpu_ew_float(L));
  ttpu_val x = ttpu_ew_in(L, 0, md), n = ttpu_ew_in(L, 1, md);
  /* the shifted Chebyshev polynomials are the plain ones of 2x - 1 */
  if (shifted) x = ttpu_ew_addk(b, ttpu_ew_add(b, x, x), -1);
  /* n as the CPU's static_cast<int64_t>: truncated */
  const ttpu_type* tn = ttpu_hlo_type(b, n);
  if (!tn) return NULL;
  ttpu_type ti = *tn;
  ti.dtype = TTPU_I64;
  n = ttpu_hlo_convert(b, ttpu_hlo_convert(b, n, TTPU_I64), md);
  ttpu_val too_big = ttpu_ew_cmpk(b, TTPU_GT, n, kMaxDegree);
  ttpu_val flags = ttpu_hlo_convert(b, too_big, TTPU_I64);
  int64_t all[TTPU_MAX_DIMS], one = 1;
  for (int d = 0; d < ti.ndim; ++d) all[d] = d;
  ttpu_val any = ttpu_hlo_reduce(b, flags, TTPU_RED_MAX, all, ti.ndim);
  ttpu_val parts[4] = {any, any, any, any};
  for (int i = 0; i < 4; ++i) parts[i] = ttpu_hlo_reshape(b, parts[i], 1, &one);
  ttpu_l_check(L, ttpu_hlo_concat(b, parts, 4, 0), TTPU_UNIMPLEMENTED,
               "torch.special polynomials on tpu take degrees up to 64");

  ttpu_val p, q, r;
  first_two(b, kind, x, &p, &q);
  r = sel(b, ttpu_ew_cmpk(b, TTPU_EQ, n, 0), p, ttpu_ew_k(b, x, 0));
  r = sel(b, ttpu_ew_cmpk(b, TTPU_EQ, n, 1), q, r);
  for (int m = 1; m < kMaxDegree; ++m) {
    ttpu_val nx = next(b, kind, x, p, q, m);
    r = sel(b, ttpu_ew_cmpk(b, TTPU_EQ, n, m + 1), nx, r);
    p = q;
    q = nx;
  }
  ttpu_val ax = ttpu_hlo_unary(b, TTPU_ABS, x);
  ttpu_val inside = ttpu_ew_cmpk(b, TTPU_LT, ax, 1);
  ttpu_val theta = TTPU_VAL_ERROR;
  if (kind <= CHEB_W) {
    /* acos(x) = atan2(sqrt(1 - x^2), x) */
    ttpu_val s = ttpu_hlo_unary(b, TTPU_SQRT, ttpu_ew_ksub(b, 1, ttpu_ew_mul(b, x, x)));
    theta = ttpu_hlo_binary(b, TTPU_ATAN2, s, x);
  }
  ttpu_val one_k = ttpu_ew_k(b, x, 1);
  ttpu_val n1 = ttpu_ew_addk(b, n, 1), n21 = ttpu_ew_addk(b, ttpu_ew_add(b, n, n), 1);
  switch (kind) {
    case CHEB_T: {
      ttpu_val trig = ttpu_hlo_unary(b, TTPU_COS, ttpu_ew_mul(b, n, theta));
      r = sel(b, ttpu_ew_and(b, ttpu_ew_cmpk(b, TTPU_GT, n, 6), inside), trig, r);
      ttpu_val edge = sel(b, ttpu_ew_cmpk(b, TTPU_GT, x, 0), one_k, by_parity(b, n, one_k));
      r = sel(b, ttpu_ew_cmpk(b, TTPU_EQ, ax, 1), edge, r);
      break;
    }
    case CHEB_U: {
      ttpu_val a = ttpu_ew_mul(b, n1, theta);
      ttpu_val st = ttpu_hlo_unary(b, TTPU_SIN, theta);
      ttpu_val trig = sel(b, ttpu_ew_cmpk(b, TTPU_NE, st, 0),
                          ttpu_ew_div(b, ttpu_hlo_unary(b, TTPU_SIN, a), st),
                          ttpu_ew_div(b, ttpu_ew_mul(b, n1, ttpu_hlo_unary(b, TTPU_COS, a)), x));
      r = sel(b, ttpu_ew_and(b, ttpu_ew_cmpk(b, TTPU_GT, n, 8), inside), trig, r);
      ttpu_val edge = sel(b, ttpu_ew_cmpk(b, TTPU_GT, x, 0), n1, by_parity(b, n, n1));
      r = sel(b, ttpu_ew_cmpk(b, TTPU_EQ, ax, 1), edge, r);
      break;
    }
    case CHEB_V: {
      ttpu_val half = ttpu_ew_mulk(b, theta, 0.5);
      ttpu_val ch = ttpu_hlo_unary(b, TTPU_COS, half);
      ttpu_val trig = ttpu_ew_div(b, ttpu_hlo_unary(b, TTPU_COS, ttpu_ew_mul(b, ttpu_ew_addk(b, n, 0.5), theta)), ch);
      ttpu_val sh1 = ttpu_ew_cmpk(b, TTPU_NE, ttpu_hlo_unary(b, TTPU_SIN, half), 1);
      trig = sel(b, sh1, trig, by_parity(b, n, n21));
      r = sel(b, ttpu_ew_and(b, ttpu_ew_cmpk(b, TTPU_GT, n, 8), inside), trig, r);
      ttpu_val edge = sel(b, ttpu_ew_cmpk(b, TTPU_GT, x, 0), one_k, by_parity(b, n, n21));
      r = sel(b, ttpu_ew_cmpk(b, TTPU_EQ, ax, 1), edge, r);
      break;
    }
    case CHEB_W: {
      ttpu_val half = ttpu_ew_mulk(b, theta, 0.5);
      ttpu_val sh = ttpu_hlo_unary(b, TTPU_SIN, half);
      ttpu_val trig = ttpu_ew_div(b, ttpu_hlo_unary(b, TTPU_SIN, ttpu_ew_mul(b, ttpu_ew_addk(b, n, 0.5), theta)), sh);
      ttpu_val ch1 = ttpu_ew_cmpk(b, TTPU_NE, ttpu_hlo_unary(b, TTPU_COS, half), 1);
      ttpu_val fallback = sel(b, ttpu_ew_cmpk(b, TTPU_GT, x, 0), n21, by_parity(b, n, one_k));
      trig = sel(b, ch1, trig, fallback);
      r = sel(b, ttpu_ew_and(b, ttpu_ew_cmpk(b, TTPU_GT, n, 8), inside), trig, r);
      ttpu_val edge = sel(b, ttpu_ew_cmpk(b, TTPU_GT, x, 0), n21, by_parity(b, n, one_k));
      r = sel(b, ttpu_ew_cmpk(b, TTPU_EQ, ax, 1), edge, r);
      break;
    }
    case LAGUERRE:
      r = sel(b, ttpu_ew_cmpk(b, TTPU_EQ, ax, 0), one_k, r);
      break;
    case LEGENDRE: {
      ttpu_val edge = sel(b, ttpu_ew_or(b, ttpu_ew_cmpk(b, TTPU_GT, x, 0), ttpu_ew_cmpk(b, TTPU_EQ, n, 0)),
                          one_k, by_parity(b, n, one_k));
      r = sel(b, ttpu_ew_cmpk(b, TTPU_EQ, ax, 1), edge, r);
      break;
    }
    default:
      break;
  }
  r = sel(b, ttpu_ew_cmpk(b, TTPU_LT, n, 0), ttpu_ew_k(b, x, 0), r);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

#define POLY(name, kind, shifted)                                         \
  static ttpu_status* lower_##name(ttpu_lower* L) { return poly(L, kind, shifted); }
POLY(cheb_t, CHEB_T, 0)
POLY(cheb_u, CHEB_U, 0)
POLY(cheb_v, CHEB_V, 0)
POLY(cheb_w, CHEB_W, 0)
POLY(scheb_t, CHEB_T, 1)
POLY(scheb_u, CHEB_U, 1)
POLY(scheb_v, CHEB_V, 1)
POLY(scheb_w, CHEB_W, 1)
POLY(hermite_h, HERMITE_H, 0)
POLY(hermite_he, HERMITE_HE, 0)
POLY(laguerre, LAGUERRE, 0)
POLY(legendre, LEGENDRE, 0)

/* Each polynomial in its Tensor/Scalar forms and out= variants. */
#define POLY_DEFS(aten, fn)                                    \
  {aten, fn, .variants = TTPU_V_OUT},                          \
  {aten ".x_scalar", fn, .variants = TTPU_V_OV_OUT},           \
  {aten ".n_scalar", fn, .variants = TTPU_V_OV_OUT}

const ttpu_op_def ttpu_ops_polynomial[] = {
    POLY_DEFS("special_chebyshev_polynomial_t", lower_cheb_t),
    POLY_DEFS("special_chebyshev_polynomial_u", lower_cheb_u),
    POLY_DEFS("special_chebyshev_polynomial_v", lower_cheb_v),
    POLY_DEFS("special_chebyshev_polynomial_w", lower_cheb_w),
    POLY_DEFS("special_shifted_chebyshev_polynomial_t", lower_scheb_t),
    POLY_DEFS("special_shifted_chebyshev_polynomial_u", lower_scheb_u),
    POLY_DEFS("special_shifted_chebyshev_polynomial_v", lower_scheb_v),
    POLY_DEFS("special_shifted_chebyshev_polynomial_w", lower_scheb_w),
    POLY_DEFS("special_hermite_polynomial_h", lower_hermite_h),
    POLY_DEFS("special_hermite_polynomial_he", lower_hermite_he),
    POLY_DEFS("special_laguerre_polynomial_l", lower_laguerre),
    POLY_DEFS("special_legendre_polynomial_p", lower_legendre),
    {0},
};
