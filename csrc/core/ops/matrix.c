/* matrix.c - matrix and vector functions that are not products: trace,
 * the 3-vector cross product, and the factorizations and solves XLA has
 * ops for (Cholesky, triangular solve) with what PyTorch builds on them. */
#include <math.h>

#include "matrix.h"

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

/* ------------------------------------------------------------ cdist */

/* x (batch..., n, m) broadcast to the given batch dims. */
static ttpu_val batch_to(ttpu_hlo* b, ttpu_val x, const int64_t* batch, int nb) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int64_t d[TTPU_MAX_DIMS];
  for (int i = 0; i < nb; ++i) d[i] = batch[i];
  d[nb] = tp->dims[tp->ndim - 2];
  d[nb + 1] = tp->dims[tp->ndim - 1];
  return ttpu_hlo_broadcast_to(b, x, nb + 2, d);
}

/* x1 (B, P, M) and x2 (B, R, M) -> x1_i - x2_j as (B, P, R, M). */
static ttpu_val pair_diff(ttpu_hlo* b, ttpu_val x1, ttpu_val x2) {
  const ttpu_type* t1 = ttpu_hlo_type(b, x1);
  const ttpu_type* t2 = ttpu_hlo_type(b, x2);
  if (!t1 || !t2) return TTPU_VAL_ERROR;
  int nb = t1->ndim - 2;
  ttpu_type t = *t1;
  t.ndim = nb + 3;
  t.dims[nb] = t1->dims[nb];
  t.dims[nb + 1] = t2->dims[nb];
  t.dims[nb + 2] = t1->dims[nb + 1];
  int64_t m1[TTPU_MAX_DIMS], m2[TTPU_MAX_DIMS];
  for (int d = 0; d < nb; ++d) m1[d] = m2[d] = d;
  m1[nb] = nb, m1[nb + 1] = nb + 2;
  m2[nb] = nb + 1, m2[nb + 1] = nb + 2;
  return ttpu_hlo_binary(b, TTPU_SUB, ttpu_hlo_broadcast_in_dim(b, x1, t, m1),
                         ttpu_hlo_broadcast_in_dim(b, x2, t, m2));
}

/* The p-norm distances (batch..., P, R) of rows of x1 (batch..., P, M)
 * and x2 (batch..., R, M), computed directly from the differences. */
static ttpu_val dist_v(ttpu_hlo* b, ttpu_val x1, ttpu_val x2, double p, ttpu_type ot) {
  int nb = ot.ndim - 2;
  const ttpu_type* t1 = ttpu_hlo_type(b, x1);
  if (!t1) return TTPU_VAL_ERROR;
  if (ttpu_type_numel(&ot) == 0 || t1->dims[nb + 1] == 0) return ttpu_hlo_const(b, ot, 0, 0);
  ttpu_val a = ttpu_hlo_unary(b, TTPU_ABS, pair_diff(b, x1, x2));
  const ttpu_type* tp = ttpu_hlo_type(b, a);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type ta = *tp;
  int64_t last = nb + 2;
  if (p == 0) {
    ttpu_val nz = ttpu_hlo_compare(b, TTPU_NE, a, ttpu_hlo_const(b, ta, 0, 0));
    return ttpu_hlo_reduce(b, ttpu_hlo_convert(b, nz, ot.dtype), TTPU_RED_SUM, &last, 1);
  }
  if (isinf(p)) return ttpu_hlo_reduce(b, a, TTPU_RED_MAX, &last, 1);
  if (p == 1) return ttpu_hlo_reduce(b, a, TTPU_RED_SUM, &last, 1);
  if (p == 2)
    return ttpu_hlo_unary(b, TTPU_SQRT, ttpu_hlo_reduce(b, ttpu_hlo_binary(b, TTPU_MUL, a, a), TTPU_RED_SUM, &last, 1));
  ttpu_val s = ttpu_hlo_reduce(b, ttpu_hlo_binary(b, TTPU_POW, a, ttpu_hlo_const(b, ta, p, 0)), TTPU_RED_SUM,
                               &last, 1);
  return ttpu_hlo_binary(b, TTPU_POW, s, ttpu_hlo_const(b, ot, 1.0 / p, 0));
}

/* The gradient (batch..., P, M) for x1 of the distances above, given
 * their upstream gradient g and values dist (batch..., P, R), term by term
 * as the CPU's kernel: zero where the distance is zero, and for p = 0. */
static ttpu_val dist_grad(ttpu_hlo* b, ttpu_val g, ttpu_val x1, ttpu_val x2, ttpu_val dist, double p) {
  ttpu_val d = pair_diff(b, x1, x2);
  const ttpu_type* tp = ttpu_hlo_type(b, d);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type td = *tp;
  int nb = td.ndim - 3;
  int64_t map[TTPU_MAX_DIMS];
  for (int i = 0; i < nb + 2; ++i) map[i] = i;
  ttpu_val gb = ttpu_hlo_broadcast_in_dim(b, g, td, map);
  ttpu_val db = ttpu_hlo_broadcast_in_dim(b, dist, td, map);
  ttpu_val zero = ttpu_hlo_const(b, td, 0, 0);
  ttpu_val a = ttpu_hlo_unary(b, TTPU_ABS, d), sg = ttpu_hlo_unary(b, TTPU_SIGN, d);
  ttpu_val term;
  if (p == 0) {
    term = zero;
  } else if (p == 1) {
    term = ttpu_hlo_binary(b, TTPU_MUL, sg, gb);
  } else if (p == 2) {
    term = ttpu_hlo_binary(b, TTPU_DIV, ttpu_hlo_binary(b, TTPU_MUL, d, gb), db);
  } else if (isinf(p)) {
    ttpu_val top = ttpu_hlo_convert(b, ttpu_hlo_compare(b, TTPU_EQ, a, db), td.dtype);
    term = ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_binary(b, TTPU_MUL, sg, top), gb);
  } else if (p < 1) {
    ttpu_val pa = ttpu_hlo_binary(b, TTPU_POW, a, ttpu_hlo_const(b, td, p - 1, 0));
    ttpu_val pd = ttpu_hlo_binary(b, TTPU_POW, db, ttpu_hlo_const(b, td, p - 1, 0));
    term = ttpu_hlo_binary(b, TTPU_DIV, ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_binary(b, TTPU_MUL, sg, pa), gb), pd);
    term = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, d, zero), zero, term);
  } else {
    ttpu_val pa = ttpu_hlo_binary(b, TTPU_POW, a, ttpu_hlo_const(b, td, p - 2, 0));
    ttpu_val pd = ttpu_hlo_binary(b, TTPU_POW, db, ttpu_hlo_const(b, td, p - 1, 0));
    term = ttpu_hlo_binary(b, TTPU_DIV, ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_binary(b, TTPU_MUL, d, pa), gb), pd);
  }
  term = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, db, zero), zero, term);
  int64_t pair = nb + 1;
  return ttpu_hlo_reduce(b, term, TTPU_RED_SUM, &pair, 1);
}

/* cdist has no half-precision CPU kernel. */
static int cdist_dtype(ttpu_lower* L, ttpu_dtype dt) {
  if (dt != TTPU_BF16 && dt != TTPU_F16) return 1;
  ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_UNIMPLEMENTED, "\"cdist\" not implemented for '%s'", ttpu_dtype_torch_title(dt));
  return 0;
}

/* _cdist_forward(x1, x2, float p, int? compute_mode) (the CPU's matmul
 * shortcut for p = 2 is only an approximation of the direct form). */
static ttpu_status* lower_cdist(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!cdist_dtype(L, ot.dtype)) return NULL;
  int nb = ot.ndim - 2;
  ttpu_val x1 = batch_to(b, ttpu_l_tensor(L, 0), ot.dims, nb), x2 = batch_to(b, ttpu_l_tensor(L, 1), ot.dims, nb);
  ttpu_l_set_out(L, 0, dist_v(b, x1, x2, ttpu_l_float(L, 2, 2.0), ot));
  return NULL;
}

/* _cdist_backward(grad, x1, x2, float p, cdist): the gradient for x1 (the
 * caller swaps the operands for x2). */
static ttpu_status* lower_cdist_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val g = ttpu_l_tensor(L, 0);
  ttpu_type tg = ttpu_l_type(L, g);
  int nb = tg.ndim - 2;
  ttpu_val x1 = batch_to(b, ttpu_l_tensor(L, 1), tg.dims, nb), x2 = batch_to(b, ttpu_l_tensor(L, 2), tg.dims, nb);
  ttpu_type t1 = ttpu_l_type(L, x1);
  if (ttpu_type_numel(&t1) == 0 || ttpu_type_numel(&tg) == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ot, 0, 0));
    return NULL;
  }
  ttpu_val r = dist_grad(b, g, x1, x2, ttpu_l_tensor(L, 4), ttpu_l_float(L, 3, 2.0));
  /* back to x1's own batch shape (its size-1 and missing dims summed) */
  ttpu_type tr = ttpu_l_type(L, r);
  int off = tr.ndim - ot.ndim;
  int64_t red[TTPU_MAX_DIMS];
  int nred = 0;
  for (int i = 0; i < tr.ndim - 2; ++i)
    if (i < off || ot.dims[i - off] == 1) red[nred++] = i;
  if (nred) r = ttpu_hlo_reduce(b, r, TTPU_RED_SUM, red, nred);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

/* The upper triangle (i < j) of (N, N) positions, row-major: a bool mask
 * and each kept position's index in the flattened triangle (N*N for the
 * others, out of range). */
static void upper_pairs(ttpu_hlo* b, int64_t n, ttpu_val* keep, ttpu_val* rank) {
  int64_t nn = n * n;
  ttpu_type tc = ttpu_type_make(TTPU_I64, 1, &nn);
  ttpu_val pos = ttpu_hlo_iota(b, tc, 0), nk = ttpu_hlo_const(b, tc, 0, n);
  ttpu_val i = ttpu_hlo_binary(b, TTPU_DIV, pos, nk), j = ttpu_hlo_binary(b, TTPU_REM, pos, nk);
  *keep = ttpu_hlo_compare(b, TTPU_LT, i, j);
  ttpu_val r = ttpu_hlo_cumulative(b, ttpu_hlo_convert(b, *keep, TTPU_I64), TTPU_RED_SUM, 0);
  r = ttpu_hlo_binary(b, TTPU_SUB, r, ttpu_hlo_const(b, tc, 0, 1));
  *rank = ttpu_hlo_select(b, *keep, r, ttpu_hlo_const(b, tc, 0, nn));
}

/* _pdist_forward(self (N, M), float p): the distances of row pairs i < j,
 * row-major. */
static ttpu_status* lower_pdist(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!cdist_dtype(L, ot.dtype)) return NULL;
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  int64_t n = tx.dims[0], nn = n * n;
  if (ot.dims[0] == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ot, 0, 0));
    return NULL;
  }
  int64_t sq[2] = {n, n};
  ttpu_val d = ttpu_hlo_reshape(b, dist_v(b, x, x, ttpu_l_float(L, 1, 2.0), ttpu_type_make(ot.dtype, 2, sq)), 1, &nn);
  ttpu_val keep, rank;
  upper_pairs(b, n, &keep, &rank);
  ttpu_l_set_out(L, 0, ttpu_hlo_put(b, ttpu_hlo_const(b, ot, 0, 0), rank, d, TTPU_SCATTER_SET));
  return NULL;
}

/* _pdist_backward(grad, self, float p, pdist): the pairs' gradients and
 * distances spread back to symmetric (N, N) matrices, then cdist's. */
static ttpu_status* lower_pdist_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 1);
  ttpu_type tx = ttpu_l_type(L, x);
  int64_t n = tx.dims[0], nn = n * n, sq[2] = {n, n};
  if (n < 2 || ttpu_type_numel(&tx) == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ot, 0, 0));
    return NULL;
  }
  ttpu_val keep, rank;
  upper_pairs(b, n, &keep, &rank);
  ttpu_val safe = ttpu_hlo_select(b, keep, rank, ttpu_hlo_const(b, ttpu_l_type(L, rank), 0, 0));
  ttpu_type tflat = ttpu_type_make(tx.dtype, 1, &nn);
  ttpu_val zero = ttpu_hlo_const(b, tflat, 0, 0);
  int64_t perm[2] = {1, 0};
  ttpu_val mats[2];
  for (int k = 0; k < 2; ++k) {
    ttpu_val v = ttpu_hlo_convert(b, ttpu_l_tensor(L, k == 0 ? 0 : 3), tx.dtype);
    ttpu_val up = ttpu_hlo_reshape(b, ttpu_hlo_select(b, keep, ttpu_hlo_take(b, v, safe), zero), 2, sq);
    mats[k] = ttpu_hlo_binary(b, TTPU_ADD, up, ttpu_hlo_transpose(b, up, perm));
  }
  ttpu_l_set_out(L, 0, dist_grad(b, mats[0], x, x, mats[1], ttpu_l_float(L, 2, 2.0)));
  return NULL;
}

/* ------------------------------------------------------------ Cholesky */

int ttpu_mx_lapack_dtype(ttpu_lower* L, ttpu_dtype dt, const char* kernel) {
  if (dt == TTPU_F32 || dt == TTPU_F64) return 1;
  ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_UNIMPLEMENTED, "\"%s\" not implemented for '%s'", kernel,
                ttpu_dtype_torch_title(dt));
  return 0;
}

ttpu_val ttpu_mx_transpose(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int64_t perm[TTPU_MAX_DIMS];
  for (int d = 0; d < tp->ndim; ++d) perm[d] = d;
  perm[tp->ndim - 1] = tp->ndim - 2;
  perm[tp->ndim - 2] = tp->ndim - 1;
  return ttpu_hlo_transpose(b, x, perm);
}

ttpu_val ttpu_mx_identity(ttpu_hlo* b, ttpu_type t) {
  ttpu_type ti = t;
  ti.dtype = TTPU_I64;
  ttpu_val eq = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, t.ndim - 2), ttpu_hlo_iota(b, ti, t.ndim - 1));
  return ttpu_hlo_convert(b, eq, t.dtype);
}

static ttpu_val rot_k(ttpu_hlo* b, ttpu_type tv, double v) {
  return ttpu_hlo_const(b, tv, v, (int64_t)v);
}

void ttpu_mx_jacobi_rotation(ttpu_hlo* b, ttpu_type tv, ttpu_val app, ttpu_val aqq,
                             ttpu_val apq, ttpu_val skip, ttpu_val lo, ttpu_val* t,
                             ttpu_val* c, ttpu_val* sj) {
  ttpu_val safe = ttpu_hlo_select(b, skip, rot_k(b, tv, 1), apq);
  ttpu_val theta = ttpu_hlo_binary(b, TTPU_DIV, ttpu_hlo_binary(b, TTPU_SUB, aqq, app), ttpu_hlo_binary(b, TTPU_MUL, safe, rot_k(b, tv, 2)));
  ttpu_val root = ttpu_hlo_unary(b, TTPU_SQRT, ttpu_hlo_binary(b, TTPU_ADD, rot_k(b, tv, 1), ttpu_hlo_binary(b, TTPU_MUL, theta, theta)));
  ttpu_val sg = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_LT, theta, rot_k(b, tv, 0)), rot_k(b, tv, -1), rot_k(b, tv, 1));
  ttpu_val tn = ttpu_hlo_binary(b, TTPU_DIV, sg, ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_unary(b, TTPU_ABS, theta), root));
  /* theta^2 overflows when apq is tiny against the diagonal: t -> 1 / (2 theta) */
  tn = ttpu_hlo_select(b, ttpu_hlo_unary(b, TTPU_IS_FINITE, root), tn, ttpu_hlo_binary(b, TTPU_DIV, rot_k(b, tv, 0.5), theta));
  tn = ttpu_hlo_select(b, skip, rot_k(b, tv, 0), tn);
  ttpu_val cs = ttpu_hlo_unary(b, TTPU_RSQRT, ttpu_hlo_binary(b, TTPU_ADD, rot_k(b, tv, 1), ttpu_hlo_binary(b, TTPU_MUL, tn, tn)));
  ttpu_val sn = ttpu_hlo_binary(b, TTPU_MUL, cs, tn);
  *t = tn;
  *c = cs;
  *sj = ttpu_hlo_select(b, lo, ttpu_hlo_unary(b, TTPU_NEG, sn), sn);
}

void ttpu_mx_check_info(ttpu_lower* L, ttpu_val info, const char* fmt) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  const ttpu_type* tp = ttpu_hlo_type(b, info);
  if (!tp) return;
  int64_t all[TTPU_MAX_DIMS], one = 1;
  int nd = tp->ndim;
  for (int d = 0; d < nd; ++d) all[d] = d;
  ttpu_val worst = ttpu_hlo_reduce(b, ttpu_hlo_convert(b, info, TTPU_I64), TTPU_RED_MAX, all, nd);
  ttpu_val flag = ttpu_hlo_convert(b, ttpu_hlo_compare(b, TTPU_NE, worst, ttpu_hlo_const_i(b, TTPU_I64, 0)),
                                   TTPU_I64);
  ttpu_val parts[4] = {flag, worst, ttpu_hlo_const_i(b, TTPU_I64, 0), ttpu_hlo_const_i(b, TTPU_I64, 0)};
  for (int i = 0; i < 4; ++i) parts[i] = ttpu_hlo_reshape(b, parts[i], 1, &one);
  ttpu_l_check(L, ttpu_hlo_concat(b, parts, 4, 0), TTPU_INVALID_ARGUMENT, fmt);
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
  if (!ttpu_mx_lapack_dtype(L, ttpu_l_type(L, a).dtype, kernel)) return TTPU_VAL_ERROR;
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
  if (ttpu_l_bool(L, 2, 0))
    ttpu_mx_check_info(L, info,
                       "linalg.cholesky: The factorization could not be completed because the input is not "
                       "positive-definite (the leading minor of order %lld is not positive-definite).");
  ttpu_l_set_out(L, 0, ttpu_l_bool(L, 1, 0) ? ttpu_mx_transpose(b, f) : f);
  ttpu_l_set_out(L, 1, info);
  return NULL;
}

/* cholesky(self, upper=False) */
static ttpu_status* lower_cholesky(ttpu_lower* L) {
  ttpu_val f = lower_factor(L, "cholesky_cpu");
  ttpu_l_set_out(L, 0, ttpu_l_bool(L, 1, 0) ? ttpu_mx_transpose(ttpu_l_hlo(L), f) : f);
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
  if (!ttpu_mx_lapack_dtype(L, ot.dtype, "cholesky_solve_cpu")) return NULL;
  ttpu_val rhs = to_batch(b, ttpu_l_tensor(L, 0), ot), f = to_batch(b, ttpu_l_tensor(L, 1), ot);
  ttpu_l_set_out(L, 0, cholesky_solve_v(b, f, rhs, ttpu_l_bool(L, 2, 0)));
  return NULL;
}

/* cholesky_inverse(self=factor, upper=False): (F F^T)^-1 as a solve
 * against the identity. */
static ttpu_status* lower_cholesky_inverse(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!ttpu_mx_lapack_dtype(L, ot.dtype, "cholesky_inverse_out_cpu")) return NULL;
  ttpu_val f = ttpu_l_tensor(L, 0);
  ttpu_l_set_out(L, 0, cholesky_solve_v(b, f, ttpu_mx_identity(b, ot), ttpu_l_bool(L, 1, 0)));
  return NULL;
}

/* triangular_solve(self=B, A, upper=True, transpose=False,
 * unitriangular=False) -> (solution, cloned_coefficient) */
static ttpu_status* lower_triangular_solve(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ox = ttpu_l_out_type(L, 0), om = ttpu_l_out_type(L, 1);
  if (!ttpu_mx_lapack_dtype(L, ox.dtype, "triangular_solve_cpu")) return NULL;
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
  if (!ttpu_mx_lapack_dtype(L, ot.dtype, "triangular_solve_cpu")) return NULL;
  ttpu_val a = to_batch(b, ttpu_l_tensor(L, 0), ot), rhs = to_batch(b, ttpu_l_tensor(L, 1), ot);
  ttpu_l_set_out(L, 0, ttpu_hlo_triangular_solve(b, a, rhs, ttpu_l_bool(L, 3, 1), !ttpu_l_bool(L, 2, 0),
                                                 ttpu_l_bool(L, 4, 0), 0));
  return NULL;
}

const ttpu_op_def ttpu_ops_matrix[] = {
    {"_cdist_forward", lower_cdist, .flags = 0},
    {"_cdist_backward", lower_cdist_backward, .flags = 0},
    {"_pdist_forward", lower_pdist, .flags = 0},
    {"_pdist_backward", lower_pdist_backward, .flags = 0},
    {"renorm", lower_renorm, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"linalg_cholesky_ex", lower_cholesky_ex, .flags = 0},
    {"linalg_cholesky_ex.L", lower_cholesky_ex, .flags = 0},
    {"cholesky", lower_cholesky, .variants = TTPU_V_OUT},
    {"_cholesky_solve_helper", lower_cholesky_solve_helper, .variants = TTPU_V_OUT},
    {"cholesky_inverse", lower_cholesky_inverse, .variants = TTPU_V_OUT},
    {"triangular_solve", lower_triangular_solve, .flags = 0},
    {"triangular_solve.X", lower_triangular_solve, .flags = 0},
    {"linalg_solve_triangular", lower_linalg_solve_triangular, .variants = TTPU_V_OUT},
    {"trace", lower_trace, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_OUT},
    {"linalg_cross", lower_linalg_cross, .variants = TTPU_V_OUT},
    {0},
};
