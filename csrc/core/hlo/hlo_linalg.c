/* hlo_linalg.c - dot_general, convolution, triangular_solve. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"
#include "ttpu_hlo.h"

static const char* prec_name(ttpu_precision p) {
  switch (p) {
    case TTPU_PREC_HIGH: return "HIGH";
    case TTPU_PREC_HIGHEST: return "HIGHEST";
    default: return "DEFAULT";
  }
}

static void put_precision(ttpu_hloi_buf* a, ttpu_precision p) {
  const char* n = prec_name(p);
  ttpu_hloi_buf_printf(a,
                       "precision_config = [#stablehlo<precision %s>, "
                       "#stablehlo<precision %s>]",
                       n, n);
}

/* Matmul-like ops take equal operand dtypes and any numeric result dtype
 * (the accumulation hint, e.g. bf16 x bf16 -> f32). */
static int check_operands(ttpu_hlo* b, const char* what, const ttpu_type* l,
                          const ttpu_type* r, ttpu_dtype out) {
  if (l->dtype != r->dtype) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s: operand dtypes differ (%s, %s)",
                  what, ttpu_dtype_name(l->dtype), ttpu_dtype_name(r->dtype));
    return 0;
  }
  if (!ttpu_hloi_dtype_valid(out) || out == TTPU_BOOL ||
      l->dtype == TTPU_BOOL) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s: bool/invalid dtype", what);
    return 0;
  }
  return 1;
}

/* TPU compilers have no 64-bit integer dot: multiply and sum instead.
 * Exact, and integer products are small. Both operands are put in the
 * order [batch, free, contract] and broadcast to [batch, lhs free, rhs
 * free, contract]. */
static ttpu_val wide_int_dot(ttpu_hlo* b, ttpu_val lhs, ttpu_val rhs,
                             const ttpu_type* tl, const ttpu_type* tr,
                             const int64_t* lb, const int64_t* rb, int nb,
                             const int64_t* lc, const int64_t* rc, int nc,
                             const ttpu_type* r) {
  int64_t pl[TTPU_MAX_DIMS], pr[TTPU_MAX_DIMS];
  int used_l[TTPU_MAX_DIMS] = {0}, used_r[TTPU_MAX_DIMS] = {0};
  int nl = 0, nr = 0;
  for (int i = 0; i < nb; i++) {
    pl[nl++] = lb[i];
    pr[nr++] = rb[i];
    used_l[lb[i]] = used_r[rb[i]] = 1;
  }
  for (int i = 0; i < nc; i++) used_l[lc[i]] = used_r[rc[i]] = 1;
  for (int i = 0; i < tl->ndim; i++)
    if (!used_l[i]) pl[nl++] = i;
  for (int i = 0; i < tr->ndim; i++)
    if (!used_r[i]) pr[nr++] = i;
  int nlf = nl - nb, nrf = nr - nb;
  for (int i = 0; i < nc; i++) {
    pl[nl++] = lc[i];
    pr[nr++] = rc[i];
  }
  int n = nb + nlf + nrf + nc;
  if (n > TTPU_MAX_DIMS)
    return ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED,
                         "64-bit integer product of rank %d (at most %d)", n,
                         TTPU_MAX_DIMS);
  ttpu_type full = *r;
  full.ndim = n;
  for (int i = 0; i < nb + nlf + nrf; i++) full.dims[i] = r->dims[i];
  for (int i = 0; i < nc; i++) full.dims[nb + nlf + nrf + i] = tl->dims[lc[i]];
  int64_t ml[TTPU_MAX_DIMS], mr[TTPU_MAX_DIMS], red[TTPU_MAX_DIMS];
  for (int i = 0; i < nb; i++) ml[i] = mr[i] = i;
  for (int i = 0; i < nlf; i++) ml[nb + i] = nb + i;
  for (int i = 0; i < nrf; i++) mr[nb + i] = nb + nlf + i;
  for (int i = 0; i < nc; i++) {
    ml[nb + nlf + i] = mr[nb + nrf + i] = red[i] = nb + nlf + nrf + i;
  }
  ttpu_val x = ttpu_hlo_convert(b, ttpu_hlo_transpose(b, lhs, pl), r->dtype);
  ttpu_val y = ttpu_hlo_convert(b, ttpu_hlo_transpose(b, rhs, pr), r->dtype);
  x = ttpu_hlo_broadcast_in_dim(b, x, full, ml);
  y = ttpu_hlo_broadcast_in_dim(b, y, full, mr);
  return ttpu_hlo_reduce(b, ttpu_hlo_binary(b, TTPU_MUL, x, y), TTPU_RED_SUM,
                         red, nc);
}

ttpu_val ttpu_hlo_dot_general(ttpu_hlo* b, ttpu_val lhs, ttpu_val rhs,
                              const int64_t* lhs_batch,
                              const int64_t* rhs_batch, int n_batch,
                              const int64_t* lhs_contract,
                              const int64_t* rhs_contract, int n_contract,
                              ttpu_dtype out, ttpu_precision prec) {
  const char* what = "stablehlo.dot_general";
  const ttpu_type* tl = ttpu_hloi_check(b, lhs, what);
  const ttpu_type* tr = ttpu_hloi_check(b, rhs, what);
  if (!tl || !tr) return TTPU_VAL_ERROR;
  if (!check_operands(b, what, tl, tr, out)) return TTPU_VAL_ERROR;
  if ((tl->dtype == TTPU_BF16 || tl->dtype == TTPU_F16) && out == TTPU_F32) {
    /* 16-bit operands, float32 products: the operands are widened first.
     * Exact (a product of two 16-bit floats fits in float32, and the sum
     * accumulates in float32 either way), and a float32 contraction of
     * DEFAULT precision is one bf16 pass on a TPU's MXU. The XLA CPU
     * plugin refuses some mixed contractions at run time ("Unsupported
     * element type for DotThunk::Execute: BF16 x BF16 = F32"). */
    lhs = ttpu_hlo_convert(b, lhs, TTPU_F32);
    rhs = ttpu_hlo_convert(b, rhs, TTPU_F32);
    tl = ttpu_hloi_check(b, lhs, what);
    tr = ttpu_hloi_check(b, rhs, what);
    if (!tl || !tr) return TTPU_VAL_ERROR;
  }
  int used_l[TTPU_MAX_DIMS] = {0}, used_r[TTPU_MAX_DIMS] = {0};
  int np = n_batch + n_contract;
  if (n_batch < 0 || n_contract < 0 || np > tl->ndim || np > tr->ndim)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: too many batch/contracting dims", what);
  for (int i = 0; i < np; i++) {
    int64_t dl = i < n_batch ? lhs_batch[i] : lhs_contract[i - n_batch];
    int64_t dr = i < n_batch ? rhs_batch[i] : rhs_contract[i - n_batch];
    if (dl < 0 || dl >= tl->ndim || dr < 0 || dr >= tr->ndim ||
        used_l[dl] || used_r[dr])
      return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                           "%s: dimension out of range or repeated", what);
    used_l[dl] = used_r[dr] = 1;
    if (tl->dims[dl] != tr->dims[dr])
      return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                           "%s: size mismatch lhs dim %lld (%lld) vs rhs dim "
                           "%lld (%lld)",
                           what, (long long)dl, (long long)tl->dims[dl],
                           (long long)dr, (long long)tr->dims[dr]);
  }
  ttpu_type r;
  memset(&r, 0, sizeof r);
  r.dtype = out;
  for (int i = 0; i < n_batch; i++) r.dims[r.ndim++] = tl->dims[lhs_batch[i]];
  for (int i = 0; i < tl->ndim; i++)
    if (!used_l[i]) r.dims[r.ndim++] = tl->dims[i];
  for (int i = 0; i < tr->ndim; i++)
    if (!used_r[i]) {
      if (r.ndim >= TTPU_MAX_DIMS)
        return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                             "%s: result rank exceeds %d", what,
                             TTPU_MAX_DIMS);
      r.dims[r.ndim++] = tr->dims[i];
    }
  if (tl->dtype == TTPU_I64 || tl->dtype == TTPU_U64 || out == TTPU_I64 ||
      out == TTPU_U64)
    return wide_int_dot(b, lhs, rhs, tl, tr, lhs_batch, rhs_batch, n_batch,
                        lhs_contract, rhs_contract, n_contract, &r);
  ttpu_hloi_buf a = {0};
  /* Empty dimension lists are left out: that is how the attribute's own
   * printer writes them, and what every parser version accepts. */
  ttpu_hloi_buf_put(&a, "dot_dimension_numbers = #stablehlo.dot<");
  int first = 1;
  const char* names[4] = {"lhs_batching_dimensions", "rhs_batching_dimensions",
                          "lhs_contracting_dimensions",
                          "rhs_contracting_dimensions"};
  const int64_t* lists[4] = {lhs_batch, rhs_batch, lhs_contract, rhs_contract};
  int counts[4] = {n_batch, n_batch, n_contract, n_contract};
  for (int i = 0; i < 4; i++) {
    if (!counts[i]) continue;
    ttpu_hloi_buf_printf(&a, "%s%s = ", first ? "" : ", ", names[i]);
    ttpu_hloi_put_list(&a, lists[i], counts[i]);
    first = 0;
  }
  ttpu_hloi_buf_put(&a, ">, ");
  put_precision(&a, prec);
  char* attrs = ttpu_hloi_buf_take(&a);
  ttpu_val ops[2] = {lhs, rhs};
  ttpu_val v = ttpu_hloi_op(b, what, ops, 2, attrs, r);
  free(attrs);
  return v;
}

ttpu_val ttpu_hlo_convolution(ttpu_hlo* b, ttpu_val lhs, ttpu_val rhs,
                              int n_spatial, const int64_t* strides,
                              const int64_t* padding,
                              const int64_t* lhs_dilation,
                              const int64_t* rhs_dilation,
                              int64_t feature_groups, int64_t batch_groups,
                              ttpu_dtype out, ttpu_precision prec) {
  const char* what = "stablehlo.convolution";
  const ttpu_type* tl = ttpu_hloi_check(b, lhs, what);
  const ttpu_type* tr = ttpu_hloi_check(b, rhs, what);
  if (!tl || !tr) return TTPU_VAL_ERROR;
  if (n_spatial < 0 || n_spatial + 2 > TTPU_MAX_DIMS ||
      tl->ndim != n_spatial + 2 || tr->ndim != n_spatial + 2)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: input and kernel must have rank %d", what,
                         n_spatial + 2);
  ttpu_conv_dims dn;
  memset(&dn, 0, sizeof dn);
  dn.in_batch = 0;
  dn.in_feature = 1;
  dn.k_out = 0;
  dn.k_in = 1;
  dn.out_batch = 0;
  dn.out_feature = 1;
  for (int i = 0; i < n_spatial; i++)
    dn.in_spatial[i] = dn.k_spatial[i] = dn.out_spatial[i] = 2 + i;
  ttpu_type r;
  memset(&r, 0, sizeof r);
  r.dtype = out;
  r.ndim = n_spatial + 2;
  r.dims[0] = batch_groups > 0 ? tl->dims[0] / batch_groups : tl->dims[0];
  r.dims[1] = tr->dims[0];
  for (int i = 0; i < n_spatial; i++) {
    int64_t ld = lhs_dilation ? lhs_dilation[i] : 1;
    int64_t rd = rhs_dilation ? rhs_dilation[i] : 1;
    int64_t st = strides ? strides[i] : 1;
    int64_t lo = padding ? padding[2 * i] : 0, hi = padding ? padding[2 * i + 1] : 0;
    int64_t d = tl->dims[2 + i];
    int64_t in = (d > 0 ? (d - 1) * ld + 1 : 0) + lo + hi;
    int64_t k = (tr->dims[2 + i] - 1) * rd + 1;
    r.dims[2 + i] = (st < 1 || in < k) ? 0 : (in - k) / st + 1;
  }
  return ttpu_hlo_convolution_general(b, lhs, rhs, n_spatial, &dn, strides,
                                      padding, lhs_dilation, rhs_dilation,
                                      feature_groups, batch_groups, r, prec);
}

/* Checks that a layout names each of the rank dims exactly once. */
static int perm_ok(int64_t a, int64_t c, const int64_t* sp, int n, int rank) {
  int seen[TTPU_MAX_DIMS] = {0};
  int64_t all[TTPU_MAX_DIMS];
  all[0] = a;
  all[1] = c;
  for (int i = 0; i < n; i++) all[2 + i] = sp[i];
  for (int i = 0; i < n + 2; i++) {
    if (all[i] < 0 || all[i] >= rank || seen[all[i]]) return 0;
    seen[all[i]] = 1;
  }
  return 1;
}

ttpu_val ttpu_hlo_convolution_general(
    ttpu_hlo* b, ttpu_val lhs, ttpu_val rhs, int n_spatial,
    const ttpu_conv_dims* dn, const int64_t* strides, const int64_t* padding,
    const int64_t* lhs_dilation, const int64_t* rhs_dilation,
    int64_t feature_groups, int64_t batch_groups, ttpu_type out,
    ttpu_precision prec) {
  const char* what = "stablehlo.convolution";
  const ttpu_type* tl = ttpu_hloi_check(b, lhs, what);
  const ttpu_type* tr = ttpu_hloi_check(b, rhs, what);
  if (!tl || !tr || !ttpu_hloi_type_ok(b, &out, what)) return TTPU_VAL_ERROR;
  if (!check_operands(b, what, tl, tr, out.dtype)) return TTPU_VAL_ERROR;
  int rank = n_spatial + 2;
  if (n_spatial < 0 || rank > TTPU_MAX_DIMS || tl->ndim != rank ||
      tr->ndim != rank || out.ndim != rank)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: input, kernel and result must have rank %d",
                         what, rank);
  if (!perm_ok(dn->in_batch, dn->in_feature, dn->in_spatial, n_spatial, rank) ||
      !perm_ok(dn->k_out, dn->k_in, dn->k_spatial, n_spatial, rank) ||
      !perm_ok(dn->out_batch, dn->out_feature, dn->out_spatial, n_spatial,
               rank))
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: dimension numbers are not permutations", what);
  if (feature_groups < 1 || batch_groups < 1 ||
      (feature_groups > 1 && batch_groups > 1))
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: bad group counts (feature %lld, batch %lld)",
                         what, (long long)feature_groups,
                         (long long)batch_groups);
  int64_t in_f = tl->dims[dn->in_feature], k_in = tr->dims[dn->k_in];
  int64_t k_out = tr->dims[dn->k_out], n = tl->dims[dn->in_batch];
  if (in_f != k_in * feature_groups || k_out % feature_groups ||
      n % batch_groups || k_out % batch_groups)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: feature sizes inconsistent (input %lld, kernel "
                         "in %lld x groups %lld, kernel out %lld)",
                         what, (long long)in_f, (long long)k_in,
                         (long long)feature_groups, (long long)k_out);
  /* The result's sizes are implied; a caller-given mismatch would only
   * surface as an opaque verifier error in the plugin. */
  int64_t want[TTPU_MAX_DIMS];
  want[dn->out_batch] = n / batch_groups;
  want[dn->out_feature] = k_out;
  int64_t st[TTPU_MAX_DIMS], ld[TTPU_MAX_DIMS], rd[TTPU_MAX_DIMS];
  int64_t pad[2 * TTPU_MAX_DIMS];
  for (int i = 0; i < n_spatial; i++) {
    st[i] = strides ? strides[i] : 1;
    ld[i] = lhs_dilation ? lhs_dilation[i] : 1;
    rd[i] = rhs_dilation ? rhs_dilation[i] : 1;
    pad[2 * i] = padding ? padding[2 * i] : 0;
    pad[2 * i + 1] = padding ? padding[2 * i + 1] : 0;
    if (st[i] < 1 || ld[i] < 1 || rd[i] < 1)
      return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                           "%s: stride/dilation must be >= 1", what);
    int64_t d = tl->dims[dn->in_spatial[i]];
    int64_t in = (d > 0 ? (d - 1) * ld[i] + 1 : 0) + pad[2 * i] + pad[2 * i + 1];
    int64_t k = (tr->dims[dn->k_spatial[i]] - 1) * rd[i] + 1;
    want[dn->out_spatial[i]] = in < k ? 0 : (in - k) / st[i] + 1;
  }
  for (int i = 0; i < rank; i++)
    if (want[i] != out.dims[i]) {
      char d[160];
      ttpu_hloi_type_desc(&out, d, sizeof d);
      return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                           "%s: result %s does not match the implied size "
                           "%lld of dim %d",
                           what, d, (long long)want[i], i);
    }

  ttpu_hloi_buf a = {0};
  ttpu_hloi_buf_put(&a, "window_strides = ");
  ttpu_hloi_put_array(&a, st, n_spatial);
  if (n_spatial > 0) {
    ttpu_hloi_buf_put(&a, ", padding = dense<[");
    for (int i = 0; i < n_spatial; i++)
      ttpu_hloi_buf_printf(&a, i ? ", [%lld, %lld]" : "[%lld, %lld]",
                           (long long)pad[2 * i], (long long)pad[2 * i + 1]);
    ttpu_hloi_buf_printf(&a, "]> : tensor<%dx2xi64>", n_spatial);
  }
  ttpu_hloi_buf_put(&a, ", lhs_dilation = ");
  ttpu_hloi_put_array(&a, ld, n_spatial);
  ttpu_hloi_buf_put(&a, ", rhs_dilation = ");
  ttpu_hloi_put_array(&a, rd, n_spatial);
  /* The "raw" spelling takes explicit dim numbers, so any layout prints
   * without reconstructing the compact [b, 0, f]x... picture. */
  ttpu_hloi_buf_printf(&a,
                       ", dimension_numbers = #stablehlo.conv<raw "
                       "input_batch_dimension = %lld, "
                       "input_feature_dimension = %lld, "
                       "input_spatial_dimensions = ",
                       (long long)dn->in_batch, (long long)dn->in_feature);
  ttpu_hloi_put_list(&a, dn->in_spatial, n_spatial);
  ttpu_hloi_buf_printf(&a,
                       ", kernel_input_feature_dimension = %lld, "
                       "kernel_output_feature_dimension = %lld, "
                       "kernel_spatial_dimensions = ",
                       (long long)dn->k_in, (long long)dn->k_out);
  ttpu_hloi_put_list(&a, dn->k_spatial, n_spatial);
  ttpu_hloi_buf_printf(&a,
                       ", output_batch_dimension = %lld, "
                       "output_feature_dimension = %lld, "
                       "output_spatial_dimensions = ",
                       (long long)dn->out_batch, (long long)dn->out_feature);
  ttpu_hloi_put_list(&a, dn->out_spatial, n_spatial);
  ttpu_hloi_buf_printf(&a,
                       ">, feature_group_count = %lld : i64, "
                       "batch_group_count = %lld : i64, ",
                       (long long)feature_groups, (long long)batch_groups);
  put_precision(&a, prec);
  char* attrs = ttpu_hloi_buf_take(&a);
  ttpu_val ops[2] = {lhs, rhs};
  ttpu_val v = ttpu_hloi_op(b, what, ops, 2, attrs, out);
  free(attrs);
  return v;
}

/* Square float or complex matrices in the last two dims. */
static int square_float(ttpu_hlo* b, const ttpu_type* t, const char* what) {
  if (!(ttpu_hloi_is_floatlike(t->dtype) || ttpu_hloi_is_complex(t->dtype)) || t->ndim < 2 ||
      t->dims[t->ndim - 1] != t->dims[t->ndim - 2]) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                  "%s: expected square float matrices", what);
    return 0;
  }
  return 1;
}

ttpu_val ttpu_hlo_triangular_solve(ttpu_hlo* b, ttpu_val a, ttpu_val rhs,
                                   int left_side, int lower,
                                   int unit_diagonal, int transpose_a) {
  const char* what = "stablehlo.triangular_solve";
  const ttpu_type* ta = ttpu_hloi_check(b, a, what);
  const ttpu_type* tr = ttpu_hloi_check(b, rhs, what);
  if (!ta || !tr || !square_float(b, ta, what)) return TTPU_VAL_ERROR;
  int n = ta->ndim;
  int ok = tr->ndim == n && tr->dtype == ta->dtype &&
           tr->dims[left_side ? n - 2 : n - 1] == ta->dims[n - 1];
  for (int i = 0; ok && i < n - 2; i++) ok = tr->dims[i] == ta->dims[i];
  if (!ok)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: right-hand side does not fit the matrix", what);
  char attrs[200];
  snprintf(attrs, sizeof attrs,
           "left_side = %s, lower = %s, unit_diagonal = %s, transpose_a = "
           "#stablehlo<transpose %s>",
           left_side ? "true" : "false", lower ? "true" : "false",
           unit_diagonal ? "true" : "false",
           transpose_a == 2 ? "ADJOINT" : transpose_a ? "TRANSPOSE" : "NO_TRANSPOSE");
  ttpu_val ops[2] = {a, rhs};
  return ttpu_hloi_op(b, what, ops, 2, attrs, *tr);
}
