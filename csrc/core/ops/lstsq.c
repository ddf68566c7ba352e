/* lstsq.c - linalg_lstsq (the .out form the functional calls): solution,
 * residuals, rank and singular values as the CPU's LAPACK drivers leave
 * them (gelsy by default; gels, gelsd and gelss on request).
 *
 * All four rest on the singular value decomposition of svd.c's one-sided
 * (Hestenes) Jacobi (ttpu_mx_hestenes): the columns of W (A, or A^T when A
 * is wide) are rotated pairwise until mutually orthogonal, W V = U S.
 * Working on W itself, never on A^T A, keeps the singular values to the
 * dtype's relative accuracy, so the rank cut-off sees what LAPACK sees.
 *
 * With W_f = W V = U S the minimum-norm least-squares solution is
 *   tall (W = A):   X = V D W_f^T B,
 *   wide (W = A^T): X = W_f D V^T B,
 * D = diag(1 / s_i^2) over the kept singular values (s_i > rcond * s_max,
 * rcond defaulting to eps * max(m, n) as PyTorch passes it; a run-time
 * value, so calls that differ in rcond alone share a program), 0 for the
 * others: pinv(A) B without normalising U. That is the solution gelsd and
 * gelss return; gelsy (QR with column pivoting) returns the same minimum
 * norm solution when what it cuts is rounding noise (exactly
 * rank-deficient matrices, the default rcond); an rcond that cuts a real
 * singular value makes gelsy's answer depend on its pivoting, and that
 * case raises NotImplementedError (gelsy_guard). gels keeps every singular
 * value (full rank assumed, as LAPACK's QR solve does).
 *
 * Complex matrices take the same path with W = A^H when A is wide and
 * the transposes above conjugated (W_f^H, V^H).
 *
 * Residuals (gels/gelsd/gelss with m > n) are |A X - B|^2 per column.
 * gelsd/gelss return them only when every matrix has full rank (else an
 * empty tensor: a shape the data decides); the meta kernel sizes them for
 * full rank and full_rank_guard fails the call otherwise. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "matrix.h"

static ttpu_val bin(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, op, x, y);
}

static ttpu_val kc(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

/* Batched product of x (batch..., r, c) and y (batch..., c', s) with the
 * same batch, contracting x's dim (tx ? rows : cols) with y's (ty ? cols :
 * rows), full float32 passes whatever the matmul precision setting. A
 * complex x contracted over its rows is conjugated (x^H y). */
static ttpu_val bmm(ttpu_hlo* b, ttpu_val x, ttpu_val y, int tx, int ty) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  if (tx) x = ttpu_mx_conj(b, x);
  int nd = tp->ndim;
  ttpu_dtype dt = tp->dtype;
  int64_t batch[TTPU_MAX_DIMS];
  for (int d = 0; d < nd - 2; ++d) batch[d] = d;
  int64_t cx = tx ? nd - 2 : nd - 1, cy = ty ? nd - 1 : nd - 2;
  return ttpu_hlo_dot_general(b, x, y, batch, batch, nd - 2, &cx, &cy, 1, dt, TTPU_PREC_HIGHEST);
}

static ttpu_val sum_dim(ttpu_hlo* b, ttpu_val x, int d) {
  int64_t dd = d;
  return ttpu_hlo_reduce(b, x, TTPU_RED_SUM, &dd, 1);
}

/* Fails the call after the run with `code` and msg when any element of
 * the bool value `bad` is set. */
static void check_any(ttpu_lower* L, ttpu_val bad, ttpu_code code, const char* msg) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type tk = ttpu_l_type(L, bad);
  int64_t all[TTPU_MAX_DIMS], one = 1;
  for (int d = 0; d < tk.ndim; ++d) all[d] = d;
  ttpu_val any = ttpu_hlo_reduce(b, bad, TTPU_RED_OR, all, tk.ndim);
  ttpu_val zero = ttpu_hlo_const_i(b, TTPU_I64, 0);
  ttpu_val parts[4] = {ttpu_hlo_convert(b, any, TTPU_I64), zero, zero, zero};
  for (int i = 0; i < 4; ++i) parts[i] = ttpu_hlo_reshape(b, parts[i], 1, &one);
  ttpu_l_check(L, ttpu_hlo_concat(b, parts, 4, 0), code, msg);
}

/* gelsd/gelss give residuals (m > n) only when every matrix has full
 * rank, else an empty tensor: the output was sized for full rank, so a
 * deficient matrix fails the call (NotImplementedError) after the run. */
static void full_rank_guard(ttpu_lower* L, ttpu_val keep) {
  check_any(L, ttpu_hlo_unary(ttpu_l_hlo(L), TTPU_NOT, keep), TTPU_UNIMPLEMENTED,
            "torch.linalg.lstsq on tpu: with driver='gelsd'/'gelss' and more rows than columns "
            "the CPU returns empty residuals for a rank-deficient matrix, an output shape tpu "
            "fixes before the run (for full rank); use driver='gelsy' for rank-deficient input");
}

/* gelsy truncates through a pivoted QR, not the SVD: the two minimum-norm
 * solutions agree when what is cut is rounding noise (an exactly
 * rank-deficient matrix, the default rcond), not when an rcond the caller
 * chose cuts a singular value well above it. That case fails with
 * NotImplementedError after the run rather than answer differently. */
static void gelsy_guard(ttpu_lower* L, ttpu_val sv, ttpu_val keep, double noise) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ts = ttpu_l_type(L, sv);
  /* sv > 10 * noise * s_max */
  int64_t lastd = ts.ndim - 1;
  ttpu_val smax = ttpu_hlo_reduce(b, sv, TTPU_RED_MAX, &lastd, 1);
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < ts.ndim - 1; ++d) map[d] = d;
  ttpu_val floor_ = ttpu_hlo_broadcast_in_dim(b, bin(b, TTPU_MUL, smax, ttpu_hlo_const(b, ttpu_l_type(L, smax), 10 * noise, 0)),
                                              ts, map);
  ttpu_val bad = bin(b, TTPU_AND, ttpu_hlo_unary(b, TTPU_NOT, keep), ttpu_hlo_compare(b, TTPU_GT, sv, floor_));
  check_any(L, bad, TTPU_UNIMPLEMENTED,
            "torch.linalg.lstsq on tpu: driver='gelsy' with an rcond that cuts a singular value "
            "well above rounding noise truncates through a pivoted QR, which tpu does not "
            "reproduce; use driver='gelsd' (SVD truncation) for that");
}

/* x broadcast to batch dims `batch` (nb of them) keeping its last two. */
static ttpu_val to_batch(ttpu_hlo* b, ttpu_val x, const int64_t* batch, int nb) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int64_t dims[TTPU_MAX_DIMS];
  for (int d = 0; d < nb; ++d) dims[d] = batch[d];
  dims[nb] = tp->dims[tp->ndim - 2];
  dims[nb + 1] = tp->dims[tp->ndim - 1];
  return ttpu_hlo_broadcast_to(b, x, nb + 2, dims);
}

/* linalg_lstsq.out(self, b, rcond=None, *, driver=None, solution,
 * residuals, rank, singular_values) */
static ttpu_status* lower_lstsq(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val a = ttpu_l_tensor(L, 0), rhs = ttpu_l_tensor(L, 1);
  ttpu_type ta = ttpu_l_type(L, a), tb = ttpu_l_type(L, rhs);
  if (!ttpu_mx_lapack_dtype(L, ta.dtype, "linalg_lstsq_cpu")) return NULL;
  ttpu_dtype dt = ta.dtype;
  const char* driver = ttpu_l_str(L, 3, "gelsy");
  int gels = strcmp(driver, "gels") == 0;
  int nd = ta.ndim;
  int64_t m = ta.dims[nd - 2], n = ta.dims[nd - 1];
  double eps = ttpu_dtype_real(dt) == TTPU_F64 ? DBL_EPSILON : FLT_EPSILON;
  double noise = eps * (double)(m > n ? m : n); /* rounding's rcond, the default */

  /* the right-hand sides as (batch..., m, k), the meta kernel's rule for
   * a vector per matrix */
  int vector = tb.ndim == 1;
  if (tb.ndim == nd - 1) {
    vector = 1;
    for (int d = 0; d < nd - 1; ++d) vector &= tb.dims[d] == ta.dims[d];
  }
  ttpu_type o0 = ttpu_l_out_type(L, 0), o1 = ttpu_l_out_type(L, 1);
  ttpu_type o2 = ttpu_l_out_type(L, 2), o3 = ttpu_l_out_type(L, 3);
  int nb = o0.ndim - (vector ? 1 : 2);
  int64_t k = vector ? 1 : tb.dims[tb.ndim - 1];
  if (vector) {
    ttpu_type t3 = tb;
    t3.dims[t3.ndim++] = 1;
    rhs = ttpu_l_reshape_to(b, rhs, t3);
  }
  rhs = to_batch(b, rhs, o0.dims, nb);
  int64_t xdims[TTPU_MAX_DIMS];
  for (int d = 0; d < nb; ++d) xdims[d] = o0.dims[d];
  xdims[nb] = n;
  xdims[nb + 1] = k;

  if (ttpu_type_numel(&ta) == 0) {
    /* nothing to fit: X = 0, residual |B|^2, rank 0 */
    ttpu_l_set_out(L, 0, kc(b, o0, 0));
    if (ttpu_type_numel(&o1) > 0)
      ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, sum_dim(b, ttpu_mx_abs2(b, rhs), nb), o1));
    else
      ttpu_l_set_out(L, 1, kc(b, o1, 0));
    ttpu_l_set_out(L, 2, kc(b, o2, 0));
    ttpu_l_set_out(L, 3, kc(b, o3, 0));
    return NULL;
  }

  int tall = m >= n;
  ttpu_val w = tall ? a : ttpu_mx_adjoint(b, a), wf, v, scale;
  ttpu_mx_hestenes(b, w, 1, &wf, &v, &scale);
  int64_t bmap[TTPU_MAX_DIMS];
  for (int d = 0; d < nd - 2; ++d) bmap[d] = d;
  wf = bin(b, TTPU_MUL, wf, ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_convert(b, scale, dt), ttpu_l_type(L, wf), bmap));
  int64_t q = tall ? n : m;

  /* s^2 per column, the cut-off, and D */
  ttpu_val s2 = sum_dim(b, ttpu_mx_abs2(b, wf), nd - 2);     /* (batch_a..., q) */
  ttpu_type ts = ttpu_l_type(L, s2);
  ttpu_val sv = ttpu_hlo_unary(b, TTPU_SQRT, s2);
  int64_t lastd = nd - 2;
  ttpu_val smax = ttpu_hlo_reduce(b, sv, TTPU_RED_MAX, &lastd, 1);
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < nd - 2; ++d) map[d] = d;
  /* rcond: a run-time scalar from the glue (None comes as the default it
   * stands for, so every rcond shares the program), a constant from
   * callers that pass a float or None */
  ttpu_type tmax = ttpu_l_type(L, smax);
  ttpu_val rcond;
  if (ttpu_l_kind(L, 2) == TTPU_ARG_SCALAR)
    rcond = ttpu_hlo_broadcast_in_dim(b, ttpu_l_scalar(L, 2, tmax.dtype), tmax, NULL);
  else
    rcond = ttpu_hlo_const(b, tmax, ttpu_l_is_none(L, 2) ? noise : ttpu_l_float(L, 2, 0), 0);
  ttpu_val cut = ttpu_hlo_broadcast_in_dim(b, bin(b, TTPU_MUL, smax, rcond), ts, map);
  ttpu_val keep = gels ? ttpu_hlo_compare(b, TTPU_EQ, sv, sv) : ttpu_hlo_compare(b, TTPU_GT, sv, cut);
  ttpu_val dinv = ttpu_hlo_select(b, keep, bin(b, TTPU_DIV, kc(b, ts, 1), s2), kc(b, ts, 0));
  if (strcmp(driver, "gelsy") == 0) gelsy_guard(L, sv, keep, noise);
  /* gels is LAPACK's QR solve, which fails on an exactly singular R */
  if (gels)
    check_any(L, ttpu_hlo_compare(b, TTPU_EQ, sv, kc(b, ts, 0)), TTPU_LINALG_ERROR,
              "torch.linalg.lstsq: The least squares solution could not be computed because the "
              "input matrix does not have full rank");

  /* X = V D W_f^H B (tall) or W_f D V^H B (wide), over the solution batch */
  ttpu_val left = to_batch(b, tall ? v : wf, xdims, nb);
  ttpu_val right = to_batch(b, tall ? wf : v, xdims, nb);
  ttpu_type tdk = ttpu_type_make(dt, nb + 1, xdims);
  tdk.dims[nb] = q;
  int64_t dmap[TTPU_MAX_DIMS];
  ttpu_val dk = ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, dinv, dt), nb + 1, tdk.dims);
  ttpu_type tqk = ttpu_type_make(dt, nb + 2, xdims);
  tqk.dims[nb] = q;
  for (int d = 0; d <= nb; ++d) dmap[d] = d;
  ttpu_val proj = bin(b, TTPU_MUL, bmm(b, right, rhs, 1, 0), ttpu_hlo_broadcast_in_dim(b, dk, tqk, dmap));
  ttpu_val x = bmm(b, left, proj, 0, 0);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, x, o0));

  if (ttpu_type_numel(&o1) > 0 && !gels) full_rank_guard(L, keep);
  if (ttpu_type_numel(&o1) > 0) {
    ttpu_val ab = to_batch(b, a, xdims, nb);
    ttpu_val res = bin(b, TTPU_SUB, bmm(b, ab, x, 0, 0), rhs);
    ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, sum_dim(b, ttpu_mx_abs2(b, res), nb), o1));
  } else {
    ttpu_l_set_out(L, 1, kc(b, o1, 0));
  }
  if (ttpu_type_numel(&o2) > 0) {
    ttpu_val r = ttpu_hlo_reduce(b, ttpu_hlo_convert(b, keep, TTPU_I64), TTPU_RED_SUM, &lastd, 1);
    ttpu_l_set_out(L, 2, ttpu_l_reshape_to(b, r, o2));
  } else {
    ttpu_l_set_out(L, 2, kc(b, o2, 0));
  }
  if (ttpu_type_numel(&o3) > 0) {
    ttpu_val sorted[1];
    ttpu_hlo_sort(b, sv, NULL, 0, nd - 2, 1, sorted);
    ttpu_l_set_out(L, 3, ttpu_l_reshape_to(b, sorted[0], o3));
  } else {
    ttpu_l_set_out(L, 3, kc(b, o3, 0));
  }
  return NULL;
}

const ttpu_op_def ttpu_ops_lstsq[] = {
    {"linalg_lstsq.out", lower_lstsq, .flags = 0, .complex_fn = lower_lstsq},
    {0},
};
