/* qr.c - Householder QR as LAPACK's geqrf computes it, and what PyTorch
 * builds on it: linalg_qr (Q, R), householder_product (Q from the
 * reflectors), ormqr (Q applied to a matrix).
 *
 * Like lu.c the factorization takes one column per step of a
 * stablehlo.while (the program does not grow with the size), with masked
 * full-matrix ops (every batch element at once). Each step is
 * LAPACK's dlarfg: beta = -sign(alpha) * ||x||, tau = (beta - alpha) /
 * beta, v = x / (alpha - beta) below the unit diagonal entry, tau = 0 when
 * the column below the diagonal is already zero. So R's signs, tau and the
 * stored reflectors match the CPU's (torch.nn.init.orthogonal_ and friends
 * depend on Q's signs).
 *
 * Complex matrices take zlarfg's reflectors: beta = -sign(re alpha) *
 * sqrt(|alpha|^2 + ||x||^2) (real), tau = (beta - alpha) / beta (complex),
 * H = I - tau v v^H, and tau = 0 only when x is zero and alpha real; the
 * factorization applies H^H (conj(tau)) to the trailing columns, as
 * zgeqr2 does. */
#include "matrix.h"

static ttpu_type with_dtype(ttpu_type t, ttpu_dtype dt) {
  t.dtype = dt;
  return t;
}

static ttpu_val kc(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

/* The batch dims (all but the last two) of t, as a type of dtype dt. */
static ttpu_type batch_of(ttpu_type t, ttpu_dtype dt) {
  t.ndim -= 2;
  t.dtype = dt;
  return t;
}

/* v (batch..., r) broadcast into t (batch..., more dims) with its last
 * dim along dim `at` of t; v (batch...) over t's leading dims when at < 0.
 * The batch rank is v's own (t may be a matrix or a column type). */
static ttpu_val spread(ttpu_hlo* b, ttpu_val v, ttpu_type t, int at) {
  const ttpu_type* tv = ttpu_hlo_type(b, v);
  if (!tv) return TTPU_VAL_ERROR;
  int nb = at >= 0 ? tv->ndim - 1 : tv->ndim;
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < nb; ++d) map[d] = d;
  if (at >= 0) map[nb] = at;
  return ttpu_hlo_broadcast_in_dim(b, v, with_dtype(t, tv->dtype), map);
}

static ttpu_type type_of(ttpu_hlo* b, ttpu_val v) {
  const ttpu_type* tp = ttpu_hlo_type(b, v);
  if (tp) return *tp;
  ttpu_type e = {TTPU_DTYPE_NONE, 0, {0}};
  return e;
}

/* The mask "index along dim of t `op` the 0-d i64 j". */
static ttpu_val cmp_index(ttpu_hlo* b, ttpu_type t, int dim, ttpu_cmp op, ttpu_val j) {
  ttpu_type ti = with_dtype(t, TTPU_I64);
  return ttpu_hlo_compare(b, op, ttpu_hlo_iota(b, ti, dim), ttpu_hlo_broadcast_to(b, j, ti.ndim, ti.dims));
}

/* Index j (a 0-d i64 value) of x along its last dim, that dim dropped:
 * column j of a matrix, entry j of a vector. */
static ttpu_val column(ttpu_hlo* b, ttpu_val x, ttpu_val j) {
  ttpu_type t = type_of(b, x);
  int64_t d = t.ndim - 1;
  return ttpu_hlo_reduce(b, ttpu_hlo_select(b, cmp_index(b, t, t.ndim - 1, TTPU_EQ, j), x, kc(b, t, 0)),
                         TTPU_RED_SUM, &d, 1);
}

/* Sum over the row dim (the second to last) of x. */
static ttpu_val col_sum(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int64_t d = tp->ndim - 2;
  return ttpu_hlo_reduce(b, x, TTPU_RED_SUM, &d, 1);
}

/* Reflector j of a factored matrix a (batch..., m, n): (batch..., m), 1
 * at row j, a's column below it, 0 above. */
static ttpu_val reflector(ttpu_hlo* b, ttpu_val a, ttpu_val j) {
  ttpu_val c = column(b, a, j);
  ttpu_type t = type_of(b, c);
  ttpu_val v = ttpu_hlo_select(b, cmp_index(b, t, t.ndim - 1, TTPU_GT, j), c, kc(b, t, 0));
  return ttpu_hlo_select(b, cmp_index(b, t, t.ndim - 1, TTPU_EQ, j), kc(b, t, 1), v);
}

/* x - tau v (v^H x): reflector v (batch..., m) with scalar tau (batch...)
 * applied from the left to x (batch..., m, c). */
static ttpu_val reflect_left(ttpu_hlo* b, ttpu_val x, ttpu_val v, ttpu_val tau) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = *tp;
  ttpu_val vb = spread(b, v, t, t.ndim - 2);
  ttpu_val w = col_sum(b, ttpu_hlo_binary(b, TTPU_MUL, ttpu_mx_conj(b, vb), x)); /* (batch..., c) */
  ttpu_val upd = ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_binary(b, TTPU_MUL, vb, spread(b, w, t, t.ndim - 1)),
                                 spread(b, tau, t, -1));
  return ttpu_hlo_binary(b, TTPU_SUB, x, upd);
}

/* Step j of geqr2, dlarfg/zlarfg and the update (ctx: the matrices'
 * type (batch..., m, n)); state {a, tau (batch..., k)}. */
static void geqr2_body(ttpu_hlo* b, void* ctx, ttpu_val j, const ttpu_val* st, ttpu_val* next) {
  ttpu_type t = *(const ttpu_type*)ctx;
  int nb = t.ndim - 2;
  int cx = ttpu_dtype_is_complex(t.dtype);
  ttpu_type tb = batch_of(t, t.dtype), tbr = batch_of(t, ttpu_dtype_real(t.dtype));
  ttpu_type tc = t; /* a column (batch..., m) */
  tc.ndim = nb + 1;
  ttpu_val a = st[0], taus = st[1];
  ttpu_val c = column(b, a, j);
  ttpu_val below = cmp_index(b, tc, nb, TTPU_GT, j);
  ttpu_val at = cmp_index(b, tc, nb, TTPU_EQ, j);
  ttpu_val zc = kc(b, tc, 0);
  int64_t last = nb;
  ttpu_val alpha = ttpu_hlo_reduce(b, ttpu_hlo_select(b, at, c, zc), TTPU_RED_SUM, &last, 1);
  ttpu_val xb = ttpu_hlo_select(b, below, c, zc);
  ttpu_val xn2 = ttpu_hlo_reduce(b, ttpu_mx_abs2(b, xb), TTPU_RED_SUM, &last, 1);
  ttpu_val norm = ttpu_hlo_unary(b, TTPU_SQRT, ttpu_hlo_binary(b, TTPU_ADD, xn2, ttpu_mx_abs2(b, alpha)));
  ttpu_val ar = cx ? ttpu_hlo_real(b, alpha) : alpha;
  ttpu_val neg = ttpu_hlo_compare(b, TTPU_LT, ar, kc(b, tbr, 0));
  ttpu_val beta = ttpu_hlo_select(b, neg, norm, ttpu_hlo_unary(b, TTPU_NEG, norm)); /* real */
  ttpu_val trivial = ttpu_hlo_compare(b, TTPU_EQ, xn2, kc(b, tbr, 0));
  if (cx)
    trivial = ttpu_hlo_binary(b, TTPU_AND, trivial,
                              ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_imag(b, alpha), kc(b, tbr, 0)));
  if (cx) beta = ttpu_hlo_convert(b, beta, t.dtype);
  ttpu_val tau = ttpu_hlo_binary(b, TTPU_DIV, ttpu_hlo_binary(b, TTPU_SUB, beta, alpha), beta);
  tau = ttpu_hlo_select(b, trivial, kc(b, tb, 0), tau);
  ttpu_val scale = ttpu_hlo_binary(b, TTPU_SUB, alpha, beta);
  scale = ttpu_hlo_select(b, trivial, kc(b, tb, 1), scale);
  ttpu_val v = ttpu_hlo_binary(b, TTPU_DIV, xb, spread(b, scale, tc, -1));
  v = ttpu_hlo_select(b, at, kc(b, tc, 1), v);
  /* the trailing columns take the reflection; column j becomes
   * (beta, v below) */
  ttpu_val right = cmp_index(b, t, nb + 1, TTPU_GT, j);
  a = ttpu_hlo_select(b, right, reflect_left(b, a, v, ttpu_mx_conj(b, tau)), a);
  ttpu_val newc = ttpu_hlo_select(b, at, spread(b, ttpu_hlo_select(b, trivial, alpha, beta), tc, -1),
                                  ttpu_hlo_select(b, below, v, c));
  next[0] = ttpu_hlo_select(b, cmp_index(b, t, nb + 1, TTPU_EQ, j), spread(b, newc, t, nb), a);
  ttpu_type tt = type_of(b, taus);
  next[1] = ttpu_hlo_select(b, cmp_index(b, tt, nb, TTPU_EQ, j), spread(b, tau, tt, -1), taus);
}

/* geqrf of a (batch..., m, n): the factored matrix and tau (batch..., k). */
static int householder(ttpu_lower* L, ttpu_val a, ttpu_val* out_a, ttpu_val* out_tau, ttpu_type ttau) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type t = ttpu_l_type(L, a);
  int nb = t.ndim - 2;
  int64_t m = t.dims[nb], n = t.dims[nb + 1];
  ttau.dtype = t.dtype;
  ttpu_val init[2] = {a, kc(b, ttau, 0)}, fin[2];
  ttpu_mx_fori(b, m < n ? m : n, 0, init, 2, geqr2_body, &t, fin);
  *out_a = fin[0];
  *out_tau = fin[1];
  return fin[0] != TTPU_VAL_ERROR;
}

/* Reflector j applied, H_j^H for the adjoint (ctx: an int, set for
 * it); state {x, a, tau}. */
static void apply_body(ttpu_hlo* b, void* ctx, ttpu_val j, const ttpu_val* st, ttpu_val* next) {
  int adjoint = *(const int*)ctx;
  ttpu_val x = st[0], a = st[1], tau = st[2];
  ttpu_val tj = column(b, tau, j);
  next[0] = reflect_left(b, x, reflector(b, a, j), adjoint ? ttpu_mx_conj(b, tj) : tj);
  next[1] = a;
  next[2] = tau;
}

/* The k reflectors of a (batch..., m, n) with tau (batch..., k) applied
 * to x (batch..., m, c) from the left: Q x (H_{k-1} first) or Q^H x
 * (H_0^H first). */
static ttpu_val apply_q(ttpu_hlo* b, ttpu_val a, ttpu_val tau, int64_t k, ttpu_val x, int adjoint) {
  ttpu_val init[3] = {x, a, tau}, fin[3];
  ttpu_mx_fori(b, k, !adjoint, init, 3, apply_body, &adjoint, fin);
  return fin[0];
}

/* geqrf(self) -> (a, tau) */
static ttpu_status* lower_geqrf(ttpu_lower* L) {
  ttpu_val a = ttpu_l_tensor(L, 0);
  if (!ttpu_mx_lapack_dtype(L, ttpu_l_type(L, a).dtype, "geqrf_cpu")) return NULL;
  ttpu_val f, tau;
  if (!householder(L, a, &f, &tau, ttpu_l_out_type(L, 1))) return NULL;
  ttpu_l_set_out(L, 0, f);
  ttpu_l_set_out(L, 1, tau);
  return NULL;
}

/* linalg_householder_product(input, tau): the first n columns of Q. */
static ttpu_status* lower_householder_product(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  /* in the input's dtype: an out= of a wider one takes the result cast */
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ot.dtype = ttpu_l_type(L, ttpu_l_tensor(L, 0)).dtype;
  if (!ttpu_mx_lapack_dtype(L, ot.dtype, "orgqr_cpu")) return NULL;
  ttpu_val tau = ttpu_l_tensor(L, 1);
  ttpu_type tt = ttpu_l_type(L, tau);
  int64_t k = tt.dims[tt.ndim - 1];
  ttpu_l_set_out(L, 0, apply_q(b, ttpu_l_tensor(L, 0), tau, k, ttpu_mx_identity(b, ot), 0));
  return NULL;
}

/* ormqr(self, input2=tau, input3=other, left=True, transpose=False) */
static ttpu_status* lower_ormqr(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!ttpu_mx_lapack_dtype(L, ot.dtype, "ormqr_cpu")) return NULL;
  ttpu_val tau = ttpu_l_tensor(L, 1), c = ttpu_l_tensor(L, 2);
  ttpu_type tt = ttpu_l_type(L, tau);
  int64_t k = tt.dims[tt.ndim - 1];
  int left = ttpu_l_bool(L, 3, 1), tr = ttpu_l_bool(L, 4, 0);
  ttpu_val r;
  if (left) {
    r = apply_q(b, ttpu_l_tensor(L, 0), tau, k, c, tr);
  } else {
    /* C Q = (Q^H C^H)^H, C Q^H = (Q C^H)^H */
    r = ttpu_mx_adjoint(b, apply_q(b, ttpu_l_tensor(L, 0), tau, k, ttpu_mx_adjoint(b, c), !tr));
  }
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* linalg_qr(A, mode="reduced") -> (Q, R): Q (m, k) and R (k, n) when
 * reduced, (m, m) and (m, n) when complete, no Q for "r". */
static ttpu_status* lower_linalg_qr(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type oq = ttpu_l_out_type(L, 0), orr = ttpu_l_out_type(L, 1);
  ttpu_val a = ttpu_l_tensor(L, 0);
  ttpu_type ta = ttpu_l_type(L, a);
  if (!ttpu_mx_lapack_dtype(L, ta.dtype, "linalg_qr")) return NULL;
  int nb = ta.ndim - 2;
  int64_t m = ta.dims[nb], n = ta.dims[nb + 1], k = m < n ? m : n;
  ttpu_type ttau = batch_of(ta, ta.dtype);
  ttau.dims[ttau.ndim++] = k;
  ttpu_val f, tau;
  if (!householder(L, a, &f, &tau, ttau)) return NULL;
  /* R: the upper triangle of the factored matrix's first rows */
  int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
  for (int d = 0; d < orr.ndim; ++d) hi[d] = orr.dims[d], st[d] = 1;
  ttpu_val r = ttpu_hlo_slice(b, f, lo, hi, st);
  ttpu_type ti = with_dtype(orr, TTPU_I64);
  ttpu_val keep = ttpu_hlo_compare(b, TTPU_LE, ttpu_hlo_iota(b, ti, nb), ttpu_hlo_iota(b, ti, nb + 1));
  ttpu_l_set_out(L, 1, ttpu_hlo_select(b, keep, r, kc(b, orr, 0)));
  ttpu_l_set_out(L, 0, ttpu_type_numel(&oq) && oq.ndim == ta.ndim ? apply_q(b, f, tau, k, ttpu_mx_identity(b, oq), 0)
                                                                   : kc(b, oq, 0));
  return NULL;
}

const ttpu_op_def ttpu_ops_qr[] = {
    {"geqrf", lower_geqrf, .complex_fn = lower_geqrf},
    {"geqrf.a", lower_geqrf, .complex_fn = lower_geqrf},
    {"linalg_householder_product", lower_householder_product, .variants = TTPU_V_OUT,
     .complex_fn = lower_householder_product},
    {"ormqr", lower_ormqr, .variants = TTPU_V_OUT, .complex_fn = lower_ormqr},
    {"linalg_qr", lower_linalg_qr, .variants = TTPU_V_OUT, .complex_fn = lower_linalg_qr},
    {0},
};
