/* matrix.c - matrix and vector functions that are not products: trace,
 * the 3-vector cross product, and the factorizations and solves XLA has
 * ops for (Cholesky, triangular solve) with what PyTorch builds on them. */
#include <math.h>

#include "ttpu_lower.h"

static ttpu_dtype opmath(ttpu_dtype dt) {
  return dt == TTPU_BF16 || dt == TTPU_F16 ? TTPU_F32 : dt;
}

/* trace(self): the sum of the main diagonal of a matrix, in sum's result
 * dtype (integers and bool sum to int64). */
static ttpu_status* lower_trace(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype md = opmath(ot.dtype);
  const ttpu_tensor* d = ttpu_l_tensor_desc(L, 0, -1);
  if (d && d->dtype == TTPU_BOOL) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"trace\" not implemented for 'Bool'");
    return NULL;
  }
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), md);
  ttpu_type tx = ttpu_l_type(L, x);
  if (tx.ndim != 2)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "trace: expected a matrix, but got tensor with dim %d",
                            tx.ndim);
  ttpu_type ti = tx;
  ti.dtype = TTPU_I64;
  ttpu_val diag = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, 0), ttpu_hlo_iota(b, ti, 1));
  ttpu_val z = ttpu_hlo_const(b, tx, 0, 0);
  int64_t both[2] = {0, 1};
  ttpu_val r = ttpu_hlo_reduce(b, ttpu_hlo_select(b, diag, x, z), TTPU_RED_SUM, both, 2);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ttpu_type_make(md, ot.ndim, ot.dims)));
  return NULL;
}

/* Component k (0..2) of x along dim. */
static ttpu_val comp(ttpu_hlo* b, ttpu_val x, int dim, int k) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
  for (int d = 0; d < tp->ndim; ++d) hi[d] = tp->dims[d], st[d] = 1;
  lo[dim] = k;
  hi[dim] = k + 1;
  return ttpu_hlo_slice(b, x, lo, hi, st);
}

/* linalg_cross(self, other, *, int dim=-1): both broadcast to the output's
 * shape (the meta kernel has checked that dim has size 3 in each). */
static ttpu_status* lower_linalg_cross(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype md = opmath(ot.dtype);
  ttpu_val x = ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), md), ot.ndim, ot.dims);
  ttpu_val y = ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 1), md), ot.ndim, ot.dims);
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 2, -1), ot.ndim);
  ttpu_val parts[3];
  for (int k = 0; k < 3; ++k) {
    int i = (k + 1) % 3, j = (k + 2) % 3;
    parts[k] = ttpu_hlo_binary(
        b, TTPU_SUB, ttpu_hlo_binary(b, TTPU_MUL, comp(b, x, dim, i), comp(b, y, dim, j)),
        ttpu_hlo_binary(b, TTPU_MUL, comp(b, x, dim, j), comp(b, y, dim, i)));
  }
  ttpu_l_set_out(L, 0, ttpu_hlo_concat(b, parts, 3, dim));
  return NULL;
}

/* renorm(self, Scalar p, int dim, Scalar maxnorm): each slice along dim
 * whose p-norm exceeds maxnorm is scaled to maxnorm / (norm + 1e-7), as
 * the CPU does. p and maxnorm are runtime Scalars (p > 0 is checked by
 * PyTorch's meta function); p = inf is the largest magnitude. */
static ttpu_status* lower_renorm(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype md = opmath(ot.dtype);
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), md);
  ttpu_type tx = ttpu_l_type(L, x);
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 2, 0), tx.ndim);
  int mask[TTPU_MAX_DIMS];
  for (int d = 0; d < tx.ndim; ++d) mask[d] = d != dim;
  ttpu_val p = ttpu_hlo_broadcast_to(b, ttpu_l_scalar(L, 1, md), tx.ndim, tx.dims);
  ttpu_val a = ttpu_hlo_unary(b, TTPU_ABS, x);
  ttpu_val s = ttpu_l_reduce_mask(L, ttpu_hlo_binary(b, TTPU_POW, a, p), TTPU_RED_SUM, mask);
  ttpu_type ts = ttpu_l_type(L, s);
  ttpu_val ps = ttpu_l_reduce_mask(L, p, TTPU_RED_MAX, mask); /* p, of the norm's shape */
  ttpu_val one = ttpu_hlo_const(b, ts, 1, 1);
  ttpu_val norm = ttpu_hlo_binary(b, TTPU_POW, s, ttpu_hlo_binary(b, TTPU_DIV, one, ps));
  /* exact forms of the common orders */
  ttpu_val n1 = ttpu_l_reduce_mask(L, a, TTPU_RED_SUM, mask);
  ttpu_val n2 = ttpu_hlo_unary(b, TTPU_SQRT, ttpu_l_reduce_mask(L, ttpu_hlo_binary(b, TTPU_MUL, x, x),
                                                                TTPU_RED_SUM, mask));
  ttpu_val ninf = ttpu_l_reduce_mask(L, a, TTPU_RED_MAX, mask);
  norm = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, ps, one), n1, norm);
  norm = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, ps, ttpu_hlo_const(b, ts, 2, 2)), n2, norm);
  norm = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, ps, ttpu_hlo_const(b, ts, INFINITY, 0)), ninf, norm);
  ttpu_val maxnorm = ttpu_hlo_broadcast_to(b, ttpu_l_scalar(L, 3, md), ts.ndim, ts.dims);
  ttpu_val factor = ttpu_hlo_binary(b, TTPU_DIV, maxnorm,
                                    ttpu_hlo_binary(b, TTPU_ADD, norm, ttpu_hlo_const(b, ts, 1e-7, 0)));
  factor = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, norm, maxnorm), factor, one);
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, TTPU_MUL, x, ttpu_l_bcast_back(L, factor, tx, mask)));
  return NULL;
}

/* ------------------------------------------------------------ Cholesky */

/* The CPU's LAPACK kernels take float32/float64 only. */
static int lapack_dtype(ttpu_lower* L, ttpu_dtype dt, const char* kernel) {
  if (dt == TTPU_F32 || dt == TTPU_F64) return 1;
  ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_UNIMPLEMENTED, "\"%s\" not implemented for '%s'", kernel,
                ttpu_dtype_torch_title(dt));
  return 0;
}

/* The last two dims of x swapped. */
static ttpu_val mT(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int64_t perm[TTPU_MAX_DIMS];
  for (int d = 0; d < tp->ndim; ++d) perm[d] = d;
  perm[tp->ndim - 1] = tp->ndim - 2;
  perm[tp->ndim - 2] = tp->ndim - 1;
  return ttpu_hlo_transpose(b, x, perm);
}

/* x with the other triangle zeroed (the diagonal kept). */
static ttpu_val triangle(ttpu_hlo* b, ttpu_val x, int lower) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = *tp, ti = *tp;
  ti.dtype = TTPU_I64;
  ttpu_val r = ttpu_hlo_iota(b, ti, t.ndim - 2), c = ttpu_hlo_iota(b, ti, t.ndim - 1);
  ttpu_val keep = ttpu_hlo_compare(b, lower ? TTPU_GE : TTPU_LE, r, c);
  return ttpu_hlo_select(b, keep, x, ttpu_hlo_const(b, t, 0, 0));
}

/* x (batch..., m, n) broadcast to the batch dims of `like`'s type. */
static ttpu_val to_batch(ttpu_hlo* b, ttpu_val x, ttpu_type like) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = like;
  t.dims[t.ndim - 2] = tp->dims[tp->ndim - 2];
  t.dims[t.ndim - 1] = tp->dims[tp->ndim - 1];
  return ttpu_hlo_broadcast_to(b, x, t.ndim, t.dims);
}

/* The lower Cholesky factor (other triangle zeroed) of self (arg 0). */
static ttpu_val lower_factor(ttpu_lower* L, const char* kernel) {
  ttpu_val a = ttpu_l_tensor(L, 0);
  if (!lapack_dtype(L, ttpu_l_type(L, a).dtype, kernel)) return TTPU_VAL_ERROR;
  ttpu_hlo* b = ttpu_l_hlo(L);
  return triangle(b, ttpu_hlo_cholesky(b, a, 1), 1);
}

/* linalg_cholesky_ex(self, *, upper=False, check_errors=False) -> (L, info):
 * info is 0, or the order of the first leading minor that is not
 * positive-definite (the first diagonal entry of the factor that is not
 * a positive number: XLA leaves NaNs from there on). */
static ttpu_status* lower_cholesky_ex(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val f = lower_factor(L, "cholesky_cpu");
  ttpu_type t = ttpu_l_type(L, f);
  if (t.ndim < 2) return NULL;
  int64_t n = t.dims[t.ndim - 1];
  ttpu_type ti = t;
  ti.dtype = TTPU_I64;
  ttpu_val eye = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, t.ndim - 2), ttpu_hlo_iota(b, ti, t.ndim - 1));
  int64_t last = t.ndim - 1;
  ttpu_val diag = ttpu_hlo_reduce(b, ttpu_hlo_select(b, eye, f, ttpu_hlo_const(b, t, 0, 0)), TTPU_RED_SUM,
                                  &last, 1);
  ttpu_type td = ttpu_l_type(L, diag), tk = td;
  tk.dtype = TTPU_I64;
  ttpu_val bad = ttpu_hlo_unary(b, TTPU_NOT, ttpu_hlo_compare(b, TTPU_GT, diag, ttpu_hlo_const(b, td, 0, 0)));
  ttpu_val order = ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_iota(b, tk, td.ndim - 1), ttpu_hlo_const(b, tk, 0, 1));
  ttpu_val first = ttpu_hlo_select(b, bad, order, ttpu_hlo_const(b, tk, 0, n + 1));
  int64_t dl = td.ndim - 1;
  first = ttpu_hlo_reduce(b, first, TTPU_RED_MIN, &dl, 1);
  ttpu_type tb = ttpu_l_type(L, first);
  ttpu_val info = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, first, ttpu_hlo_const(b, tb, 0, n)),
                                  ttpu_hlo_const(b, tb, 0, 0), first);
  if (ttpu_l_bool(L, 2, 0)) {
    int64_t all[TTPU_MAX_DIMS], one = 1, zero = 0;
    for (int d = 0; d < tb.ndim; ++d) all[d] = d;
    ttpu_val worst = ttpu_hlo_reduce(b, info, TTPU_RED_MAX, all, tb.ndim);
    ttpu_val flag = ttpu_hlo_convert(b, ttpu_hlo_compare(b, TTPU_NE, worst, ttpu_hlo_const_i(b, TTPU_I64, 0)),
                                     TTPU_I64);
    ttpu_val parts[4] = {flag, worst, ttpu_hlo_const_i(b, TTPU_I64, 0), ttpu_hlo_const_i(b, TTPU_I64, 0)};
    for (int i = 0; i < 4; ++i) parts[i] = ttpu_hlo_reshape(b, parts[i], 1, &one);
    (void)zero;
    ttpu_l_check(L, ttpu_hlo_concat(b, parts, 4, 0), TTPU_INVALID_ARGUMENT,
                 "linalg.cholesky: The factorization could not be completed because the input is not "
                 "positive-definite (the leading minor of order %lld is not positive-definite).");
  }
  ttpu_l_set_out(L, 0, ttpu_l_bool(L, 1, 0) ? mT(b, f) : f);
  ttpu_l_set_out(L, 1, info);
  return NULL;
}

/* cholesky(self, upper=False) */
static ttpu_status* lower_cholesky(ttpu_lower* L) {
  ttpu_val f = lower_factor(L, "cholesky_cpu");
  ttpu_l_set_out(L, 0, ttpu_l_bool(L, 1, 0) ? mT(ttpu_l_hlo(L), f) : f);
  return NULL;
}

/* x with factor F = L (lower) or U (upper): solves F F^T x = rhs (lower) or
 * U^T U x = rhs (upper), by two triangular solves. */
static ttpu_val cholesky_solve_v(ttpu_hlo* b, ttpu_val f, ttpu_val rhs, int upper) {
  ttpu_val y = ttpu_hlo_triangular_solve(b, f, rhs, 1, !upper, 0, upper);
  return ttpu_hlo_triangular_solve(b, f, y, 1, !upper, 0, !upper);
}

/* _cholesky_solve_helper(self=B, A=factor, bool upper) */
static ttpu_status* lower_cholesky_solve_helper(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!lapack_dtype(L, ot.dtype, "cholesky_solve_cpu")) return NULL;
  ttpu_val rhs = to_batch(b, ttpu_l_tensor(L, 0), ot), f = to_batch(b, ttpu_l_tensor(L, 1), ot);
  ttpu_l_set_out(L, 0, cholesky_solve_v(b, f, rhs, ttpu_l_bool(L, 2, 0)));
  return NULL;
}

/* cholesky_inverse(self=factor, upper=False): (F F^T)^-1 as a solve
 * against the identity. */
static ttpu_status* lower_cholesky_inverse(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!lapack_dtype(L, ot.dtype, "cholesky_inverse_out_cpu")) return NULL;
  ttpu_val f = ttpu_l_tensor(L, 0);
  ttpu_type ti = ot;
  ti.dtype = TTPU_I64;
  ttpu_val eye = ttpu_hlo_convert(
      b, ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, ot.ndim - 2), ttpu_hlo_iota(b, ti, ot.ndim - 1)),
      ot.dtype);
  ttpu_l_set_out(L, 0, cholesky_solve_v(b, f, eye, ttpu_l_bool(L, 1, 0)));
  return NULL;
}

/* triangular_solve(self=B, A, upper=True, transpose=False,
 * unitriangular=False) -> (solution, cloned_coefficient) */
static ttpu_status* lower_triangular_solve(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ox = ttpu_l_out_type(L, 0), om = ttpu_l_out_type(L, 1);
  if (!lapack_dtype(L, ox.dtype, "triangular_solve_cpu")) return NULL;
  ttpu_val rhs = to_batch(b, ttpu_l_tensor(L, 0), ox), a = to_batch(b, ttpu_l_tensor(L, 1), ox);
  int upper = ttpu_l_bool(L, 2, 1);
  ttpu_l_set_out(L, 0, ttpu_hlo_triangular_solve(b, a, rhs, 1, !upper, ttpu_l_bool(L, 4, 0),
                                                 ttpu_l_bool(L, 3, 0)));
  ttpu_l_set_out(L, 1, to_batch(b, ttpu_l_tensor(L, 1), om));
  return NULL;
}

/* linalg_solve_triangular(self=A, B, *, upper, left=True, unitriangular=False):
 * A X = B (left) or X A = B. */
static ttpu_status* lower_linalg_solve_triangular(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!lapack_dtype(L, ot.dtype, "triangular_solve_cpu")) return NULL;
  ttpu_val a = to_batch(b, ttpu_l_tensor(L, 0), ot), rhs = to_batch(b, ttpu_l_tensor(L, 1), ot);
  ttpu_l_set_out(L, 0, ttpu_hlo_triangular_solve(b, a, rhs, ttpu_l_bool(L, 3, 1), !ttpu_l_bool(L, 2, 0),
                                                 ttpu_l_bool(L, 4, 0), 0));
  return NULL;
}

const ttpu_op_def ttpu_ops_matrix[] = {
    {"renorm", lower_renorm, 0},
    {"renorm_", lower_renorm, 0},
    {"renorm.out", lower_renorm, 0},
    {"linalg_cholesky_ex", lower_cholesky_ex, 0},
    {"linalg_cholesky_ex.L", lower_cholesky_ex, 0},
    {"cholesky", lower_cholesky, 0},
    {"cholesky.out", lower_cholesky, 0},
    {"_cholesky_solve_helper", lower_cholesky_solve_helper, 0},
    {"_cholesky_solve_helper.out", lower_cholesky_solve_helper, 0},
    {"cholesky_inverse", lower_cholesky_inverse, 0},
    {"cholesky_inverse.out", lower_cholesky_inverse, 0},
    {"triangular_solve", lower_triangular_solve, 0},
    {"triangular_solve.X", lower_triangular_solve, 0},
    {"linalg_solve_triangular", lower_linalg_solve_triangular, 0},
    {"linalg_solve_triangular.out", lower_linalg_solve_triangular, 0},
    {"trace", lower_trace, 0},
    {"trace.out", lower_trace, 0},
    {"linalg_cross", lower_linalg_cross, 0},
    {"linalg_cross.out", lower_linalg_cross, 0},
    {NULL, NULL, 0},
};
