/* eigh.c - the symmetric eigendecomposition (_linalg_eigh: eigh,
 * eigvalsh, and through them pinv/matrix_rank with hermitian=True), by
 * cyclic Jacobi in the parallel (round-robin) order.
 *
 * Each round pairs every index with another one (a tournament schedule:
 * over m-1 rounds every pair meets once, m = n rounded up to even) and
 * applies all n/2 disjoint rotations at once as one orthogonal matrix J:
 * A <- J^T A J, V <- V J. A round is a few n x n matrix products, the same
 * program text for every n, and the rounds run in an XLA while loop until
 * the off-diagonal part is negligible against the whole (or a sweep
 * limit), so neither the program nor its compile time grows with n, unlike
 * an unrolled sweep. This is the method TPUs favour: matrix products
 * rather than the sequential bulge chasing of LAPACK's tridiagonal
 * reduction. Eigenvalues come out to the input dtype's rounding, ascending
 * like LAPACK's.
 *
 * Complex Hermitian matrices take the same rounds with each pair's
 * rotation turned by the phase of its off-diagonal entry a_pq = |a_pq|
 * e^{i phi}: J = D R D^H with D = diag(1, e^{-i phi}) and R the real
 * rotation that zeroes |a_pq|, so J[p, q] = s e^{i phi}, J[q, p] = -s
 * e^{-i phi} and the diagonal stays real.
 *
 * Eigenvectors are unique only up to sign (and rotation within a repeated
 * eigenvalue): ours need not be LAPACK's, while what PyTorch builds on
 * them (V diag(w) V^T, pinv, the gradients of gauge-invariant losses) is
 * invariant to that choice. */
#include <float.h>

#include "matrix.h"

/* Jacobi converges quadratically once the off-diagonal part is small;
 * random matrices of a few hundred rows take 6-10 sweeps in float64. */
enum { kMaxSweeps = 14 };

typedef struct {
  ttpu_type tm;  /* the matrices (batch..., n, n) */
  int64_t n, m;  /* order, and m = n rounded up to even (the schedule) */
  int64_t max_rounds;
  double tol2;   /* converged when off(A)^2 <= tol2 * |A|_F^2 */
  int vectors;   /* carry V */
  int cx;        /* complex Hermitian */
  ttpu_dtype rdt; /* the real component dtype */
} jacobi;

static ttpu_val kc(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

static ttpu_val bin(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, op, x, y);
}

/* Type of the per-column vectors (batch..., n). */
static ttpu_type vec_type(const jacobi* j) {
  ttpu_type t = j->tm;
  t.ndim--;
  return t;
}

/* A (batch..., n) value v broadcast along the rows (v[k] in column k) or
 * the columns (v[i] in row i) of the matrices. */
static ttpu_val spread(ttpu_hlo* b, const jacobi* j, ttpu_val v, int along_rows) {
  const ttpu_type* tp = ttpu_hlo_type(b, v);
  if (!tp) return TTPU_VAL_ERROR;
  int nd = j->tm.ndim;
  ttpu_type to = j->tm;
  to.dtype = tp->dtype;
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < nd - 2; ++d) map[d] = d;
  map[nd - 2] = along_rows ? nd - 1 : nd - 2;
  return ttpu_hlo_broadcast_in_dim(b, v, to, map);
}

/* A (n, n) value broadcast over the batch. */
static ttpu_val over_batch(ttpu_hlo* b, const jacobi* j, ttpu_val x) {
  int nd = j->tm.ndim;
  int64_t map[2] = {nd - 2, nd - 1};
  return ttpu_hlo_broadcast_in_dim(b, x, j->tm, map);
}

static ttpu_val identity(ttpu_hlo* b, const jacobi* j) {
  return ttpu_mx_identity(b, j->tm);
}

/* The matrices' type with the real component dtype. */
static ttpu_type real_tm(const jacobi* j) {
  ttpu_type t = j->tm;
  t.dtype = j->rdt;
  return t;
}

/* Sum over dim d of x. */
static ttpu_val sum_dim(ttpu_hlo* b, ttpu_val x, int d) {
  int64_t dd = d;
  return ttpu_hlo_reduce(b, x, TTPU_RED_SUM, &dd, 1);
}

/* The (real) diagonal of a. */
static ttpu_val diagonal(ttpu_hlo* b, const jacobi* j, ttpu_val a) {
  if (j->cx) a = ttpu_hlo_real(b, a);
  return sum_dim(b, bin(b, TTPU_MUL, a, ttpu_mx_identity(b, real_tm(j))), j->tm.ndim - 1);
}

/* Batched x @ y with full float32 passes whatever the matmul precision
 * setting: the rotations must stay orthogonal to the dtype's rounding. */
static ttpu_val matmul(ttpu_hlo* b, const jacobi* j, ttpu_val x, ttpu_val y, int transpose_x) {
  int nd = j->tm.ndim;
  int64_t batch[TTPU_MAX_DIMS];
  for (int d = 0; d < nd - 2; ++d) batch[d] = d;
  int64_t cx = transpose_x ? nd - 2 : nd - 1, cy = nd - 2;
  if (transpose_x) x = ttpu_mx_conj(b, x);
  return ttpu_hlo_dot_general(b, x, y, batch, batch, nd - 2, &cx, &cy, 1, j->tm.dtype, TTPU_PREC_HIGHEST);
}

/* Per matrix: 1 while off(A)^2 > tol2 * |A|_F^2, reduced to "any". */
static ttpu_val not_converged(ttpu_hlo* b, const jacobi* j, ttpu_val a) {
  int nd = j->tm.ndim;
  ttpu_type tr = real_tm(j);
  ttpu_val sq = ttpu_mx_abs2(b, a);
  ttpu_val off = bin(b, TTPU_MUL, sq, bin(b, TTPU_SUB, kc(b, tr, 1), ttpu_mx_identity(b, tr)));
  int64_t last2[2] = {nd - 2, nd - 1};
  ttpu_val off2 = ttpu_hlo_reduce(b, off, TTPU_RED_SUM, last2, 2);
  ttpu_val all2 = ttpu_hlo_reduce(b, sq, TTPU_RED_SUM, last2, 2);
  const ttpu_type* tp = ttpu_hlo_type(b, all2);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type ts = *tp;
  ttpu_val more = ttpu_hlo_compare(b, TTPU_GT, off2, bin(b, TTPU_MUL, all2, kc(b, ts, j->tol2)));
  int64_t all[TTPU_MAX_DIMS];
  for (int d = 0; d < ts.ndim; ++d) all[d] = d;
  return ts.ndim ? ttpu_hlo_reduce(b, more, TTPU_RED_OR, all, ts.ndim) : more;
}

static ttpu_val loop_cond(ttpu_hlo* b, void* ctx, const ttpu_val* st) {
  const jacobi* j = ctx;
  ttpu_val more = ttpu_hlo_compare(b, TTPU_LT, st[0], ttpu_hlo_const_i(b, TTPU_I64, j->max_rounds));
  return bin(b, TTPU_AND, more, not_converged(b, j, st[1]));
}

/* One round: the schedule's pairing for round r = it mod (m-1), every
 * pair's rotation, and A <- J^T A J, V <- V J. */
static void loop_body(ttpu_hlo* b, void* ctx, const ttpu_val* st, ttpu_val* next) {
  const jacobi* j = ctx;
  int nd = j->tm.ndim;
  int64_t n = j->n, mm1 = j->m - 1;
  ttpu_val it = st[0], a = st[1];

  /* Circle method: with m-1 seats around a table and one at its head,
   * index k meets (2r - k) mod (m-1), and index r meets the head (m-1).
   * When n is odd the head is a phantom: its partner sits the round out
   * (pairs with itself, a rotation by zero). */
  ttpu_type tk = ttpu_type_make(TTPU_I64, 1, &n);
  ttpu_val k = ttpu_hlo_iota(b, tk, 0);
  ttpu_val r = ttpu_hlo_broadcast_to(b, bin(b, TTPU_REM, it, ttpu_hlo_const_i(b, TTPU_I64, mm1)), 1, &n);
  ttpu_val head = kc(b, tk, (double)mm1);
  ttpu_val seat = bin(b, TTPU_REM, bin(b, TTPU_ADD, bin(b, TTPU_SUB, bin(b, TTPU_ADD, r, r), k), head), head);
  ttpu_val partner = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, k, r), head, seat);
  partner = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, k, head), r, partner);
  partner = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GE, partner, kc(b, tk, (double)n)), k, partner);

  /* P[i, k] = (i == partner[k]): picks each column's partner. */
  int64_t nn[2] = {n, n}, col = 1;
  ttpu_type tnn = ttpu_type_make(TTPU_I64, 2, nn);
  ttpu_val pick = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, tnn, 0), ttpu_hlo_broadcast_in_dim(b, partner, tnn, &col));
  ttpu_val p = over_batch(b, j, ttpu_hlo_convert(b, pick, j->tm.dtype));
  ttpu_type trm = real_tm(j);
  int64_t last2[2] = {nd - 2, nd - 1};
  ttpu_val pr = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_convert(b, pick, j->rdt), trm, last2);

  ttpu_type tv = vec_type(j);
  tv.dtype = j->rdt;
  ttpu_val d = diagonal(b, j, a);                                           /* a_kk */
  ttpu_val dp = sum_dim(b, bin(b, TTPU_MUL, spread(b, j, d, 0), pr), nd - 2); /* a_pp */
  ttpu_val akp = sum_dim(b, bin(b, TTPU_MUL, a, p), nd - 2);                  /* a_kp */
  ttpu_val phase = TTPU_VAL_ERROR;
  if (j->cx) {
    /* the real rotation of |a_kp|, turned by its phase */
    ttpu_val mag = ttpu_hlo_unary(b, TTPU_ABS, akp);
    ttpu_val none = ttpu_hlo_compare(b, TTPU_EQ, mag, kc(b, tv, 0));
    phase = ttpu_hlo_binary(b, TTPU_DIV, akp, ttpu_hlo_convert(b, ttpu_hlo_select(b, none, kc(b, tv, 1), mag), j->tm.dtype));
    phase = ttpu_hlo_select(b, none, ttpu_hlo_const(b, ttpu_type_make(j->tm.dtype, tv.ndim, tv.dims), 1, 1), phase);
    akp = mag;
  }
  int64_t vmap = nd - 2;
  ttpu_type tvb = tv;
  tvb.dtype = TTPU_BOOL;
  ttpu_val lo = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_compare(b, TTPU_LT, k, partner), tvb, &vmap);
  ttpu_val alone = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_compare(b, TTPU_EQ, k, partner), tvb, &vmap);

  /* The rotation zeroing a_pq for p < q (both columns of the pair compute
   * it alike). */
  ttpu_val app = ttpu_hlo_select(b, lo, d, dp), aqq = ttpu_hlo_select(b, lo, dp, d);
  ttpu_val skip = bin(b, TTPU_OR, alone, ttpu_hlo_compare(b, TTPU_EQ, akp, kc(b, tv, 0)));
  ttpu_val t, c, sj;
  ttpu_mx_jacobi_rotation(b, tv, app, aqq, akp, skip, lo, &t, &c, &sj);
  ttpu_val cj = c;
  if (j->cx) {
    cj = ttpu_hlo_convert(b, c, j->tm.dtype);
    sj = bin(b, TTPU_MUL, ttpu_hlo_convert(b, sj, j->tm.dtype), phase);
  }
  ttpu_val jm = bin(b, TTPU_ADD, bin(b, TTPU_MUL, identity(b, j), spread(b, j, cj, 1)),
                    bin(b, TTPU_MUL, p, spread(b, j, sj, 1)));

  ttpu_val na = matmul(b, j, matmul(b, j, jm, a, 1), jm, 0);
  /* Kept exactly symmetric, so both columns of a pair see the same a_pq
   * next round and J stays orthogonal. */
  na = bin(b, TTPU_MUL, bin(b, TTPU_ADD, na, ttpu_mx_adjoint(b, na)), kc(b, j->tm, 0.5));
  /* The diagonal by the rotation's exact effect, a_pp - t a_pq and
   * a_qq + t a_pq, and a_pq set to zero: the product's diagonal carries
   * the rounding of c^2 + s^2 = 1, which over hundreds of rounds drifts the
   * eigenvalues by ~rounds * eps (several times LAPACK's error). */
  ttpu_val dn = bin(b, TTPU_ADD, d, bin(b, TTPU_MUL, ttpu_hlo_select(b, lo, ttpu_hlo_unary(b, TTPU_NEG, t), t), akp));
  ttpu_val one = kc(b, j->tm, 1), eye = identity(b, j);
  ttpu_val keep = bin(b, TTPU_MUL, bin(b, TTPU_SUB, one, eye), bin(b, TTPU_SUB, one, p));
  ttpu_val dnm = spread(b, j, dn, 1);
  if (j->cx) dnm = ttpu_hlo_convert(b, dnm, j->tm.dtype);
  next[1] = bin(b, TTPU_ADD, bin(b, TTPU_MUL, na, keep), bin(b, TTPU_MUL, eye, dnm));
  next[0] = bin(b, TTPU_ADD, it, ttpu_hlo_const_i(b, TTPU_I64, 1));
  if (j->vectors) next[2] = matmul(b, j, st[2], jm, 0);
}

/* _linalg_eigh(A, UPLO="L", compute_v=True) -> (eigenvalues, eigenvectors):
 * eigenvalues ascending; eigenvectors is empty when not computed. */
static ttpu_status* lower_eigh(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ow = ttpu_l_out_type(L, 0), ov = ttpu_l_out_type(L, 1);
  ttpu_val a = ttpu_l_tensor(L, 0);
  ttpu_type ta = ttpu_l_type(L, a);
  if (!ttpu_mx_lapack_dtype(L, ta.dtype, "linalg_eigh_cpu")) return NULL;
  int vectors = ttpu_l_bool(L, 2, 1);
  const char* uplo = ttpu_l_str(L, 1, "L");
  if (ttpu_type_numel(&ow) == 0) {
    ttpu_l_set_out(L, 0, kc(b, ow, 0));
    ttpu_l_set_out(L, 1, kc(b, ov, 0));
    return NULL;
  }
  int nd = ta.ndim;
  jacobi j;
  j.tm = ta;
  j.n = ta.dims[nd - 1];
  j.m = j.n + (j.n & 1);
  j.max_rounds = (int64_t)kMaxSweeps * (j.m - 1);
  double eps = ta.dtype == TTPU_F64 || ta.dtype == TTPU_C128 ? DBL_EPSILON : FLT_EPSILON;
  j.tol2 = eps * eps;
  j.vectors = vectors;
  j.cx = ttpu_dtype_is_complex(ta.dtype);
  j.rdt = ttpu_dtype_real(ta.dtype);

  /* The symmetric matrix the chosen triangle stands for. */
  ttpu_type ti = ta;
  ti.dtype = TTPU_I64;
  ttpu_val in_tri = ttpu_hlo_compare(b, (uplo[0] == 'U' || uplo[0] == 'u') ? TTPU_LE : TTPU_GE,
                                     ttpu_hlo_iota(b, ti, nd - 2), ttpu_hlo_iota(b, ti, nd - 1));
  ttpu_val s = ttpu_hlo_select(b, in_tri, a, ttpu_mx_adjoint(b, a));
  if (j.cx) /* LAPACK reads only the real part of the diagonal */
    s = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, nd - 2), ttpu_hlo_iota(b, ti, nd - 1)),
                        ttpu_hlo_convert(b, ttpu_hlo_real(b, s), ta.dtype), s);

  ttpu_val init[3] = {ttpu_hlo_const_i(b, TTPU_I64, 0), s, identity(b, &j)}, fin[3];
  ttpu_hlo_while(b, init, vectors ? 3 : 2, loop_cond, loop_body, &j, fin);

  ttpu_val w = diagonal(b, &j, fin[1]);
  ttpu_type tv = vec_type(&j), tvi = tv;
  tvi.dtype = TTPU_I64;
  ttpu_val order = ttpu_hlo_iota(b, tvi, nd - 2), sorted[2];
  ttpu_hlo_sort(b, w, &order, 1, nd - 2, 0, sorted);
  ttpu_l_set_out(L, 0, sorted[0]);
  if (!vectors) {
    ttpu_l_set_out(L, 1, kc(b, ov, 0));
    return NULL;
  }
  /* Columns reordered like the eigenvalues: V Q with Q[i, r] = (order[r] == i),
   * exact (one nonzero product per entry). */
  ttpu_val q = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, nd - 2), spread(b, &j, sorted[1], 1));
  ttpu_val v = matmul(b, &j, fin[2], ttpu_hlo_convert(b, q, ta.dtype), 0);
  /* unit columns: the rotations' rounding scales them by 1 + O(rounds eps) */
  ttpu_val norm = ttpu_hlo_unary(b, TTPU_SQRT, sum_dim(b, ttpu_mx_abs2(b, v), nd - 2));
  if (j.cx) norm = ttpu_hlo_convert(b, norm, ta.dtype);
  ttpu_l_set_out(L, 1, bin(b, TTPU_DIV, v, spread(b, &j, norm, 1)));
  return NULL;
}

const ttpu_op_def ttpu_ops_eigh[] = {
    {"_linalg_eigh", lower_eigh, .complex_fn = lower_eigh},
    {"_linalg_eigh.eigenvalues", lower_eigh, .complex_fn = lower_eigh},
    {0},
};
