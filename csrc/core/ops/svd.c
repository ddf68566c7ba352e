/* svd.c - the singular value decomposition (_linalg_svd), by one-sided
 * Jacobi (Hestenes): the columns of the matrix (its transpose when wide)
 * are rotated pairwise until orthogonal; their norms are the singular
 * values, the normalized columns U, the accumulated rotations V. Singular
 * values come out to float32 rounding (no squaring of the condition number
 * as through A^T A). The sweeps are unrolled (sizes are compile-time), so
 * programs grow with n^2: this serves the small matrices of
 * pinv/matrix_rank/cond/norms (min(m, n) <= 16).
 *
 * Complex matrices take the same sweeps: before each rotation, column j
 * is turned by the phase of <c_i, c_j> so that the pair's inner product is
 * real, and V takes the same turn (A = U S V^H).
 *
 * Singular vectors are unique only up to sign or phase (and rotation
 * within equal singular values): ours need not be LAPACK's, while
 * everything PyTorch builds on them (pinv, the gradients) is invariant to
 * that choice. */
#include <math.h>

#include "matrix.h"

/* Sweeps: Jacobi converges quadratically; 8 reach float64 rounding for
 * the sizes allowed. Columns: the program has ~40 n^2/2 ops per sweep, so
 * beyond 16 columns compiling it would take longer than it is worth: those
 * raise NotImplementedError instead. */
enum { kSweeps = 8, kMaxCols = 16 };

static ttpu_val kc(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

/* Sum over the last dim. */
static ttpu_val sum_last(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int64_t d = tp->ndim - 1;
  return ttpu_hlo_reduce(b, x, TTPU_RED_SUM, &d, 1);
}

/* s (batch...) broadcast to the type of a column (batch..., p). */
static ttpu_val per_col(ttpu_hlo* b, ttpu_val s, ttpu_val like) {
  const ttpu_type* tp = ttpu_hlo_type(b, like);
  if (!tp) return TTPU_VAL_ERROR;
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < tp->ndim - 1; ++d) map[d] = d;
  return ttpu_hlo_broadcast_in_dim(b, s, *tp, map);
}

/* conj(x) of a complex x. */
static ttpu_val conj_v(ttpu_hlo* b, ttpu_val x) {
  return ttpu_hlo_complex(b, ttpu_hlo_real(b, x), ttpu_hlo_unary(b, TTPU_NEG, ttpu_hlo_imag(b, x)));
}

/* sum |x|^2 over the last dim (real). */
static ttpu_val sq_norm(ttpu_hlo* b, ttpu_val x, int cx) {
  if (!cx) return sum_last(b, ttpu_hlo_binary(b, TTPU_MUL, x, x));
  ttpu_val re = ttpu_hlo_real(b, x), im = ttpu_hlo_imag(b, x);
  return sum_last(b, ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_binary(b, TTPU_MUL, re, re),
                                     ttpu_hlo_binary(b, TTPU_MUL, im, im)));
}

/* x^H (the conjugate transpose of the last two dims). */
static ttpu_val adjoint(ttpu_hlo* b, ttpu_val x, int cx) {
  ttpu_val t = ttpu_mx_transpose(b, x);
  return cx ? conj_v(b, t) : t;
}

/* Columns c_0..c_{q-1} (batch..., p) of x (batch..., p, q). */
static void columns(ttpu_hlo* b, ttpu_val x, int q, ttpu_val* c) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return;
  ttpu_type t = *tp, tc = *tp;
  tc.ndim--;
  for (int j = 0; j < q; ++j) {
    int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
    for (int d = 0; d < t.ndim; ++d) hi[d] = t.dims[d], st[d] = 1;
    lo[t.ndim - 1] = j;
    hi[t.ndim - 1] = j + 1;
    c[j] = ttpu_l_reshape_to(b, ttpu_hlo_slice(b, x, lo, hi, st), tc);
  }
}

/* The matrix (batch..., p, q) with columns c_0..c_{q-1}. */
static ttpu_val from_columns(ttpu_hlo* b, const ttpu_val* c, int q) {
  ttpu_val parts[kMaxCols];
  for (int j = 0; j < q; ++j) {
    const ttpu_type* tp = ttpu_hlo_type(b, c[j]);
    if (!tp) return TTPU_VAL_ERROR;
    ttpu_type t = *tp;
    t.dims[t.ndim++] = 1;
    parts[j] = ttpu_l_reshape_to(b, c[j], t);
  }
  const ttpu_type* tp = ttpu_hlo_type(b, c[0]);
  return tp ? ttpu_hlo_concat(b, parts, q, tp->ndim) : TTPU_VAL_ERROR;
}

/* Columns of x (batch..., p, q) reordered: column r of the result is
 * column perm[r] of x (perm (batch..., q) of i64). */
static ttpu_val permute_columns(ttpu_hlo* b, ttpu_val x, ttpu_val perm) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = *tp;
  int nb = t.ndim - 2;
  int64_t q = t.dims[nb + 1];
  ttpu_type big = t; /* (batch..., p, c, r) */
  big.dims[big.ndim++] = q;
  int64_t mx[TTPU_MAX_DIMS], mp[TTPU_MAX_DIMS];
  for (int d = 0; d < nb + 2; ++d) mx[d] = d;
  for (int d = 0; d < nb; ++d) mp[d] = d;
  mp[nb] = nb + 2;
  ttpu_type bi = big;
  bi.dtype = TTPU_I64;
  ttpu_val pick = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_broadcast_in_dim(b, perm, bi, mp), ttpu_hlo_iota(b, bi, nb + 1));
  ttpu_val v = ttpu_hlo_select(b, pick, ttpu_hlo_broadcast_in_dim(b, x, big, mx), kc(b, big, 0));
  int64_t c = nb + 1;
  return ttpu_hlo_reduce(b, v, TTPU_RED_SUM, &c, 1);
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
  int uv = ttpu_l_bool(L, 2, 1);
  if (ttpu_type_numel(&os) == 0) {
    /* No singular values: a full U or Vh is still an orthonormal basis of
     * its side (LAPACK's is the identity). */
    ttpu_l_set_out(L, 0, ttpu_type_numel(&ou) ? ttpu_mx_identity(b, ou) : kc(b, ou, 0));
    ttpu_l_set_out(L, 1, kc(b, os, 0));
    ttpu_l_set_out(L, 2, ttpu_type_numel(&ov) ? ttpu_mx_identity(b, ov) : kc(b, ov, 0));
    return NULL;
  }
  if (uv && ttpu_l_bool(L, 1, 0) && m != n)
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "linalg.svd: full_matrices=True for a non-square matrix is not supported on tpu");
  int wide = m < n;
  ttpu_val x = wide ? adjoint(b, a, cx) : a; /* tall: (batch..., p, q), p >= q */
  int q = (int)k;
  if (q > kMaxCols)
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "linalg.svd on tpu takes matrices whose smaller side is at most 16");
  ttpu_val w[kMaxCols], v[kMaxCols];
  columns(b, x, q, w);
  ttpu_type tv = ta; /* V: (batch..., q, q) */
  tv.dims[nb] = tv.dims[nb + 1] = q;
  columns(b, ttpu_mx_identity(b, tv), q, v);
  for (int sweep = 0; sweep < kSweeps; ++sweep)
    for (int i = 0; i < q - 1; ++i)
      for (int j = i + 1; j < q; ++j) {
        ttpu_val al = sq_norm(b, w[i], cx), be = sq_norm(b, w[j], cx);
        ttpu_val ga = sum_last(b, ttpu_hlo_binary(b, TTPU_MUL, cx ? conj_v(b, w[i]) : w[i], w[j]));
        const ttpu_type* tsp = ttpu_hlo_type(b, al);
        if (!tsp) return NULL;
        ttpu_type ts = *tsp;
        if (cx) {
          /* turn column j by the phase of <c_i, c_j>: the pair's inner
           * product becomes |<c_i, c_j>|, real */
          ttpu_val mag = ttpu_hlo_unary(b, TTPU_ABS, ga);
          ttpu_val none = ttpu_hlo_compare(b, TTPU_EQ, mag, kc(b, ts, 0));
          ttpu_val ph = ttpu_hlo_binary(b, TTPU_DIV, ga, ttpu_hlo_convert(b, ttpu_hlo_select(b, none, kc(b, ts, 1), mag), ta.dtype));
          ph = conj_v(b, ttpu_hlo_select(b, none, kc(b, ttpu_l_type(L, ga), 1), ph));
          w[j] = ttpu_hlo_binary(b, TTPU_MUL, w[j], per_col(b, ph, w[j]));
          v[j] = ttpu_hlo_binary(b, TTPU_MUL, v[j], per_col(b, ph, v[j]));
          ga = mag;
        }
        ttpu_val zero_g = ttpu_hlo_compare(b, TTPU_EQ, ga, kc(b, ts, 0));
        ttpu_val safe_g = ttpu_hlo_select(b, zero_g, kc(b, ts, 1), ga);
        ttpu_val zeta = ttpu_hlo_binary(b, TTPU_DIV, ttpu_hlo_binary(b, TTPU_SUB, be, al),
                                        ttpu_hlo_binary(b, TTPU_MUL, safe_g, kc(b, ts, 2)));
        ttpu_val az = ttpu_hlo_unary(b, TTPU_ABS, zeta);
        ttpu_val root = ttpu_hlo_unary(b, TTPU_SQRT, ttpu_hlo_binary(b, TTPU_ADD, kc(b, ts, 1),
                                                                     ttpu_hlo_binary(b, TTPU_MUL, zeta, zeta)));
        ttpu_val sg = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_LT, zeta, kc(b, ts, 0)), kc(b, ts, -1), kc(b, ts, 1));
        ttpu_val t = ttpu_hlo_binary(b, TTPU_DIV, sg, ttpu_hlo_binary(b, TTPU_ADD, az, root));
        /* a huge zeta (tiny gamma) overflows zeta^2: t -> 1/(2 zeta) */
        t = ttpu_hlo_select(b, ttpu_hlo_unary(b, TTPU_IS_FINITE, root), t,
                            ttpu_hlo_binary(b, TTPU_DIV, kc(b, ts, 0.5), zeta));
        t = ttpu_hlo_select(b, zero_g, kc(b, ts, 0), t);
        ttpu_val c = ttpu_hlo_unary(b, TTPU_RSQRT, ttpu_hlo_binary(b, TTPU_ADD, kc(b, ts, 1),
                                                                   ttpu_hlo_binary(b, TTPU_MUL, t, t)));
        ttpu_val s = ttpu_hlo_binary(b, TTPU_MUL, c, t);
        if (cx) {
          c = ttpu_hlo_convert(b, c, ta.dtype);
          s = ttpu_hlo_convert(b, s, ta.dtype);
        }
        ttpu_val* cols[2] = {w, v};
        for (int z = 0; z < 2; ++z) {
          ttpu_val ci = per_col(b, c, cols[z][i]), si = per_col(b, s, cols[z][i]);
          ttpu_val xi = cols[z][i], xj = cols[z][j];
          cols[z][i] = ttpu_hlo_binary(b, TTPU_SUB, ttpu_hlo_binary(b, TTPU_MUL, ci, xi),
                                       ttpu_hlo_binary(b, TTPU_MUL, si, xj));
          cols[z][j] = ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_binary(b, TTPU_MUL, si, xi),
                                       ttpu_hlo_binary(b, TTPU_MUL, ci, xj));
        }
      }
  ttpu_val sig[kMaxCols];
  for (int j = 0; j < q; ++j) {
    sig[j] = ttpu_hlo_unary(b, TTPU_SQRT, sq_norm(b, w[j], cx));
    const ttpu_type* tp = ttpu_hlo_type(b, sig[j]);
    if (!tp) return NULL;
    ttpu_val zero = ttpu_hlo_compare(b, TTPU_EQ, sig[j], kc(b, *tp, 0));
    ttpu_val inv = ttpu_hlo_select(b, zero, kc(b, *tp, 0),
                                   ttpu_hlo_binary(b, TTPU_DIV, kc(b, *tp, 1), sig[j]));
    if (cx) inv = ttpu_hlo_convert(b, inv, ta.dtype);
    w[j] = ttpu_hlo_binary(b, TTPU_MUL, w[j], per_col(b, inv, w[j]));
  }
  ttpu_val s_all = from_columns(b, sig, q); /* (batch..., q) via a trailing dim */
  ttpu_type tsv = os;
  ttpu_val keys = ttpu_l_reshape_to(b, s_all, tsv);
  ttpu_type ti = tsv;
  ti.dtype = TTPU_I64;
  ttpu_val extra = ttpu_hlo_iota(b, ti, ti.ndim - 1), sorted[2];
  ttpu_hlo_sort(b, keys, &extra, 1, tsv.ndim - 1, 1, sorted);
  ttpu_l_set_out(L, 1, sorted[0]);
  if (!uv || ttpu_type_numel(&ou) == 0) {
    ttpu_l_set_out(L, 0, kc(b, ou, 0));
    ttpu_l_set_out(L, 2, kc(b, ov, 0));
    return NULL;
  }
  ttpu_val uu = permute_columns(b, from_columns(b, w, q), sorted[1]);
  ttpu_val vv = permute_columns(b, from_columns(b, v, q), sorted[1]);
  /* tall: A = U S V^H; wide: A^H = U S V^H, so A = V S U^H */
  ttpu_l_set_out(L, 0, wide ? vv : uu);
  ttpu_l_set_out(L, 2, adjoint(b, wide ? uu : vv, cx));
  return NULL;
}

const ttpu_op_def ttpu_ops_svd[] = {
    {"_linalg_svd", lower_svd, .complex_fn = lower_svd},
    {"_linalg_svd.U", lower_svd, .complex_fn = lower_svd},
    {0},
};
