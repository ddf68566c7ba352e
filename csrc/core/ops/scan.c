/* scan.c - running extremes with their indices (cummax/cummin) and the
 * running log-sum-exp. */
#include <math.h>

#include "ttpu_lower.h"

/* A 0-d tensor scans as one element along dim 0. */
static ttpu_val at_least_1d(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t || t->ndim > 0) return x;
  int64_t one = 1;
  return ttpu_hlo_reshape(b, x, 1, &one);
}

/* _cummax_helper / _cummin_helper(self, Tensor(a!) values, Tensor(b!)
 * indices, int dim): outputs are values then indices. The index is the
 * last position holding the running extreme (ties go to the later
 * element, as the CPU's >= / <= comparison), NaN included: once a NaN is
 * seen the value stays NaN and the index moves to each later NaN. That
 * index is the last j <= i where x[j] equals the running extreme at j
 * itself, a running max of such positions. */
static ttpu_status* cum_extreme(ttpu_lower* L) {
  int is_max = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ov = ttpu_l_out_type(L, 0), oi = ttpu_l_out_type(L, 1);
  ttpu_val x = at_least_1d(b, ttpu_l_tensor(L, 0));
  ttpu_type tx = ttpu_l_type(L, x);
  int64_t dim = ttpu_l_dim(L, ttpu_l_int(L, 3, 0), tx.ndim);
  if (ttpu_type_numel(&tx) == 0) {
    ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, x, ov));
    ttpu_l_set_out(L, 1, ttpu_hlo_const(b, oi, 0, 0));
    return NULL;
  }
  ttpu_val m = ttpu_hlo_cumulative(b, x, is_max ? TTPU_RED_MAX : TTPU_RED_MIN, (int)dim);
  ttpu_val at = ttpu_hlo_compare(b, TTPU_EQ, x, m);
  ttpu_type ti = tx;
  ti.dtype = TTPU_I64;
  if (ttpu_dtype_is_float(tx.dtype)) {
    /* A running max/min need not propagate NaN (XLA's CPU backend does
     * not): once a NaN is seen the value is NaN and only later NaNs move
     * the index. */
    ttpu_val xn = ttpu_hlo_compare(b, TTPU_NE, x, x);
    ttpu_val seen = ttpu_hlo_cumulative(b, ttpu_hlo_convert(b, xn, TTPU_I64),
                                        TTPU_RED_MAX, (int)dim);
    seen = ttpu_hlo_compare(b, TTPU_NE, seen, ttpu_hlo_const(b, ti, 0, 0));
    m = ttpu_hlo_select(b, seen, ttpu_hlo_const(b, tx, NAN, 0), m);
    at = ttpu_hlo_select(b, seen, xn, at);
  }
  ttpu_val pos = ttpu_hlo_select(b, at, ttpu_hlo_iota(b, ti, (int)dim), ttpu_hlo_const(b, ti, 0, -1));
  ttpu_val idx = ttpu_hlo_cumulative(b, pos, TTPU_RED_MAX, (int)dim);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, m, ov));
  ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, idx, oi));
  return NULL;
}

/* x shifted by k along dim, the first k positions filled with fill. */
static ttpu_val shifted(ttpu_hlo* b, ttpu_val x, int dim, int64_t k, ttpu_val fill) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = *tp;
  int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
  for (int d = 0; d < t.ndim; ++d) hi[d] = t.dims[d], st[d] = 1;
  int64_t edge[TTPU_MAX_DIMS] = {0}, interior[TTPU_MAX_DIMS] = {0};
  for (int d = 0; d < t.ndim; ++d) edge[d] = d == dim ? k : 0;
  int64_t zero[TTPU_MAX_DIMS] = {0};
  ttpu_val p = ttpu_hlo_pad(b, x, fill, edge, zero, interior);
  return ttpu_hlo_slice(b, p, lo, hi, st);
}

/* log(exp(a) + exp(b)) without overflow; -inf + -inf stays -inf, a +inf
 * wins (both have a - b NaN) and a NaN stays NaN (XLA's max and min need
 * not propagate it, the CPU's scan does). */
static ttpu_val logaddexp(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  ttpu_val hi = ttpu_hlo_binary(b, TTPU_MAX, x, y), lo = ttpu_hlo_binary(b, TTPU_MIN, x, y);
  ttpu_val d = ttpu_hlo_binary(b, TTPU_SUB, lo, hi);
  ttpu_val r = ttpu_hlo_binary(b, TTPU_ADD, hi,
                               ttpu_hlo_unary(b, TTPU_LOG1P, ttpu_hlo_unary(b, TTPU_EXP, d)));
  ttpu_val same_inf = ttpu_hlo_binary(
      b, TTPU_AND, ttpu_hlo_compare(b, TTPU_EQ, x, y),
      ttpu_hlo_unary(b, TTPU_NOT, ttpu_hlo_unary(b, TTPU_IS_FINITE, x)));
  r = ttpu_hlo_select(b, same_inf, x, r);
  ttpu_val nan = ttpu_hlo_binary(b, TTPU_OR, ttpu_hlo_compare(b, TTPU_NE, x, x),
                                 ttpu_hlo_compare(b, TTPU_NE, y, y));
  return ttpu_hlo_select(b, nan, ttpu_hlo_binary(b, TTPU_ADD, x, y), r);
}

/* _logcumsumexp(self, int dim): an inclusive scan with logaddexp in
 * log2(n) doubling steps (each element combines with the one 2^s before
 * it), exact for any spread of values. */
static ttpu_status* lower_logcumsumexp(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype md = ot.dtype == TTPU_BF16 || ot.dtype == TTPU_F16 ? TTPU_F32 : ot.dtype;
  ttpu_val x = at_least_1d(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), md));
  ttpu_type tx = ttpu_l_type(L, x);
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 1, 0), tx.ndim);
  ttpu_val ninf = ttpu_hlo_const_f(b, md, -INFINITY);
  for (int64_t k = 1; k < tx.dims[dim]; k *= 2)
    x = logaddexp(b, x, shifted(b, x, dim, k, ninf));
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, x, ot));
  return NULL;
}

const ttpu_op_def ttpu_ops_scan[] = {
    {"_cummax_helper", cum_extreme, .param = 1},
    {"_cummin_helper", cum_extreme, .param = 0},
    {"_logcumsumexp", lower_logcumsumexp, .variants = TTPU_V_OUT},
    {0},
};
