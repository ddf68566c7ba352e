/* svd.c - the singular value decomposition (_linalg_svd; through it
 * svdvals, pinv, matrix_rank, cond, the spectral and nuclear norms), and
 * the one-sided Jacobi iteration lstsq.c shares.
 *
 * One-sided Jacobi (Hestenes): the columns of W (A, or A^H when wide) are
 * rotated pairwise until mutually orthogonal, W V = U S; their norms are
 * the singular values, the normalized columns U, the accumulated rotations
 * V. Working on W itself, never on A^H A, keeps each singular value to the
 * dtype's relative accuracy.
 *
 * Why this method: it runs at any size as a loop whose program does not
 * depend on the matrix size. The columns are held as two halves X and Y
 * (column i of X pairs with column i of Y), so one round rotates all q/2
 * disjoint pairs at once with elementwise ops and column sums, O(p q) work,
 * and then moves the columns one seat along a round-robin tournament (a
 * fixed shuffle of slices: every pair meets once in q-1 rounds, a sweep).
 * The rounds run in one stablehlo.while until a whole sweep found every
 * pair orthogonal to rounding. A sweep is O(p q^2), like one LAPACK
 * bidiagonalization, with no n x n matrix product per round (J-matrix
 * rounds as in eigh.c cost O(p q^3) a sweep), and random matrices converge
 * in 10-13 sweeps at 128-512 columns. Measured (benchmarks/linalg/svd.py):
 * the program is ~36 KB at every size and compiles in ~2 s from 16x16 to
 * 512x512 (the unrolled sweeps took 23 s at 16x16), with singular values
 * and U S V^H as accurate as LAPACK's. QDWH + eigh needs several matrix
 * products and an eigh per call, and QR preconditioning for tall inputs
 * would need a QR that is not unrolled: both left for later.
 *
 * Complex matrices take the same rounds: before a rotation, Y's column is
 * turned by the phase of <x, y> so that the pair's inner product is real,
 * and V's column takes the same turn (A = U S V^H).
 *
 * Singular vectors are unique only up to sign or phase (and rotation
 * within equal singular values): ours need not be LAPACK's, while
 * everything PyTorch builds on them (pinv, the gradients) is invariant to
 * that choice. Where a singular value is zero (or full_matrices asks for
 * more columns than there are values), U's missing columns are completed
 * to an orthonormal basis by Gram-Schmidt on the unit vector least covered
 * by the columns already there. */
#include <float.h>
#include <math.h>

#include "matrix.h"

/* Jacobi converges quadratically once the columns are nearly orthogonal;
 * the limit only stops a pathological input. */
enum { kMaxSweeps = 30 };

static ttpu_val kc(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

static ttpu_val bin(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, op, x, y);
}

static ttpu_type with_dtype(ttpu_type t, ttpu_dtype dt) {
  t.dtype = dt;
  return t;
}

static ttpu_dtype real_of(ttpu_dtype dt) {
  return dt == TTPU_C64 ? TTPU_F32 : dt == TTPU_C128 ? TTPU_F64 : dt;
}

/* Sum over dim d of x. */
static ttpu_val sum_dim(ttpu_hlo* b, ttpu_val x, int d) {
  int64_t dd = d;
  return ttpu_hlo_reduce(b, x, TTPU_RED_SUM, &dd, 1);
}

static ttpu_val reduce_all(ttpu_hlo* b, ttpu_val x, ttpu_redop op) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int nd = tp->ndim;
  int64_t all[TTPU_MAX_DIMS];
  for (int d = 0; d < nd; ++d) all[d] = d;
  return nd ? ttpu_hlo_reduce(b, x, op, all, nd) : x;
}

/* conj(x) of a complex x; x itself when real. */
static ttpu_val conj_v(ttpu_hlo* b, ttpu_val x, int cx) {
  if (!cx) return x;
  return ttpu_hlo_complex(b, ttpu_hlo_real(b, x), ttpu_hlo_unary(b, TTPU_NEG, ttpu_hlo_imag(b, x)));
}

/* |x|^2 elementwise (real). */
static ttpu_val abs2(ttpu_hlo* b, ttpu_val x, int cx) {
  if (!cx) return bin(b, TTPU_MUL, x, x);
  ttpu_val re = ttpu_hlo_real(b, x), im = ttpu_hlo_imag(b, x);
  return bin(b, TTPU_ADD, bin(b, TTPU_MUL, re, re), bin(b, TTPU_MUL, im, im));
}

/* x^H (the conjugate transpose of the last two dims). */
static ttpu_val adjoint(ttpu_hlo* b, ttpu_val x, int cx) {
  return conj_v(b, ttpu_mx_transpose(b, x), cx);
}

/* v (batch..., c) as v[k] in column k of t (batch..., r, c), or v
 * (batch..., r) as v[i] in row i when rows; in v's dtype. */
static ttpu_val spread(ttpu_hlo* b, ttpu_val v, ttpu_type t, int rows) {
  const ttpu_type* tp = ttpu_hlo_type(b, v);
  if (!tp) return TTPU_VAL_ERROR;
  int nd = t.ndim;
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < nd - 1; ++d) map[d] = d;
  if (!rows) map[nd - 2] = nd - 1;
  return ttpu_hlo_broadcast_in_dim(b, v, with_dtype(t, tp->dtype), map);
}

static ttpu_val per_col(ttpu_hlo* b, ttpu_val v, ttpu_type t) { return spread(b, v, t, 0); }
static ttpu_val per_row(ttpu_hlo* b, ttpu_val v, ttpu_type t) { return spread(b, v, t, 1); }

/* Columns [lo, hi) of x (last dim). */
static ttpu_val cols(ttpu_hlo* b, ttpu_val x, int64_t lo, int64_t hi) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int nd = tp->ndim;
  int64_t s[TTPU_MAX_DIMS] = {0}, e[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
  for (int d = 0; d < nd; ++d) e[d] = tp->dims[d], st[d] = 1;
  s[nd - 1] = lo;
  e[nd - 1] = hi;
  return ttpu_hlo_slice(b, x, s, e, st);
}

/* The circle method's move after a round, on the seats (top, bottom) of h
 * pairs along the last dim: top[0] stays, the others move one seat round
 * the circle top[1..h-1], bottom[h-1..0]. Over 2h-1 moves every two
 * columns share a pair once. */
static void next_seats(ttpu_hlo* b, int64_t h, ttpu_val* top, ttpu_val* bot) {
  if (h < 2) return;
  const ttpu_type* tp = ttpu_hlo_type(b, *top);
  if (!tp) return;
  int d = tp->ndim - 1;
  ttpu_val t[3] = {cols(b, *top, 0, 1), cols(b, *bot, 0, 1), cols(b, *top, 1, h - 1)};
  ttpu_val u[2] = {cols(b, *bot, 1, h), cols(b, *top, h - 1, h)};
  *top = ttpu_hlo_concat(b, t, h > 2 ? 3 : 2, d);
  *bot = ttpu_hlo_concat(b, u, 2, d);
}

typedef struct {
  ttpu_type tx;      /* a half of W: (batch..., p, h) */
  ttpu_type tvx;     /* a half of V: (batch..., q, h) */
  int64_t h, rounds; /* pairs; rounds a sweep (2h - 1) */
  int64_t max_rounds;
  double eps, tol;   /* skip a pair at |cos| <= eps; converged at <= tol */
  int cx, vectors;
} hestenes;

/* The pairs' rotation, columns x, y (s, tau spread over them). */
static void rotate(ttpu_hlo* b, ttpu_val s, ttpu_val tau, ttpu_val x, ttpu_val y, ttpu_val* nx, ttpu_val* ny) {
  *nx = bin(b, TTPU_SUB, x, bin(b, TTPU_MUL, s, bin(b, TTPU_ADD, y, bin(b, TTPU_MUL, tau, x))));
  *ny = bin(b, TTPU_ADD, y, bin(b, TTPU_MUL, s, bin(b, TTPU_SUB, x, bin(b, TTPU_MUL, tau, y))));
}

/* state: {round, X, Y, seat labels top, bottom, largest |cos| of the
 * sweep so far, [VX, VY]} */
static ttpu_val sweep_cond(ttpu_hlo* b, void* ctx, const ttpu_val* st) {
  const hestenes* h = ctx;
  ttpu_val it = st[0];
  ttpu_val more = ttpu_hlo_compare(b, TTPU_LT, it, ttpu_hlo_const_i(b, TTPU_I64, h->max_rounds));
  ttpu_val mid = ttpu_hlo_compare(b, TTPU_NE, bin(b, TTPU_REM, it, ttpu_hlo_const_i(b, TTPU_I64, h->rounds)),
                                  ttpu_hlo_const_i(b, TTPU_I64, 0));
  ttpu_val first = ttpu_hlo_compare(b, TTPU_EQ, it, ttpu_hlo_const_i(b, TTPU_I64, 0));
  ttpu_val off = ttpu_hlo_compare(b, TTPU_GT, st[5], ttpu_hlo_const_f(b, real_of(h->tx.dtype), h->tol));
  return bin(b, TTPU_AND, more, bin(b, TTPU_OR, bin(b, TTPU_OR, mid, first), off));
}

static void sweep_body(ttpu_hlo* b, void* ctx, const ttpu_val* st, ttpu_val* next) {
  const hestenes* h = ctx;
  int cx = h->cx, nd = h->tx.ndim;
  ttpu_dtype rt = real_of(h->tx.dtype);
  ttpu_val it = st[0], x = st[1], y = st[2];
  ttpu_val vx = h->vectors ? st[6] : TTPU_VAL_ERROR, vy = h->vectors ? st[7] : TTPU_VAL_ERROR;

  ttpu_val al = sum_dim(b, abs2(b, x, cx), nd - 2); /* (batch..., h) */
  ttpu_val be = sum_dim(b, abs2(b, y, cx), nd - 2);
  ttpu_val ga = sum_dim(b, bin(b, TTPU_MUL, conj_v(b, x, cx), y), nd - 2);
  const ttpu_type* tsp = ttpu_hlo_type(b, al);
  if (!tsp) return;
  ttpu_type ts = *tsp;
  if (cx) {
    /* turn y by the phase of <x, y>: the pair's inner product becomes
     * |<x, y>|, real */
    ttpu_val mag = ttpu_hlo_unary(b, TTPU_ABS, ga);
    ttpu_val none = ttpu_hlo_compare(b, TTPU_EQ, mag, kc(b, ts, 0));
    ttpu_val ph = bin(b, TTPU_DIV, ga, ttpu_hlo_convert(b, ttpu_hlo_select(b, none, kc(b, ts, 1), mag), h->tx.dtype));
    ph = conj_v(b, ttpu_hlo_select(b, none, kc(b, with_dtype(ts, h->tx.dtype), 1), ph), 1);
    y = bin(b, TTPU_MUL, y, per_col(b, ph, h->tx));
    if (h->vectors) vy = bin(b, TTPU_MUL, vy, per_col(b, ph, h->tvx));
    ga = mag;
  }
  /* |cos| of the pair's angle (a zero column counts as orthogonal) */
  ttpu_val ab = bin(b, TTPU_MUL, al, be);
  ttpu_val pos = ttpu_hlo_compare(b, TTPU_GT, ab, kc(b, ts, 0));
  ttpu_val cosv = bin(b, TTPU_DIV, ttpu_hlo_unary(b, TTPU_ABS, ga),
                      ttpu_hlo_unary(b, TTPU_SQRT, ttpu_hlo_select(b, pos, ab, kc(b, ts, 1))));
  cosv = ttpu_hlo_select(b, pos, cosv, kc(b, ts, 0));
  ttpu_val skip = ttpu_hlo_compare(b, TTPU_LE, cosv, kc(b, ts, h->eps));
  ttpu_val t, c, sj;
  ttpu_mx_jacobi_rotation(b, ts, al, be, ga, skip, kc(b, with_dtype(ts, TTPU_BOOL), 1), &t, &c, &sj);
  /* x' = c x - s y = x - s (y + tau x), y' = s x + c y = y + s (x - tau y)
   * with tau = s / (1 + c): c itself rounds to 1 for a small angle, and
   * c^2 + s^2 = 1 + t^2 would grow both columns at every late rotation */
  ttpu_val sn = ttpu_hlo_unary(b, TTPU_NEG, sj);
  ttpu_val tau = bin(b, TTPU_DIV, sn, bin(b, TTPU_ADD, c, kc(b, ts, 1)));
  if (cx) {
    sn = ttpu_hlo_convert(b, sn, h->tx.dtype);
    tau = ttpu_hlo_convert(b, tau, h->tx.dtype);
  }
  ttpu_val nx, ny;
  rotate(b, per_col(b, sn, h->tx), per_col(b, tau, h->tx), x, y, &nx, &ny);
  ttpu_val lt = st[3], lb = st[4];
  next_seats(b, h->h, &nx, &ny);
  next_seats(b, h->h, &lt, &lb);
  ttpu_val zero = ttpu_hlo_const_i(b, TTPU_I64, 0);
  ttpu_val start = ttpu_hlo_compare(b, TTPU_EQ, bin(b, TTPU_REM, it, ttpu_hlo_const_i(b, TTPU_I64, h->rounds)), zero);
  ttpu_val seen = ttpu_hlo_select(b, start, ttpu_hlo_const_f(b, rt, 0), st[5]);
  next[0] = bin(b, TTPU_ADD, it, ttpu_hlo_const_i(b, TTPU_I64, 1));
  next[1] = nx;
  next[2] = ny;
  next[3] = lt;
  next[4] = lb;
  next[5] = bin(b, TTPU_MAX, seen, reduce_all(b, cosv, TTPU_RED_MAX));
  if (h->vectors) {
    ttpu_val nvx, nvy;
    rotate(b, per_col(b, sn, h->tvx), per_col(b, tau, h->tvx), vx, vy, &nvx, &nvy);
    next_seats(b, h->h, &nvx, &nvy);
    next[6] = nvx;
    next[7] = nvy;
  }
}

/* Batched x @ y, exact for a 0/1 permutation y (full float32 passes). */
static ttpu_val bmm(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int nd = tp->ndim;
  ttpu_dtype dt = tp->dtype;
  int64_t batch[TTPU_MAX_DIMS];
  for (int d = 0; d < nd - 2; ++d) batch[d] = d;
  int64_t cx = nd - 1, cy = nd - 2;
  return ttpu_hlo_dot_general(b, x, y, batch, batch, nd - 2, &cx, &cy, 1, dt, TTPU_PREC_HIGHEST);
}

/* The columns of x (batch..., r, c) reordered: column k of the result is
 * column src[k] of x, src (batch..., k) or (k) of i64. Exact (one nonzero
 * product per entry). */
static ttpu_val take_cols(ttpu_hlo* b, ttpu_val x, ttpu_val src, int64_t k) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  const ttpu_type* ts = ttpu_hlo_type(b, src);
  if (!tp || !ts) return TTPU_VAL_ERROR;
  ttpu_type tx = *tp, tpm = *tp; /* (batch..., c, k) */
  int nd = tx.ndim, nsrc = ts->ndim;
  tpm.dims[nd - 2] = tx.dims[nd - 1];
  tpm.dims[nd - 1] = k;
  ttpu_type ti = with_dtype(tpm, TTPU_I64);
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < nsrc - 1; ++d) map[d] = d;
  map[nsrc - 1] = nd - 1;
  ttpu_val pick = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, nd - 2), ttpu_hlo_broadcast_in_dim(b, src, ti, map));
  return bmm(b, x, ttpu_hlo_convert(b, pick, tx.dtype));
}

void ttpu_mx_hestenes(ttpu_hlo* b, ttpu_val w, int vectors, ttpu_val* wf, ttpu_val* v, ttpu_val* scale) {
  const ttpu_type* tp = ttpu_hlo_type(b, w);
  if (!tp) {
    *wf = *scale = TTPU_VAL_ERROR;
    if (v) *v = TTPU_VAL_ERROR;
    return;
  }
  ttpu_type tw = *tp;
  int nd = tw.ndim, cx = ttpu_dtype_is_complex(tw.dtype);
  ttpu_dtype rt = real_of(tw.dtype);
  int64_t p = tw.dims[nd - 2], q = tw.dims[nd - 1], h = (q + 1) / 2;

  /* scaled to largest |entry| 1: the squared norms neither overflow nor
   * underflow */
  int64_t last2[2] = {nd - 2, nd - 1};
  ttpu_val big = ttpu_hlo_reduce(b, ttpu_hlo_unary(b, TTPU_ABS, w), TTPU_RED_MAX, last2, 2);
  const ttpu_type* tbp = ttpu_hlo_type(b, big);
  if (!tbp) return;
  ttpu_type tb = *tbp;
  big = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, big, kc(b, tb, 0)), big, kc(b, tb, 1));
  *scale = big;
  int64_t bmap[TTPU_MAX_DIMS];
  for (int d = 0; d < nd - 2; ++d) bmap[d] = d;
  w = bin(b, TTPU_DIV, w, ttpu_hlo_convert(b, ttpu_hlo_broadcast_in_dim(b, big, with_dtype(tw, rt), bmap), tw.dtype));

  hestenes H;
  H.h = h;
  H.rounds = 2 * h - 1;
  H.max_rounds = q < 2 ? 0 : (int64_t)kMaxSweeps * H.rounds;
  H.eps = rt == TTPU_F64 ? DBL_EPSILON : FLT_EPSILON;
  H.tol = H.eps * (double)p;
  H.cx = cx;
  H.vectors = vectors;
  H.tx = tw;
  H.tx.dims[nd - 1] = h;
  H.tvx = H.tx;
  H.tvx.dims[nd - 2] = q;

  /* an odd column count gets a zero column: its pairs are skipped, so it
   * stays zero; the labels find it again */
  ttpu_type tv = tw;
  tv.dims[nd - 2] = q;
  ttpu_val vi = ttpu_mx_identity(b, tv);
  if (q & 1) {
    int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS] = {0}, in[TTPU_MAX_DIMS] = {0};
    hi[nd - 1] = 1;
    ttpu_val z = kc(b, ttpu_type_make(tw.dtype, 0, NULL), 0);
    w = ttpu_hlo_pad(b, w, z, lo, hi, in);
    vi = ttpu_hlo_pad(b, vi, z, lo, hi, in);
  }
  ttpu_type tl = ttpu_type_make(TTPU_I64, 1, &h);
  ttpu_val label = ttpu_hlo_iota(b, tl, 0);
  ttpu_val init[8] = {ttpu_hlo_const_i(b, TTPU_I64, 0), cols(b, w, 0, h), cols(b, w, h, 2 * h), label,
                      bin(b, TTPU_ADD, label, kc(b, tl, (double)h)), ttpu_hlo_const_f(b, rt, HUGE_VAL),
                      TTPU_VAL_ERROR, TTPU_VAL_ERROR}, fin[8];
  if (vectors) {
    init[6] = cols(b, vi, 0, h);
    init[7] = cols(b, vi, h, 2 * h);
  }
  ttpu_hlo_while(b, init, vectors ? 8 : 6, sweep_cond, sweep_body, &H, fin);

  /* back to the columns' first order, the zero column dropped */
  ttpu_val lab[2] = {fin[3], fin[4]};
  ttpu_val seat_of = ttpu_hlo_concat(b, lab, 2, 0); /* label at each seat */
  int64_t qq[2] = {2 * h, q}, zero = 0;
  ttpu_type t2 = ttpu_type_make(TTPU_I64, 2, qq);
  ttpu_val hit = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_broadcast_in_dim(b, seat_of, t2, &zero), ttpu_hlo_iota(b, t2, 1));
  ttpu_val inv = sum_dim(b, ttpu_hlo_select(b, hit, ttpu_hlo_iota(b, t2, 0), kc(b, t2, 0)), 0); /* seat of each label < q */
  ttpu_val halves[2] = {fin[1], fin[2]};
  *wf = take_cols(b, ttpu_hlo_concat(b, halves, 2, nd - 1), inv, q);
  if (v) {
    ttpu_val vh[2] = {fin[6], fin[7]};
    *v = vectors ? take_cols(b, ttpu_hlo_concat(b, vh, 2, nd - 1), inv, q) : TTPU_VAL_ERROR;
  }
}

/* Completes the columns of u (batch..., p, c) marked in `missing`
 * (batch..., c) (zero there) to an orthonormal basis: each in turn becomes
 * the unit vector e_i least covered by the columns already there (the row
 * of least norm: its distance from their span is at least sqrt(1 - r/p)
 * for r columns), orthogonalized twice against them and normalized. The
 * loop visits only the columns some matrix misses. */
typedef struct {
  ttpu_type tu;
  ttpu_val missing, any_after; /* (batch..., c) bool; (c) i64 next index */
  int cx;
} completion;

static ttpu_val fill_cond(ttpu_hlo* b, void* ctx, const ttpu_val* st) {
  const completion* f = ctx;
  return ttpu_hlo_compare(b, TTPU_LT, st[0], ttpu_hlo_const_i(b, TTPU_I64, f->tu.dims[f->tu.ndim - 1]));
}

/* u - u (u^H c) for c (batch..., p): c without its part in u's span. */
static ttpu_val project_out(ttpu_hlo* b, const completion* f, ttpu_val u, ttpu_val c) {
  int nd = f->tu.ndim;
  ttpu_val coef = sum_dim(b, bin(b, TTPU_MUL, conj_v(b, u, f->cx), per_row(b, c, f->tu)), nd - 2);
  return bin(b, TTPU_SUB, c, sum_dim(b, bin(b, TTPU_MUL, u, per_col(b, coef, f->tu)), nd - 1));
}

static void fill_body(ttpu_hlo* b, void* ctx, const ttpu_val* st, ttpu_val* next) {
  const completion* f = ctx;
  int nd = f->tu.ndim, cx = f->cx;
  ttpu_val j = st[0], u = st[1];
  ttpu_type tr = with_dtype(f->tu, real_of(f->tu.dtype));
  ttpu_val rows = sum_dim(b, abs2(b, u, cx), nd - 1); /* (batch..., p) */
  ttpu_val least, at;
  ttpu_hlo_reduce_arg(b, rows, nd - 2, 0, &least, &at);
  ttpu_type tcol = f->tu;
  tcol.ndim--;
  ttpu_type tci = with_dtype(tcol, TTPU_I64);
  int64_t bmap[TTPU_MAX_DIMS];
  for (int d = 0; d < nd - 2; ++d) bmap[d] = d;
  ttpu_val e = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, tci, nd - 2), ttpu_hlo_broadcast_in_dim(b, at, tci, bmap));
  ttpu_val c = project_out(b, f, u, ttpu_hlo_convert(b, e, f->tu.dtype));
  c = project_out(b, f, u, c);
  ttpu_val norm = ttpu_hlo_unary(b, TTPU_SQRT, sum_dim(b, abs2(b, c, cx), nd - 2));
  c = bin(b, TTPU_DIV, c, ttpu_hlo_convert(b, ttpu_hlo_broadcast_in_dim(b, norm, with_dtype(tcol, tr.dtype), bmap), f->tu.dtype));
  /* column j, in the matrices that miss it */
  ttpu_type ti = with_dtype(f->tu, TTPU_I64);
  ttpu_val at_j = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, nd - 1), ttpu_hlo_broadcast_to(b, j, nd, ti.dims));
  ttpu_val put = bin(b, TTPU_AND, at_j, per_col(b, f->missing, f->tu));
  next[1] = ttpu_hlo_select(b, put, per_row(b, c, f->tu), u);
  next[0] = ttpu_hlo_dynamic_slice(b, f->any_after, &j, (int64_t[]){1});
  next[0] = ttpu_hlo_reshape(b, next[0], 0, NULL);
}

static ttpu_val complete_basis(ttpu_hlo* b, ttpu_val u, ttpu_val missing, int cx) {
  const ttpu_type* tp = ttpu_hlo_type(b, u);
  if (!tp) return TTPU_VAL_ERROR;
  completion f;
  f.tu = *tp;
  f.cx = cx;
  f.missing = missing;
  int nd = f.tu.ndim;
  int64_t c = f.tu.dims[nd - 1];
  /* which columns any matrix misses; next[k]: the first such index > k
   * (c when none), first: the first such index */
  ttpu_val any = missing;
  if (nd > 2) {
    int64_t bd[TTPU_MAX_DIMS];
    for (int d = 0; d < nd - 2; ++d) bd[d] = d;
    any = ttpu_hlo_reduce(b, missing, TTPU_RED_OR, bd, nd - 2);
  }
  ttpu_type tc = ttpu_type_make(TTPU_I64, 1, &c);
  ttpu_val idx = ttpu_hlo_select(b, any, ttpu_hlo_iota(b, tc, 0), kc(b, tc, (double)c));
  /* suffix minimum of idx, shifted by one */
  int64_t rev = 0;
  ttpu_val smin = ttpu_hlo_reverse(b, ttpu_hlo_cumulative(b, ttpu_hlo_reverse(b, idx, &rev, 1), TTPU_RED_MIN, 0), &rev, 1);
  int64_t lo = 0, hi = 1, in = 0;
  f.any_after = ttpu_hlo_pad(b, cols(b, smin, 1, c), ttpu_hlo_const_i(b, TTPU_I64, c), &lo, &hi, &in);
  ttpu_val first = ttpu_hlo_reshape(b, cols(b, smin, 0, 1), 0, NULL);
  ttpu_val init[2] = {first, u}, fin[2];
  ttpu_hlo_while(b, init, 2, fill_cond, fill_body, &f, fin);
  return fin[1];
}

/* _linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None)
 *   -> (U, S, Vh), S descending. */
static ttpu_status* lower_svd(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ou = ttpu_l_out_type(L, 0), os = ttpu_l_out_type(L, 1), ov = ttpu_l_out_type(L, 2);
  ttpu_val a = ttpu_l_tensor(L, 0);
  ttpu_type ta = ttpu_l_type(L, a);
  int cx = ttpu_dtype_is_complex(ta.dtype);
  if (!cx && !ttpu_mx_lapack_dtype(L, ta.dtype, "linalg_svd")) return NULL;
  int nb = ta.ndim - 2;
  int64_t m = ta.dims[nb], n = ta.dims[nb + 1], k = m < n ? m : n;
  int uv = ttpu_l_bool(L, 2, 1) && ttpu_type_numel(&ou) > 0;
  if (ttpu_type_numel(&os) == 0) {
    /* No singular values: a full U or Vh is still an orthonormal basis of
     * its side (LAPACK's is the identity). */
    ttpu_l_set_out(L, 0, ttpu_type_numel(&ou) ? ttpu_mx_identity(b, ou) : kc(b, ou, 0));
    ttpu_l_set_out(L, 1, kc(b, os, 0));
    ttpu_l_set_out(L, 2, ttpu_type_numel(&ov) ? ttpu_mx_identity(b, ov) : kc(b, ov, 0));
    return NULL;
  }
  int wide = m < n, full = ttpu_l_bool(L, 1, 0);
  int64_t p = wide ? n : m;
  ttpu_val x = wide ? adjoint(b, a, cx) : a; /* tall: (batch..., p, k), p >= k */
  ttpu_val wf, v = TTPU_VAL_ERROR, scale;
  ttpu_mx_hestenes(b, x, uv, &wf, uv ? &v : NULL, &scale);
  ttpu_type tw = ttpu_l_type(L, wf);
  ttpu_val s2 = sum_dim(b, abs2(b, wf, cx), nb); /* (batch..., k), of the scaled W */
  ttpu_type ts = ttpu_l_type(L, s2);
  ttpu_type ti = with_dtype(ts, TTPU_I64);
  ttpu_val sorted[2], order = ttpu_hlo_iota(b, ti, nb);
  ttpu_hlo_sort(b, s2, &order, 1, nb, 1, sorted);
  int64_t bmap[TTPU_MAX_DIMS];
  for (int d = 0; d < nb; ++d) bmap[d] = d;
  ttpu_val sv = bin(b, TTPU_MUL, ttpu_hlo_unary(b, TTPU_SQRT, sorted[0]), ttpu_hlo_broadcast_in_dim(b, scale, ts, bmap));
  ttpu_l_set_out(L, 1, sv);
  if (!uv) {
    ttpu_l_set_out(L, 0, kc(b, ou, 0));
    ttpu_l_set_out(L, 2, kc(b, ov, 0));
    return NULL;
  }
  /* U = W_f S^-1, its columns where S is zero (to the squared norms'
   * underflow) and those full_matrices adds completed */
  double tiny = ts.dtype == TTPU_F64 ? DBL_MIN / DBL_EPSILON : FLT_MIN / FLT_EPSILON;
  ttpu_val missing = ttpu_hlo_compare(b, TTPU_LE, sorted[0], kc(b, ts, tiny));
  ttpu_val inv = ttpu_hlo_select(b, missing, kc(b, ts, 0), ttpu_hlo_unary(b, TTPU_RSQRT, sorted[0]));
  ttpu_val u = bin(b, TTPU_MUL, take_cols(b, wf, sorted[1], k), ttpu_hlo_convert(b, per_col(b, inv, tw), tw.dtype));
  v = take_cols(b, v, sorted[1], k);
  if (full && p > k) {
    int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS] = {0}, in[TTPU_MAX_DIMS] = {0};
    hi[nb + 1] = p - k;
    u = ttpu_hlo_pad(b, u, kc(b, ttpu_type_make(tw.dtype, 0, NULL), 0), lo, hi, in);
    hi[nb + 1] = 0;
    hi[nb] = p - k;
    missing = ttpu_hlo_pad(b, missing, ttpu_hlo_const(b, ttpu_type_make(TTPU_BOOL, 0, NULL), 1, 1), lo, hi, in);
  }
  u = complete_basis(b, u, missing, cx);
  /* tall: A = U S V^H; wide: A^H = U S V^H, so A = V S U^H */
  ttpu_l_set_out(L, 0, wide ? v : u);
  ttpu_l_set_out(L, 2, adjoint(b, wide ? u : v, cx));
  return NULL;
}

const ttpu_op_def ttpu_ops_svd[] = {
    {"_linalg_svd", lower_svd, .complex_fn = lower_svd},
    {"_linalg_svd.U", lower_svd, .complex_fn = lower_svd},
    {0},
};
