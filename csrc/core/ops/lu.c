/* lu.c - LU factorization with partial pivoting and what PyTorch builds on
 * it: solve, inverse, determinant, log-determinant, lu_solve, lu_unpack.
 *
 * StableHLO has no LU op, so the factorization is the textbook elimination
 * unrolled over the min(m, n) columns (sizes are compile-time): each step
 * picks the largest |pivot| (the first of equals, as LAPACK's getrf), swaps
 * it into place with masked selects (every batch element may pick a
 * different row), and updates the trailing matrix. Programs grow linearly
 * with n: right for the small and medium matrices models factor, not for n
 * in the thousands. Results follow LAPACK's conventions: LU packed in one
 * matrix, 1-based int32 pivots of sequential row swaps, info = the first
 * zero pivot (1-based) or 0. Solves use stablehlo.triangular_solve.
 * Complex matrices pivot on |re| + |im|, as LAPACK's izamax does, so the
 * pivots are the CPU's. */
#include "matrix.h"

enum { kMaxSteps = 256 }; /* columns an unrolled factorization may take */

typedef struct {
  ttpu_val lu;              /* (batch..., m, n) */
  ttpu_val piv[kMaxSteps];  /* 0-based pivot row of step j, i64 (batch...) */
  int k;                    /* min(m, n) */
  ttpu_val info;            /* i64 (batch...) */
} lu_fact;

static ttpu_type with_dtype(ttpu_type t, ttpu_dtype dt) {
  t.dtype = dt;
  return t;
}

static ttpu_val kconst(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

/* t's leading nb dims (the batch) as a type of dtype dt. */
static ttpu_type batch_type(ttpu_type t, int nb, ttpu_dtype dt) {
  ttpu_type r = t;
  r.ndim = nb;
  r.dtype = dt;
  return r;
}

/* v (batch...) broadcast into t (batch..., more dims). */
static ttpu_val spread(ttpu_hlo* b, ttpu_val v, ttpu_type t, int nb) {
  const ttpu_type* tv = ttpu_hlo_type(b, v);
  if (!tv) return TTPU_VAL_ERROR;
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < nb; ++d) map[d] = d;
  return ttpu_hlo_broadcast_in_dim(b, v, with_dtype(t, tv->dtype), map);
}

/* v (batch..., len) broadcast into t (batch..., r, c) along dim at (nb or
 * nb + 1). */
static ttpu_val spread_vec(ttpu_hlo* b, ttpu_val v, ttpu_type t, int nb, int at) {
  const ttpu_type* tv = ttpu_hlo_type(b, v);
  if (!tv) return TTPU_VAL_ERROR;
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < nb; ++d) map[d] = d;
  map[nb] = at;
  return ttpu_hlo_broadcast_in_dim(b, v, with_dtype(t, tv->dtype), map);
}

/* Row i / column i of x (batch..., m, n) with i a constant, as a
 * (batch..., n) / (batch..., m) value. */
static ttpu_val line(ttpu_hlo* b, ttpu_val x, int64_t i, int is_col) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = *tp;
  int nb = t.ndim - 2, d = is_col ? nb + 1 : nb;
  int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
  for (int a = 0; a < t.ndim; ++a) hi[a] = t.dims[a], st[a] = 1;
  lo[d] = i;
  hi[d] = i + 1;
  ttpu_type r = t;
  r.ndim = t.ndim - 1;
  for (int a = d; a < r.ndim; ++a) r.dims[a] = t.dims[a + 1];
  return ttpu_l_reshape_to(b, ttpu_hlo_slice(b, x, lo, hi, st), r);
}

/* x (batch..., m, c) with rows j (constant) and p (i64 batch...) swapped. */
static ttpu_val swap_rows(ttpu_hlo* b, ttpu_val x, int64_t j, ttpu_val p) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = *tp;
  int nb = t.ndim - 2;
  ttpu_type ti = with_dtype(t, TTPU_I64);
  ttpu_val row = ttpu_hlo_iota(b, ti, nb);
  ttpu_val is_p = ttpu_hlo_compare(b, TTPU_EQ, row, spread(b, p, ti, nb));
  ttpu_val is_j = ttpu_hlo_compare(b, TTPU_EQ, row, kconst(b, ti, (double)j));
  int64_t rd = nb;
  ttpu_val zero = kconst(b, t, 0);
  ttpu_val rp = ttpu_hlo_reduce(b, ttpu_hlo_select(b, is_p, x, zero), TTPU_RED_SUM, &rd, 1);
  ttpu_val rj = line(b, x, j, 0);
  ttpu_val r = ttpu_hlo_select(b, is_p, spread_vec(b, rj, t, nb, nb + 1), x);
  return ttpu_hlo_select(b, is_j, spread_vec(b, rp, t, nb, nb + 1), r);
}

/* Unrolled getrf of a (batch..., m, n), float. */
static int factor(ttpu_lower* L, ttpu_val a, lu_fact* f) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type t = ttpu_l_type(L, a);
  int nb = t.ndim - 2;
  int64_t m = t.dims[nb], n = t.dims[nb + 1];
  f->k = (int)(m < n ? m : n);
  if (f->k > kMaxSteps) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "LU factorization on tpu takes matrices up to %d columns",
                  kMaxSteps);
    return 0;
  }
  ttpu_type tb = batch_type(t, nb, TTPU_I64), tbf = batch_type(t, nb, t.dtype);
  ttpu_type ti = with_dtype(t, TTPU_I64);
  ttpu_val row = ttpu_hlo_iota(b, ti, nb), col = ttpu_hlo_iota(b, ti, nb + 1);
  ttpu_type tc = t; /* (batch..., m): a column */
  tc.ndim = nb + 1;
  tc.dims[nb] = m;
  ttpu_val crow = ttpu_hlo_iota(b, with_dtype(tc, TTPU_I64), nb);
  ttpu_val info = kconst(b, tb, 0), zero = kconst(b, t, 0);
  for (int j = 0; j < f->k; ++j) {
    ttpu_val c = line(b, a, j, 1);
    ttpu_val mag = ttpu_hlo_unary(b, TTPU_ABS, c);
    if (ttpu_dtype_is_complex(t.dtype))
      mag = ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_unary(b, TTPU_ABS, ttpu_hlo_real(b, c)),
                            ttpu_hlo_unary(b, TTPU_ABS, ttpu_hlo_imag(b, c)));
    ttpu_val cand = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GE, crow, kconst(b, with_dtype(tc, TTPU_I64), j)),
                                    mag, kconst(b, with_dtype(tc, ttpu_dtype_real(t.dtype)), -1));
    ttpu_val best, p;
    ttpu_hlo_reduce_arg(b, cand, nb, 1, &best, &p);
    p = ttpu_hlo_convert(b, p, TTPU_I64);
    f->piv[j] = p;
    a = swap_rows(b, a, j, p);
    /* the pivot a[j, j] */
    ttpu_val rowj = line(b, a, j, 0);          /* (batch..., n) */
    int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
    for (int q = 0; q < nb; ++q) hi[q] = t.dims[q], st[q] = 1;
    lo[nb] = j;
    hi[nb] = j + 1;
    st[nb] = 1;
    ttpu_val piv = ttpu_l_reshape_to(b, ttpu_hlo_slice(b, rowj, lo, hi, st), tbf);
    ttpu_val nz = ttpu_hlo_compare(b, TTPU_NE, piv, kconst(b, tbf, 0));
    ttpu_val first_zero = ttpu_hlo_binary(b, TTPU_AND, ttpu_hlo_unary(b, TTPU_NOT, nz),
                                          ttpu_hlo_compare(b, TTPU_EQ, info, kconst(b, tb, 0)));
    info = ttpu_hlo_select(b, first_zero, kconst(b, tb, j + 1), info);
    /* multipliers below the pivot (a zero pivot leaves the column as is,
     * as getf2 does) */
    ttpu_val cj = line(b, a, j, 1);
    ttpu_val scaled = ttpu_hlo_binary(b, TTPU_DIV, cj, spread(b, piv, tc, nb));
    ttpu_val l = ttpu_hlo_select(b, spread(b, nz, with_dtype(tc, TTPU_BOOL), nb), scaled, cj);
    ttpu_val below = ttpu_hlo_compare(b, TTPU_GT, row, kconst(b, ti, j));
    ttpu_val right = ttpu_hlo_compare(b, TTPU_GT, col, kconst(b, ti, j));
    ttpu_val at_j = ttpu_hlo_compare(b, TTPU_EQ, col, kconst(b, ti, j));
    ttpu_val lb = spread_vec(b, l, t, nb, nb), ub = spread_vec(b, rowj, t, nb, nb + 1);
    ttpu_val upd = ttpu_hlo_binary(b, TTPU_MUL, lb, ub);
    a = ttpu_hlo_binary(b, TTPU_SUB, a,
                        ttpu_hlo_select(b, ttpu_hlo_binary(b, TTPU_AND, below, right), upd, zero));
    a = ttpu_hlo_select(b, ttpu_hlo_binary(b, TTPU_AND, below, at_j), lb, a);
  }
  f->lu = a;
  f->info = info;
  return 1;
}

/* The 1-based int32 pivots tensor (batch..., k). */
static ttpu_val pivots_tensor(ttpu_hlo* b, const lu_fact* f, ttpu_type out) {
  ttpu_val parts[kMaxSteps];
  if (f->k == 0) return kconst(b, out, 0);
  ttpu_type one = out;
  one.dims[one.ndim - 1] = 1;
  for (int j = 0; j < f->k; ++j) {
    const ttpu_type* tp = ttpu_hlo_type(b, f->piv[j]);
    if (!tp) return TTPU_VAL_ERROR;
    ttpu_val p = ttpu_hlo_binary(b, TTPU_ADD, f->piv[j], kconst(b, *tp, 1));
    parts[j] = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, p, out.dtype), one.ndim, one.dims);
  }
  return ttpu_hlo_concat(b, parts, f->k, out.ndim - 1);
}

/* Pivots (batch..., k) given as a tensor: 0-based i64 per step. */
static void pivots_from(ttpu_hlo* b, ttpu_val piv, int k, ttpu_val* out) {
  const ttpu_type* tp = ttpu_hlo_type(b, piv);
  if (!tp) return;
  ttpu_type t = *tp;
  ttpu_type tb = batch_type(t, t.ndim - 1, TTPU_I64);
  ttpu_val p64 = ttpu_hlo_convert(b, piv, TTPU_I64);
  for (int j = 0; j < k; ++j) {
    int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
    for (int q = 0; q < t.ndim; ++q) hi[q] = t.dims[q], st[q] = 1;
    lo[t.ndim - 1] = j;
    hi[t.ndim - 1] = j + 1;
    ttpu_val v = ttpu_l_reshape_to(b, ttpu_hlo_slice(b, p64, lo, hi, st), tb);
    out[j] = ttpu_hlo_binary(b, TTPU_SUB, v, kconst(b, tb, 1));
  }
}

/* The row swaps applied to x (batch..., m, c): forward (P^T x) or
 * backward (P x). */
static ttpu_val apply_swaps(ttpu_hlo* b, ttpu_val x, const ttpu_val* piv, int k, int forward) {
  for (int s = 0; s < k; ++s) {
    int j = forward ? s : k - 1 - s;
    x = swap_rows(b, x, j, piv[j]);
  }
  return x;
}

/* X with op(A) X = rhs from A's factorization, all of one batch shape:
 * op 0 is A, 1 A^T, 2 A^H (the triangular solves' transpose_a). */
static ttpu_val lu_solve_v(ttpu_hlo* b, ttpu_val lu, const ttpu_val* piv, int k, ttpu_val rhs, int op) {
  if (!op) {
    ttpu_val y = apply_swaps(b, rhs, piv, k, 1);
    y = ttpu_hlo_triangular_solve(b, lu, y, 1, 1, 1, 0);
    return ttpu_hlo_triangular_solve(b, lu, y, 1, 0, 0, 0);
  }
  ttpu_val z = ttpu_hlo_triangular_solve(b, lu, rhs, 1, 0, 0, op);
  z = ttpu_hlo_triangular_solve(b, lu, z, 1, 1, 1, op);
  return apply_swaps(b, z, piv, k, 0);
}

/* left/adjoint forms of a solve through the factorization. */
static ttpu_val solve_any(ttpu_hlo* b, ttpu_val lu, const ttpu_val* piv, int k, ttpu_val rhs,
                          int left, int adjoint) {
  const ttpu_type* tp = ttpu_hlo_type(b, lu);
  if (!tp) return TTPU_VAL_ERROR;
  int cx = ttpu_dtype_is_complex(tp->dtype);
  if (left) return lu_solve_v(b, lu, piv, k, rhs, adjoint ? (cx ? 2 : 1) : 0);
  /* X A = B  <=>  A^T X^T = B^T;  X A^H = B  <=>  A X^H = B^H */
  if (adjoint) return ttpu_mx_adjoint(b, lu_solve_v(b, lu, piv, k, ttpu_mx_adjoint(b, rhs), 0));
  return ttpu_mx_transpose(b, lu_solve_v(b, lu, piv, k, ttpu_mx_transpose(b, rhs), 1));
}

/* x (batch..., r, c) broadcast to the batch dims of `like`. */
static ttpu_val to_batch(ttpu_hlo* b, ttpu_val x, ttpu_type like, int like_tail) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int tail = 2;
  ttpu_type t = like;
  t.ndim = like.ndim - like_tail + tail;
  for (int i = 0; i < tail; ++i) t.dims[t.ndim - tail + i] = tp->dims[tp->ndim - tail + i];
  return ttpu_hlo_broadcast_to(b, x, t.ndim, t.dims);
}

/* Pivots (batch..., k) broadcast to a batch shape, then split. */
static void pivots_to_batch(ttpu_hlo* b, ttpu_val piv, ttpu_type like, int like_tail, int k,
                            ttpu_val* out) {
  const ttpu_type* tp = ttpu_hlo_type(b, piv);
  if (!tp) return;
  ttpu_type t = like;
  t.ndim = like.ndim - like_tail + 1;
  t.dims[t.ndim - 1] = tp->dims[tp->ndim - 1];
  pivots_from(b, ttpu_hlo_broadcast_to(b, piv, t.ndim, t.dims), k, out);
}

/* PyTorch's det and slogdet factor A^T when A is real and row-major
 * contiguous (LAPACK reads that memory as A^T without a copy) and return
 * that LU and pivots; their backward formulas expect exactly that. (Its
 * solve, and det of a complex A, factor A itself.) */
static int factors_transpose(ttpu_lower* L) {
  const ttpu_tensor* d = ttpu_l_tensor_desc(L, 0, -1);
  if (!d || ttpu_dtype_is_complex(d->dtype)) return 0;
  int64_t expect = 1;
  for (int i = d->ndim - 1; i >= 0; --i) {
    if (d->sizes[i] != 1 && d->strides[i] != expect) return 0;
    expect *= d->sizes[i];
  }
  return 1;
}

static const char kInverse[] =
    "The diagonal element %lld is zero, the inversion could not be completed because the input "
    "matrix is singular.";

/* linalg_lu_factor_ex(A, *, pivot=True, check_errors=False) -> (LU, pivots, info) */
static ttpu_status* lower_lu_factor_ex(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val a = ttpu_l_tensor(L, 0);
  if (!ttpu_mx_lapack_dtype(L, ttpu_l_type(L, a).dtype, "linalg_lu_factor_ex_out")) return NULL;
  if (!ttpu_l_bool(L, 1, 1))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  lu_fact f;
  if (!factor(L, a, &f)) return NULL;
  if (ttpu_l_bool(L, 2, 0))
    ttpu_mx_check_info(L, f.info, "torch.linalg.lu_factor_ex",
                       "U[%lld,%lld] is zero and using it on lu_solve would result in a division by zero. If "
                       "you still want to perform the factorization, consider calling linalg.lu(A, pivot) or "
                       "linalg.lu_factor_ex(A, pivot)");
  ttpu_l_set_out(L, 0, f.lu);
  ttpu_l_set_out(L, 1, pivots_tensor(b, &f, ttpu_l_out_type(L, 1)));
  ttpu_l_set_out(L, 2, f.info);
  return NULL;
}

/* linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False) */
static ttpu_status* lower_lu_solve(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!ttpu_mx_lapack_dtype(L, ot.dtype, "linalg_lu_solve")) return NULL;
  ttpu_val lu = to_batch(b, ttpu_l_tensor(L, 0), ot, 2);
  ttpu_type tl = ttpu_l_type(L, lu);
  int k = (int)tl.dims[tl.ndim - 1];
  if (k > kMaxSteps) return ttpu_status_make(TTPU_UNIMPLEMENTED, "lu_solve: matrix too large");
  ttpu_val piv[kMaxSteps];
  pivots_to_batch(b, ttpu_l_tensor(L, 1), ot, 2, k, piv);
  ttpu_val rhs = to_batch(b, ttpu_l_tensor(L, 2), ot, 2);
  ttpu_l_set_out(L, 0, solve_any(b, lu, piv, k, rhs, ttpu_l_bool(L, 3, 1), ttpu_l_bool(L, 4, 0)));
  return NULL;
}

/* _linalg_solve_ex(A, B, *, left=True, check_errors=False)
 *   -> (result, LU, pivots, info) */
static ttpu_status* lower_solve_ex(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type orr = ttpu_l_out_type(L, 0), olu = ttpu_l_out_type(L, 1);
  if (!ttpu_mx_lapack_dtype(L, orr.dtype, "linalg_solve")) return NULL;
  int left = ttpu_l_bool(L, 2, 1);
  ttpu_val a = ttpu_hlo_broadcast_to(b, ttpu_l_tensor(L, 0), olu.ndim, olu.dims);
  lu_fact f;
  if (!factor(L, a, &f)) return NULL;
  if (ttpu_l_bool(L, 3, 0))
    ttpu_mx_check_info(L, f.info, "torch.linalg.solve_ex",
                       "The solver failed because the input matrix is singular.");
  /* a vector B (result of rank LU - 1) solves as one column */
  int vector = orr.ndim == olu.ndim - 1;
  ttpu_type rt = orr;
  if (vector) {
    rt.ndim = orr.ndim + 1;
    rt.dims[rt.ndim - 1] = 1;
    rt.dims[rt.ndim - 2] = orr.dims[orr.ndim - 1];
  }
  ttpu_val rhs = ttpu_l_tensor(L, 1);
  ttpu_type tr = ttpu_l_type(L, rhs);
  if (vector) {
    ttpu_type u = tr;
    u.ndim = tr.ndim + 1;
    u.dims[u.ndim - 1] = 1;
    rhs = ttpu_l_reshape_to(b, rhs, u);
  }
  rhs = to_batch(b, rhs, rt, 2);
  ttpu_val lu = to_batch(b, f.lu, rt, 2);
  ttpu_val piv[kMaxSteps];
  /* the pivots of the factorization, broadcast to the solve's batch */
  ttpu_val pv = pivots_tensor(b, &f, with_dtype(ttpu_l_out_type(L, 2), TTPU_I64));
  pivots_to_batch(b, pv, rt, 2, f.k, piv);
  ttpu_val x = solve_any(b, lu, piv, f.k, rhs, left, 0);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, x, orr));
  ttpu_l_set_out(L, 1, f.lu);
  ttpu_l_set_out(L, 2, pivots_tensor(b, &f, ttpu_l_out_type(L, 2)));
  ttpu_l_set_out(L, 3, f.info);
  return NULL;
}

/* linalg_inv_ex(A, *, check_errors=False) -> (inverse, info) */
static ttpu_status* lower_inv_ex(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!ttpu_mx_lapack_dtype(L, ot.dtype, "linalg_inv")) return NULL;
  lu_fact f;
  if (!factor(L, ttpu_l_tensor(L, 0), &f)) return NULL;
  if (ttpu_l_bool(L, 1, 0)) ttpu_mx_check_info(L, f.info, "linalg.inv_ex", kInverse);
  ttpu_l_set_out(L, 0, lu_solve_v(b, f.lu, f.piv, f.k, ttpu_mx_identity(b, ot), 0));
  ttpu_l_set_out(L, 1, f.info);
  return NULL;
}

/* The diagonal of lu (batch..., n, n) as (batch..., n). */
static ttpu_val diagonal(ttpu_hlo* b, ttpu_val lu) {
  const ttpu_type* tp = ttpu_hlo_type(b, lu);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = *tp, ti = with_dtype(*tp, TTPU_I64);
  ttpu_val eye = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, t.ndim - 2), ttpu_hlo_iota(b, ti, t.ndim - 1));
  int64_t last = t.ndim - 1;
  return ttpu_hlo_reduce(b, ttpu_hlo_select(b, eye, lu, kconst(b, t, 0)), TTPU_RED_SUM, &last, 1);
}

/* +1 / -1 (dtype of t) for an even / odd number of actual row swaps. */
static ttpu_val perm_sign(ttpu_hlo* b, const lu_fact* f, ttpu_type tb) {
  ttpu_val s = kconst(b, tb, 1);
  for (int j = 0; j < f->k; ++j) {
    const ttpu_type* tp = ttpu_hlo_type(b, f->piv[j]);
    if (!tp) return TTPU_VAL_ERROR;
    ttpu_val moved = ttpu_hlo_compare(b, TTPU_NE, f->piv[j], kconst(b, *tp, j));
    s = ttpu_hlo_select(b, moved, ttpu_hlo_unary(b, TTPU_NEG, s), s);
  }
  return s;
}

/* _linalg_det(A) -> (result, LU, pivots) */
static ttpu_status* lower_det(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!ttpu_mx_lapack_dtype(L, ot.dtype, "linalg_det")) return NULL;
  lu_fact f;
  ttpu_val a = ttpu_l_tensor(L, 0);
  if (!factor(L, factors_transpose(L) ? ttpu_mx_transpose(b, a) : a, &f)) return NULL;
  ttpu_val d = diagonal(b, f.lu);
  int64_t last = ot.ndim;
  ttpu_val det = ttpu_hlo_reduce(b, d, TTPU_RED_PROD, &last, 1);
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, TTPU_MUL, det, perm_sign(b, &f, ot)));
  ttpu_l_set_out(L, 1, f.lu);
  ttpu_l_set_out(L, 2, pivots_tensor(b, &f, ttpu_l_out_type(L, 2)));
  return NULL;
}

/* _linalg_slogdet(A) -> (sign, logabsdet, LU, pivots) */
static ttpu_status* lower_slogdet(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!ttpu_mx_lapack_dtype(L, ot.dtype, "linalg_slogdet")) return NULL;
  lu_fact f;
  ttpu_val a = ttpu_l_tensor(L, 0);
  if (!factor(L, factors_transpose(L) ? ttpu_mx_transpose(b, a) : a, &f)) return NULL;
  ttpu_val d = diagonal(b, f.lu);
  int64_t last = ot.ndim;
  /* the sign of a complex determinant is d / |d| per pivot, 0 for a zero one */
  ttpu_val zero_d = ttpu_hlo_compare(b, TTPU_EQ, d, kconst(b, ttpu_l_type(L, d), 0));
  ttpu_val sd = ttpu_hlo_select(b, zero_d, kconst(b, ttpu_l_type(L, d), 0), ttpu_hlo_unary(b, TTPU_SIGN, d));
  ttpu_val sg = ttpu_hlo_reduce(b, sd, TTPU_RED_PROD, &last, 1);
  ttpu_val la = ttpu_hlo_reduce(b, ttpu_hlo_unary(b, TTPU_LOG, ttpu_hlo_unary(b, TTPU_ABS, d)), TTPU_RED_SUM,
                                &last, 1);
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, TTPU_MUL, sg, perm_sign(b, &f, ot)));
  ttpu_l_set_out(L, 1, la);
  ttpu_l_set_out(L, 2, f.lu);
  ttpu_l_set_out(L, 3, pivots_tensor(b, &f, ttpu_l_out_type(L, 3)));
  return NULL;
}

/* The strictly lower (lower) or upper-with-diagonal part of x, plus a
 * unit diagonal when unit. */
static ttpu_val tri_part(ttpu_hlo* b, ttpu_val x, int lower, int unit) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = *tp, ti = with_dtype(*tp, TTPU_I64);
  ttpu_val r = ttpu_hlo_iota(b, ti, t.ndim - 2), c = ttpu_hlo_iota(b, ti, t.ndim - 1);
  ttpu_val keep = ttpu_hlo_compare(b, lower ? TTPU_GT : TTPU_LE, r, c);
  x = ttpu_hlo_select(b, keep, x, kconst(b, t, 0));
  if (unit) x = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, r, c), kconst(b, t, 1), x);
  return x;
}

/* The first rows x cols block of x. */
static ttpu_val block(ttpu_hlo* b, ttpu_val x, int64_t rows, int64_t cols) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
  for (int d = 0; d < tp->ndim; ++d) hi[d] = tp->dims[d], st[d] = 1;
  hi[tp->ndim - 2] = rows;
  hi[tp->ndim - 1] = cols;
  return ttpu_hlo_slice(b, x, lo, hi, st);
}

/* P (batch..., m, m) of A = P L U from the swaps: P[perm[i], i] = 1 with
 * perm the swaps applied to 0..m-1. */
static ttpu_val perm_matrix(ttpu_hlo* b, const ttpu_val* piv, int k, ttpu_type tp_out) {
  ttpu_type tcol = tp_out; /* (batch..., m, 1): the identity permutation */
  tcol.dims[tcol.ndim - 1] = 1;
  tcol.dtype = TTPU_I64;
  ttpu_val perm = ttpu_hlo_iota(b, tcol, tcol.ndim - 2);
  perm = apply_swaps(b, perm, piv, k, 1);
  ttpu_type ti = with_dtype(tp_out, TTPU_I64);
  int64_t last = tcol.ndim - 1;
  ttpu_val pv = ttpu_hlo_reduce(b, perm, TTPU_RED_SUM, &last, 1); /* (batch..., m) */
  int nb = tp_out.ndim - 2;
  ttpu_val pcol = spread_vec(b, pv, ti, nb, nb + 1); /* perm[i] along columns */
  ttpu_val eq = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, nb), pcol);
  return ttpu_hlo_convert(b, eq, tp_out.dtype);
}

/* P, L, U of a factorization into outputs first..first+2; an output with
 * no elements (lu_unpack's unpack_* = False) is left empty. */
static void unpack_to(ttpu_lower* L, ttpu_val lu, const ttpu_val* piv, int k, int first) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type tp = ttpu_l_out_type(L, first), tl = ttpu_l_out_type(L, first + 1),
            tu = ttpu_l_out_type(L, first + 2);
  ttpu_val p = ttpu_type_numel(&tp) ? perm_matrix(b, piv, k, tp) : kconst(b, tp, 0);
  ttpu_val l = ttpu_type_numel(&tl)
                   ? tri_part(b, block(b, lu, tl.dims[tl.ndim - 2], tl.dims[tl.ndim - 1]), 1, 1)
                   : kconst(b, tl, 0);
  ttpu_val u = ttpu_type_numel(&tu)
                   ? tri_part(b, block(b, lu, tu.dims[tu.ndim - 2], tu.dims[tu.ndim - 1]), 0, 0)
                   : kconst(b, tu, 0);
  ttpu_l_set_out(L, first, p);
  ttpu_l_set_out(L, first + 1, l);
  ttpu_l_set_out(L, first + 2, u);
}

/* linalg_lu(A, *, pivot=True) -> (P, L, U) */
static ttpu_status* lower_linalg_lu(ttpu_lower* L) {
  ttpu_val a = ttpu_l_tensor(L, 0);
  if (!ttpu_mx_lapack_dtype(L, ttpu_l_type(L, a).dtype, "linalg_lu")) return NULL;
  if (!ttpu_l_bool(L, 1, 1))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  lu_fact f;
  if (!factor(L, a, &f)) return NULL;
  unpack_to(L, f.lu, f.piv, f.k, 0);
  return NULL;
}

/* lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True) */
static ttpu_status* lower_lu_unpack(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val lu = ttpu_l_tensor(L, 0), pv = ttpu_l_tensor(L, 1);
  ttpu_type tv = ttpu_l_type(L, pv);
  int k = (int)tv.dims[tv.ndim - 1];
  if (k > kMaxSteps) return ttpu_status_make(TTPU_UNIMPLEMENTED, "lu_unpack: matrix too large");
  ttpu_val piv[kMaxSteps];
  pivots_from(b, pv, k, piv);
  unpack_to(L, lu, piv, k, 0);
  return NULL;
}

/* Every lowering here serves complex matrices too. */
const ttpu_op_def ttpu_ops_lu[] = {
    {"linalg_lu_factor_ex", lower_lu_factor_ex, .variants = TTPU_V_OUT, .complex_fn = lower_lu_factor_ex},
    {"linalg_lu_solve", lower_lu_solve, .variants = TTPU_V_OUT, .complex_fn = lower_lu_solve},
    {"_linalg_solve_ex", lower_solve_ex, .complex_fn = lower_solve_ex},
    {"_linalg_solve_ex.result", lower_solve_ex, .complex_fn = lower_solve_ex},
    {"linalg_inv_ex", lower_inv_ex, .complex_fn = lower_inv_ex},
    {"linalg_inv_ex.inverse", lower_inv_ex, .complex_fn = lower_inv_ex},
    {"_linalg_det", lower_det, .complex_fn = lower_det},
    {"_linalg_det.result", lower_det, .complex_fn = lower_det},
    {"_linalg_slogdet", lower_slogdet, .complex_fn = lower_slogdet},
    {"_linalg_slogdet.sign", lower_slogdet, .complex_fn = lower_slogdet},
    {"linalg_lu", lower_linalg_lu, .variants = TTPU_V_OUT, .complex_fn = lower_linalg_lu},
    {"lu_unpack", lower_lu_unpack, .variants = TTPU_V_OUT, .complex_fn = lower_lu_unpack},
    {0},
};
