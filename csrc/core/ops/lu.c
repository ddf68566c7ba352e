/* lu.c - LU factorization with partial pivoting and what PyTorch builds on
 * it: solve, inverse, determinant, log-determinant, lu_solve, lu_unpack.
 *
 * StableHLO has no LU op, so the factorization is the textbook elimination
 * (getf2), one column per step of a stablehlo.while: the program holds one
 * step whatever the size, so compile time does not grow with n. Square
 * matrices of order 128 and more factor in panels of 32 columns (getrf's
 * blocking: getf2 on the panel, a triangular solve and one matrix product
 * for the rest), so a step touches a panel, not the whole matrix. Each step
 * picks the largest |pivot| (the first of equals, as LAPACK's getrf), swaps
 * it into place with masked selects (every batch element may pick a
 * different row), and updates the trailing matrix. Results follow LAPACK's
 * conventions: LU packed in one matrix, 1-based int32 pivots of sequential
 * row swaps, info = the first zero pivot (1-based) or 0. Solves use
 * stablehlo.triangular_solve; the row swaps become one permutation (a
 * loop over the swaps of an index vector) applied by a gather.
 * Complex matrices pivot on |re| + |im|, as LAPACK's izamax does, so the
 * pivots are the CPU's. */
#include "matrix.h"

typedef struct {
  ttpu_val lu;   /* (batch..., m, n) */
  ttpu_val piv;  /* (batch..., k) i64: the 0-based pivot row of each step */
  ttpu_val info; /* i64 (batch...) */
} lu_fact;

static ttpu_type with_dtype(ttpu_type t, ttpu_dtype dt) {
  t.dtype = dt;
  return t;
}

static ttpu_val kconst(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

static ttpu_type type_of(ttpu_hlo* b, ttpu_val v) {
  const ttpu_type* tp = ttpu_hlo_type(b, v);
  if (tp) return *tp;
  ttpu_type e = {TTPU_DTYPE_NONE, 0, {0}};
  return e;
}

/* t's leading nb dims (the batch) as a type of dtype dt. */
static ttpu_type batch_type(ttpu_type t, int nb, ttpu_dtype dt) {
  ttpu_type r = t;
  r.ndim = nb;
  r.dtype = dt;
  return r;
}

/* The mask "index along dim of t equals the 0-d i64 j". */
static ttpu_val at_index(ttpu_hlo* b, ttpu_type t, int dim, ttpu_val j) {
  ttpu_type ti = with_dtype(t, TTPU_I64);
  return ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, dim), ttpu_hlo_broadcast_to(b, j, ti.ndim, ti.dims));
}

/* The mask "index along dim of t `op` the 0-d i64 j". */
static ttpu_val cmp_index(ttpu_hlo* b, ttpu_type t, int dim, ttpu_cmp op, ttpu_val j) {
  ttpu_type ti = with_dtype(t, TTPU_I64);
  return ttpu_hlo_compare(b, op, ttpu_hlo_iota(b, ti, dim), ttpu_hlo_broadcast_to(b, j, ti.ndim, ti.dims));
}

/* Index j (a 0-d i64 value) of x along dim, that dim dropped. */
static ttpu_val pick(ttpu_hlo* b, ttpu_val x, int dim, ttpu_val j) {
  ttpu_type t = type_of(b, x);
  int64_t d = dim;
  return ttpu_hlo_reduce(b, ttpu_hlo_select(b, at_index(b, t, dim, j), x, kconst(b, t, 0)), TTPU_RED_SUM, &d, 1);
}

/* x (batch..., m, c) with rows j (0-d i64) and p (i64 batch...) swapped. */
static ttpu_val swap_rows(ttpu_hlo* b, ttpu_val x, ttpu_val j, ttpu_val p) {
  ttpu_type t = type_of(b, x);
  int nb = t.ndim - 2;
  ttpu_type ti = with_dtype(t, TTPU_I64);
  ttpu_val is_p = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, nb), ttpu_mx_spread(b, p, ti, nb));
  ttpu_val is_j = at_index(b, t, nb, j);
  int64_t rd = nb;
  ttpu_val zero = kconst(b, t, 0);
  ttpu_val rp = ttpu_hlo_reduce(b, ttpu_hlo_select(b, is_p, x, zero), TTPU_RED_SUM, &rd, 1);
  ttpu_val rj = pick(b, x, nb, j);
  ttpu_val r = ttpu_hlo_select(b, is_p, ttpu_mx_spread_vec(b, rj, t, nb, nb + 1), x);
  return ttpu_hlo_select(b, is_j, ttpu_mx_spread_vec(b, rp, t, nb, nb + 1), r);
}

/* What a getf2 loop works on: the matrices (or one panel of them) and
 * the order of the true matrix (rows past it are padding, whose zero
 * pivots are not the matrix's). */
typedef struct {
  ttpu_type t; /* (batch..., m, c) */
  int64_t n;
} getf2_ctx;

/* Step j of getf2 on columns of a matrix whose column j is the matrix's
 * row r = r0 + j (r0 = 0 for a whole matrix, the panel's first column in
 * a blocked factorization); state {a, piv (batch..., k) 0-based rows by
 * r, info, r0 (0-d i64)}. */
static void getf2_body(ttpu_hlo* b, void* ctx, ttpu_val j, const ttpu_val* st, ttpu_val* next) {
  const getf2_ctx* c = ctx;
  ttpu_type t = c->t;
  int nb = t.ndim - 2;
  ttpu_val a = st[0], piv = st[1], info = st[2], r0 = st[3];
  ttpu_val r = ttpu_hlo_binary(b, TTPU_ADD, r0, j);
  ttpu_type tb = batch_type(t, nb, TTPU_I64), tbf = batch_type(t, nb, t.dtype);
  ttpu_type tc = t; /* (batch..., m): a column */
  tc.ndim = nb + 1;
  ttpu_val col = pick(b, a, nb + 1, j);
  ttpu_val mag = ttpu_hlo_unary(b, TTPU_ABS, col);
  if (ttpu_dtype_is_complex(t.dtype))
    mag = ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_unary(b, TTPU_ABS, ttpu_hlo_real(b, col)),
                          ttpu_hlo_unary(b, TTPU_ABS, ttpu_hlo_imag(b, col)));
  ttpu_val cand = ttpu_hlo_select(b, cmp_index(b, tc, nb, TTPU_GE, r), mag,
                                  kconst(b, with_dtype(tc, ttpu_dtype_real(t.dtype)), -1));
  ttpu_val best, p;
  ttpu_hlo_reduce_arg(b, cand, nb, 1, &best, &p);
  p = ttpu_hlo_convert(b, p, TTPU_I64);
  ttpu_type tp = type_of(b, piv);
  next[1] = ttpu_hlo_select(b, at_index(b, tp, nb, r), ttpu_mx_spread(b, p, tp, nb), piv);
  a = swap_rows(b, a, r, p);
  ttpu_val rowr = pick(b, a, nb, r); /* (batch..., c) */
  ttpu_val pv = pick(b, rowr, nb, j);
  ttpu_val nz = ttpu_hlo_compare(b, TTPU_NE, pv, kconst(b, tbf, 0));
  ttpu_val in_matrix = ttpu_hlo_compare(b, TTPU_LT, r, ttpu_hlo_const_i(b, TTPU_I64, c->n));
  ttpu_val first_zero = ttpu_hlo_binary(b, TTPU_AND, ttpu_hlo_unary(b, TTPU_NOT, nz),
                                        ttpu_hlo_compare(b, TTPU_EQ, info, kconst(b, tb, 0)));
  first_zero = ttpu_hlo_binary(b, TTPU_AND, first_zero, ttpu_hlo_broadcast_to(b, in_matrix, tb.ndim, tb.dims));
  ttpu_val r1 = ttpu_hlo_binary(b, TTPU_ADD, r, ttpu_hlo_const_i(b, TTPU_I64, 1));
  next[2] = ttpu_hlo_select(b, first_zero, ttpu_hlo_broadcast_to(b, r1, tb.ndim, tb.dims), info);
  next[3] = r0;
  /* multipliers below the pivot (a zero pivot leaves the column as is,
   * as getf2 does) */
  ttpu_val cj = pick(b, a, nb + 1, j);
  ttpu_val scaled = ttpu_hlo_binary(b, TTPU_DIV, cj, ttpu_mx_spread(b, pv, tc, nb));
  ttpu_val l = ttpu_hlo_select(b, ttpu_mx_spread(b, nz, with_dtype(tc, TTPU_BOOL), nb), scaled, cj);
  ttpu_val below = cmp_index(b, t, nb, TTPU_GT, r);
  ttpu_val right = cmp_index(b, t, nb + 1, TTPU_GT, j);
  ttpu_val at_j = at_index(b, t, nb + 1, j);
  ttpu_val lb = ttpu_mx_spread_vec(b, l, t, nb, nb), ub = ttpu_mx_spread_vec(b, rowr, t, nb, nb + 1);
  ttpu_val upd = ttpu_hlo_binary(b, TTPU_MUL, lb, ub);
  a = ttpu_hlo_binary(b, TTPU_SUB, a,
                      ttpu_hlo_select(b, ttpu_hlo_binary(b, TTPU_AND, below, right), upd, kconst(b, t, 0)));
  next[0] = ttpu_hlo_select(b, ttpu_hlo_binary(b, TTPU_AND, below, at_j), lb, a);
}

static void swaps_body(ttpu_hlo* b, void* ctx, ttpu_val j, const ttpu_val* st, ttpu_val* next);

/* swaps_body at step r0 + j; state {perm, piv, r0}. */
static void swaps_from_body(ttpu_hlo* b, void* ctx, ttpu_val j, const ttpu_val* st, ttpu_val* next) {
  swaps_body(b, ctx, ttpu_hlo_binary(b, TTPU_ADD, st[2], j), st, next);
  next[2] = st[2];
}

static ttpu_val permute_rows(ttpu_hlo* b, ttpu_val x, ttpu_val perm);
static ttpu_val block(ttpu_hlo* b, ttpu_val x, int64_t rows, int64_t cols);

/* Blocked (right-looking) LU of square matrices, kPanel columns at a
 * time, as LAPACK's getrf: the panel (all rows, kPanel columns) by getf2,
 * its row swaps applied to the other columns, the block row right of it
 * by a triangular solve, and the trailing matrix updated by one matrix
 * product. Each step touches a panel instead of the whole matrix, so a
 * 616 x 616 factorization does about a tenth of the unblocked one's
 * elementwise work. The matrix is padded to a whole number of panels
 * with an identity block, whose rows never win a pivot search over the
 * matrix's columns (their entries there are zero). */
enum { kPanel = 32, kBlockedFrom = 128 };

typedef struct {
  ttpu_type t;  /* the padded matrices (batch..., np, np) */
  getf2_ctx panel;
} blocked_ctx;

static void panel_step_body(ttpu_hlo* b, void* ctx, ttpu_val q, const ttpu_val* st, ttpu_val* next) {
  const blocked_ctx* c = ctx;
  ttpu_type t = c->t;
  int nb = t.ndim - 2;
  int64_t np = t.dims[nb];
  ttpu_val a = st[0], piv = st[1], info = st[2];
  ttpu_val j0 = ttpu_hlo_binary(b, TTPU_MUL, q, ttpu_hlo_const_i(b, TTPU_I64, kPanel));
  ttpu_val zero = ttpu_hlo_const_i(b, TTPU_I64, 0);
  ttpu_val starts[TTPU_MAX_DIMS];
  int64_t sizes[TTPU_MAX_DIMS];
  for (int d = 0; d < nb; ++d) starts[d] = zero, sizes[d] = t.dims[d];
  /* the panel, factored */
  starts[nb] = zero, starts[nb + 1] = j0, sizes[nb] = np, sizes[nb + 1] = kPanel;
  ttpu_val panel = ttpu_hlo_dynamic_slice(b, a, starts, sizes);
  ttpu_val pin[4] = {panel, piv, info, j0}, pout[4];
  ttpu_mx_fori(b, kPanel, 0, pin, 4, getf2_body, (void*)&c->panel, pout);
  panel = pout[0];
  next[1] = pout[1];
  next[2] = pout[2];
  /* its swaps applied to every column, then the factored panel in place */
  ttpu_type tv = batch_type(t, nb + 1, TTPU_I64);
  ttpu_val sin[3] = {ttpu_hlo_iota(b, tv, nb), pout[1], j0}, sout[3];
  ttpu_mx_fori(b, kPanel, 0, sin, 3, swaps_from_body, NULL, sout);
  a = permute_rows(b, a, sout[0]);
  a = ttpu_hlo_dynamic_update_slice(b, a, panel, starts);
  /* the block row: L11 U12 = A12 */
  starts[nb] = j0, starts[nb + 1] = zero, sizes[nb] = kPanel, sizes[nb + 1] = np;
  ttpu_val row = ttpu_hlo_dynamic_slice(b, a, starts, sizes);
  ttpu_val l11s[TTPU_MAX_DIMS];
  int64_t l11z[TTPU_MAX_DIMS];
  for (int d = 0; d < nb; ++d) l11s[d] = zero, l11z[d] = t.dims[d];
  l11s[nb] = j0, l11s[nb + 1] = zero, l11z[nb] = kPanel, l11z[nb + 1] = kPanel;
  ttpu_val l11 = ttpu_hlo_dynamic_slice(b, panel, l11s, l11z);
  ttpu_val x = ttpu_hlo_triangular_solve(b, l11, row, 1, 1, 1, 0);
  ttpu_type tr = type_of(b, row);
  ttpu_val j1 = ttpu_hlo_binary(b, TTPU_ADD, j0, ttpu_hlo_const_i(b, TTPU_I64, kPanel));
  ttpu_val past = cmp_index(b, tr, nb + 1, TTPU_GE, j1);
  a = ttpu_hlo_dynamic_update_slice(b, a, ttpu_hlo_select(b, past, x, row), starts);
  /* the trailing matrix: A22 -= L21 U12 */
  ttpu_type tpn = type_of(b, panel);
  ttpu_val below = cmp_index(b, tpn, nb, TTPU_GE, j1);
  ttpu_val l21 = ttpu_hlo_select(b, below, panel, kconst(b, tpn, 0));
  ttpu_val u12 = ttpu_hlo_select(b, past, x, kconst(b, tr, 0));
  int64_t batch[TTPU_MAX_DIMS];
  for (int d = 0; d < nb; ++d) batch[d] = d;
  int64_t lc = nb + 1, rc = nb;
  ttpu_val prod = ttpu_hlo_dot_general(b, l21, u12, batch, batch, nb, &lc, &rc, 1, t.dtype, TTPU_PREC_HIGHEST);
  next[0] = ttpu_hlo_binary(b, TTPU_SUB, a, prod);
}

/* getrf of a square a (batch..., n, n), n >= kBlockedFrom, blocked. */
static int factor_blocked(ttpu_lower* L, ttpu_val a, ttpu_type t, lu_fact* f) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  int nb = t.ndim - 2;
  int64_t n = t.dims[nb], np = (n + kPanel - 1) / kPanel * kPanel;
  blocked_ctx c = {.t = t};
  c.t.dims[nb] = c.t.dims[nb + 1] = np;
  if (np != n) { /* diag(A, I) */
    int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS] = {0}, in[TTPU_MAX_DIMS] = {0};
    hi[nb] = hi[nb + 1] = np - n;
    a = ttpu_hlo_pad(b, a, kconst(b, batch_type(t, 0, t.dtype), 0), lo, hi, in);
    ttpu_type ti = with_dtype(c.t, TTPU_I64);
    ttpu_val r = ttpu_hlo_iota(b, ti, nb), col = ttpu_hlo_iota(b, ti, nb + 1);
    ttpu_val pad_diag = ttpu_hlo_binary(b, TTPU_AND, ttpu_hlo_compare(b, TTPU_EQ, r, col),
                                        ttpu_hlo_compare(b, TTPU_GE, r, kconst(b, ti, (double)n)));
    a = ttpu_hlo_select(b, pad_diag, kconst(b, c.t, 1), a);
  }
  c.panel.t = c.t;
  c.panel.t.dims[nb + 1] = kPanel;
  c.panel.n = n;
  ttpu_type tp = batch_type(c.t, nb + 1, TTPU_I64);
  ttpu_val init[3] = {a, kconst(b, tp, 0), kconst(b, batch_type(t, nb, TTPU_I64), 0)}, fin[3];
  ttpu_mx_fori(b, np / kPanel, 0, init, 3, panel_step_body, &c, fin);
  if (fin[0] == TTPU_VAL_ERROR) return 0;
  f->lu = fin[0];
  f->piv = fin[1];
  if (np != n) {
    f->lu = block(b, fin[0], n, n);
    int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
    for (int d = 0; d <= nb; ++d) hi[d] = tp.dims[d], st[d] = 1;
    hi[nb] = n;
    f->piv = ttpu_hlo_slice(b, fin[1], lo, hi, st);
  }
  f->info = fin[2];
  return 1;
}

/* getrf of a (batch..., m, n), float or complex. */
static int factor(ttpu_lower* L, ttpu_val a, lu_fact* f) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type t = ttpu_l_type(L, a);
  int nb = t.ndim - 2;
  int64_t m = t.dims[nb], n = t.dims[nb + 1];
  if (m == n && n >= kBlockedFrom) return factor_blocked(L, a, t, f);
  int64_t k = m < n ? m : n;
  ttpu_type tp = batch_type(t, nb + 1, TTPU_I64);
  tp.dims[nb] = k;
  getf2_ctx c = {t, m};
  ttpu_val init[4] = {a, kconst(b, tp, 0), kconst(b, batch_type(t, nb, TTPU_I64), 0), ttpu_hlo_const_i(b, TTPU_I64, 0)};
  ttpu_val fin[4];
  ttpu_mx_fori(b, k, 0, init, 4, getf2_body, &c, fin);
  f->lu = fin[0];
  f->piv = fin[1];
  f->info = fin[2];
  return fin[0] != TTPU_VAL_ERROR;
}

/* The 1-based int32 pivots tensor (batch..., k). */
static ttpu_val pivots_tensor(ttpu_hlo* b, const lu_fact* f, ttpu_type out) {
  ttpu_val p = ttpu_hlo_binary(b, TTPU_ADD, f->piv, kconst(b, type_of(b, f->piv), 1));
  return ttpu_hlo_convert(b, p, out.dtype);
}

/* Pivots (batch..., k) given as a tensor (1-based): 0-based i64. */
static ttpu_val pivots_from(ttpu_hlo* b, ttpu_val piv) {
  ttpu_val p64 = ttpu_hlo_convert(b, piv, TTPU_I64);
  return ttpu_hlo_binary(b, TTPU_SUB, p64, kconst(b, type_of(b, p64), 1));
}

/* Swap j of piv (batch..., k) applied to an index vector; state {perm
 * (batch..., m), piv}. */
static void swaps_body(ttpu_hlo* b, void* ctx, ttpu_val j, const ttpu_val* st, ttpu_val* next) {
  (void)ctx;
  ttpu_val perm = st[0], piv = st[1];
  ttpu_type tv = type_of(b, perm);
  int last = tv.ndim - 1;
  ttpu_val p = pick(b, piv, last, j); /* (batch...) */
  ttpu_val is_p = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, tv, last), ttpu_mx_spread(b, p, tv, last));
  int64_t d = last;
  ttpu_val vp = ttpu_hlo_reduce(b, ttpu_hlo_select(b, is_p, perm, kconst(b, tv, 0)), TTPU_RED_SUM, &d, 1);
  ttpu_val vj = pick(b, perm, last, j);
  ttpu_val r = ttpu_hlo_select(b, is_p, ttpu_mx_spread(b, vj, tv, last), perm);
  next[0] = ttpu_hlo_select(b, at_index(b, tv, last, j), ttpu_mx_spread(b, vp, tv, last), r);
  next[1] = piv;
}

/* perm (batch..., m) i64 such that x[perm] is x with the swaps of piv
 * (batch..., k) applied in order (forward) or in reverse order. */
static ttpu_val swaps_permutation(ttpu_hlo* b, ttpu_val piv, int64_t m, int forward) {
  ttpu_type tp = type_of(b, piv);
  ttpu_type tv = tp;
  tv.dims[tv.ndim - 1] = m;
  ttpu_val perm = ttpu_hlo_iota(b, tv, tv.ndim - 1);
  if (m == 0) return perm;
  ttpu_val init[2] = {perm, piv}, fin[2];
  ttpu_mx_fori(b, tp.dims[tp.ndim - 1], !forward, init, 2, swaps_body, NULL, fin);
  return fin[0];
}

/* x (batch..., m, c) with its rows taken in the order perm (batch...,
 * m): row i of the result is row perm[i] of x. One gather over the
 * batch flattened into the rows. */
static ttpu_val permute_rows(ttpu_hlo* b, ttpu_val x, ttpu_val perm) {
  ttpu_type t = type_of(b, x);
  if (t.dtype == TTPU_DTYPE_NONE || ttpu_type_numel(&t) == 0) return x;
  int nb = t.ndim - 2;
  int64_t m = t.dims[nb], rows = 1;
  for (int d = 0; d <= nb; ++d) rows *= t.dims[d];
  /* perm[i] + m * (flat batch index) */
  ttpu_type tf = ttpu_type_make(TTPU_I64, 1, &rows);
  ttpu_val flat = ttpu_hlo_reshape(b, perm, 1, &rows);
  ttpu_val base = ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_binary(b, TTPU_DIV, ttpu_hlo_iota(b, tf, 0), kconst(b, tf, (double)m)),
                                  kconst(b, tf, (double)m));
  int64_t x2[2] = {rows, t.dims[nb + 1]};
  ttpu_val g = ttpu_l_gather_dim(b, ttpu_hlo_reshape(b, x, 2, x2), 0, ttpu_hlo_binary(b, TTPU_ADD, flat, base));
  return ttpu_hlo_reshape(b, g, t.ndim, t.dims);
}

/* The row swaps of piv applied to x (batch..., m, c): forward (P^T x) or
 * backward (P x). */
static ttpu_val apply_swaps(ttpu_hlo* b, ttpu_val x, ttpu_val piv, int forward) {
  ttpu_type t = type_of(b, x);
  return permute_rows(b, x, swaps_permutation(b, piv, t.dims[t.ndim - 2], forward));
}

/* X with op(A) X = rhs from A's factorization, all of one batch shape:
 * op 0 is A, 1 A^T, 2 A^H (the triangular solves' transpose_a). */
static ttpu_val lu_solve_v(ttpu_hlo* b, ttpu_val lu, ttpu_val piv, ttpu_val rhs, int op) {
  if (!op) {
    ttpu_val y = apply_swaps(b, rhs, piv, 1);
    y = ttpu_hlo_triangular_solve(b, lu, y, 1, 1, 1, 0);
    return ttpu_hlo_triangular_solve(b, lu, y, 1, 0, 0, 0);
  }
  ttpu_val z = ttpu_hlo_triangular_solve(b, lu, rhs, 1, 0, 0, op);
  z = ttpu_hlo_triangular_solve(b, lu, z, 1, 1, 1, op);
  return apply_swaps(b, z, piv, 0);
}

/* left/adjoint forms of a solve through the factorization. */
static ttpu_val solve_any(ttpu_hlo* b, ttpu_val lu, ttpu_val piv, ttpu_val rhs,
                          int left, int adjoint) {
  const ttpu_type* tp = ttpu_hlo_type(b, lu);
  if (!tp) return TTPU_VAL_ERROR;
  int cx = ttpu_dtype_is_complex(tp->dtype);
  if (left) return lu_solve_v(b, lu, piv, rhs, adjoint ? (cx ? 2 : 1) : 0);
  /* X A = B  <=>  A^T X^T = B^T;  X A^H = B  <=>  A X^H = B^H */
  if (adjoint) return ttpu_mx_adjoint(b, lu_solve_v(b, lu, piv, ttpu_mx_adjoint(b, rhs), 0));
  return ttpu_mx_transpose(b, lu_solve_v(b, lu, piv, ttpu_mx_transpose(b, rhs), 1));
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

/* Pivots (batch..., k), 0-based i64, broadcast to a batch shape. */
static ttpu_val pivots_to_batch(ttpu_hlo* b, ttpu_val piv, ttpu_type like, int like_tail) {
  const ttpu_type* tp = ttpu_hlo_type(b, piv);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = like;
  t.ndim = like.ndim - like_tail + 1;
  t.dims[t.ndim - 1] = tp->dims[tp->ndim - 1];
  return ttpu_hlo_broadcast_to(b, piv, t.ndim, t.dims);
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
  ttpu_val piv = pivots_to_batch(b, pivots_from(b, ttpu_l_tensor(L, 1)), ot, 2);
  ttpu_val rhs = to_batch(b, ttpu_l_tensor(L, 2), ot, 2);
  ttpu_l_set_out(L, 0, solve_any(b, lu, piv, rhs, ttpu_l_bool(L, 3, 1), ttpu_l_bool(L, 4, 0)));
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
  /* the pivots of the factorization, broadcast to the solve's batch */
  ttpu_val piv = pivots_to_batch(b, f.piv, rt, 2);
  ttpu_val x = solve_any(b, lu, piv, rhs, left, 0);
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
  ttpu_l_set_out(L, 0, lu_solve_v(b, f.lu, f.piv, ttpu_mx_identity(b, ot), 0));
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
  ttpu_type tp = type_of(b, f->piv);
  if (tp.dtype == TTPU_DTYPE_NONE) return TTPU_VAL_ERROR;
  int64_t last = tp.ndim - 1;
  ttpu_val moved = ttpu_hlo_compare(b, TTPU_NE, f->piv, ttpu_hlo_iota(b, tp, tp.ndim - 1));
  ttpu_val swaps = ttpu_hlo_reduce(b, ttpu_hlo_convert(b, moved, TTPU_I64), TTPU_RED_SUM, &last, 1);
  ttpu_type tk = type_of(b, swaps);
  ttpu_val odd = ttpu_hlo_compare(b, TTPU_NE, ttpu_hlo_binary(b, TTPU_REM, swaps, kconst(b, tk, 2)), kconst(b, tk, 0));
  return ttpu_hlo_select(b, odd, kconst(b, tb, -1), kconst(b, tb, 1));
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
static ttpu_val perm_matrix(ttpu_hlo* b, ttpu_val piv, ttpu_type tp_out) {
  int nb = tp_out.ndim - 2;
  ttpu_val pv = swaps_permutation(b, piv, tp_out.dims[nb], 1); /* (batch..., m) */
  ttpu_type ti = with_dtype(tp_out, TTPU_I64);
  ttpu_val pcol = ttpu_mx_spread_vec(b, pv, ti, nb, nb + 1); /* perm[i] along columns */
  ttpu_val eq = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, nb), pcol);
  return ttpu_hlo_convert(b, eq, tp_out.dtype);
}

/* P, L, U of a factorization into outputs first..first+2; an output with
 * no elements (lu_unpack's unpack_* = False) is left empty. */
static void unpack_to(ttpu_lower* L, ttpu_val lu, ttpu_val piv, int first) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type tp = ttpu_l_out_type(L, first), tl = ttpu_l_out_type(L, first + 1),
            tu = ttpu_l_out_type(L, first + 2);
  ttpu_val p = ttpu_type_numel(&tp) ? perm_matrix(b, piv, tp) : kconst(b, tp, 0);
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
  unpack_to(L, f.lu, f.piv, 0);
  return NULL;
}

/* lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True) */
static ttpu_status* lower_lu_unpack(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val lu = ttpu_l_tensor(L, 0), pv = ttpu_l_tensor(L, 1);
  unpack_to(L, lu, pivots_from(b, pv), 0);
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
