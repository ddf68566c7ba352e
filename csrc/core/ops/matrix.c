/* matrix.c - matrix and vector functions that are not products: trace,
 * the 3-vector cross product, and the factorizations and solves XLA has
 * ops for (Cholesky, triangular solve) with what PyTorch builds on them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

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
 * shape (the meta kernel has checked that dim has size 3 in each). The
 * same products and differences for complex values, unconjugated, as on
 * the CPU. */
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
  if (dt == TTPU_F32 || dt == TTPU_F64 || dt == TTPU_C64 || dt == TTPU_C128) return 1;
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

ttpu_val ttpu_mx_conj(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp || !ttpu_dtype_is_complex(tp->dtype)) return x;
  return ttpu_hlo_complex(b, ttpu_hlo_real(b, x), ttpu_hlo_unary(b, TTPU_NEG, ttpu_hlo_imag(b, x)));
}

ttpu_val ttpu_mx_adjoint(ttpu_hlo* b, ttpu_val x) {
  return ttpu_mx_conj(b, ttpu_mx_transpose(b, x));
}

ttpu_val ttpu_mx_abs2(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  if (!ttpu_dtype_is_complex(tp->dtype)) return ttpu_hlo_binary(b, TTPU_MUL, x, x);
  ttpu_val re = ttpu_hlo_real(b, x), im = ttpu_hlo_imag(b, x);
  return ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_binary(b, TTPU_MUL, re, re), ttpu_hlo_binary(b, TTPU_MUL, im, im));
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

void ttpu_mx_check_info(ttpu_lower* L, ttpu_val info, const char* who, const char* body) {
  ttpu_mx_check_info_unless(L, TTPU_VAL_ERROR, NULL, info, who, body);
}

void ttpu_mx_check_info_unless(ttpu_lower* L, ttpu_val refuse, const char* refusal,
                               ttpu_val info, const char* who, const char* body) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  const ttpu_type* tp = ttpu_hlo_type(b, info);
  if (!tp) return;
  int batched = tp->ndim > 0;
  int64_t count = ttpu_type_numel(tp), one = 1, d0 = 0;
  ttpu_type tf = ttpu_type_make(TTPU_I64, 1, &count);
  ttpu_val flat = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, info, TTPU_I64), 1, &count);
  ttpu_val bad = ttpu_hlo_compare(b, TTPU_NE, flat, ttpu_hlo_const(b, tf, 0, 0));
  ttpu_val idx = ttpu_hlo_iota(b, tf, 0);
  ttpu_val first = ttpu_hlo_reduce(b, ttpu_hlo_select(b, bad, idx, ttpu_hlo_const(b, tf, 0, count)),
                                   TTPU_RED_MIN, &d0, 1);
  ttpu_val at_first = ttpu_hlo_compare(b, TTPU_EQ, idx, ttpu_hlo_broadcast_to(b, first, 1, &count));
  ttpu_val value = ttpu_hlo_reduce(b, ttpu_hlo_select(b, at_first, flat, ttpu_hlo_const(b, tf, 0, 0)),
                                   TTPU_RED_SUM, &d0, 1);
  ttpu_val flag = ttpu_hlo_convert(b, ttpu_hlo_compare(b, TTPU_LT, first, ttpu_hlo_const_i(b, TTPU_I64, count)),
                                   TTPU_I64);
  char fmt[TTPU_L_CHECK_FMT_MAX];
  snprintf(fmt, sizeof fmt, "%s: %s%s", who, batched ? "(Batch element %lld): " : "", body);
  if (refusal) { /* flag 1: the refusal, 2: info's message */
    const ttpu_type* rt = ttpu_hlo_type(b, refuse);
    if (!rt) return;
    int64_t rn = ttpu_type_numel(rt);
    ttpu_val any = ttpu_hlo_const_i(b, TTPU_I64, 0);
    if (rn > 0) {
      ttpu_val rflat = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, refuse, TTPU_BOOL), 1, &rn);
      any = ttpu_hlo_convert(b, ttpu_hlo_reduce(b, rflat, TTPU_RED_OR, &d0, 1), TTPU_I64);
    }
    ttpu_val two = ttpu_hlo_const_i(b, TTPU_I64, 2);
    flag = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_NE, any, ttpu_hlo_const_i(b, TTPU_I64, 0)),
                           ttpu_hlo_const_i(b, TTPU_I64, 1), ttpu_hlo_binary(b, TTPU_MUL, flag, two));
    char both[TTPU_L_CHECK_FMT_MAX];
    int w = snprintf(both, sizeof both, "%s" TTPU_CHECK_ALT "%s", refusal, fmt);
    if (w < 0 || (size_t)w >= sizeof both) {
      ttpu_hlo_fail(b, TTPU_INTERNAL, "%s: check message too long", who);
      return;
    }
    memcpy(fmt, both, (size_t)w + 1);
  }
  ttpu_val parts[4] = {flag, batched ? first : value, value, value};
  for (int i = 0; i < 4; ++i) parts[i] = ttpu_hlo_reshape(b, parts[i], 1, &one);
  /* _linalg_check_errors raises LinAlgError, but a plain RuntimeError for
   * lu_factor's zero pivot */
  ttpu_code code = strstr(who, "lu_factor") ? TTPU_INVALID_ARGUMENT : TTPU_LINALG_ERROR;
  ttpu_l_check(L, ttpu_hlo_concat(b, parts, 4, 0), code, fmt);
}

typedef struct {
  int64_t trips;
  int reverse;
  ttpu_mx_fori_body body;
  void* ctx;
} fori_loop;

static ttpu_val fori_cond(ttpu_hlo* b, void* ctx, const ttpu_val* st) {
  const fori_loop* f = ctx;
  return ttpu_hlo_compare(b, TTPU_LT, st[0], ttpu_hlo_const_i(b, TTPU_I64, f->trips));
}

static void fori_body(ttpu_hlo* b, void* ctx, const ttpu_val* st, ttpu_val* next) {
  const fori_loop* f = ctx;
  ttpu_val j = f->reverse ? ttpu_hlo_binary(b, TTPU_SUB, ttpu_hlo_const_i(b, TTPU_I64, f->trips - 1), st[0]) : st[0];
  f->body(b, f->ctx, j, st + 1, next + 1);
  next[0] = ttpu_hlo_binary(b, TTPU_ADD, st[0], ttpu_hlo_const_i(b, TTPU_I64, 1));
}

void ttpu_mx_fori(ttpu_hlo* b, int64_t trips, int reverse, const ttpu_val* init, int n, ttpu_mx_fori_body body,
                  void* ctx, ttpu_val* fin) {
  enum { kMaxState = 15 };
  if (n < 1 || n > kMaxState) {
    ttpu_hlo_fail(b, TTPU_INTERNAL, "fori: %d state values (1..%d)", n, kMaxState);
    for (int i = 0; i < n && i < kMaxState; ++i) fin[i] = TTPU_VAL_ERROR;
    return;
  }
  if (trips <= 0) {
    for (int i = 0; i < n; ++i) fin[i] = init[i];
    return;
  }
  ttpu_val st[kMaxState + 1], out[kMaxState + 1];
  st[0] = ttpu_hlo_const_i(b, TTPU_I64, 0);
  for (int i = 0; i < n; ++i) st[i + 1] = init[i];
  fori_loop f = {trips, reverse, body, ctx};
  ttpu_hlo_while(b, st, n + 1, fori_cond, fori_body, &f, out);
  for (int i = 0; i < n; ++i) fin[i] = out[i + 1];
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

static ttpu_type type_of(ttpu_hlo* b, ttpu_val v) {
  const ttpu_type* tp = ttpu_hlo_type(b, v);
  if (tp) return *tp;
  ttpu_type e = {TTPU_DTYPE_NONE, 0, {0}};
  return e;
}

/* The diagonal (batch..., n) of x (batch..., n, n). */
static ttpu_val diag_of(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = *tp, ti = *tp;
  ti.dtype = TTPU_I64;
  ttpu_val eye = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, t.ndim - 2), ttpu_hlo_iota(b, ti, t.ndim - 1));
  int64_t last = t.ndim - 1;
  return ttpu_hlo_reduce(b, ttpu_hlo_select(b, eye, x, ttpu_hlo_const(b, t, 0, 0)), TTPU_RED_SUM, &last, 1);
}

/* i32 (batch...): the 1-based position of the first entry of the bool
 * vectors bad (batch..., n) that is set, or 0 when none is. */
static ttpu_val first_bad(ttpu_hlo* b, ttpu_val bad, int64_t n) {
  const ttpu_type* tp = ttpu_hlo_type(b, bad);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type tk = *tp;
  tk.dtype = TTPU_I64;
  int64_t last = tk.ndim - 1;
  ttpu_val order = ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_iota(b, tk, tk.ndim - 1), ttpu_hlo_const(b, tk, 0, 1));
  ttpu_val first = ttpu_hlo_reduce(b, ttpu_hlo_select(b, bad, order, ttpu_hlo_const(b, tk, 0, n + 1)),
                                   TTPU_RED_MIN, &last, 1);
  ttpu_type tb = type_of(b, first);
  ttpu_val info = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, first, ttpu_hlo_const(b, tb, 0, n)),
                                  ttpu_hlo_const(b, tb, 0, 0), first);
  return ttpu_hlo_convert(b, info, TTPU_I32);
}

static const char kNotPd[] =
    "The factorization could not be completed because the input is not positive-definite (the leading "
    "minor of order %lld is not positive-definite).";

/* Column j, as LAPACK's left-looking potf2 computes it: a_jj - sum_k<j
 * |l_jk|^2 must be positive (else info = j + 1, the diagonal entry takes
 * that value and nothing more changes), then the entries below. */
static void chol_body(ttpu_hlo* b, void* ctx, ttpu_val j, const ttpu_val* st, ttpu_val* next) {
  ttpu_type t = *(const ttpu_type*)ctx, ti = t;
  ti.dtype = TTPU_I64;
  int nd = t.ndim;
  ttpu_val l = st[0], info = st[1];
  ttpu_val row = ttpu_hlo_iota(b, ti, nd - 2), col = ttpu_hlo_iota(b, ti, nd - 1);
  ttpu_val jm = ttpu_hlo_broadcast_to(b, j, nd, t.dims);
  ttpu_val zero = ttpu_hlo_const(b, t, 0, 0);
  ttpu_val left = ttpu_hlo_compare(b, TTPU_LT, col, jm), at_j = ttpu_hlo_compare(b, TTPU_EQ, col, jm);
  ttpu_val lf = ttpu_hlo_select(b, left, l, zero);
  ttpu_val lj = ttpu_hlo_reduce(b, ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, row, jm), lf, zero), TTPU_RED_SUM,
                                (int64_t[]){nd - 2}, 1); /* row j's factored part, over the columns */
  int64_t map[TTPU_MAX_DIMS];
  for (int k = 0; k < nd - 1; ++k) map[k] = k < nd - 2 ? k : nd - 1;
  ttpu_val s = ttpu_hlo_binary(b, TTPU_MUL, lf, ttpu_hlo_broadcast_in_dim(b, ttpu_mx_conj(b, lj), t, map));
  int64_t last = nd - 1;
  ttpu_val colj = ttpu_hlo_reduce(b, ttpu_hlo_select(b, at_j, l, zero), TTPU_RED_SUM, &last, 1);
  ttpu_val upd = ttpu_hlo_binary(b, TTPU_SUB, colj, ttpu_hlo_reduce(b, s, TTPU_RED_SUM, &last, 1));
  ttpu_type tv = type_of(b, upd), tvi = tv;
  tvi.dtype = TTPU_I64;
  ttpu_val vrow = ttpu_hlo_iota(b, tvi, nd - 2), jv = ttpu_hlo_broadcast_to(b, j, tv.ndim, tv.dims);
  ttpu_val is_j = ttpu_hlo_compare(b, TTPU_EQ, vrow, jv);
  int64_t vlast = nd - 2;
  ttpu_val ajj = ttpu_hlo_reduce(b, ttpu_hlo_real(b, ttpu_hlo_select(b, is_j, upd, ttpu_hlo_const(b, tv, 0, 0))),
                                 TTPU_RED_SUM, &vlast, 1);
  ttpu_type tb = type_of(b, ajj);
  ttpu_val ok = ttpu_hlo_compare(b, TTPU_GT, ajj, ttpu_hlo_const(b, tb, 0, 0));
  ttpu_val ljj = ttpu_hlo_unary(b, TTPU_SQRT, ttpu_hlo_select(b, ok, ajj, ttpu_hlo_const(b, tb, 1, 1)));
  for (int k = 0; k < nd - 2; ++k) map[k] = k;
  ttpu_val ljv = ttpu_hlo_convert(b, ttpu_hlo_broadcast_in_dim(b, ljj, type_of(b, ttpu_hlo_real(b, upd)), map), t.dtype);
  ttpu_val ajv = ttpu_hlo_convert(b, ttpu_hlo_broadcast_in_dim(b, ajj, type_of(b, ttpu_hlo_real(b, upd)), map), t.dtype);
  ttpu_val okv = ttpu_hlo_broadcast_in_dim(b, ok, type_of(b, ttpu_hlo_compare(b, TTPU_EQ, vrow, jv)), map);
  ttpu_val good = ttpu_hlo_select(b, is_j, ljv, ttpu_hlo_binary(b, TTPU_DIV, upd, ljv));
  ttpu_val bad = ttpu_hlo_select(b, is_j, ajv, colj);
  ttpu_val newcol = ttpu_hlo_select(b, okv, good, bad);
  newcol = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_LT, vrow, jv), ttpu_hlo_const(b, tv, 0, 0), newcol);
  ttpu_val alive = ttpu_hlo_compare(b, TTPU_EQ, info, ttpu_hlo_const(b, type_of(b, info), 0, 0));
  for (int k = 0; k < nd - 2; ++k) map[k] = k;
  ttpu_type tbm = t;
  tbm.dtype = TTPU_BOOL;
  ttpu_val write = ttpu_hlo_binary(b, TTPU_AND, at_j, ttpu_hlo_broadcast_in_dim(b, alive, tbm, map));
  map[nd - 2] = nd - 2;
  next[0] = ttpu_hlo_select(b, write, ttpu_hlo_broadcast_in_dim(b, newcol, t, map), l);
  ttpu_val j1 = ttpu_hlo_binary(b, TTPU_ADD, j, ttpu_hlo_const_i(b, TTPU_I64, 1));
  ttpu_type tib = type_of(b, info);
  ttpu_val fails = ttpu_hlo_binary(b, TTPU_AND, alive, ttpu_hlo_unary(b, TTPU_NOT, ok));
  next[1] = ttpu_hlo_select(b, fails, ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, j1, TTPU_I32), tib.ndim, tib.dims), info);
}

/* The lower Cholesky factor of self (arg 0, real symmetric or complex
 * Hermitian, its lower triangle read) and its info: 0, or the order of the
 * first leading minor that is not positive-definite. Column by column in a
 * while loop, as LAPACK's left-looking potf2 (the program does not grow
 * with n), so a failure leaves what the CPU leaves: the columns before the
 * failing one factored, the failing diagonal entry its updated value
 * a_jj - sum_k |l_jk|^2 (not positive), the rest the input's lower
 * triangle untouched. (XLA's cholesky gives NaN everywhere instead.) */
static ttpu_val lower_factor(ttpu_lower* L, const char* kernel, ttpu_val* info_out) {
  ttpu_val a = ttpu_l_tensor(L, 0);
  ttpu_type t = ttpu_l_type(L, a);
  if (!ttpu_mx_lapack_dtype(L, t.dtype, kernel)) return TTPU_VAL_ERROR;
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type tb = t;
  tb.ndim -= 2;
  tb.dtype = TTPU_I32;
  ttpu_val init[2] = {triangle(b, a, 1), ttpu_hlo_const(b, tb, 0, 0)}, fin[2];
  ttpu_mx_fori(b, t.dims[t.ndim - 1], 0, init, 2, chol_body, &t, fin);
  *info_out = fin[1];
  return fin[0];
}

/* linalg_cholesky_ex(self, *, upper=False, check_errors=False) -> (L, info) */
static ttpu_status* lower_cholesky_ex(ttpu_lower* L) {
  ttpu_val info;
  ttpu_val f = lower_factor(L, "cholesky_cpu", &info);
  if (f == TTPU_VAL_ERROR) return NULL;
  if (ttpu_l_bool(L, 2, 0)) ttpu_mx_check_info(L, info, "linalg.cholesky_ex", kNotPd);
  ttpu_l_set_out(L, 0, ttpu_l_bool(L, 1, 0) ? ttpu_mx_adjoint(ttpu_l_hlo(L), f) : f);
  ttpu_l_set_out(L, 1, info);
  return NULL;
}

/* cholesky(self, upper=False): fails as the CPU does on an input that is
 * not positive-definite. */
static ttpu_status* lower_cholesky(ttpu_lower* L) {
  ttpu_val info;
  ttpu_val f = lower_factor(L, "cholesky_cpu", &info);
  if (f == TTPU_VAL_ERROR) return NULL;
  ttpu_mx_check_info(L, info, "cholesky", kNotPd);
  ttpu_l_set_out(L, 0, ttpu_l_bool(L, 1, 0) ? ttpu_mx_adjoint(ttpu_l_hlo(L), f) : f);
  return NULL;
}

/* x with factor F = L (lower) or U (upper): solves F F^H x = rhs (lower)
 * or U^H U x = rhs (upper), by two triangular solves. */
static ttpu_val cholesky_solve_v(ttpu_hlo* b, ttpu_val f, ttpu_val rhs, int upper) {
  const ttpu_type* tp = ttpu_hlo_type(b, f);
  if (!tp) return TTPU_VAL_ERROR;
  int adj = ttpu_dtype_is_complex(tp->dtype) ? 2 : 1;
  ttpu_val y = ttpu_hlo_triangular_solve(b, f, rhs, 1, !upper, 0, upper ? adj : 0);
  return ttpu_hlo_triangular_solve(b, f, y, 1, !upper, 0, upper ? 0 : adj);
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

/* cholesky_inverse(self=factor, upper=False): (F F^H)^-1 as a solve
 * against the identity; a zero on the factor's diagonal fails as the
 * CPU's. */
static ttpu_status* lower_cholesky_inverse(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!ttpu_mx_lapack_dtype(L, ot.dtype, "cholesky_inverse_out_cpu")) return NULL;
  ttpu_val f = ttpu_l_tensor(L, 0);
  ttpu_val d = diag_of(b, f);
  ttpu_type td = type_of(b, d);
  ttpu_mx_check_info(L, first_bad(b, ttpu_hlo_compare(b, TTPU_EQ, d, ttpu_hlo_const(b, td, 0, 0)), ot.dims[ot.ndim - 1]),
                     "cholesky_inverse",
                     "The diagonal element %lld is zero, the inversion could not be completed because the input "
                     "matrix is singular.");
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
    {"linalg_cholesky_ex", lower_cholesky_ex, .complex_fn = lower_cholesky_ex},
    {"linalg_cholesky_ex.L", lower_cholesky_ex, .complex_fn = lower_cholesky_ex},
    {"cholesky", lower_cholesky, .variants = TTPU_V_OUT, .complex_fn = lower_cholesky},
    {"_cholesky_solve_helper", lower_cholesky_solve_helper, .variants = TTPU_V_OUT,
     .complex_fn = lower_cholesky_solve_helper},
    {"cholesky_inverse", lower_cholesky_inverse, .variants = TTPU_V_OUT, .complex_fn = lower_cholesky_inverse},
    {"triangular_solve", lower_triangular_solve, .complex_fn = lower_triangular_solve},
    {"triangular_solve.X", lower_triangular_solve, .complex_fn = lower_triangular_solve},
    {"linalg_solve_triangular", lower_linalg_solve_triangular, .variants = TTPU_V_OUT,
     .complex_fn = lower_linalg_solve_triangular},
    {"trace", lower_trace, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_OUT},
    {"linalg_cross", lower_linalg_cross, .variants = TTPU_V_OUT, .flags = TTPU_OP_COMPLEX_AS_IS},
    {0},
};

/* ---- broadcasting per-matrix values (matrix.h) */

ttpu_val ttpu_mx_spread(ttpu_hlo* b, ttpu_val v, ttpu_type t, int nb) {
  const ttpu_type* tv = ttpu_hlo_type(b, v);
  if (!tv) return TTPU_VAL_ERROR;
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < nb; ++d) map[d] = d;
  t.dtype = tv->dtype;
  return ttpu_hlo_broadcast_in_dim(b, v, t, map);
}

ttpu_val ttpu_mx_spread_vec(ttpu_hlo* b, ttpu_val v, ttpu_type t, int nb, int at) {
  const ttpu_type* tv = ttpu_hlo_type(b, v);
  if (!tv) return TTPU_VAL_ERROR;
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < nb; ++d) map[d] = d;
  map[nb] = at;
  t.dtype = tv->dtype;
  return ttpu_hlo_broadcast_in_dim(b, v, t, map);
}
