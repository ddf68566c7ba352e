/* lstsq.c - linalg_lstsq (the .out form the functional calls): solution,
 * residuals, rank and singular values as the CPU's LAPACK drivers leave
 * them (gelsy by default; gels, gelsd and gelss on request).
 *
 * All four rest on a singular value decomposition computed here by
 * one-sided (Hestenes) Jacobi: the columns of W (A, or A^T when A is wide)
 * are rotated pairwise until mutually orthogonal, W V = U S. Each round
 * applies n/2 disjoint rotations at once as one orthogonal matrix J
 * (W <- W J, V <- V J; the pairs follow a round-robin tournament so every
 * pair meets once a sweep), and the rounds run in a stablehlo.while until
 * the columns are orthogonal to the dtype's rounding. Working on W itself,
 * never on A^T A, keeps the singular values to the dtype's relative
 * accuracy, so the rank cut-off sees what LAPACK sees.
 *
 * With W_f = W V = U S the minimum-norm least-squares solution is
 *   tall (W = A):   X = V D W_f^T B,
 *   wide (W = A^T): X = W_f D V^T B,
 * D = diag(1 / s_i^2) over the kept singular values (s_i > rcond * s_max,
 * rcond defaulting to eps * max(m, n) as PyTorch passes it), 0 for the
 * others: pinv(A) B without normalising U. That is the solution gelsd and
 * gelss return; gelsy (QR with column pivoting) returns the same minimum
 * norm solution when what it cuts is rounding noise (exactly
 * rank-deficient matrices, the default rcond); an rcond that cuts a real
 * singular value makes gelsy's answer depend on its pivoting, and that
 * case raises NotImplementedError (gelsy_guard). gels keeps every singular
 * value (full rank assumed, as LAPACK's QR solve does).
 *
 * Residuals (gels/gelsd/gelss with m > n) are |A X - B|^2 per column.
 * gelsd/gelss return them only when every matrix has full rank (else an
 * empty tensor: a shape the data decides); the meta kernel sizes them for
 * full rank and full_rank_guard fails the call otherwise. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "matrix.h"

enum { kMaxSweeps = 30 };

static ttpu_val bin(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, op, x, y);
}

static ttpu_val kc(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

/* Batched product of x (batch..., r, c) and y (batch..., c', s) with the
 * same batch, contracting x's dim (tx ? rows : cols) with y's (ty ? cols :
 * rows), full float32 passes whatever the matmul precision setting. */
static ttpu_val bmm(ttpu_hlo* b, ttpu_val x, ttpu_val y, int tx, int ty) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
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

typedef struct {
  ttpu_type tw;        /* W: (batch..., p, q), p >= q */
  ttpu_type tg;        /* (batch..., q, q) */
  int64_t q, qe;       /* columns, and q rounded up to even (the schedule) */
  int64_t max_rounds;
  double eps, tol;     /* converged when every |cos| between columns <= tol */
} hestenes;

/* A (batch..., q) value v as v[k] in column k of (batch..., q, q). */
static ttpu_val along_rows(ttpu_hlo* b, const hestenes* h, ttpu_val v) {
  int nd = h->tg.ndim;
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < nd - 2; ++d) map[d] = d;
  map[nd - 2] = nd - 1;
  return ttpu_hlo_broadcast_in_dim(b, v, h->tg, map);
}
/* ... and as v[i] in row i. */
static ttpu_val along_cols(ttpu_hlo* b, const hestenes* h, ttpu_val v) {
  int nd = h->tg.ndim;
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < nd - 1; ++d) map[d] = d;
  return ttpu_hlo_broadcast_in_dim(b, v, h->tg, map);
}

static ttpu_val eye(ttpu_hlo* b, const hestenes* h) { return ttpu_mx_identity(b, h->tg); }

static ttpu_val all_max(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int nd = tp->ndim;
  int64_t all[TTPU_MAX_DIMS];
  for (int d = 0; d < nd; ++d) all[d] = d;
  return ttpu_hlo_reduce(b, x, TTPU_RED_MAX, all, nd);
}

/* state: {round, W, V, largest |cos| seen at the last round's start} */
static ttpu_val sweep_cond(ttpu_hlo* b, void* ctx, const ttpu_val* st) {
  const hestenes* h = ctx;
  ttpu_val more = ttpu_hlo_compare(b, TTPU_LT, st[0], ttpu_hlo_const_i(b, TTPU_I64, h->max_rounds));
  ttpu_val off = ttpu_hlo_compare(b, TTPU_GT, st[3], ttpu_hlo_const_f(b, h->tw.dtype, h->tol));
  return bin(b, TTPU_AND, more, off);
}

static void sweep_body(ttpu_hlo* b, void* ctx, const ttpu_val* st, ttpu_val* next) {
  const hestenes* h = ctx;
  int nd = h->tg.ndim;
  int64_t q = h->q, last = h->qe - 1;
  ttpu_type tg = h->tg, tv = tg;
  tv.ndim--;
  ttpu_val it = st[0], w = st[1];

  ttpu_val g = bmm(b, w, w, 1, 0);                       /* W^T W */
  ttpu_val d = sum_dim(b, bin(b, TTPU_MUL, g, eye(b, h)), nd - 1);
  /* largest |cos| between two columns (zero columns count as orthogonal) */
  ttpu_val dd = bin(b, TTPU_MUL, along_rows(b, h, d), along_cols(b, h, d));
  ttpu_val pos = ttpu_hlo_compare(b, TTPU_GT, dd, kc(b, tg, 0));
  ttpu_val cosv = bin(b, TTPU_DIV, ttpu_hlo_unary(b, TTPU_ABS, g),
                      ttpu_hlo_unary(b, TTPU_SQRT, ttpu_hlo_select(b, pos, dd, kc(b, tg, 1))));
  ttpu_val offd = bin(b, TTPU_MUL, cosv, bin(b, TTPU_SUB, kc(b, tg, 1), eye(b, h)));
  next[3] = all_max(b, ttpu_hlo_select(b, pos, offd, kc(b, tg, 0)));

  /* Round r of the circle method over qe seats: seat `last` is fixed,
   * k meets (2r - k) mod last, and r meets the fixed seat. A partner
   * beyond the real columns (odd q) means sitting the round out. */
  ttpu_type tk = ttpu_type_make(TTPU_I64, 1, &q);
  ttpu_val k = ttpu_hlo_iota(b, tk, 0);
  ttpu_val r = ttpu_hlo_broadcast_to(b, bin(b, TTPU_REM, it, ttpu_hlo_const_i(b, TTPU_I64, last)), 1, &q);
  ttpu_val fixed = kc(b, tk, (double)last);
  ttpu_val partner = bin(b, TTPU_REM, bin(b, TTPU_ADD, bin(b, TTPU_SUB, bin(b, TTPU_ADD, r, r), k), fixed), fixed);
  partner = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, k, r), fixed, partner);
  partner = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, k, fixed), r, partner);
  partner = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GE, partner, kc(b, tk, (double)q)), k, partner);

  /* P[i, k] = (i == partner[k]) */
  int64_t qq[2] = {q, q}, one = 1;
  ttpu_type tqq = ttpu_type_make(TTPU_I64, 2, qq);
  ttpu_val pick = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, tqq, 0), ttpu_hlo_broadcast_in_dim(b, partner, tqq, &one));
  int64_t map2[2] = {nd - 2, nd - 1};
  ttpu_val p = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_convert(b, pick, tg.dtype), tg, map2);

  ttpu_val dp = sum_dim(b, bin(b, TTPU_MUL, along_cols(b, h, d), p), nd - 2);  /* |w_partner|^2 */
  ttpu_val gk = sum_dim(b, bin(b, TTPU_MUL, g, p), nd - 2);                   /* w_k . w_partner */
  int64_t vmap = nd - 2;
  ttpu_type tvb = tv;
  tvb.dtype = TTPU_BOOL;
  ttpu_val lo = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_compare(b, TTPU_LT, k, partner), tvb, &vmap);
  ttpu_val alone = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_compare(b, TTPU_EQ, k, partner), tvb, &vmap);

  /* the rotation orthogonalising columns (a, c), a < c: zeta = (|c|^2 -
   * |a|^2) / (2 a.c), t the smaller root of t^2 + 2 zeta t - 1 = 0;
   * pairs already orthogonal to rounding are left alone */
  ttpu_val aa = ttpu_hlo_select(b, lo, d, dp), cc = ttpu_hlo_select(b, lo, dp, d);
  ttpu_val small = ttpu_hlo_compare(b, TTPU_LE, ttpu_hlo_unary(b, TTPU_ABS, gk),
                                    bin(b, TTPU_MUL, kc(b, tv, h->eps),
                                        ttpu_hlo_unary(b, TTPU_SQRT, bin(b, TTPU_MUL, aa, cc))));
  ttpu_val skip = bin(b, TTPU_OR, alone, small);
  ttpu_val t, c, sj;
  ttpu_mx_jacobi_rotation(b, tv, aa, cc, gk, skip, lo, &t, &c, &sj);
  ttpu_val jm = bin(b, TTPU_ADD, bin(b, TTPU_MUL, eye(b, h), along_rows(b, h, c)),
                    bin(b, TTPU_MUL, p, along_rows(b, h, sj)));
  next[0] = bin(b, TTPU_ADD, it, ttpu_hlo_const_i(b, TTPU_I64, 1));
  next[1] = bmm(b, w, jm, 0, 0);
  next[2] = bmm(b, st[2], jm, 0, 0);
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
  double eps = dt == TTPU_F64 ? DBL_EPSILON : FLT_EPSILON;
  double rcond = ttpu_l_is_none(L, 2) ? eps * (double)(m > n ? m : n) : ttpu_l_float(L, 2, 0);

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
      ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, sum_dim(b, bin(b, TTPU_MUL, rhs, rhs), nb), o1));
    else
      ttpu_l_set_out(L, 1, kc(b, o1, 0));
    ttpu_l_set_out(L, 2, kc(b, o2, 0));
    ttpu_l_set_out(L, 3, kc(b, o3, 0));
    return NULL;
  }

  int tall = m >= n;
  ttpu_val w = tall ? a : ttpu_mx_transpose(b, a);
  hestenes h;
  h.tw = ttpu_l_type(L, w);
  h.q = tall ? n : m;
  h.qe = h.q + (h.q & 1);
  h.tg = h.tw;
  h.tg.dims[nd - 2] = h.q;
  h.max_rounds = h.q < 2 ? 0 : (int64_t)kMaxSweeps * (h.qe - 1);
  h.eps = eps;
  h.tol = eps * (double)(tall ? m : n);
  ttpu_val init[4] = {ttpu_hlo_const_i(b, TTPU_I64, 0), w, ttpu_mx_identity(b, h.tg),
                      ttpu_hlo_const_f(b, dt, HUGE_VAL)}, fin[4];
  ttpu_hlo_while(b, init, 4, sweep_cond, sweep_body, &h, fin);
  ttpu_val wf = fin[1], v = fin[2];

  /* s^2 per column, the cut-off, and D */
  ttpu_val s2 = sum_dim(b, bin(b, TTPU_MUL, wf, wf), nd - 2);     /* (batch_a..., q) */
  ttpu_type ts = ttpu_l_type(L, s2);
  ttpu_val sv = ttpu_hlo_unary(b, TTPU_SQRT, s2);
  int64_t lastd = nd - 2;
  ttpu_val smax = ttpu_hlo_reduce(b, sv, TTPU_RED_MAX, &lastd, 1);
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < nd - 2; ++d) map[d] = d;
  ttpu_val cut = ttpu_hlo_broadcast_in_dim(b, bin(b, TTPU_MUL, smax, ttpu_hlo_const(b, ttpu_l_type(L, smax), rcond, 0)),
                                           ts, map);
  ttpu_val keep = gels ? ttpu_hlo_compare(b, TTPU_EQ, sv, sv) : ttpu_hlo_compare(b, TTPU_GT, sv, cut);
  ttpu_val dinv = ttpu_hlo_select(b, keep, bin(b, TTPU_DIV, kc(b, ts, 1), s2), kc(b, ts, 0));
  if (strcmp(driver, "gelsy") == 0) gelsy_guard(L, sv, keep, eps * (double)(m > n ? m : n));
  /* gels is LAPACK's QR solve, which fails on an exactly singular R */
  if (gels)
    check_any(L, ttpu_hlo_compare(b, TTPU_EQ, sv, kc(b, ts, 0)), TTPU_INVALID_ARGUMENT,
              "torch.linalg.lstsq: The least squares solution could not be computed because the "
              "input matrix does not have full rank");

  /* X = V D W_f^T B (tall) or W_f D V^T B (wide), over the solution batch */
  ttpu_val left = to_batch(b, tall ? v : wf, xdims, nb);
  ttpu_val right = to_batch(b, tall ? wf : v, xdims, nb);
  ttpu_type tdk = ttpu_type_make(dt, nb + 1, xdims);
  tdk.dims[nb] = h.q;
  int64_t dmap[TTPU_MAX_DIMS];
  ttpu_val dk = ttpu_hlo_broadcast_to(b, dinv, nb + 1, tdk.dims);
  ttpu_type tqk = ttpu_type_make(dt, nb + 2, xdims);
  tqk.dims[nb] = h.q;
  for (int d = 0; d <= nb; ++d) dmap[d] = d;
  ttpu_val proj = bin(b, TTPU_MUL, bmm(b, right, rhs, 1, 0), ttpu_hlo_broadcast_in_dim(b, dk, tqk, dmap));
  ttpu_val x = bmm(b, left, proj, 0, 0);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, x, o0));

  if (ttpu_type_numel(&o1) > 0 && !gels) full_rank_guard(L, keep);
  if (ttpu_type_numel(&o1) > 0) {
    ttpu_val ab = to_batch(b, a, xdims, nb);
    ttpu_val res = bin(b, TTPU_SUB, bmm(b, ab, x, 0, 0), rhs);
    ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, sum_dim(b, bin(b, TTPU_MUL, res, res), nb), o1));
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
    {"linalg_lstsq.out", lower_lstsq, .flags = 0},
    {0},
};
