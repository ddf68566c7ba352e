/* eig.c - the general (non-symmetric) eigendecomposition: linalg_eig and
 * _linalg_eigvals (eig, eigvals), real and complex matrices.
 *
 * In complex arithmetic whatever the input (a real matrix's eigenvalues
 * are complex in general, and PyTorch returns them complex), the way
 * LAPACK's zgeev goes: a Householder reduction to upper Hessenberg form,
 * then the single-shift QR algorithm (Wilkinson shifts, Givens bulge
 * chases, deflation at negligible subdiagonal entries) down to the Schur
 * form T = Z^H A Z, whose diagonal holds the eigenvalues. Eigenvectors are
 * T's, by back substitution (one triangular solve per eigenvalue, a tiny
 * divisor replaced by eps |t_ii| as ztrevc does), mapped back through Z
 * and scaled as zgeev scales them: unit norm, largest component real.
 *
 * Every stage is an XLA while loop (the reduction over columns, the QR
 * sweeps, each sweep's rotations), so the program is the same size for
 * every n. A rotation updates two rows and two columns by masked
 * whole-matrix selects: O(n^2) per rotation, O(n^3) per sweep, about 2-3
 * sweeps per eigenvalue. Right for the small and medium matrices models
 * use; slow for n in the thousands.
 *
 * The eigenvalues' order is the Schur form's, which need not be LAPACK's:
 * compare them as sets. A batch element whose iteration does not converge
 * fails the call with the CPU's message. */
#include <float.h>
#include <stdio.h>

#include "matrix.h"

typedef struct {
  ttpu_type tm;  /* the complex matrices (batch..., n, n) */
  ttpu_type tb;  /* a real scalar per matrix (batch...) */
  int64_t n;
  int nb;        /* batch rank */
  int64_t max_sweeps;
  double eps;
  int vectors;   /* carry Z */
  /* the current sweep's window and shift, for the rotations' loop */
  ttpu_val lo, m, mu;
  int64_t end; /* count_cond's bound */
} eig_ctx;

static ttpu_val kc(ttpu_hlo* b, ttpu_type t, double v) { return ttpu_hlo_const(b, t, v, (int64_t)v); }

static ttpu_val bin(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) { return ttpu_hlo_binary(b, op, x, y); }

static ttpu_type with_dtype(ttpu_type t, ttpu_dtype dt) {
  t.dtype = dt;
  return t;
}

static ttpu_type type_of(ttpu_hlo* b, ttpu_val v) {
  const ttpu_type* tp = ttpu_hlo_type(b, v);
  if (tp) return *tp;
  ttpu_type e = {TTPU_DTYPE_NONE, 0, {0}};
  return e;
}

/* The type (batch..., n) of a vector per matrix. */
static ttpu_type vec_type(const eig_ctx* e, ttpu_dtype dt) {
  ttpu_type t = e->tm;
  t.ndim--;
  t.dtype = dt;
  return t;
}

/* A per-matrix value (batch...) broadcast to (batch..., n, n). */
static ttpu_val per_mat(ttpu_hlo* b, const eig_ctx* e, ttpu_val v) {
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < e->nb; ++d) map[d] = d;
  return ttpu_hlo_broadcast_in_dim(b, v, with_dtype(e->tm, type_of(b, v).dtype), map);
}

/* A per-matrix value (batch...) broadcast to (batch..., n). */
static ttpu_val per_vec(ttpu_hlo* b, const eig_ctx* e, ttpu_val v) {
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < e->nb; ++d) map[d] = d;
  return ttpu_hlo_broadcast_in_dim(b, v, vec_type(e, type_of(b, v).dtype), map);
}

/* A vector (batch..., n) broadcast to (batch..., n, n): v[i] in row i
 * (along_cols = 0) or v[k] in column k (along_cols = 1). */
static ttpu_val spread(ttpu_hlo* b, const eig_ctx* e, ttpu_val v, int along_cols) {
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < e->nb; ++d) map[d] = d;
  map[e->nb] = along_cols ? e->nb + 1 : e->nb;
  return ttpu_hlo_broadcast_in_dim(b, v, with_dtype(e->tm, type_of(b, v).dtype), map);
}

/* Sum over dim d. */
static ttpu_val sum_dim(ttpu_hlo* b, ttpu_val x, int d) {
  int64_t dd = d;
  return ttpu_hlo_reduce(b, x, TTPU_RED_SUM, &dd, 1);
}

static ttpu_val conj_v(ttpu_hlo* b, ttpu_val x) { return ttpu_mx_conj(b, x); }

static ttpu_val to_cx(ttpu_hlo* b, const eig_ctx* e, ttpu_val x) { return ttpu_hlo_convert(b, x, e->tm.dtype); }

/* Row (along_cols = 0) or column index iota of the matrices, i64. */
static ttpu_val idx(ttpu_hlo* b, const eig_ctx* e, int col) {
  return ttpu_hlo_iota(b, with_dtype(e->tm, TTPU_I64), e->nb + col);
}

/* Where the row (col = 0) or column index equals k, a 0-d or per-matrix
 * i64 value. */
static ttpu_val at(ttpu_hlo* b, const eig_ctx* e, int col, ttpu_val k) {
  ttpu_val kk = type_of(b, k).ndim == 0 ? ttpu_hlo_broadcast_to(b, k, e->tm.ndim, e->tm.dims) : per_mat(b, e, k);
  return ttpu_hlo_compare(b, TTPU_EQ, idx(b, e, col), kk);
}

/* Row k (col = 0, a vector over the columns) or column k (col = 1, a
 * vector over the rows) of x. */
static ttpu_val line(ttpu_hlo* b, const eig_ctx* e, ttpu_val x, int col, ttpu_val k) {
  ttpu_val z = kc(b, type_of(b, x), 0);
  return sum_dim(b, ttpu_hlo_select(b, at(b, e, col, k), x, z), e->nb + (col ? 1 : 0));
}

/* x with row (col = 0) or column k replaced by v. */
static ttpu_val put_line(ttpu_hlo* b, const eig_ctx* e, ttpu_val x, int col, ttpu_val k, ttpu_val v) {
  return ttpu_hlo_select(b, at(b, e, col, k), spread(b, e, v, !col), x);
}

/* Entry v[k] of vectors v (batch..., n), k per matrix. */
static ttpu_val pick(ttpu_hlo* b, const eig_ctx* e, ttpu_val v, ttpu_val k) {
  ttpu_type tv = type_of(b, v);
  ttpu_val hit = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, with_dtype(tv, TTPU_I64), e->nb),
                                  type_of(b, k).ndim == 0 && e->nb > 0 ? ttpu_hlo_broadcast_to(b, k, tv.ndim, tv.dims)
                                                                       : per_vec(b, e, k));
  return sum_dim(b, ttpu_hlo_select(b, hit, v, kc(b, tv, 0)), e->nb);
}

/* The test of a loop over st[0] = 0, 1, ... up to e->end (exclusive). */
static ttpu_val count_cond(ttpu_hlo* b, void* ctx, const ttpu_val* st) {
  const eig_ctx* e = ctx;
  return ttpu_hlo_compare(b, TTPU_LT, st[0], ttpu_hlo_const_i(b, TTPU_I64, e->end));
}

/* Entry x[i, j] per matrix (i, j per-matrix i64). */
static ttpu_val entry(ttpu_hlo* b, const eig_ctx* e, ttpu_val x, ttpu_val i, ttpu_val j) {
  return pick(b, e, line(b, e, x, 0, i), j);
}

/* ---------------------------------------------------------- Hessenberg */

/* Step j: the reflector P = I - tau v v^H (tau real) that zeroes column j
 * below row j + 1; H <- P H P, Z <- Z P. */
static void hess_body(ttpu_hlo* b, void* ctx, const ttpu_val* st, ttpu_val* next) {
  const eig_ctx* e = ctx;
  ttpu_val j = st[0], h = st[1];
  ttpu_type tv = vec_type(e, e->tm.dtype), tr = with_dtype(e->tb, ttpu_dtype_real(e->tm.dtype));
  ttpu_val c = line(b, e, h, 1, j); /* column j, over the rows */
  ttpu_val r = ttpu_hlo_iota(b, with_dtype(tv, TTPU_I64), e->nb);
  ttpu_val j1 = bin(b, TTPU_ADD, j, ttpu_hlo_const_i(b, TTPU_I64, 1));
  ttpu_val jv = ttpu_hlo_broadcast_to(b, j1, tv.ndim, tv.dims);
  ttpu_val below = ttpu_hlo_compare(b, TTPU_GE, r, jv), first = ttpu_hlo_compare(b, TTPU_EQ, r, jv);
  ttpu_val x = ttpu_hlo_select(b, below, c, kc(b, tv, 0));
  ttpu_val alpha = sum_dim(b, ttpu_hlo_select(b, first, c, kc(b, tv, 0)), e->nb);
  ttpu_val xn = ttpu_hlo_unary(b, TTPU_SQRT, sum_dim(b, ttpu_mx_abs2(b, x), e->nb));
  ttpu_val am = ttpu_hlo_unary(b, TTPU_ABS, alpha);
  ttpu_val a0 = ttpu_hlo_compare(b, TTPU_EQ, am, kc(b, tr, 0));
  ttpu_val phase = ttpu_hlo_select(b, a0, kc(b, type_of(b, alpha), 1),
                                   bin(b, TTPU_DIV, alpha, to_cx(b, e, ttpu_hlo_select(b, a0, kc(b, tr, 1), am))));
  /* v = x + e^{i arg alpha} |x| e_{j+1}: no cancellation */
  ttpu_val v = bin(b, TTPU_ADD, x,
                   ttpu_hlo_select(b, first, per_vec(b, e, bin(b, TTPU_MUL, phase, to_cx(b, e, xn))), kc(b, tv, 0)));
  ttpu_val vv = sum_dim(b, ttpu_mx_abs2(b, v), e->nb);
  ttpu_val none = ttpu_hlo_compare(b, TTPU_EQ, vv, kc(b, tr, 0));
  ttpu_val tau = ttpu_hlo_select(b, none, kc(b, tr, 0), bin(b, TTPU_DIV, kc(b, tr, 2), ttpu_hlo_select(b, none, kc(b, tr, 1), vv)));
  ttpu_val taum = to_cx(b, e, per_mat(b, e, tau));
  ttpu_val vr = spread(b, e, v, 0), vcc = spread(b, e, conj_v(b, v), 1);
  /* H <- H - tau v (v^H H), then H <- H - tau (H v) v^H */
  ttpu_val w = sum_dim(b, bin(b, TTPU_MUL, spread(b, e, conj_v(b, v), 0), h), e->nb); /* over columns */
  h = bin(b, TTPU_SUB, h, bin(b, TTPU_MUL, taum, bin(b, TTPU_MUL, vr, spread(b, e, w, 1))));
  ttpu_val u = sum_dim(b, bin(b, TTPU_MUL, h, spread(b, e, v, 1)), e->nb + 1); /* over rows */
  h = bin(b, TTPU_SUB, h, bin(b, TTPU_MUL, taum, bin(b, TTPU_MUL, spread(b, e, u, 0), vcc)));
  /* the zeroed part exactly zero */
  ttpu_val below_sub = bin(b, TTPU_AND, at(b, e, 1, j),
                           ttpu_hlo_compare(b, TTPU_GT, idx(b, e, 0), ttpu_hlo_broadcast_to(b, j1, e->tm.ndim, e->tm.dims)));
  next[1] = ttpu_hlo_select(b, below_sub, kc(b, e->tm, 0), h);
  if (e->vectors) {
    ttpu_val z = st[2];
    ttpu_val zu = sum_dim(b, bin(b, TTPU_MUL, z, spread(b, e, v, 1)), e->nb + 1);
    next[2] = bin(b, TTPU_SUB, z, bin(b, TTPU_MUL, taum, bin(b, TTPU_MUL, spread(b, e, zu, 0), vcc)));
  }
  next[0] = j1;
}

/* ---------------------------------------------------------- QR sweeps */

/* Rotation k of a sweep: the Givens rotation G of rows k, k+1 that starts
 * the chase (k = lo: it zeroes the shifted column's second entry) or
 * chases the bulge at (k+1, k-1); H <- G H G^H, Z <- Z G^H. Identity
 * outside a matrix's window [lo, m). */
static void rot_body(ttpu_hlo* b, void* ctx, const ttpu_val* st, ttpu_val* next) {
  const eig_ctx* e = ctx;
  ttpu_val k = st[0], h = st[1];
  ttpu_type tr = with_dtype(e->tb, ttpu_dtype_real(e->tm.dtype)), tc = with_dtype(e->tb, e->tm.dtype);
  ttpu_type ti = with_dtype(e->tb, TTPU_I64);
  ttpu_val one = ttpu_hlo_const_i(b, TTPU_I64, 1);
  ttpu_val k1 = bin(b, TTPU_ADD, k, one);
  ttpu_val kb = ttpu_hlo_broadcast_to(b, k, ti.ndim, ti.dims);
  ttpu_val starts = ttpu_hlo_compare(b, TTPU_EQ, kb, e->lo);
  ttpu_val active = bin(b, TTPU_AND, ttpu_hlo_compare(b, TTPU_GE, kb, e->lo),
                        ttpu_hlo_compare(b, TTPU_LE, kb, bin(b, TTPU_SUB, e->m, kc(b, ti, 2))));
  ttpu_val rk = line(b, e, h, 0, k), rk1 = line(b, e, h, 0, k1);
  ttpu_val km1 = bin(b, TTPU_SUB, kb, kc(b, ti, 1));
  ttpu_val src = ttpu_hlo_select(b, starts, kb, km1);
  ttpu_val x = pick(b, e, rk, src), y = pick(b, e, rk1, src);
  x = ttpu_hlo_select(b, starts, bin(b, TTPU_SUB, x, e->mu), x);
  ttpu_val ax = ttpu_hlo_unary(b, TTPU_ABS, x), ay = ttpu_hlo_unary(b, TTPU_ABS, y);
  ttpu_val big = bin(b, TTPU_MAX, ax, ay);
  ttpu_val zero = ttpu_hlo_compare(b, TTPU_EQ, big, kc(b, tr, 0));
  ttpu_val sb = ttpu_hlo_select(b, zero, kc(b, tr, 1), big);
  ttpu_val axs = bin(b, TTPU_DIV, ax, sb), ays = bin(b, TTPU_DIV, ay, sb);
  ttpu_val r = bin(b, TTPU_MUL, sb, ttpu_hlo_unary(b, TTPU_SQRT, bin(b, TTPU_ADD, bin(b, TTPU_MUL, axs, axs),
                                                                     bin(b, TTPU_MUL, ays, ays))));
  ttpu_val rs = ttpu_hlo_select(b, zero, kc(b, tr, 1), r);
  ttpu_val x0 = ttpu_hlo_compare(b, TTPU_EQ, ax, kc(b, tr, 0));
  ttpu_val phase = ttpu_hlo_select(b, x0, kc(b, tc, 1),
                                   bin(b, TTPU_DIV, x, to_cx(b, e, ttpu_hlo_select(b, x0, kc(b, tr, 1), ax))));
  ttpu_val c = bin(b, TTPU_DIV, ax, rs);
  ttpu_val s = bin(b, TTPU_DIV, bin(b, TTPU_MUL, phase, conj_v(b, y)), to_cx(b, e, rs));
  ttpu_val skip = bin(b, TTPU_OR, zero, ttpu_hlo_unary(b, TTPU_NOT, active));
  c = to_cx(b, e, ttpu_hlo_select(b, skip, kc(b, tr, 1), c));
  s = ttpu_hlo_select(b, skip, kc(b, tc, 0), s);
  ttpu_val cv = per_vec(b, e, c), sv = per_vec(b, e, s), scv = per_vec(b, e, conj_v(b, s));
  /* rows: [rk; rk1] <- [[c, s], [-conj(s), c]] [rk; rk1] */
  ttpu_val nk = bin(b, TTPU_ADD, bin(b, TTPU_MUL, cv, rk), bin(b, TTPU_MUL, sv, rk1));
  ttpu_val nk1 = bin(b, TTPU_SUB, bin(b, TTPU_MUL, cv, rk1), bin(b, TTPU_MUL, scv, rk));
  h = put_line(b, e, put_line(b, e, h, 0, k, nk), 0, k1, nk1);
  /* columns: [ck, ck1] <- [ck, ck1] [[c, -s], [conj(s), c]] */
  ttpu_val* mats[2] = {&h, NULL};
  ttpu_val z = e->vectors ? st[2] : TTPU_VAL_ERROR;
  if (e->vectors) mats[1] = &z;
  for (int q = 0; q < 2 && mats[q]; ++q) {
    ttpu_val ck = line(b, e, *mats[q], 1, k), ck1 = line(b, e, *mats[q], 1, k1);
    ttpu_val mk = bin(b, TTPU_ADD, bin(b, TTPU_MUL, cv, ck), bin(b, TTPU_MUL, scv, ck1));
    ttpu_val mk1 = bin(b, TTPU_SUB, bin(b, TTPU_MUL, cv, ck1), bin(b, TTPU_MUL, sv, ck));
    *mats[q] = put_line(b, e, put_line(b, e, *mats[q], 1, k, mk), 1, k1, mk1);
  }
  next[0] = k1;
  next[1] = h;
  if (e->vectors) next[2] = z;
}

static ttpu_val any_active(ttpu_hlo* b, const eig_ctx* e, ttpu_val m) {
  ttpu_val act = ttpu_hlo_compare(b, TTPU_GE, m, kc(b, with_dtype(e->tb, TTPU_I64), 2));
  if (e->nb == 0) return act;
  int64_t all[TTPU_MAX_DIMS];
  for (int d = 0; d < e->nb; ++d) all[d] = d;
  return ttpu_hlo_reduce(b, act, TTPU_RED_OR, all, e->nb);
}

/* state: sweep count, H, lo, m (, Z) */
static ttpu_val sweep_cond(ttpu_hlo* b, void* ctx, const ttpu_val* st) {
  const eig_ctx* e = ctx;
  ttpu_val more = ttpu_hlo_compare(b, TTPU_LT, st[0], ttpu_hlo_const_i(b, TTPU_I64, e->max_sweeps));
  return bin(b, TTPU_AND, more, any_active(b, e, st[3]));
}

static void sweep_body(ttpu_hlo* b, void* ctx, const ttpu_val* st, ttpu_val* next) {
  eig_ctx* e = ctx;
  ttpu_val it = st[0], h = st[1], lo = st[2], m = st[3];
  ttpu_type ti = with_dtype(e->tb, TTPU_I64), tr = with_dtype(e->tb, ttpu_dtype_real(e->tm.dtype));
  ttpu_type tc = with_dtype(e->tb, e->tm.dtype);
  /* the Wilkinson shift: the eigenvalue of the window's trailing 2 x 2
   * block nearer its last diagonal entry */
  ttpu_val mm = bin(b, TTPU_MAX, m, kc(b, ti, 2));
  ttpu_val i1 = bin(b, TTPU_SUB, mm, kc(b, ti, 1)), i2 = bin(b, TTPU_SUB, mm, kc(b, ti, 2));
  ttpu_val a = entry(b, e, h, i2, i2), bb = entry(b, e, h, i2, i1);
  ttpu_val cc = entry(b, e, h, i1, i2), d = entry(b, e, h, i1, i1);
  ttpu_val hm = bin(b, TTPU_MUL, bin(b, TTPU_SUB, a, d), kc(b, tc, 0.5));
  ttpu_val bc = bin(b, TTPU_MUL, bb, cc);
  ttpu_val disc = ttpu_hlo_unary(b, TTPU_SQRT, bin(b, TTPU_ADD, bin(b, TTPU_MUL, hm, hm), bc));
  ttpu_val dp = bin(b, TTPU_ADD, hm, disc), dm = bin(b, TTPU_SUB, hm, disc);
  ttpu_val den = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GE, ttpu_hlo_unary(b, TTPU_ABS, dp), ttpu_hlo_unary(b, TTPU_ABS, dm)), dp, dm);
  ttpu_val den0 = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_unary(b, TTPU_ABS, den), kc(b, tr, 0));
  ttpu_val mu = ttpu_hlo_select(b, den0, d, bin(b, TTPU_SUB, d, bin(b, TTPU_DIV, bc, ttpu_hlo_select(b, den0, kc(b, tc, 1), den))));
  /* every 10th sweep an exceptional shift breaks a cycle (as LAPACK's) */
  ttpu_val exc = ttpu_hlo_compare(b, TTPU_EQ, bin(b, TTPU_REM, it, ttpu_hlo_const_i(b, TTPU_I64, 10)),
                                  ttpu_hlo_const_i(b, TTPU_I64, 9));
  ttpu_val ex_mu = bin(b, TTPU_ADD, d, to_cx(b, e, bin(b, TTPU_MUL, kc(b, tr, 0.75), ttpu_hlo_unary(b, TTPU_ABS, cc))));
  mu = ttpu_hlo_select(b, ttpu_hlo_broadcast_to(b, exc, tc.ndim, tc.dims), ex_mu, mu);
  e->lo = lo;
  e->m = m;
  e->mu = mu;
  int nst = e->vectors ? 3 : 2;
  ttpu_val init[3] = {ttpu_hlo_const_i(b, TTPU_I64, 0), h, e->vectors ? st[4] : TTPU_VAL_ERROR}, fin[3];
  e->end = e->n - 1;
  ttpu_hlo_while(b, init, nst, count_cond, rot_body, e, fin);
  h = fin[1];
  /* Hessenberg again (rounding below the subdiagonal), then deflation:
   * a subdiagonal entry negligible against its diagonal neighbours is
   * set to zero */
  ttpu_val row = idx(b, e, 0), col = idx(b, e, 1);
  ttpu_val one = kc(b, with_dtype(e->tm, TTPU_I64), 1);
  h = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, row, bin(b, TTPU_ADD, col, one)), kc(b, e->tm, 0), h);
  ttpu_val sub_m = ttpu_hlo_compare(b, TTPU_EQ, col, bin(b, TTPU_SUB, row, one));
  ttpu_val sub = sum_dim(b, ttpu_hlo_select(b, sub_m, h, kc(b, e->tm, 0)), e->nb + 1); /* H[i, i-1] */
  ttpu_val eye = ttpu_hlo_compare(b, TTPU_EQ, row, col);
  ttpu_val dg = ttpu_hlo_unary(b, TTPU_ABS, sum_dim(b, ttpu_hlo_select(b, eye, h, kc(b, e->tm, 0)), e->nb + 1));
  ttpu_val dprev = sum_dim(b, ttpu_hlo_select(b, sub_m, spread(b, e, dg, 1), kc(b, with_dtype(e->tm, type_of(b, dg).dtype), 0)),
                           e->nb + 1);
  ttpu_type tvr = type_of(b, dg);
  int64_t last2[2] = {e->nb, e->nb + 1};
  ttpu_val fro = ttpu_hlo_unary(b, TTPU_SQRT, ttpu_hlo_reduce(b, ttpu_mx_abs2(b, h), TTPU_RED_SUM, last2, 2));
  ttpu_val tst = bin(b, TTPU_ADD, dg, dprev);
  tst = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, tst, kc(b, tvr, 0)), per_vec(b, e, fro), tst);
  ttpu_val small = ttpu_hlo_compare(b, TTPU_LE, ttpu_hlo_unary(b, TTPU_ABS, sub), bin(b, TTPU_MUL, tst, kc(b, tvr, e->eps)));
  h = ttpu_hlo_select(b, bin(b, TTPU_AND, sub_m, spread(b, e, small, 0)), kc(b, e->tm, 0), h);
  /* the new window: m - 1 the last row with a nonzero subdiagonal entry
   * (at or above the old window's end), lo the row of the zero one above */
  ttpu_type tvi = vec_type(e, TTPU_I64);
  ttpu_val ri = ttpu_hlo_iota(b, tvi, e->nb);
  ttpu_val in_old = bin(b, TTPU_AND, ttpu_hlo_compare(b, TTPU_GE, ri, kc(b, tvi, 1)),
                        ttpu_hlo_compare(b, TTPU_LT, ri, per_vec(b, e, m)));
  ttpu_val nz = bin(b, TTPU_AND, in_old, ttpu_hlo_unary(b, TTPU_NOT, small));
  int64_t vd = e->nb;
  ttpu_val last = ttpu_hlo_reduce(b, ttpu_hlo_select(b, nz, ri, kc(b, tvi, 0)), TTPU_RED_MAX, &vd, 1);
  ttpu_val nm = bin(b, TTPU_ADD, last, kc(b, ti, 1));
  ttpu_val zero_in = bin(b, TTPU_AND, ttpu_hlo_compare(b, TTPU_GE, ri, kc(b, tvi, 1)),
                         bin(b, TTPU_AND, ttpu_hlo_compare(b, TTPU_LT, ri, per_vec(b, e, nm)), ttpu_hlo_unary(b, TTPU_NOT, nz)));
  ttpu_val nlo = ttpu_hlo_reduce(b, ttpu_hlo_select(b, zero_in, ri, kc(b, tvi, 0)), TTPU_RED_MAX, &vd, 1);
  next[0] = bin(b, TTPU_ADD, it, ttpu_hlo_const_i(b, TTPU_I64, 1));
  next[1] = h;
  next[2] = nlo;
  next[3] = nm;
  if (e->vectors) next[4] = fin[2];
}

/* ---------------------------------------------------------- vectors */

/* The eigenvectors (batch..., n, n) of upper triangular T: column i solves
 * (T - t_ii I) x = 0 with x_i = 1, x_j = 0 below, as one batched
 * triangular solve over the n systems. */
static ttpu_val triangular_vectors(ttpu_hlo* b, const eig_ctx* e, ttpu_val t) {
  int nb = e->nb;
  int64_t n = e->n;
  ttpu_type t4 = e->tm; /* (batch..., i, j, l) */
  t4.ndim = nb + 3;
  t4.dims[nb] = t4.dims[nb + 1] = t4.dims[nb + 2] = n;
  ttpu_type t4i = with_dtype(t4, TTPU_I64), tr4 = with_dtype(t4, ttpu_dtype_real(e->tm.dtype));
  ttpu_val si = ttpu_hlo_iota(b, t4i, nb), rj = ttpu_hlo_iota(b, t4i, nb + 1), cl = ttpu_hlo_iota(b, t4i, nb + 2);
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < nb; ++d) map[d] = d;
  map[nb] = nb + 1;
  map[nb + 1] = nb + 2;
  ttpu_val tt = ttpu_hlo_broadcast_in_dim(b, t, t4, map); /* T[j, l] */
  ttpu_val eye = ttpu_hlo_compare(b, TTPU_EQ, idx(b, e, 0), idx(b, e, 1));
  ttpu_val diag = sum_dim(b, ttpu_hlo_select(b, eye, t, kc(b, e->tm, 0)), nb + 1); /* (batch..., n) */
  map[nb] = nb;
  ttpu_val tii = ttpu_hlo_broadcast_in_dim(b, diag, t4, map); /* t_ii */
  ttpu_val jeq = ttpu_hlo_compare(b, TTPU_EQ, rj, cl);
  ttpu_val jlt = ttpu_hlo_compare(b, TTPU_LT, rj, si), llt = ttpu_hlo_compare(b, TTPU_LT, cl, si);
  ttpu_val d = ttpu_hlo_select(b, jeq, bin(b, TTPU_SUB, tt, tii), tt); /* T - t_ii I */
  /* a divisor below eps |t_ii| (a repeated eigenvalue) becomes that */
  ttpu_val smin = bin(b, TTPU_MUL, ttpu_hlo_unary(b, TTPU_ABS, tii), kc(b, tr4, e->eps));
  smin = bin(b, TTPU_MAX, smin, kc(b, tr4, e->tm.dtype == TTPU_C128 ? DBL_MIN : FLT_MIN));
  ttpu_val tiny = bin(b, TTPU_AND, jeq, ttpu_hlo_compare(b, TTPU_LT, ttpu_hlo_unary(b, TTPU_ABS, d), smin));
  d = ttpu_hlo_select(b, tiny, to_cx(b, e, smin), d);
  ttpu_val in = bin(b, TTPU_AND, jlt, llt);
  ttpu_val u = ttpu_hlo_select(b, in, d, to_cx(b, e, ttpu_hlo_convert(b, jeq, tr4.dtype)));
  /* right-hand sides: -T[j, i] above row i, 1 at row i */
  ttpu_type t3 = t4;
  t3.dims[nb + 2] = 1;
  ttpu_val is_col_i = ttpu_hlo_compare(b, TTPU_EQ, cl, si);
  ttpu_val ti = sum_dim(b, ttpu_hlo_select(b, is_col_i, tt, kc(b, t4, 0)), nb + 2); /* T[j, i]: (batch..., i, j) */
  ttpu_type t2 = t4;
  t2.ndim = nb + 2;
  ttpu_type t2i = with_dtype(t2, TTPU_I64);
  ttpu_val i2 = ttpu_hlo_iota(b, t2i, nb), j2 = ttpu_hlo_iota(b, t2i, nb + 1);
  ttpu_val rhs = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_LT, j2, i2), ttpu_hlo_unary(b, TTPU_NEG, ti), kc(b, t2, 0));
  rhs = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, j2, i2), kc(b, t2, 1), rhs);
  ttpu_val x = ttpu_hlo_triangular_solve(b, u, ttpu_l_reshape_to(b, rhs, t3), 1, 0, 0, 0);
  return ttpu_mx_transpose(b, ttpu_l_reshape_to(b, x, t2)); /* column i = x_i */
}

/* Unit columns with the largest component real (zgeev's scaling). */
static ttpu_val scale_vectors(ttpu_hlo* b, const eig_ctx* e, ttpu_val v) {
  ttpu_val a2 = ttpu_mx_abs2(b, v);
  ttpu_type tr = type_of(b, a2);
  ttpu_val norm = ttpu_hlo_unary(b, TTPU_SQRT, sum_dim(b, a2, e->nb));
  ttpu_val big, at_big;
  ttpu_hlo_reduce_arg(b, a2, e->nb, 1, &big, &at_big);
  ttpu_val top = sum_dim(b, ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, with_dtype(tr, TTPU_I64), e->nb),
                                                                  spread(b, e, ttpu_hlo_convert(b, at_big, TTPU_I64), 1)),
                                            v, kc(b, e->tm, 0)),
                         e->nb); /* (batch..., n): each column's largest component */
  ttpu_val mag = ttpu_hlo_unary(b, TTPU_ABS, top);
  ttpu_type tm = type_of(b, mag);
  ttpu_val z = ttpu_hlo_compare(b, TTPU_EQ, mag, kc(b, tm, 0));
  ttpu_val ph = ttpu_hlo_select(b, z, kc(b, type_of(b, top), 1),
                                bin(b, TTPU_DIV, conj_v(b, top), to_cx(b, e, ttpu_hlo_select(b, z, kc(b, tm, 1), mag))));
  ttpu_val nz = ttpu_hlo_compare(b, TTPU_EQ, norm, kc(b, tm, 0));
  ttpu_val f = bin(b, TTPU_DIV, ph, to_cx(b, e, ttpu_hlo_select(b, nz, kc(b, tm, 1), norm)));
  return bin(b, TTPU_MUL, v, spread(b, e, f, 1));
}

/* The eigenvalues w (batch..., n) of real matrices as LAPACK leaves them:
 * a complex pair exactly conjugate (equal real parts, opposite imaginary
 * ones) and a real eigenvalue with a zero imaginary part. The complex
 * iteration gets them only to rounding; w_i's partner is the w_j nearest
 * conj(w_i) (itself for a real eigenvalue), and a mutual pair takes the
 * mean of w_i and conj(w_j), which is exactly conjugate since IEEE
 * addition commutes and subtraction is antisymmetric. */
static ttpu_val conjugate_pairs(ttpu_hlo* b, const eig_ctx* e, ttpu_val w) {
  ttpu_val wi = spread(b, e, w, 0), wj = spread(b, e, w, 1);
  ttpu_val dist = ttpu_mx_abs2(b, bin(b, TTPU_SUB, wi, conj_v(b, wj)));
  ttpu_val best, p;
  ttpu_hlo_reduce_arg(b, ttpu_hlo_unary(b, TTPU_NEG, dist), e->nb + 1, 1, &best, &p);
  p = ttpu_hlo_convert(b, p, TTPU_I64);
  ttpu_val row = idx(b, e, 0), col = idx(b, e, 1);
  ttpu_val is_p = ttpu_hlo_compare(b, TTPU_EQ, col, spread(b, e, p, 0));        /* j == p_i */
  ttpu_val back = ttpu_hlo_compare(b, TTPU_EQ, spread(b, e, p, 1), row);        /* p_j == i */
  int64_t last = e->nb + 1;
  ttpu_val mutual = ttpu_hlo_reduce(b, bin(b, TTPU_AND, is_p, back), TTPU_RED_OR, &last, 1);
  ttpu_val wp = sum_dim(b, ttpu_hlo_select(b, is_p, wj, kc(b, e->tm, 0)), e->nb + 1);
  ttpu_type tv = vec_type(e, e->tb.dtype);
  ttpu_val half = kc(b, tv, 0.5);
  ttpu_val re = bin(b, TTPU_MUL, bin(b, TTPU_ADD, ttpu_hlo_real(b, w), ttpu_hlo_real(b, wp)), half);
  ttpu_val im = bin(b, TTPU_MUL, bin(b, TTPU_SUB, ttpu_hlo_imag(b, w), ttpu_hlo_imag(b, wp)), half);
  ttpu_val self = ttpu_hlo_compare(b, TTPU_EQ, p, ttpu_hlo_iota(b, with_dtype(tv, TTPU_I64), e->nb));
  im = ttpu_hlo_select(b, self, kc(b, tv, 0), im);
  return ttpu_hlo_select(b, mutual, ttpu_hlo_complex(b, re, im), w);
}

static const char kNonFinite[] = "torch.linalg.eig: input tensor should not contain infs or NaNs.";

/* linalg_eig(A) -> (eigenvalues, eigenvectors); _linalg_eigvals(A) ->
 * eigenvalues. */
static ttpu_status* lower_eig(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  int vectors = ttpu_l_nout(L) > 1;
  ttpu_type ow = ttpu_l_out_type(L, 0);
  ttpu_val a = ttpu_l_tensor(L, 0);
  ttpu_type ta = ttpu_l_type(L, a);
  if (!ttpu_mx_lapack_dtype(L, ta.dtype, "linalg_eig_out_cpu")) return NULL;
  eig_ctx e = {0};
  e.tm = with_dtype(ta, ttpu_dtype_is_complex(ta.dtype) ? ta.dtype : ttpu_dtype_complex_of(ta.dtype));
  e.nb = ta.ndim - 2;
  e.tb = ta;
  e.tb.ndim = e.nb;
  e.tb.dtype = ttpu_dtype_real(e.tm.dtype);
  e.n = ta.dims[ta.ndim - 1];
  e.vectors = vectors;
  e.eps = e.tm.dtype == TTPU_C128 ? DBL_EPSILON : FLT_EPSILON;
  e.max_sweeps = 30 * (e.n < 10 ? 10 : e.n);
  /* linalg.eig refuses a non-finite input before LAPACK runs, as the CPU
   * does (its eigvals does not check, and LAPACK then fails or crashes). */
  ttpu_val nonfinite = TTPU_VAL_ERROR;
  if (vectors) {
    ttpu_val fin = ttpu_dtype_is_complex(ta.dtype)
                       ? ttpu_hlo_binary(b, TTPU_AND, ttpu_hlo_unary(b, TTPU_IS_FINITE, ttpu_hlo_real(b, a)),
                                         ttpu_hlo_unary(b, TTPU_IS_FINITE, ttpu_hlo_imag(b, a)))
                       : ttpu_hlo_unary(b, TTPU_IS_FINITE, a);
    nonfinite = ttpu_hlo_unary(b, TTPU_NOT, fin);
  }
  if (ttpu_type_numel(&ta) == 0 || e.n == 1) {
    if (vectors && ttpu_type_numel(&ta))
      ttpu_mx_check_info_unless(L, nonfinite, kNonFinite, kc(b, with_dtype(e.tb, TTPU_I64), 0), "linalg.eig", "");
    ttpu_val w = ttpu_type_numel(&ta) ? ttpu_l_reshape_to(b, ttpu_hlo_convert(b, a, e.tm.dtype), ow) : kc(b, ow, 0);
    ttpu_l_set_out(L, 0, w);
    if (vectors) {
      ttpu_type ov = ttpu_l_out_type(L, 1);
      ttpu_l_set_out(L, 1, kc(b, ov, ttpu_type_numel(&ta) ? 1 : 0));
    }
    return NULL;
  }
  ttpu_val h = ttpu_hlo_convert(b, a, e.tm.dtype);
  ttpu_val z = ttpu_mx_identity(b, e.tm);
  ttpu_val hs[3] = {ttpu_hlo_const_i(b, TTPU_I64, 0), h, z}, hf[3];
  e.end = e.n - 2;
  ttpu_hlo_while(b, hs, vectors ? 3 : 2, count_cond, hess_body, &e, hf);
  ttpu_type ti = with_dtype(e.tb, TTPU_I64);
  ttpu_val ss[5] = {ttpu_hlo_const_i(b, TTPU_I64, 0), hf[1], kc(b, ti, 0), kc(b, ti, (double)e.n), hf[2]}, sf[5];
  ttpu_hlo_while(b, ss, vectors ? 5 : 4, sweep_cond, sweep_body, &e, sf);
  ttpu_val m = sf[3];
  ttpu_val info = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GE, m, kc(b, ti, 2)), m, kc(b, ti, 0));
  ttpu_mx_check_info_unless(L, nonfinite, vectors ? kNonFinite : NULL, info, "linalg.eig",
                            "The algorithm failed to converge because the input matrix is ill-conditioned or has too "
                            "many repeated eigenvalues (error code: %lld).");
  ttpu_val t = sf[1];
  ttpu_val eye = ttpu_hlo_compare(b, TTPU_EQ, idx(b, &e, 0), idx(b, &e, 1));
  ttpu_val w = sum_dim(b, ttpu_hlo_select(b, eye, t, kc(b, e.tm, 0)), e.nb + 1);
  ttpu_l_set_out(L, 0, ttpu_dtype_is_complex(ta.dtype) ? w : conjugate_pairs(b, &e, w));
  if (!vectors) return NULL;
  ttpu_val row = idx(b, &e, 0), col = idx(b, &e, 1);
  t = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, row, col), kc(b, e.tm, 0), t);
  int64_t bd[TTPU_MAX_DIMS], cz[1] = {e.nb + 1}, cx[1] = {e.nb};
  for (int d = 0; d < e.nb; ++d) bd[d] = d;
  ttpu_val v = ttpu_hlo_dot_general(b, sf[4], triangular_vectors(b, &e, t), bd, bd, e.nb, cz, cx, 1, e.tm.dtype,
                                    TTPU_PREC_HIGHEST);
  ttpu_l_set_out(L, 1, scale_vectors(b, &e, v));
  return NULL;
}

const ttpu_op_def ttpu_ops_eig[] = {
    {"linalg_eig", lower_eig, .variants = TTPU_V_OUT, .complex_fn = lower_eig},
    {"_linalg_eigvals", lower_eig, .complex_fn = lower_eig},
    {0},
};
