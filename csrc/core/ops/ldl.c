/* ldl.c - the LDL^T (Bunch-Kaufman) factorization of symmetric and
 * Hermitian matrices and the solve through it: linalg_ldl_factor_ex and
 * linalg_ldl_solve, with LAPACK's sytrf/hetrf conventions so that the
 * factors and pivots are the CPU's.
 *
 * The factorization is LAPACK's unblocked sytf2 (hetf2) for the lower
 * triangle: at step k the diagonal entry is the pivot when it is large
 * enough against its column (alpha = (1 + sqrt 17) / 8), else the largest
 * entry of the column, imax, is swapped in as a 1x1 pivot or paired with k
 * as a 2x2 pivot; the trailing matrix takes the rank-1 or rank-2 update.
 * Each batch element steps through its columns at its own pace (a 2x2
 * pivot takes two columns), so the step index is a per-matrix value and
 * the loop runs n trips of one stablehlo.while, the program the same for
 * every n. The working matrix is kept whole (both triangles, mirrored from
 * the lower one after each update), so the symmetric interchanges of the
 * trailing block are a row and a column swap.
 *
 * The output follows LAPACK: L's columns below the diagonal, D's 1x1 and
 * 2x2 blocks on and just below it, the upper triangle zero (PyTorch copies
 * the lower triangle in before factoring); pivots 1-based, ipiv[k] = p for
 * a 1x1 pivot after swapping k and p, ipiv[k] = ipiv[k+1] = -p for a 2x2
 * block after swapping k+1 and p; info the first zero pivot (1-based). The
 * solve is sytrs/hetrs: L D Y = P B forward, then L^T X = Y backward, each
 * a loop over the blocks. */
#include <math.h>

#include "matrix.h"

typedef struct {
  ttpu_type t; /* the matrices (batch..., n, n), or the right-hand sides (batch..., n, r) */
  int nb;      /* batch dims */
  int64_t n;
  int herm;    /* Hermitian (conjugates; real diagonal), else symmetric */
  int cx;      /* complex dtype */
  ttpu_val ld; /* ldl_solve: the factors (batch..., n, n) */
  ttpu_val piv; /* ldl_solve: the pivots (batch..., n) i64 */
} ldl_ctx;

static ttpu_val bin(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, op, x, y);
}

static ttpu_type ty(ttpu_hlo* b, ttpu_val v) {
  const ttpu_type* tp = ttpu_hlo_type(b, v);
  if (tp) return *tp;
  ttpu_type e = {TTPU_DTYPE_NONE, 0, {0}};
  return e;
}

static ttpu_type as(ttpu_type t, ttpu_dtype dt) {
  t.dtype = dt;
  return t;
}

static ttpu_val kf(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

/* The mask "index along dim of t `op` k", k an i64 (batch...). */
static ttpu_val idx_cmp(ttpu_hlo* b, ttpu_type t, int nb, int dim, ttpu_cmp op, ttpu_val k) {
  ttpu_type ti = as(t, TTPU_I64);
  return ttpu_hlo_compare(b, op, ttpu_hlo_iota(b, ti, dim), ttpu_mx_spread(b, k, ti, nb));
}

/* Entry k (i64 batch...) of x along dim, that dim dropped. */
static ttpu_val take(ttpu_hlo* b, ttpu_val x, int nb, int dim, ttpu_val k) {
  ttpu_type t = ty(b, x);
  int64_t d = dim;
  return ttpu_hlo_reduce(b, ttpu_hlo_select(b, idx_cmp(b, t, nb, dim, TTPU_EQ, k), x, kf(b, t, 0)), TTPU_RED_SUM, &d,
                         1);
}

/* x (batch..., m, c) with rows r and p (i64 batch...) swapped, only in the
 * columns where `cols` (bool (batch..., m, c) or TTPU_VAL_ERROR for all) holds. */
static ttpu_val swap_rows(ttpu_hlo* b, ttpu_val x, int nb, ttpu_val r, ttpu_val p, ttpu_val cols) {
  ttpu_type t = ty(b, x);
  ttpu_val xr = take(b, x, nb, nb, r), xp = take(b, x, nb, nb, p);
  ttpu_val is_r = idx_cmp(b, t, nb, nb, TTPU_EQ, r), is_p = idx_cmp(b, t, nb, nb, TTPU_EQ, p);
  if (cols != TTPU_VAL_ERROR) {
    is_r = bin(b, TTPU_AND, is_r, cols);
    is_p = bin(b, TTPU_AND, is_p, cols);
  }
  ttpu_val y = ttpu_hlo_select(b, is_p, ttpu_mx_spread_vec(b, xr, t, nb, nb + 1), x);
  return ttpu_hlo_select(b, is_r, ttpu_mx_spread_vec(b, xp, t, nb, nb + 1), y);
}

/* |re| + |im| (LAPACK's cabs1, which its pivot searches use), or |x|. */
static ttpu_val cabs1(ttpu_hlo* b, ttpu_val x) {
  if (!ttpu_dtype_is_complex(ty(b, x).dtype)) return ttpu_hlo_unary(b, TTPU_ABS, x);
  return bin(b, TTPU_ADD, ttpu_hlo_unary(b, TTPU_ABS, ttpu_hlo_real(b, x)),
             ttpu_hlo_unary(b, TTPU_ABS, ttpu_hlo_imag(b, x)));
}

static ttpu_val conj_if(ttpu_hlo* b, ttpu_val x, int on) {
  return on ? ttpu_mx_conj(b, x) : x;
}

/* re(x) back in x's dtype (a Hermitian matrix's diagonal entries). */
static ttpu_val real_part(ttpu_hlo* b, ttpu_val x) {
  ttpu_type t = ty(b, x);
  if (!ttpu_dtype_is_complex(t.dtype)) return x;
  return ttpu_hlo_convert(b, ttpu_hlo_real(b, x), t.dtype);
}

/* The whole matrix from its lower triangle: the upper one mirrored
 * (conjugated when Hermitian, whose diagonal is taken real). */
static ttpu_val mirror_lower(ttpu_hlo* b, ttpu_val s, int nb, int herm) {
  ttpu_type t = ty(b, s), ti = as(t, TTPU_I64);
  ttpu_val r = ttpu_hlo_iota(b, ti, nb), c = ttpu_hlo_iota(b, ti, nb + 1);
  ttpu_val m = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GE, r, c), s,
                               herm ? ttpu_mx_adjoint(b, s) : ttpu_mx_transpose(b, s));
  if (herm && ttpu_dtype_is_complex(t.dtype))
    m = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, r, c), real_part(b, m), m);
  return m;
}

/* One step of sytf2/hetf2 for every matrix whose next column k is < n;
 * state {S (batch..., n, n), piv (batch..., n) i64, info (batch...) i32,
 * k (batch...) i64}. */
static void factor_body(ttpu_hlo* b, void* ctx, ttpu_val j, const ttpu_val* st, ttpu_val* next) {
  (void)j;
  const ldl_ctx* c = ctx;
  ttpu_type t = c->t;
  int nb = c->nb, herm = c->herm && c->cx;
  int64_t n = c->n;
  ttpu_val s = st[0], piv = st[1], info = st[2], k = st[3];
  ttpu_type tb = ty(b, k), tv = t; /* (batch...) i64; (batch..., n) */
  tv.ndim = nb + 1;
  ttpu_type tr = as(t, ttpu_dtype_real(t.dtype)), tvr = as(tv, tr.dtype), tbr = as(tb, tr.dtype);
  ttpu_val active = ttpu_hlo_compare(b, TTPU_LT, k, kf(b, tb, (double)n));
  ttpu_val kc = ttpu_hlo_select(b, active, k, kf(b, tb, (double)(n - 1)));
  ttpu_val one = kf(b, tb, 1);

  /* the pivot search */
  ttpu_val col = take(b, s, nb, nb + 1, kc); /* column k (batch..., n) */
  ttpu_val akk = take(b, col, nb, nb, kc);
  ttpu_val absakk = herm ? ttpu_hlo_unary(b, TTPU_ABS, ttpu_hlo_real(b, akk)) : cabs1(b, akk);
  ttpu_val neg1 = kf(b, tvr, -1);
  ttpu_val below = idx_cmp(b, tv, nb, nb, TTPU_GT, kc);
  ttpu_val colmax, imax;
  ttpu_hlo_reduce_arg(b, ttpu_hlo_select(b, below, cabs1(b, col), neg1), nb, 1, &colmax, &imax);
  ttpu_val zr = kf(b, tbr, 0);
  colmax = bin(b, TTPU_MAX, colmax, zr); /* k = n - 1: no entries below */
  ttpu_val row = take(b, s, nb, nb, imax); /* row imax: the entries of its column and row past k */
  ttpu_val others = bin(b, TTPU_AND, idx_cmp(b, tv, nb, nb, TTPU_GE, kc), idx_cmp(b, tv, nb, nb, TTPU_NE, imax));
  int64_t last = nb;
  ttpu_val rowmax = ttpu_hlo_reduce(b, ttpu_hlo_select(b, others, cabs1(b, row), kf(b, tvr, 0)), TTPU_RED_MAX,
                                    &last, 1);
  ttpu_val aii = take(b, row, nb, nb, imax);
  ttpu_val absaii = herm ? ttpu_hlo_unary(b, TTPU_ABS, ttpu_hlo_real(b, aii)) : cabs1(b, aii);
  ttpu_val alpha = kf(b, tbr, (1.0 + sqrt(17.0)) / 8.0);
  ttpu_val acol = bin(b, TTPU_MUL, alpha, colmax);
  ttpu_val zero = bin(b, TTPU_OR, ttpu_hlo_compare(b, TTPU_EQ, bin(b, TTPU_MAX, absakk, colmax), zr),
                      ttpu_hlo_compare(b, TTPU_NE, absakk, absakk));
  ttpu_val c1 = ttpu_hlo_compare(b, TTPU_GE, absakk, acol);
  ttpu_val c2 = ttpu_hlo_compare(b, TTPU_GE, absakk, bin(b, TTPU_MUL, acol, bin(b, TTPU_DIV, colmax, rowmax)));
  ttpu_val c3 = ttpu_hlo_compare(b, TTPU_GE, absaii, bin(b, TTPU_MUL, alpha, rowmax));
  ttpu_val keep = bin(b, TTPU_OR, zero, bin(b, TTPU_OR, c1, c2));
  ttpu_val two = bin(b, TTPU_AND, ttpu_hlo_unary(b, TTPU_NOT, keep), ttpu_hlo_unary(b, TTPU_NOT, c3));
  ttpu_val kp = ttpu_hlo_select(b, keep, kc, imax);
  ttpu_val kk = ttpu_hlo_select(b, two, bin(b, TTPU_ADD, kc, one), kc);

  /* interchange kk and kp in the trailing block (rows and columns >= k) */
  ttpu_val trail_c = idx_cmp(b, t, nb, nb + 1, TTPU_GE, kc), trail_r = idx_cmp(b, t, nb, nb, TTPU_GE, kc);
  ttpu_val s2 = swap_rows(b, s, nb, kk, kp, trail_c);
  s2 = ttpu_mx_transpose(b, swap_rows(b, ttpu_mx_transpose(b, s2), nb, kk, kp, ttpu_mx_transpose(b, trail_r)));

  /* the 1x1 update: S -= x d^-1 x^T (x^H), column k <- x / d */
  ttpu_val x = take(b, s2, nb, nb + 1, kc);
  ttpu_val d = take(b, x, nb, nb, kc);
  if (herm) d = real_part(b, d);
  ttpu_val d11 = bin(b, TTPU_DIV, kf(b, ty(b, d), 1), d);
  ttpu_val xv = ttpu_mx_spread_vec(b, x, t, nb, nb); /* x(i) along the rows */
  ttpu_val xj = ttpu_mx_spread_vec(b, conj_if(b, x, herm), t, nb, nb + 1);
  ttpu_val d11m = ttpu_mx_spread(b, d11, t, nb);
  ttpu_val after_r = idx_cmp(b, t, nb, nb, TTPU_GT, kc), after_c = idx_cmp(b, t, nb, nb + 1, TTPU_GT, kc);
  ttpu_val at_c = idx_cmp(b, t, nb, nb + 1, TTPU_EQ, kc);
  ttpu_val in1 = bin(b, TTPU_AND, after_r, after_c);
  ttpu_val s1 = ttpu_hlo_select(b, in1, bin(b, TTPU_SUB, s2, bin(b, TTPU_MUL, xv, bin(b, TTPU_MUL, d11m, xj))), s2);
  s1 = ttpu_hlo_select(b, bin(b, TTPU_AND, after_r, at_c), bin(b, TTPU_MUL, xv, d11m), s1);

  /* the 2x2 update over rows and columns >= k + 2 */
  ttpu_val k1 = bin(b, TTPU_MIN, bin(b, TTPU_ADD, kc, one), kf(b, tb, (double)(n - 1)));
  ttpu_val ck = x, ck1 = take(b, s2, nb, nb + 1, k1);
  ttpu_val d21 = take(b, ck, nb, nb, k1), akk2 = take(b, ck, nb, nb, kc), ak1 = take(b, ck1, nb, nb, k1);
  ttpu_type tbd = ty(b, d21);
  ttpu_val wk, wkp1;
  if (herm) {
    ttpu_val dabs = ttpu_hlo_convert(b, ttpu_hlo_unary(b, TTPU_ABS, d21), t.dtype);
    ttpu_val e11 = bin(b, TTPU_DIV, real_part(b, ak1), dabs), e22 = bin(b, TTPU_DIV, real_part(b, akk2), dabs);
    ttpu_val tt = bin(b, TTPU_DIV, kf(b, tbd, 1), bin(b, TTPU_SUB, bin(b, TTPU_MUL, e11, e22), kf(b, tbd, 1)));
    ttpu_val dn = bin(b, TTPU_DIV, d21, dabs), dd = bin(b, TTPU_DIV, tt, dabs);
    ttpu_val e11v = ttpu_mx_spread(b, e11, tv, nb), e22v = ttpu_mx_spread(b, e22, tv, nb);
    ttpu_val dnv = ttpu_mx_spread(b, dn, tv, nb),
             ddv = ttpu_mx_spread(b, dd, tv, nb);
    wk = bin(b, TTPU_MUL, ddv, bin(b, TTPU_SUB, bin(b, TTPU_MUL, e11v, ck), bin(b, TTPU_MUL, dnv, ck1)));
    wkp1 = bin(b, TTPU_MUL, ddv,
               bin(b, TTPU_SUB, bin(b, TTPU_MUL, e22v, ck1), bin(b, TTPU_MUL, ttpu_mx_conj(b, dnv), ck)));
  } else {
    ttpu_val e11 = bin(b, TTPU_DIV, ak1, d21), e22 = bin(b, TTPU_DIV, akk2, d21);
    ttpu_val tt = bin(b, TTPU_DIV, kf(b, tbd, 1), bin(b, TTPU_SUB, bin(b, TTPU_MUL, e11, e22), kf(b, tbd, 1)));
    ttpu_val f = bin(b, TTPU_DIV, tt, d21);
    ttpu_val e11v = ttpu_mx_spread(b, e11, tv, nb), e22v = ttpu_mx_spread(b, e22, tv, nb);
    ttpu_val fv = ttpu_mx_spread(b, f, tv, nb);
    wk = bin(b, TTPU_MUL, fv, bin(b, TTPU_SUB, bin(b, TTPU_MUL, e11v, ck), ck1));
    wkp1 = bin(b, TTPU_MUL, fv, bin(b, TTPU_SUB, bin(b, TTPU_MUL, e22v, ck1), ck));
  }
  ttpu_val k2 = bin(b, TTPU_ADD, kc, kf(b, tb, 2));
  ttpu_val past_r = idx_cmp(b, t, nb, nb, TTPU_GE, k2), past_c = idx_cmp(b, t, nb, nb + 1, TTPU_GE, k2);
  ttpu_val wkj = ttpu_mx_spread_vec(b, conj_if(b, wk, herm), t, nb, nb + 1);
  ttpu_val wk1j = ttpu_mx_spread_vec(b, conj_if(b, wkp1, herm), t, nb, nb + 1);
  ttpu_val u = bin(b, TTPU_ADD, bin(b, TTPU_MUL, ttpu_mx_spread_vec(b, ck, t, nb, nb), wkj),
                   bin(b, TTPU_MUL, ttpu_mx_spread_vec(b, ck1, t, nb, nb), wk1j));
  ttpu_val sw = ttpu_hlo_select(b, bin(b, TTPU_AND, past_r, past_c), bin(b, TTPU_SUB, s2, u), s2);
  sw = ttpu_hlo_select(b, bin(b, TTPU_AND, past_r, at_c), ttpu_mx_spread_vec(b, wk, t, nb, nb), sw);
  sw = ttpu_hlo_select(b, bin(b, TTPU_AND, past_r, idx_cmp(b, t, nb, nb + 1, TTPU_EQ, k1)),
                       ttpu_mx_spread_vec(b, wkp1, t, nb, nb), sw);

  ttpu_val twom = ttpu_mx_spread(b, two, as(t, TTPU_BOOL), nb), zerom = ttpu_mx_spread(b, zero, as(t, TTPU_BOOL), nb);
  ttpu_val sn = ttpu_hlo_select(b, zerom, s2, ttpu_hlo_select(b, twom, sw, s1));
  sn = mirror_lower(b, sn, nb, herm);
  next[0] = ttpu_hlo_select(b, ttpu_mx_spread(b, active, as(t, TTPU_BOOL), nb), sn, s);

  /* pivots: kp + 1 at k for a 1x1 block; -(kp + 1) at k and k + 1 for a 2x2 */
  ttpu_val p1 = bin(b, TTPU_ADD, kp, one);
  ttpu_val pv = ttpu_hlo_select(b, two, ttpu_hlo_unary(b, TTPU_NEG, p1), p1);
  ttpu_type tp = ty(b, piv);
  ttpu_val pvv = ttpu_mx_spread(b, pv, tp, nb);
  ttpu_val atk = idx_cmp(b, tp, nb, nb, TTPU_EQ, kc);
  ttpu_val atk1 = bin(b, TTPU_AND, idx_cmp(b, tp, nb, nb, TTPU_EQ, bin(b, TTPU_ADD, kc, one)),
                      ttpu_mx_spread(b, two, as(tp, TTPU_BOOL), nb));
  ttpu_val pn = ttpu_hlo_select(b, bin(b, TTPU_OR, atk, atk1), pvv, piv);
  next[1] = ttpu_hlo_select(b, ttpu_mx_spread(b, active, as(tp, TTPU_BOOL), nb), pn, piv);

  ttpu_type ti = ty(b, info);
  ttpu_val first = bin(b, TTPU_AND, bin(b, TTPU_AND, active, zero), ttpu_hlo_compare(b, TTPU_EQ, info, kf(b, ti, 0)));
  next[2] = ttpu_hlo_select(b, first, ttpu_hlo_convert(b, bin(b, TTPU_ADD, kc, one), TTPU_I32), info);
  next[3] = ttpu_hlo_select(b, active, bin(b, TTPU_ADD, kc, ttpu_hlo_select(b, two, kf(b, tb, 2), one)), k);
}

/* linalg_ldl_factor_ex(self, *, hermitian=False, check_errors=False) -> (LD, pivots, info) */
static ttpu_status* lower_ldl_factor_ex(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val a = ttpu_l_tensor(L, 0);
  ldl_ctx c = {.t = ttpu_l_type(L, a)};
  if (!ttpu_mx_lapack_dtype(L, c.t.dtype, "ldl_factor_kernel_cpu")) return NULL;
  c.nb = c.t.ndim - 2;
  c.n = c.t.dims[c.t.ndim - 1];
  c.cx = ttpu_dtype_is_complex(c.t.dtype);
  c.herm = ttpu_l_bool(L, 1, 0);
  ttpu_type tb = as(c.t, TTPU_I64), tp = as(c.t, TTPU_I64);
  tb.ndim = c.nb;
  tp.ndim = c.nb + 1;
  ttpu_val init[4] = {mirror_lower(b, a, c.nb, c.herm && c.cx), kf(b, tp, 0), kf(b, as(tb, TTPU_I32), 0),
                      kf(b, tb, 0)};
  ttpu_val fin[4];
  ttpu_mx_fori(b, c.n, 0, init, 4, factor_body, &c, fin);
  if (fin[0] == TTPU_VAL_ERROR) return NULL;
  ttpu_type ti = as(c.t, TTPU_I64);
  ttpu_val lowerm = ttpu_hlo_compare(b, TTPU_GE, ttpu_hlo_iota(b, ti, c.nb), ttpu_hlo_iota(b, ti, c.nb + 1));
  if (ttpu_l_bool(L, 2, 0))
    ttpu_mx_check_info(L, fin[2], "torch.linalg.ldl_factor_ex", "Unknown error code: %lld.");
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, lowerm, fin[0], kf(b, c.t, 0)));
  ttpu_l_set_out(L, 1, ttpu_hlo_convert(b, fin[1], ttpu_l_out_type(L, 1).dtype));
  ttpu_l_set_out(L, 2, fin[2]);
  return NULL;
}

/* Pivot entry k of the pivots as (0-based row, 1x1 block?). */
static void pivot_at(ttpu_hlo* b, const ldl_ctx* c, ttpu_val k, ttpu_val* row, ttpu_val* one_block) {
  ttpu_val p = take(b, c->piv, c->nb, c->nb, k);
  ttpu_type tb = ty(b, p);
  *one_block = ttpu_hlo_compare(b, TTPU_GT, p, kf(b, tb, 0));
  ttpu_val r = ttpu_hlo_select(b, *one_block, bin(b, TTPU_SUB, p, kf(b, tb, 1)),
                               bin(b, TTPU_SUB, ttpu_hlo_unary(b, TTPU_NEG, p), kf(b, tb, 1)));
  *row = ttpu_hlo_clamp(b, kf(b, tb, 0), r, kf(b, tb, (double)(c->n - 1))); /* pivots not from a factorization */
}

/* Column k of the factors, kept in rows past `from` (i64 batch...). */
static ttpu_val l_column(ttpu_hlo* b, const ldl_ctx* c, ttpu_val k, ttpu_val from) {
  ttpu_val col = take(b, c->ld, c->nb, c->nb + 1, k);
  ttpu_type tv = ty(b, col);
  return ttpu_hlo_select(b, idx_cmp(b, tv, c->nb, c->nb, TTPU_GT, from), col, kf(b, tv, 0));
}

/* x (batch..., n, r) less the outer product of col (batch..., n) and row
 * (batch..., r): one rank-1 update of the right-hand sides. */
static ttpu_val less_outer(ttpu_hlo* b, ttpu_val x, ttpu_val col, ttpu_val row, int nb) {
  ttpu_type t = ty(b, x);
  ttpu_val c = ttpu_mx_spread_vec(b, col, t, nb, nb), r = ttpu_mx_spread_vec(b, row, t, nb, nb + 1);
  return bin(b, TTPU_SUB, x, bin(b, TTPU_MUL, c, r));
}

/* Forward: L D Y = P B, one block per trip; state {X (batch..., n, r), k}. */
static void forward_body(ttpu_hlo* b, void* ctx, ttpu_val j, const ttpu_val* st, ttpu_val* next) {
  (void)j;
  const ldl_ctx* c = ctx;
  int nb = c->nb, herm = c->herm && c->cx;
  ttpu_type t = c->t, tb = ty(b, st[1]);
  ttpu_val x = st[0], k = st[1], one = kf(b, tb, 1), last = kf(b, tb, (double)(c->n - 1));
  ttpu_val active = ttpu_hlo_compare(b, TTPU_LT, k, kf(b, tb, (double)c->n));
  ttpu_val kc = bin(b, TTPU_MIN, k, last), k1 = bin(b, TTPU_MIN, bin(b, TTPU_ADD, kc, one), last);
  ttpu_val kp, is1;
  pivot_at(b, c, kc, &kp, &is1);
  x = swap_rows(b, x, nb, ttpu_hlo_select(b, is1, kc, k1), kp, TTPU_VAL_ERROR);
  ttpu_val xk = take(b, x, nb, nb, kc), xk1 = take(b, x, nb, nb, k1); /* (batch..., r) */
  /* 1x1: rows past k less L(:,k) x_k; x_k / d */
  ttpu_val lk = l_column(b, c, kc, kc);
  ttpu_val y1 = less_outer(b, x, lk, xk, nb);
  ttpu_val d = take(b, take(b, c->ld, nb, nb + 1, kc), nb, nb, kc);
  if (herm) d = real_part(b, d);
  ttpu_val xs = bin(b, TTPU_MUL, xk, ttpu_mx_spread(b, bin(b, TTPU_DIV, kf(b, ty(b, d), 1), d), ty(b, xk), nb));
  ttpu_val atk = idx_cmp(b, t, nb, nb, TTPU_EQ, kc);
  y1 = ttpu_hlo_select(b, atk, ttpu_mx_spread_vec(b, xs, t, nb, nb + 1), y1);
  /* 2x2: rows past k + 1 less L(:,k) x_k, then less L(:,k+1) x_k+1; the block solved */
  ttpu_val lk2 = l_column(b, c, kc, k1), lk12 = l_column(b, c, k1, k1);
  ttpu_val y2 = less_outer(b, less_outer(b, x, lk2, xk, nb), lk12, xk1, nb);
  ttpu_val colk = take(b, c->ld, nb, nb + 1, kc);
  ttpu_val e = take(b, colk, nb, nb, k1), akk = take(b, colk, nb, nb, kc);
  ttpu_val ak1 = take(b, take(b, c->ld, nb, nb + 1, k1), nb, nb, k1);
  ttpu_val ec = conj_if(b, e, herm);
  ttpu_val am1 = bin(b, TTPU_DIV, akk, ec), a0 = bin(b, TTPU_DIV, ak1, e);
  ttpu_type tbd = ty(b, e), tr = ty(b, xk);
  ttpu_val den = bin(b, TTPU_SUB, bin(b, TTPU_MUL, am1, a0), kf(b, tbd, 1));
  ttpu_val bm1 = bin(b, TTPU_DIV, xk, ttpu_mx_spread(b, ec, tr, nb));
  ttpu_val bk = bin(b, TTPU_DIV, xk1, ttpu_mx_spread(b, e, tr, nb));
  ttpu_val a0v = ttpu_mx_spread(b, a0, tr, nb), am1v = ttpu_mx_spread(b, am1, tr, nb);
  ttpu_val denv = ttpu_mx_spread(b, den, tr, nb);
  ttpu_val nk = bin(b, TTPU_DIV, bin(b, TTPU_SUB, bin(b, TTPU_MUL, a0v, bm1), bk), denv);
  ttpu_val nk1 = bin(b, TTPU_DIV, bin(b, TTPU_SUB, bin(b, TTPU_MUL, am1v, bk), bm1), denv);
  y2 = ttpu_hlo_select(b, atk, ttpu_mx_spread_vec(b, nk, t, nb, nb + 1), y2);
  y2 = ttpu_hlo_select(b, idx_cmp(b, t, nb, nb, TTPU_EQ, k1), ttpu_mx_spread_vec(b, nk1, t, nb, nb + 1), y2);
  ttpu_val y = ttpu_hlo_select(b, ttpu_mx_spread(b, is1, as(t, TTPU_BOOL), nb), y1, y2);
  next[0] = ttpu_hlo_select(b, ttpu_mx_spread(b, active, as(t, TTPU_BOOL), nb), y, st[0]);
  next[1] = ttpu_hlo_select(b, active, bin(b, TTPU_ADD, kc, ttpu_hlo_select(b, is1, one, kf(b, tb, 2))), k);
}

/* Backward: L^T X = Y (L^H when Hermitian), then the swaps undone, one
 * block per trip from the last; state {X, k}. */
static void backward_body(ttpu_hlo* b, void* ctx, ttpu_val j, const ttpu_val* st, ttpu_val* next) {
  (void)j;
  const ldl_ctx* c = ctx;
  int nb = c->nb, herm = c->herm && c->cx;
  ttpu_type t = c->t, tb = ty(b, st[1]);
  ttpu_val x = st[0], k = st[1], zero = kf(b, tb, 0), one = kf(b, tb, 1);
  ttpu_val active = ttpu_hlo_compare(b, TTPU_GE, k, zero);
  ttpu_val kc = bin(b, TTPU_MAX, k, zero), km1 = bin(b, TTPU_MAX, bin(b, TTPU_SUB, kc, one), zero);
  ttpu_val kp, is1;
  pivot_at(b, c, kc, &kp, &is1);
  int64_t rd = nb;
  ttpu_val lk = conj_if(b, l_column(b, c, kc, kc), herm);
  ttpu_val sk = ttpu_hlo_reduce(b, bin(b, TTPU_MUL, ttpu_mx_spread_vec(b, lk, t, nb, nb), x), TTPU_RED_SUM, &rd, 1);
  ttpu_val lm = conj_if(b, l_column(b, c, km1, kc), herm);
  ttpu_val sm = ttpu_hlo_reduce(b, bin(b, TTPU_MUL, ttpu_mx_spread_vec(b, lm, t, nb, nb), x), TTPU_RED_SUM, &rd, 1);
  ttpu_val y = ttpu_hlo_select(b, idx_cmp(b, t, nb, nb, TTPU_EQ, kc),
                               bin(b, TTPU_SUB, x, ttpu_mx_spread_vec(b, sk, t, nb, nb + 1)), x);
  ttpu_val atm = bin(b, TTPU_AND, idx_cmp(b, t, nb, nb, TTPU_EQ, km1),
                     ttpu_mx_spread(b, ttpu_hlo_unary(b, TTPU_NOT, is1), as(t, TTPU_BOOL), nb));
  y = ttpu_hlo_select(b, atm, bin(b, TTPU_SUB, y, ttpu_mx_spread_vec(b, sm, t, nb, nb + 1)), y);
  y = swap_rows(b, y, nb, kc, kp, TTPU_VAL_ERROR);
  next[0] = ttpu_hlo_select(b, ttpu_mx_spread(b, active, as(t, TTPU_BOOL), nb), y, x);
  next[1] = ttpu_hlo_select(b, active, bin(b, TTPU_SUB, kc, ttpu_hlo_select(b, is1, one, kf(b, tb, 2))), k);
}

/* x (batch..., r, c) broadcast to the batch dims of `like` (batch'..., *, *) */
static ttpu_val to_batch(ttpu_hlo* b, ttpu_val x, ttpu_type like, int tail) {
  ttpu_type tx = ty(b, x), t = like;
  t.ndim = like.ndim - 2 + tail;
  for (int i = 0; i < tail; ++i) t.dims[t.ndim - tail + i] = tx.dims[tx.ndim - tail + i];
  return ttpu_hlo_broadcast_to(b, x, t.ndim, t.dims);
}

/* linalg_ldl_solve(LD, pivots, B, *, hermitian=False) */
static ttpu_status* lower_ldl_solve(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!ttpu_mx_lapack_dtype(L, ot.dtype, "ldl_solve_kernel_cpu")) return NULL;
  ldl_ctx c = {.t = ot, .nb = ot.ndim - 2, .n = ot.dims[ot.ndim - 2]};
  c.cx = ttpu_dtype_is_complex(ot.dtype);
  c.herm = ttpu_l_bool(L, 3, 0);
  c.ld = to_batch(b, ttpu_l_tensor(L, 0), ot, 2);
  c.piv = to_batch(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 1), TTPU_I64), ot, 1);
  ttpu_val x = to_batch(b, ttpu_l_tensor(L, 2), ot, 2);
  if (c.n == 0 || ttpu_type_numel(&ot) == 0) {
    ttpu_l_set_out(L, 0, x);
    return NULL;
  }
  ttpu_type tb = as(ot, TTPU_I64);
  tb.ndim = c.nb;
  ttpu_val init[2] = {x, kf(b, tb, 0)}, fin[2];
  ttpu_mx_fori(b, c.n, 0, init, 2, forward_body, &c, fin);
  init[0] = fin[0];
  init[1] = kf(b, tb, (double)(c.n - 1));
  ttpu_mx_fori(b, c.n, 0, init, 2, backward_body, &c, fin);
  ttpu_l_set_out(L, 0, fin[0]);
  return NULL;
}

/* Every lowering here serves complex matrices too. */
const ttpu_op_def ttpu_ops_ldl[] = {
    {"linalg_ldl_factor_ex", lower_ldl_factor_ex, .variants = TTPU_V_OUT, .complex_fn = lower_ldl_factor_ex},
    {"linalg_ldl_solve", lower_ldl_solve, .variants = TTPU_V_OUT, .complex_fn = lower_ldl_solve},
    {0},
};
