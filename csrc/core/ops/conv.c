/* conv.c - convolution (plain and transposed, forward and backward),
 * pooling and upsampling, for any number of spatial dims (the trailing
 * dims of the input).
 *
 * Everything here is static in shape, so window bookkeeping (pooling
 * windows, adaptive ranges, interpolation indices and weights) is done on
 * the host with PyTorch's own integer/float formulas and emitted as small
 * per-dimension constants; the device does the data math only.
 *
 * Precision: float32 contractions ask for HIGHEST (exact f32 on a TPU,
 * matching the CPU); torch.set_float32_matmul_precision comes later.
 * bf16/f16 math accumulates in f32 and rounds once, as the CPU does. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ttpu_lower.h"
#include "upsample_u8.h"

#define MAXD TTPU_MAX_DIMS

/* ------------------------------------------------------------ helpers */

static ttpu_dtype acc_dtype(ttpu_dtype dt) {
  if (dt == TTPU_BF16 || dt == TTPU_F16) return TTPU_F32;
  if (ttpu_dtype_is_int(dt) || dt == TTPU_BOOL) return TTPU_I64;
  return dt;
}

/* Fails like a CPU kernel with no instance for dt. */
static int reject(ttpu_lower* L, const char* kernel, ttpu_dtype dt) {
  ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_UNIMPLEMENTED,
                "\"%s\" not implemented for '%s'", kernel, ttpu_dtype_torch_title(dt));
  return 0;
}

static int require_float(ttpu_lower* L, const char* kernel, ttpu_dtype dt) {
  return ttpu_dtype_is_float(dt) ? 1 : reject(L, kernel, dt);
}

/* int[] arg as n values: one value repeats (PyTorch's expand_param_if_
 * needed), an empty or None list gives `fallback` if given, else dflt. */
static void ints_n(ttpu_lower* L, int arg, int n, const int64_t* fallback,
                   int64_t dflt, int64_t* out) {
  int m = 0;
  const int64_t* v = ttpu_l_ints(L, arg, &m);
  for (int i = 0; i < n; ++i) {
    if (m == 0)
      out[i] = fallback ? fallback[i] : dflt;
    else
      out[i] = v[m == 1 ? 0 : (i < m ? i : m - 1)];
  }
}

/* Output k exists: backward ops leave outputs undefined per output_mask. */
static int wanted(ttpu_lower* L, int k, int mask_arg) {
  if (k >= ttpu_l_nout(L)) return 0;
  const ttpu_tensor* t = &ttpu_l_call(L)->outputs[k];
  if (!t->buffer || t->dtype == TTPU_DTYPE_NONE) return 0;
  int n = 0;
  const int64_t* m = ttpu_l_ints(L, mask_arg, &n);
  return !(mask_arg >= 0 && k < n && !m[k]);
}

/* A 1-d constant of n floats of dtype dt (f32 or f64), exact: the bits
 * travel as integers, since the builder's array constants are i64. */
static ttpu_val const_floats(ttpu_hlo* h, const double* v, int64_t n,
                             ttpu_dtype dt) {
  int64_t* bits = malloc(sizeof(int64_t) * (size_t)(n + 1));
  if (!bits)
    return ttpu_hlo_fail(h, TTPU_RESOURCE_EXHAUSTED, "out of host memory");
  for (int64_t i = 0; i < n; ++i) {
    if (dt == TTPU_F64) {
      memcpy(&bits[i], &v[i], sizeof(double));
    } else {
      float f = (float)v[i];
      uint32_t u;
      memcpy(&u, &f, sizeof u);
      bits[i] = (int64_t)u;
    }
  }
  ttpu_val c = ttpu_hlo_const_i64s(h, bits, (int)n);
  free(bits);
  if (dt == TTPU_F64) return ttpu_hlo_bitcast(h, c, ttpu_type_make(TTPU_F64, 1, &n));
  c = ttpu_hlo_convert(h, c, TTPU_U32);
  c = ttpu_hlo_bitcast(h, c, ttpu_type_make(TTPU_F32, 1, &n));
  return dt == TTPU_F32 ? c : ttpu_hlo_convert(h, c, dt);
}

/* A [rows, cols] i64 table (row-major) broadcast into type `to` with its
 * rows on dim d0 and its columns on dim d1 (d1 < 0: a 1-d table). */
static ttpu_val table_to(ttpu_hlo* h, const int64_t* v, int64_t rows,
                         int64_t cols, ttpu_type to, int d0, int d1) {
  ttpu_val c = ttpu_hlo_const_i64s(h, v, (int)(rows * cols));
  to.dtype = TTPU_I64;
  if (d1 < 0) {
    int64_t map[1] = {d0};
    return ttpu_hlo_broadcast_in_dim(h, c, to, map);
  }
  int64_t dims[2] = {rows, cols}, map[2] = {d0, d1};
  c = ttpu_hlo_reshape(h, c, 2, dims);
  return ttpu_hlo_broadcast_in_dim(h, c, to, map);
}

/* Slices `lo[i]` elements off the front and `hi[i]` off the back of dim
 * first + i, for i < n (negative padding, done as cropping). */
static ttpu_val crop(ttpu_lower* L, ttpu_val x, int first, int n,
                     const int64_t* lo, const int64_t* hi) {
  ttpu_type t = ttpu_l_type(L, x);
  int any = 0;
  for (int i = 0; i < n; ++i) any |= lo[i] > 0 || hi[i] > 0;
  if (!any) return x;
  int64_t s[MAXD], e[MAXD], st[MAXD];
  for (int d = 0; d < t.ndim; ++d) {
    s[d] = 0;
    e[d] = t.dims[d];
    st[d] = 1;
  }
  for (int i = 0; i < n; ++i) {
    s[first + i] = lo[i];
    e[first + i] = t.dims[first + i] - hi[i];
  }
  return ttpu_hlo_slice(ttpu_l_hlo(L), x, s, e, st);
}

/* Gathers x along `dim` at the k constant indices idx: the result has k
 * at dim. */
static ttpu_val index_along(ttpu_lower* L, ttpu_val x, int dim,
                            const int64_t* idx, int64_t k) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_type t = ttpu_l_type(L, x);
  int64_t two[2] = {k, 1};
  ttpu_val ind = ttpu_hlo_reshape(h, ttpu_hlo_const_i64s(h, idx, (int)k), 2, two);
  int64_t offset[MAXD], slice[MAXD], coll[1] = {dim}, map[1] = {dim};
  int no = 0;
  for (int d = 0; d < t.ndim; ++d) {
    slice[d] = d == dim ? 1 : t.dims[d];
    if (d != dim) offset[no++] = d;
  }
  ttpu_gather_dims dn;
  memset(&dn, 0, sizeof dn);
  dn.n_offset_dims = no;
  dn.offset_dims = offset;
  dn.n_collapsed_slice_dims = 1;
  dn.collapsed_slice_dims = coll;
  dn.n_start_index_map = 1;
  dn.start_index_map = map;
  dn.index_vector_dim = 1;
  dn.slice_sizes = slice;
  ttpu_type out = t;
  out.dims[dim] = k;
  return ttpu_hlo_gather(h, x, ind, &dn, out);
}

/* out[.., j, ..] = sum over t < kmax with idx[j*kmax+t] >= 0 of
 * w[j*kmax+t] * x[.., idx[j*kmax+t], ..] (w NULL: weight 1), along dim.
 * The separable core of adaptive pooling, upsampling and their
 * backwards; a negative index marks an unused slot (never multiplied, so
 * NaN/inf elsewhere in x stay where they are). */
static ttpu_val gather_sum(ttpu_lower* L, ttpu_val x, int dim, int64_t n_out,
                           int64_t kmax, const int64_t* idx,
                           const double* w) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_type t = ttpu_l_type(L, x);
  int64_t k = n_out * kmax;
  int64_t* clamped = malloc(sizeof(int64_t) * (size_t)(2 * k + 1));
  if (!clamped)
    return ttpu_hlo_fail(h, TTPU_RESOURCE_EXHAUSTED, "out of host memory");
  int64_t* valid = clamped + k;
  int any_invalid = 0;
  for (int64_t i = 0; i < k; ++i) {
    valid[i] = idx[i] >= 0;
    clamped[i] = idx[i] >= 0 ? idx[i] : 0;
    any_invalid |= idx[i] < 0;
  }
  ttpu_val g = index_along(L, x, dim, clamped, k);
  int64_t dims[MAXD];
  int r = t.ndim + 1;
  if (r > MAXD) {
    free(clamped);
    return ttpu_hlo_fail(h, TTPU_UNIMPLEMENTED, "rank %d too large", t.ndim);
  }
  for (int d = 0, e = 0; d < t.ndim; ++d) {
    if (d == dim) {
      dims[e++] = n_out;
      dims[e++] = kmax;
    } else {
      dims[e++] = t.dims[d];
    }
  }
  g = ttpu_hlo_reshape(h, g, r, dims);
  ttpu_type gt = ttpu_type_make(t.dtype, r, dims);
  if (w) {
    ttpu_val wc = const_floats(h, w, k, t.dtype);
    int64_t two[2] = {n_out, kmax}, map[2] = {dim, dim + 1};
    wc = ttpu_hlo_broadcast_in_dim(h, ttpu_hlo_reshape(h, wc, 2, two), gt, map);
    g = ttpu_hlo_binary(h, TTPU_MUL, g, wc);
  }
  if (any_invalid) {
    ttpu_val m = table_to(h, valid, n_out, kmax, gt, dim, dim + 1);
    m = ttpu_hlo_compare(h, TTPU_NE, m, ttpu_hlo_const(h, ttpu_l_type(L, m), 0, 0));
    g = ttpu_hlo_select(h, m, g, ttpu_hlo_const(h, gt, 0, 0));
  }
  free(clamped);
  int64_t red[1] = {dim + 1};
  return ttpu_hlo_reduce(h, g, TTPU_RED_SUM, red, 1);
}

/* For a monotone map src (n_src entries into [0, n_dst)), the inverse as
 * padded ranges: for each j < n_dst, the i with src[i] == j (and, with two
 * maps, those of src2 too), weights taken from w/w2. *kmax receives the
 * widest list; idx/wt are malloc'ed (caller frees). */
static int invert_maps(const int64_t* src, const double* w, const int64_t* src2,
                       const double* w2, int64_t n_src, int64_t n_dst,
                       int64_t* kmax, int64_t** idx, double** wt) {
  int64_t* cnt = calloc((size_t)n_dst + 1, sizeof(int64_t));
  if (!cnt) return 0;
  int64_t km = 1;
  for (int64_t i = 0; i < n_src; ++i) {
    if (++cnt[src[i]] > km) km = cnt[src[i]];
    if (src2 && ++cnt[src2[i]] > km) km = cnt[src2[i]];
  }
  *idx = malloc(sizeof(int64_t) * (size_t)(n_dst * km + 1));
  *wt = malloc(sizeof(double) * (size_t)(n_dst * km + 1));
  if (!*idx || !*wt) {
    free(cnt);
    free(*idx);
    free(*wt);
    return 0;
  }
  for (int64_t i = 0; i < n_dst * km; ++i) {
    (*idx)[i] = -1;
    (*wt)[i] = 0;
  }
  memset(cnt, 0, sizeof(int64_t) * (size_t)n_dst);
  for (int64_t i = 0; i < n_src; ++i) {
    int64_t j = src[i];
    (*idx)[j * km + cnt[j]] = i;
    (*wt)[j * km + cnt[j]++] = w ? w[i] : 1.0;
    if (src2) {
      j = src2[i];
      (*idx)[j * km + cnt[j]] = i;
      (*wt)[j * km + cnt[j]++] = w2 ? w2[i] : 1.0;
    }
  }
  free(cnt);
  *kmax = km;
  return 1;
}

/* ------------------------------------------------------------ convolution
 *
 * Layouts are PyTorch's: input [N, C, S...], weight [O, C/G, K...] (a
 * transposed convolution's weight is [C, O/G, K...]). Three primitives
 * cover forward, transposed and every gradient. */

typedef struct {
  int n;  /* spatial dims */
  int64_t stride[MAXD], pad[MAXD], dil[MAXD];
  int64_t groups;
} conv_geom;

/* Plain convolution producing out_sp[] spatial sizes: low padding pad,
 * high padding whatever yields out_sp (cropping where that is negative). */
static ttpu_val conv_fwd(ttpu_lower* L, ttpu_val x, ttpu_val w,
                         const conv_geom* g, const int64_t* out_sp,
                         ttpu_dtype acc) {
  ttpu_type tx = ttpu_l_type(L, x), tw = ttpu_l_type(L, w);
  int64_t padding[2 * MAXD], cut_lo[MAXD] = {0}, cut_hi[MAXD] = {0};
  for (int i = 0; i < g->n; ++i) {
    int64_t k = tw.dims[2 + i], in = tx.dims[2 + i];
    int64_t hi = (out_sp[i] - 1) * g->stride[i] + g->dil[i] * (k - 1) + 1 -
                 in - g->pad[i];
    cut_lo[i] = 0;
    cut_hi[i] = hi < 0 ? -hi : 0;
    padding[2 * i] = g->pad[i];
    padding[2 * i + 1] = hi < 0 ? 0 : hi;
  }
  x = crop(L, x, 2, g->n, cut_lo, cut_hi);
  return ttpu_hlo_convolution(ttpu_l_hlo(L), x, w, g->n, g->stride, padding,
                              NULL, g->dil, g->groups, 1, acc,
                              ttpu_l_precision(L, tx.dtype));
}

/* The gradient of conv_fwd with respect to its input (equivalently a
 * transposed convolution): gy [N, O, So...] to [N, C, in_sp...]. The
 * kernel is flipped and its feature dims swapped within each group, gy is
 * dilated by the stride. */
static ttpu_val conv_dgrad(ttpu_lower* L, ttpu_val gy, ttpu_val w,
                           const conv_geom* g, const int64_t* in_sp,
                           ttpu_dtype acc) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_type tg = ttpu_l_type(L, gy), tw = ttpu_l_type(L, w);
  int n = g->n;
  int64_t G = g->groups, O = tw.dims[0], Ig = tw.dims[1], Og = O / G;
  int64_t d5[MAXD + 1], perm[MAXD + 1];
  d5[0] = G;
  d5[1] = Og;
  d5[2] = Ig;
  for (int i = 0; i < n; ++i) d5[3 + i] = tw.dims[2 + i];
  for (int i = 0; i < n + 3; ++i) perm[i] = i;
  perm[1] = 2;
  perm[2] = 1;
  ttpu_val k = ttpu_hlo_reshape(h, w, n + 3, d5);
  k = ttpu_hlo_transpose(h, k, perm);
  int64_t d4[MAXD], rev[MAXD];
  d4[0] = G * Ig;
  d4[1] = Og;
  for (int i = 0; i < n; ++i) {
    d4[2 + i] = tw.dims[2 + i];
    rev[i] = 2 + i;
  }
  k = ttpu_hlo_reshape(h, k, n + 2, d4);
  k = ttpu_hlo_reverse(h, k, rev, n);
  int64_t padding[2 * MAXD], cut[MAXD], one[MAXD];
  int need_cut = 0;
  for (int i = 0; i < n; ++i) {
    int64_t kk = tw.dims[2 + i], so = tg.dims[2 + i];
    int64_t lo = g->dil[i] * (kk - 1) - g->pad[i];
    int64_t hi = in_sp[i] - (so - 1) * g->stride[i] - 1 + g->pad[i];
    cut[i] = lo < 0 ? -lo : 0;
    padding[2 * i] = lo < 0 ? 0 : lo;
    padding[2 * i + 1] = hi < 0 ? 0 : hi;
    need_cut |= lo < 0 || hi < 0;
    one[i] = 1;
  }
  ttpu_val r = ttpu_hlo_convolution(h, gy, k, n, one, padding, g->stride,
                                    g->dil, G, 1, acc, ttpu_l_precision(L, tg.dtype));
  if (!need_cut) return r;
  ttpu_type tr = ttpu_l_type(L, r);
  int64_t s[MAXD], e[MAXD], st[MAXD];
  for (int d = 0; d < tr.ndim; ++d) {
    s[d] = 0;
    e[d] = tr.dims[d];
    st[d] = 1;
  }
  for (int i = 0; i < n; ++i) {
    s[2 + i] = cut[i];
    e[2 + i] = cut[i] + in_sp[i];
  }
  return ttpu_hlo_slice(h, r, s, e, st);
}

/* The gradient of conv_fwd with respect to its weight: x [N, C, S...] and
 * gy [N, O, So...] to [O, C/G, k_sp...]. A convolution over the batch:
 * x's channels act as its batch, gy is the kernel dilated by the stride,
 * the window steps by the dilation; batch_group_count keeps the groups
 * apart. */
static ttpu_val conv_wgrad(ttpu_lower* L, ttpu_val x, ttpu_val gy,
                           const conv_geom* g, const int64_t* k_sp,
                           ttpu_dtype acc) {
  ttpu_type tx = ttpu_l_type(L, x), tg = ttpu_l_type(L, gy);
  int n = g->n;
  int64_t padding[2 * MAXD], cut_lo[MAXD] = {0}, cut_hi[MAXD] = {0};
  for (int i = 0; i < n; ++i) {
    int64_t hi = (tg.dims[2 + i] - 1) * g->stride[i] + 1 +
                 (k_sp[i] - 1) * g->dil[i] - tx.dims[2 + i] - g->pad[i];
    cut_lo[i] = 0;
    cut_hi[i] = hi < 0 ? -hi : 0;
    padding[2 * i] = g->pad[i];
    padding[2 * i + 1] = hi < 0 ? 0 : hi;
  }
  x = crop(L, x, 2, n, cut_lo, cut_hi);
  ttpu_conv_dims dn;
  memset(&dn, 0, sizeof dn);
  dn.in_batch = 1;
  dn.in_feature = 0;
  dn.k_out = 1;
  dn.k_in = 0;
  dn.out_batch = 1;
  dn.out_feature = 0;
  for (int i = 0; i < n; ++i)
    dn.in_spatial[i] = dn.k_spatial[i] = dn.out_spatial[i] = 2 + i;
  int64_t od[MAXD];
  od[0] = tg.dims[1];
  od[1] = tx.dims[1] / g->groups;
  for (int i = 0; i < n; ++i) od[2 + i] = k_sp[i];
  return ttpu_hlo_convolution_general(
      ttpu_l_hlo(L), x, gy, n, &dn, g->dil, padding, NULL, g->stride, 1,
      g->groups, ttpu_type_make(acc, n + 2, od), ttpu_l_precision(L, tx.dtype));
}

/* Reads stride/padding/dilation/groups starting at arg `a` (stride, pad,
 * dil, transposed, output_padding, groups). */
static void read_conv(ttpu_lower* L, int a, int n, conv_geom* g) {
  g->n = n;
  ints_n(L, a, n, NULL, 1, g->stride);
  ints_n(L, a + 1, n, NULL, 0, g->pad);
  ints_n(L, a + 2, n, NULL, 1, g->dil);
  g->groups = ttpu_l_int(L, a + 5, 1);
  if (g->groups < 1) g->groups = 1;
}

/* Convolution runs in the data dtype (PyTorch's meta function has
 * checked that input, weight and bias agree); its accumulation type is
 * f32 for bf16/f16 and the dtype itself otherwise (the CPU's integer
 * convolution wraps in the input type). */
static ttpu_dtype conv_dtype(ttpu_lower* L, ttpu_dtype dt, ttpu_dtype* acc) {
  if (dt == TTPU_BOOL) reject(L, "slow_conv2d_cpu", dt);
  *acc = dt == TTPU_BF16 || dt == TTPU_F16 ? TTPU_F32 : dt;
  return dt;
}

/* The argument checks of at::convolution that its meta function leaves
 * to the CPU kernels (same messages). */
static ttpu_status* check_conv(ttpu_lower* L, int n, int transposed) {
  const ttpu_tensor* x = ttpu_l_tensor_desc(L, 0, -1);
  const ttpu_tensor* w = ttpu_l_tensor_desc(L, 1, -1);
  if (x && w && x->dtype != w->dtype)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "Input type (%s) and weight type (%s) should be "
                            "the same",
                            ttpu_dtype_name(x->dtype), ttpu_dtype_name(w->dtype));
  int m = 0;
  const int64_t* v = ttpu_l_ints(L, 4, &m);
  for (int i = 0; i < m; ++i)
    if (v[i] < 0)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "negative padding is not supported");
  v = ttpu_l_ints(L, 3, &m);
  for (int i = 0; i < m; ++i)
    if (v[i] <= 0)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "non-positive stride is not supported");
  v = ttpu_l_ints(L, 5, &m);
  for (int i = 0; i < m; ++i)
    if (v[i] <= 0)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "dilation should be greater than zero");
  if (ttpu_l_int(L, 8, 1) <= 0)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "non-positive groups is not supported");
  if (transposed) {
    int64_t st[MAXD], dl[MAXD], op[MAXD];
    ints_n(L, 3, n, NULL, 1, st);
    ints_n(L, 5, n, NULL, 1, dl);
    ints_n(L, 7, n, NULL, 0, op);
    for (int i = 0; i < n; ++i)
      if (op[i] >= st[i] && op[i] >= dl[i])
        return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                                "output padding must be smaller than either "
                                "stride or dilation");
  }
  return NULL;
}

/* convolution(input, weight, bias?, stride, padding, dilation, transposed,
 * output_padding, groups) and _convolution (the same plus cudnn flags). */
static ttpu_status* lower_convolution(ttpu_lower* L) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_type out = ttpu_l_out_type(L, 0);
  ttpu_dtype acc, dt = conv_dtype(L, out.dtype, &acc);
  ttpu_val x = ttpu_hlo_convert(h, ttpu_l_tensor(L, 0), dt);
  ttpu_val w = ttpu_hlo_convert(h, ttpu_l_tensor(L, 1), dt);
  int n = ttpu_l_type(L, w).ndim - 2;
  if (n < 1 || ttpu_l_type(L, x).ndim != n + 2)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "convolution: input and weight ranks differ");
  conv_geom g;
  read_conv(L, 3, n, &g);
  int transposed = ttpu_l_bool(L, 6, 0);
  ttpu_status* bad = check_conv(L, n, transposed);
  if (bad) return bad;
  ttpu_val y = transposed ? conv_dgrad(L, x, w, &g, out.dims + 2, acc)
                          : conv_fwd(L, x, w, &g, out.dims + 2, acc);
  if (!ttpu_l_is_none(L, 2)) {
    ttpu_val bias = ttpu_hlo_convert(h, ttpu_l_tensor(L, 2), acc);
    ttpu_type ty = ttpu_l_type(L, y);
    int64_t map[1] = {1};
    y = ttpu_hlo_binary(h, TTPU_ADD, y, ttpu_hlo_broadcast_in_dim(h, bias, ty, map));
  }
  ttpu_l_set_out(L, 0, y);
  return NULL;
}

/* convolution_backward(grad_output, input, weight, bias_sizes?, stride,
 * padding, dilation, transposed, output_padding, groups, output_mask[3])
 * -> (grad_input, grad_weight, grad_bias). A transposed convolution is the
 * input gradient of a plain one, so its gradients swap roles: its input
 * gradient is a plain convolution and its weight gradient is conv_wgrad
 * with grad_output and input exchanged. */
static ttpu_status* lower_convolution_backward(ttpu_lower* L) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_val gy = ttpu_l_tensor(L, 0), x = ttpu_l_tensor(L, 1),
           w = ttpu_l_tensor(L, 2);
  ttpu_type tx = ttpu_l_type(L, x), tw = ttpu_l_type(L, w);
  ttpu_dtype acc, dt = conv_dtype(L, tx.dtype, &acc);
  gy = ttpu_hlo_convert(h, gy, dt);
  w = ttpu_hlo_convert(h, w, dt);
  int n = tw.ndim - 2;
  conv_geom g;
  read_conv(L, 4, n, &g);
  int transposed = ttpu_l_bool(L, 7, 0);
  if (wanted(L, 0, 10)) {
    ttpu_val gi = transposed ? conv_fwd(L, gy, w, &g, tx.dims + 2, acc)
                             : conv_dgrad(L, gy, w, &g, tx.dims + 2, acc);
    ttpu_l_set_out(L, 0, gi);
  }
  if (wanted(L, 1, 10)) {
    ttpu_val gw = transposed ? conv_wgrad(L, gy, x, &g, tw.dims + 2, acc)
                             : conv_wgrad(L, x, gy, &g, tw.dims + 2, acc);
    ttpu_l_set_out(L, 1, gw);
  }
  if (wanted(L, 2, 10)) {
    ttpu_type tg = ttpu_l_type(L, gy);
    if (ttpu_type_numel(&tg) == 0) {
      /* an empty grad_output (as the CPU's forward gives for no input
       * channels: no output channels either) sums to zeros of the bias */
      ttpu_l_set_out(L, 2, ttpu_hlo_const(h, ttpu_l_out_type(L, 2), 0, 0));
      return NULL;
    }
    int64_t dims[MAXD];
    int nd = 0;
    for (int d = 0; d < tg.ndim; ++d)
      if (d != 1) dims[nd++] = d;
    ttpu_l_set_out(L, 2, ttpu_hlo_reduce(h, ttpu_hlo_convert(h, gy, acc),
                                         TTPU_RED_SUM, dims, nd));
  }
  return NULL;
}

/* ------------------------------------------------------------ max pooling
 *
 * The CPU kernels scan a window in row-major order, starting from its
 * first element and taking `val > max || isnan(val)`: the result is the
 * first maximum, or the last NaN when there is one, and the index is flat
 * within the (spatial) plane. Fixed windows do that scan literally;
 * adaptive ones (variable, possibly large windows) get the same answer
 * from reductions in window_argmax. */

/* Float patches [lead.., O.., K] (each output's window gathered into the
 * trailing dim); pos[d] is an [O_d, K] table of input positions along
 * spatial dim d (-1 for none); H the input's spatial sizes. Sets the
 * values and the flat in-plane indices. */
static void window_argmax(ttpu_lower* L, ttpu_val patches, int n,
                          int64_t* const* pos, const int64_t* H,
                          ttpu_val* val, ttpu_val* idx) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_type tp = ttpu_l_type(L, patches);
  int r = tp.ndim, lead = r - 1 - n;
  int64_t K = tp.dims[r - 1];
  ttpu_type ti = tp;
  ti.dtype = TTPU_I64;
  ttpu_type tb = tp;
  tb.dtype = TTPU_BOOL;
  ttpu_val F = ttpu_hlo_const(h, ti, 0, 0);
  ttpu_val valid = ttpu_hlo_const(h, tb, 0, 1);
  int64_t plane = 1;
  for (int d = n - 1; d >= 0; --d) {
    ttpu_val p = table_to(h, pos[d], tp.dims[lead + d], K, ti, lead + d, r - 1);
    ttpu_val in = ttpu_hlo_binary(
        h, TTPU_AND, ttpu_hlo_compare(h, TTPU_GE, p, ttpu_hlo_const(h, ti, 0, 0)),
        ttpu_hlo_compare(h, TTPU_LT, p, ttpu_hlo_const(h, ti, 0, H[d])));
    valid = ttpu_hlo_binary(h, TTPU_AND, valid, in);
    F = ttpu_hlo_binary(h, TTPU_ADD, F,
                        ttpu_hlo_binary(h, TTPU_MUL, p,
                                        ttpu_hlo_const(h, ti, 0, plane)));
    plane *= H[d];
  }
  ttpu_val isnan = ttpu_hlo_compare(h, TTPU_NE, patches, patches);
  ttpu_val ok = ttpu_hlo_binary(h, TTPU_AND, valid,
                                ttpu_hlo_unary(h, TTPU_NOT, isnan));
  int64_t last[1] = {r - 1};
  /* the max over usable slots (a window's first usable slot wins a tie,
   * and a window of -inf yields its first slot, as on the CPU) */
  ttpu_val fill = ttpu_hlo_const(h, tp, -INFINITY, 0);
  ttpu_val m = ttpu_hlo_reduce(h, ttpu_hlo_select(h, ok, patches, fill),
                               TTPU_RED_MAX, last, 1);
  int64_t keep[MAXD];
  for (int d = 0; d < r - 1; ++d) keep[d] = d;
  ttpu_val mb = ttpu_hlo_broadcast_in_dim(h, m, tp, keep);
  ttpu_val hit = ttpu_hlo_binary(h, TTPU_AND, ok,
                                 ttpu_hlo_compare(h, TTPU_EQ, patches, mb));
  ttpu_val first = ttpu_hlo_reduce(
      h, ttpu_hlo_select(h, hit, F, ttpu_hlo_const(h, ti, 0, INT64_MAX)),
      TTPU_RED_MIN, last, 1);
  ttpu_val nanpos = ttpu_hlo_reduce(
      h,
      ttpu_hlo_select(h, ttpu_hlo_binary(h, TTPU_AND, valid, isnan), F,
                      ttpu_hlo_const(h, ti, 0, -1)),
      TTPU_RED_MAX, last, 1);
  ttpu_type to = ttpu_l_type(L, nanpos);
  ttpu_val has_nan = ttpu_hlo_compare(h, TTPU_GE, nanpos,
                                      ttpu_hlo_const(h, to, 0, 0));
  to.dtype = tp.dtype;
  *val = ttpu_hlo_select(h, has_nan, ttpu_hlo_const(h, to, NAN, 0), m);
  *idx = ttpu_hlo_select(h, has_nan, nanpos, first);
}

/* Spatial geometry of a pooling call: n trailing dims of x. */
typedef struct {
  int n, lead;
  int64_t H[MAXD], O[MAXD];
} pool_geom;

static int pool_geom_of(ttpu_lower* L, ttpu_type x, ttpu_type out, int n,
                        pool_geom* p) {
  p->n = n;
  p->lead = x.ndim - n;
  if (p->lead < 0 || out.ndim != x.ndim) {
    ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INVALID_ARGUMENT,
                  "pooling: expected %d spatial dims", n);
    return 0;
  }
  for (int d = 0; d < n; ++d) {
    p->H[d] = x.dims[p->lead + d];
    p->O[d] = out.dims[p->lead + d];
  }
  return 1;
}

/* Row-major digit d of window slot kk for window sizes k[0..n). */
static int64_t slot_digit(int64_t kk, const int64_t* k, int n, int d) {
  for (int e = n - 1; e > d; --e) kk /= k[e];
  return kk % k[d];
}

/* max_poolNd_with_indices(self, kernel_size, stride=[], padding=0,
 * dilation=1, ceil_mode) -> (values, indices). The output sizes (and so
 * ceil_mode) come from PyTorch's meta function. A fixed window is a
 * strided slice per window slot, so the CPU's scan is done literally, slot
 * by slot in row-major order: all elementwise, one fused loop for XLA. */
static ttpu_status* lower_max_pool(ttpu_lower* L) {
  int n = (int)ttpu_l_param(L);
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  pool_geom p;
  ttpu_type to = ttpu_l_out_type(L, 0);
  if (!pool_geom_of(L, tx, to, n, &p)) return NULL;
  int64_t k[MAXD], s[MAXD], pad[MAXD], dil[MAXD];
  ints_n(L, 1, n, NULL, 1, k);
  ints_n(L, 2, n, k, 1, s);
  ints_n(L, 3, n, NULL, 0, pad);
  ints_n(L, 4, n, NULL, 1, dil);
  /* Pad so every window fits; padded slots are masked, not compared. */
  int64_t lo[MAXD] = {0}, hi[MAXD] = {0}, in0[MAXD] = {0};
  for (int d = 0; d < n; ++d) {
    int64_t need = (p.O[d] - 1) * s[d] + (k[d] - 1) * dil[d] + 1;
    lo[p.lead + d] = pad[d];
    hi[p.lead + d] = need - p.H[d] - pad[d] > 0 ? need - p.H[d] - pad[d] : 0;
  }
  ttpu_val xp = ttpu_hlo_pad(
      h, x, ttpu_hlo_const(h, ttpu_type_make(tx.dtype, 0, NULL), 0, 0), lo, hi, in0);
  ttpu_type txp = ttpu_l_type(L, xp);
  ttpu_type ti = to, tb = to;
  ti.dtype = TTPU_I64;
  tb.dtype = TTPU_BOOL;
  int is_float = ttpu_dtype_is_float(tx.dtype);
  int64_t K = 1, maxo = 1;
  for (int d = 0; d < n; ++d) {
    K *= k[d];
    maxo = p.O[d] > maxo ? p.O[d] : maxo;
  }
  int64_t* pos = malloc(sizeof(int64_t) * (size_t)(2 * maxo + 1));
  if (!pos) return ttpu_status_oom();
  int64_t* in = pos + maxo;
  ttpu_val best = ttpu_hlo_const(h, to, 0, 0), idx = ttpu_hlo_const(h, ti, 0, 0);
  ttpu_val have = ttpu_hlo_const(h, tb, 0, 0);
  for (int64_t kk = 0; kk < K; ++kk) {
    int64_t st[MAXD], lim[MAXD], step[MAXD];
    for (int d = 0; d < txp.ndim; ++d) {
      st[d] = 0;
      lim[d] = txp.dims[d];
      step[d] = 1;
    }
    ttpu_val F = TTPU_VAL_ERROR, valid = TTPU_VAL_ERROR;
    int64_t plane = 1;
    for (int d = n - 1; d >= 0; --d) {
      int64_t off = slot_digit(kk, k, n, d);
      st[p.lead + d] = off * dil[d];
      lim[p.lead + d] = off * dil[d] + (p.O[d] - 1) * s[d] + 1;
      step[p.lead + d] = s[d];
      int all_in = 1;
      for (int64_t o = 0; o < p.O[d]; ++o) {
        int64_t q = o * s[d] - pad[d] + off * dil[d];
        pos[o] = q * plane;
        in[o] = q >= 0 && q < p.H[d];
        all_in &= (int)in[o];
      }
      ttpu_val f = table_to(h, pos, p.O[d], 1, ti, p.lead + d, -1);
      F = F == TTPU_VAL_ERROR ? f : ttpu_hlo_binary(h, TTPU_ADD, F, f);
      if (!all_in) {
        ttpu_val m = table_to(h, in, p.O[d], 1, ti, p.lead + d, -1);
        m = ttpu_hlo_compare(h, TTPU_NE, m, ttpu_hlo_const(h, ti, 0, 0));
        valid = valid == TTPU_VAL_ERROR ? m : ttpu_hlo_binary(h, TTPU_AND, valid, m);
      }
      plane *= p.H[d];
    }
    ttpu_val v = ttpu_hlo_reshape(h, ttpu_hlo_slice(h, xp, st, lim, step), to.ndim,
                                  to.dims);
    /* take = valid && (first valid slot || v > best || isnan(v)) */
    ttpu_val take = ttpu_hlo_binary(h, TTPU_OR, ttpu_hlo_unary(h, TTPU_NOT, have),
                                    ttpu_hlo_compare(h, TTPU_GT, v, best));
    if (is_float)
      take = ttpu_hlo_binary(h, TTPU_OR, take, ttpu_hlo_compare(h, TTPU_NE, v, v));
    if (valid != TTPU_VAL_ERROR) {
      take = ttpu_hlo_binary(h, TTPU_AND, take, valid);
      have = ttpu_hlo_binary(h, TTPU_OR, have, valid);
    } else {
      have = ttpu_hlo_const(h, tb, 0, 1);
    }
    best = ttpu_hlo_select(h, take, v, best);
    idx = ttpu_hlo_select(h, take, F, idx);
  }
  free(pos);
  ttpu_l_set_out(L, 0, best);
  ttpu_l_set_out(L, 1, idx);
  return NULL;
}

/* PyTorch's adaptive window of output o: [start, end) over in inputs. */
static int64_t ad_start(int64_t o, int64_t out, int64_t in) {
  return (o / out) * in + ((o % out) * in) / out;
}
static int64_t ad_end(int64_t o, int64_t out, int64_t in) {
  return 1 + ((o + 1) * in - 1) / out;
}

/* adaptive_max_poolNd(self, output_size) -> (values, indices). */
static ttpu_status* lower_adaptive_max_pool(ttpu_lower* L, int n) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  pool_geom p;
  if (!pool_geom_of(L, tx, ttpu_l_out_type(L, 0), n, &p)) return NULL;
  if (p.lead + 2 * n > MAXD)
    return ttpu_status_make(TTPU_UNIMPLEMENTED, "adaptive_max_pool: rank too large");
  int64_t kw[MAXD], K = 1;
  for (int d = 0; d < n; ++d) {
    kw[d] = 1;
    for (int64_t o = 0; o < p.O[d]; ++o) {
      int64_t c = ad_end(o, p.O[d], p.H[d]) - ad_start(o, p.O[d], p.H[d]);
      if (c > kw[d]) kw[d] = c;
    }
    K *= kw[d];
  }
  int64_t* pos[MAXD] = {0};
  int64_t* gi = NULL;
  int ok = 1;
  for (int d = 0; d < n && ok; ++d)
    ok = (pos[d] = malloc(sizeof(int64_t) * (size_t)(p.O[d] * K + 1))) != NULL;
  int64_t maxg = 0;
  for (int d = 0; d < n; ++d) maxg = maxg > p.O[d] * kw[d] ? maxg : p.O[d] * kw[d];
  if (ok) ok = (gi = malloc(sizeof(int64_t) * (size_t)(maxg + 1))) != NULL;
  if (!ok) {
    for (int d = 0; d < n; ++d) free(pos[d]);
    free(gi);
    return ttpu_status_oom();
  }
  /* Gather every window along each dim: [lead.., O1*k1, .., On*kn]. */
  ttpu_val v = x;
  for (int d = 0; d < n; ++d) {
    for (int64_t o = 0; o < p.O[d]; ++o) {
      int64_t s0 = ad_start(o, p.O[d], p.H[d]), e0 = ad_end(o, p.O[d], p.H[d]);
      for (int64_t t = 0; t < kw[d]; ++t)
        gi[o * kw[d] + t] = s0 + t < e0 ? s0 + t : e0 - 1;
    }
    v = index_along(L, v, p.lead + d, gi, p.O[d] * kw[d]);
  }
  for (int d = 0; d < n; ++d)
    for (int64_t o = 0; o < p.O[d]; ++o) {
      int64_t s0 = ad_start(o, p.O[d], p.H[d]), e0 = ad_end(o, p.O[d], p.H[d]);
      for (int64_t kk = 0; kk < K; ++kk) {
        int64_t t = slot_digit(kk, kw, n, d);
        pos[d][o * K + kk] = s0 + t < e0 ? s0 + t : -1;
      }
    }
  /* [lead.., O1, k1, .., On, kn] -> [lead.., O1..On, k1..kn] -> K. */
  int64_t split[MAXD], perm[MAXD], fin[MAXD];
  for (int d = 0; d < p.lead; ++d) {
    split[d] = fin[d] = tx.dims[d];
    perm[d] = d;
  }
  for (int d = 0; d < n; ++d) {
    split[p.lead + 2 * d] = p.O[d];
    split[p.lead + 2 * d + 1] = kw[d];
    perm[p.lead + d] = p.lead + 2 * d;
    perm[p.lead + n + d] = p.lead + 2 * d + 1;
    fin[p.lead + d] = p.O[d];
  }
  fin[p.lead + n] = K;
  v = ttpu_hlo_reshape(h, v, p.lead + 2 * n, split);
  v = ttpu_hlo_transpose(h, v, perm);
  v = ttpu_hlo_reshape(h, v, p.lead + n + 1, fin);
  ttpu_val val, idx;
  window_argmax(L, v, n, pos, p.H, &val, &idx);
  ttpu_l_set_out(L, 0, val);
  ttpu_l_set_out(L, 1, idx);
  for (int d = 0; d < n; ++d) free(pos[d]);
  free(gi);
  return NULL;
}

static ttpu_status* lower_adaptive_max_pool2d(ttpu_lower* L) {
  return lower_adaptive_max_pool(L, 2);
}
static ttpu_status* lower_adaptive_max_pool3d(ttpu_lower* L) {
  return lower_adaptive_max_pool(L, 3);
}

/* The backward of every max pooling: grad_output scattered (added) into
 * the input plane at `indices` (arg idx_arg), as the CPU kernels do. */
/* param: the spatial dims. */
static ttpu_status* lower_max_pool_backward(ttpu_lower* L, int idx_arg) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_type out = ttpu_l_out_type(L, 0);
  ttpu_val go = ttpu_l_tensor(L, 0), ind = ttpu_l_tensor(L, idx_arg);
  ttpu_type tg = ttpu_l_type(L, go);
  /* planes: the leading dims the indices do not address (the meta
   * function has checked that grad_output and indices agree) */
  const char* name = ttpu_op_name(ttpu_l_call(L)->op);
  int nsp = (int)ttpu_l_param(L);
  int lead = out.ndim - nsp;
  if (lead < 0)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "%s: bad rank", name);
  int64_t planes = 1, P = 1, Q = 1;
  for (int d = 0; d < lead; ++d) planes *= out.dims[d];
  for (int d = lead; d < out.ndim; ++d) P *= out.dims[d];
  for (int d = lead; d < tg.ndim; ++d) Q *= tg.dims[d];
  ttpu_dtype acc = acc_dtype(out.dtype);
  int64_t pq[2] = {planes, Q};
  ttpu_val g = ttpu_hlo_reshape(h, ttpu_hlo_convert(h, go, acc), 2, pq);
  ttpu_val i = ttpu_hlo_reshape(h, ttpu_hlo_convert(h, ind, TTPU_I64), 2, pq);
  ttpu_type ti = ttpu_type_make(TTPU_I64, 2, pq);
  ttpu_val base = ttpu_hlo_binary(h, TTPU_MUL, ttpu_hlo_iota(h, ti, 0),
                                  ttpu_hlo_const(h, ti, 0, P));
  i = ttpu_hlo_binary(h, TTPU_ADD, i, base);
  int64_t total = planes * P;
  ttpu_val z = ttpu_hlo_const(h, ttpu_type_make(acc, 1, &total), 0, 0);
  ttpu_val r = ttpu_hlo_put(h, z, i, g, TTPU_ADD);
  ttpu_l_set_out(L, 0, ttpu_hlo_reshape(h, r, out.ndim, out.dims));
  return NULL;
}

static ttpu_status* lower_max_pool_with_indices_backward(ttpu_lower* L) {
  return lower_max_pool_backward(L, 7);
}
static ttpu_status* lower_adaptive_max_pool_backward(ttpu_lower* L) {
  return lower_max_pool_backward(L, 2);
}

/* ------------------------------------------------------------ avg pooling */

/* The divisor of every output of avg_poolNd (CPU formula: the window
 * clipped to the padded input, or to the input without count_include_pad,
 * or divisor_override), as a value of type `to` (acc dtype, output shape).
 * *empty receives a bool mask of windows with no input element (whose
 * output the CPU sets to 0), or VAL_ERROR when there are none. */
static ttpu_val avg_divisor(ttpu_lower* L, const pool_geom* p,
                            const int64_t* k, const int64_t* s,
                            const int64_t* pad, int count_include_pad,
                            int has_override, int64_t override, ttpu_type to,
                            ttpu_val* empty) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_type ti = to;
  ti.dtype = TTPU_I64;
  ttpu_val div = ttpu_hlo_const(h, ti, 0, has_override ? override : 1);
  ttpu_val none = TTPU_VAL_ERROR;
  for (int d = 0; d < p->n; ++d) {
    int64_t* c = malloc(sizeof(int64_t) * (size_t)(2 * p->O[d] + 1));
    if (!c) return ttpu_hlo_fail(h, TTPU_RESOURCE_EXHAUSTED, "out of host memory");
    int64_t* e = c + p->O[d];
    int any_empty = 0;
    for (int64_t o = 0; o < p->O[d]; ++o) {
      int64_t a = o * s[d] - pad[d];
      int64_t b = a + k[d] < p->H[d] + pad[d] ? a + k[d] : p->H[d] + pad[d];
      int64_t pool = b - a;
      a = a > 0 ? a : 0;
      b = b < p->H[d] ? b : p->H[d];
      c[o] = count_include_pad ? pool : b - a;
      e[o] = a >= b;
      any_empty |= a >= b;
    }
    if (!has_override)
      div = ttpu_hlo_binary(h, TTPU_MUL, div,
                            table_to(h, c, p->O[d], 1, ti, p->lead + d, -1));
    if (any_empty) {
      ttpu_val m = table_to(h, e, p->O[d], 1, ti, p->lead + d, -1);
      m = ttpu_hlo_compare(h, TTPU_NE, m, ttpu_hlo_const(h, ti, 0, 0));
      none = none == TTPU_VAL_ERROR ? m : ttpu_hlo_binary(h, TTPU_OR, none, m);
    }
    free(c);
  }
  *empty = none;
  return ttpu_hlo_convert(h, div, to.dtype);
}

/* avg_poolNd(self, kernel_size, stride=[], padding=0, ceil_mode,
 * count_include_pad, divisor_override?). */
static ttpu_status* lower_avg_pool(ttpu_lower* L) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x), out = ttpu_l_out_type(L, 0);
  int n = (int)ttpu_l_param(L);
  pool_geom p;
  if (!pool_geom_of(L, tx, out, n, &p)) return NULL;
  int64_t k[MAXD], s[MAXD], pad[MAXD];
  ints_n(L, 1, n, NULL, 1, k);
  ints_n(L, 2, n, k, 1, s);
  ints_n(L, 3, n, NULL, 0, pad);
  int cip = ttpu_l_bool(L, 5, 1);
  int has_ov = !ttpu_l_is_none(L, 6);
  int64_t ov = ttpu_l_int(L, 6, 1);
  ttpu_dtype acc = acc_dtype(tx.dtype);
  x = ttpu_hlo_convert(h, x, acc);
  int64_t win[MAXD], str[MAXD], padding[2 * MAXD], cut_lo[MAXD] = {0},
      cut_hi[MAXD] = {0};
  for (int d = 0; d < tx.ndim; ++d) {
    win[d] = str[d] = 1;
    padding[2 * d] = padding[2 * d + 1] = 0;
  }
  for (int d = 0; d < n; ++d) {
    int64_t hi = (p.O[d] - 1) * s[d] + k[d] - p.H[d] - pad[d];
    win[p.lead + d] = k[d];
    str[p.lead + d] = s[d];
    padding[2 * (p.lead + d)] = pad[d];
    padding[2 * (p.lead + d) + 1] = hi > 0 ? hi : 0;
    cut_lo[d] = 0;
    cut_hi[d] = hi < 0 ? -hi : 0;
  }
  x = crop(L, x, p.lead, n, cut_lo, cut_hi);
  ttpu_val sum = ttpu_hlo_reduce_window(h, x, TTPU_RED_SUM, TTPU_VAL_ERROR, win,
                                        str, NULL, NULL, padding);
  ttpu_type ta = out;
  ta.dtype = acc;
  ttpu_val empty;
  ttpu_val div = avg_divisor(L, &p, k, s, pad, cip, has_ov, ov, ta, &empty);
  ttpu_val r = ttpu_hlo_binary(h, TTPU_DIV, sum, div);
  if (empty != TTPU_VAL_ERROR)
    r = ttpu_hlo_select(h, empty, ttpu_hlo_const(h, ta, 0, 0), r);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* avg_poolNd_backward(grad_output, self, kernel_size, stride, padding,
 * ceil_mode, count_include_pad, divisor_override?): each output's share
 * spread over its window, i.e. the input gradient of a convolution with a
 * ones kernel applied to every plane. */
static ttpu_status* lower_avg_pool_backward(ttpu_lower* L) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_val go = ttpu_l_tensor(L, 0);
  ttpu_type tg = ttpu_l_type(L, go), out = ttpu_l_out_type(L, 0);
  int n = (int)ttpu_l_param(L);
  pool_geom p;
  if (!pool_geom_of(L, out, tg, n, &p)) return NULL;
  int64_t k[MAXD], s[MAXD], pad[MAXD];
  ints_n(L, 2, n, NULL, 1, k);
  ints_n(L, 3, n, k, 1, s);
  ints_n(L, 4, n, NULL, 0, pad);
  int cip = ttpu_l_bool(L, 6, 1);
  int has_ov = !ttpu_l_is_none(L, 7);
  int64_t ov = ttpu_l_int(L, 7, 1);
  ttpu_dtype acc = acc_dtype(out.dtype);
  ttpu_type ta = tg;
  ta.dtype = acc;
  ttpu_val empty;
  ttpu_val div = avg_divisor(L, &p, k, s, pad, cip, has_ov, ov, ta, &empty);
  ttpu_val g = ttpu_hlo_binary(h, TTPU_DIV, ttpu_hlo_convert(h, go, acc), div);
  if (empty != TTPU_VAL_ERROR)
    g = ttpu_hlo_select(h, empty, ttpu_hlo_const(h, ta, 0, 0), g);
  int64_t planes = 1;
  for (int d = 0; d < p.lead; ++d) planes *= tg.dims[d];
  int64_t gd[MAXD], kd[MAXD];
  gd[0] = planes;
  gd[1] = 1;
  kd[0] = kd[1] = 1;
  for (int d = 0; d < n; ++d) {
    gd[2 + d] = p.O[d];
    kd[2 + d] = k[d];
  }
  g = ttpu_hlo_reshape(h, g, n + 2, gd);
  ttpu_val ones = ttpu_hlo_const(h, ttpu_type_make(acc, n + 2, kd), 1.0, 1);
  conv_geom cg;
  cg.n = n;
  cg.groups = 1;
  for (int d = 0; d < n; ++d) {
    cg.stride[d] = s[d];
    cg.pad[d] = pad[d];
    cg.dil[d] = 1;
  }
  ttpu_val r = conv_dgrad(L, g, ones, &cg, p.H, acc);
  ttpu_l_set_out(L, 0, ttpu_hlo_reshape(h, r, out.ndim, out.dims));
  return NULL;
}

/* ------------------------------------------------------------ adaptive avg */

/* Divides *v (of type ta, the accumulation type) by the length of each
 * output's adaptive window, dim by dim: the averaging step shared by the
 * adaptive average pool and its backward. */
static ttpu_status* divide_by_window_lengths(ttpu_lower* L, ttpu_val* v,
                                             ttpu_type ta, const pool_geom* p,
                                             int n) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  for (int d = 0; d < n; ++d) {
    int64_t O = p->O[d], H = p->H[d];
    int64_t* len = malloc(sizeof(int64_t) * (size_t)(O + 1));
    if (!len) return ttpu_status_oom();
    for (int64_t o = 0; o < O; ++o) len[o] = ad_end(o, O, H) - ad_start(o, O, H);
    ttpu_val c = ttpu_hlo_convert(h, table_to(h, len, O, 1, ta, p->lead + d, -1),
                                  ta.dtype);
    *v = ttpu_hlo_binary(h, TTPU_DIV, *v, c);
    free(len);
  }
  return NULL;
}

/* _adaptive_avg_poolNd(self, output_size): per dim, each window summed
 * and divided by its length (the CPU divides by each length in turn). */
static ttpu_status* lower_adaptive_avg_pool(ttpu_lower* L) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x), out = ttpu_l_out_type(L, 0);
  int n = (int)ttpu_l_param(L);
  pool_geom p;
  if (!pool_geom_of(L, tx, out, n, &p)) return NULL;
  ttpu_dtype acc = acc_dtype(tx.dtype);
  ttpu_val v = ttpu_hlo_convert(h, x, acc);
  for (int d = 0; d < n; ++d) {
    int64_t O = p.O[d], H = p.H[d], km = 1;
    for (int64_t o = 0; o < O; ++o)
      if (ad_end(o, O, H) - ad_start(o, O, H) > km) km = ad_end(o, O, H) - ad_start(o, O, H);
    int64_t* idx = malloc(sizeof(int64_t) * (size_t)(O * km + O + 1));
    if (!idx) return ttpu_status_oom();
    int64_t* len = idx + O * km;
    for (int64_t o = 0; o < O; ++o) {
      int64_t a = ad_start(o, O, H), b = ad_end(o, O, H);
      len[o] = b - a;
      for (int64_t t = 0; t < km; ++t) idx[o * km + t] = a + t < b ? a + t : -1;
    }
    v = gather_sum(L, v, p.lead + d, O, km, idx, NULL);
    free(idx);
  }
  ttpu_type ta = out;
  ta.dtype = acc;
  ttpu_status* st = divide_by_window_lengths(L, &v, ta, &p, n);
  if (st) return st;
  ttpu_l_set_out(L, 0, v);
  return NULL;
}

/* _adaptive_avg_poolNd_backward(grad_output, self): each output's grad
 * divided by its window lengths, summed back over the windows holding
 * each input element. */
static ttpu_status* lower_adaptive_avg_pool_backward(ttpu_lower* L) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_val go = ttpu_l_tensor(L, 0);
  ttpu_type tg = ttpu_l_type(L, go), out = ttpu_l_out_type(L, 0);
  int n = (int)ttpu_l_param(L);
  pool_geom p;
  if (!pool_geom_of(L, out, tg, n, &p)) return NULL;
  ttpu_dtype acc = acc_dtype(out.dtype);
  ttpu_val v = ttpu_hlo_convert(h, go, acc);
  ttpu_type ta = tg;
  ta.dtype = acc;
  ttpu_status* st = divide_by_window_lengths(L, &v, ta, &p, n);
  if (st) return st;
  for (int d = 0; d < n; ++d) {
    int64_t O = p.O[d], H = p.H[d], km = 1;
    /* input h lies in the windows of outputs [first(h), last(h)] */
    int64_t* cnt = calloc((size_t)H + 1, sizeof(int64_t));
    if (!cnt) return ttpu_status_oom();
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = ad_start(o, O, H); i < ad_end(o, O, H); ++i)
        if (++cnt[i] > km) km = cnt[i];
    int64_t* idx = malloc(sizeof(int64_t) * (size_t)(H * km + 1));
    if (!idx) {
      free(cnt);
      return ttpu_status_oom();
    }
    for (int64_t i = 0; i < H * km; ++i) idx[i] = -1;
    memset(cnt, 0, sizeof(int64_t) * (size_t)H);
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = ad_start(o, O, H); i < ad_end(o, O, H); ++i)
        idx[i * km + cnt[i]++] = o;
    v = gather_sum(L, v, p.lead + d, H, km, idx, NULL);
    free(idx);
    free(cnt);
  }
  ttpu_l_set_out(L, 0, v);
  return NULL;
}

/* ------------------------------------------------------------ upsampling */

/* In an upsample record's param, with its spatial dims: nearest-exact. */
#define UPSAMPLE_EXACT (1 << 8)

/* Spatial dims of an upsample op (its record's param). */
static int upsample_dims(ttpu_lower* L) {
  return (int)(ttpu_l_param(L) & ~UPSAMPLE_EXACT);
}

/* A `float? scales` arg: >0 when given and positive, else 0. */
static double scale_arg(ttpu_lower* L, int arg) {
  if (ttpu_l_is_none(L, arg)) return 0;
  double s = ttpu_l_float(L, arg, 0);
  return s > 0 ? s : 0;
}

/* PyTorch's nearest / nearest-exact source index (UpSample.h), in its
 * float arithmetic. */
static int64_t nearest_src(int64_t o, int64_t in, int64_t out, double scale,
                           int exact) {
  if (!exact) {
    if (out == in) return o;
    if (out == 2 * in) return o >> 1;
  }
  float sc = scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
  float f = exact ? (float)(((double)o + 0.5) * (double)sc)
                  : (float)o * sc;
  int64_t i = (int64_t)floorf(f);
  return i < in - 1 ? i : in - 1;
}

/* upsample_nearestNd / _upsample_nearest_exactNd (self, output_size,
 * scales...) and their backwards (grad_output, output_size, input_size,
 * scales...). */
static ttpu_status* lower_upsample_nearest(ttpu_lower* L, int backward) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  int n = upsample_dims(L);
  int exact = (ttpu_l_param(L) & UPSAMPLE_EXACT) != 0;
  ttpu_val v = ttpu_l_tensor(L, 0);
  ttpu_type tin = ttpu_l_type(L, v), out = ttpu_l_out_type(L, 0);
  /* big: the upsampled side; small: the original input */
  ttpu_type big = backward ? tin : out, small = backward ? out : tin;
  int lead = out.ndim - n, sarg = backward ? 3 : 2;
  if (lead < 0 || tin.ndim != out.ndim)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "upsample: bad rank");
  if (backward) {
    if (!require_float(L, "upsample_nearest_backward", out.dtype)) return NULL;
    v = ttpu_hlo_convert(h, v, acc_dtype(out.dtype));
  } else if (out.dtype != TTPU_U8 &&
             !require_float(L, "compute_indices_weights_nearest", out.dtype)) {
    return NULL; /* the CPU kernel's dtypes: floats and uint8 */
  }
  for (int d = 0; d < n; ++d) {
    int64_t O = big.dims[lead + d], H = small.dims[lead + d];
    double sc = scale_arg(L, sarg + d);
    int64_t* src = malloc(sizeof(int64_t) * (size_t)(O + 1));
    if (!src) return ttpu_status_oom();
    for (int64_t o = 0; o < O; ++o) src[o] = nearest_src(o, H, O, sc, exact);
    if (!backward) {
      v = index_along(L, v, lead + d, src, O);
    } else {
      int64_t km, *idx;
      double* wt;
      if (!invert_maps(src, NULL, NULL, NULL, O, H, &km, &idx, &wt)) {
        free(src);
        return ttpu_status_oom();
      }
      v = gather_sum(L, v, lead + d, H, km, idx, NULL);
      free(idx);
      free(wt);
    }
    free(src);
  }
  ttpu_l_set_out(L, 0, v);
  return NULL;
}

static ttpu_status* lower_upsample_nearest_fwd(ttpu_lower* L) {
  return lower_upsample_nearest(L, 0);
}
static ttpu_status* lower_upsample_nearest_bwd(ttpu_lower* L) {
  return lower_upsample_nearest(L, 1);
}

/* PyTorch's linear interpolation sources and weights for output o
 * (compute_source_index_and_lambda), in opmath (float, or double for
 * float64 data). */
static void linear_src(int64_t o, int64_t in, int64_t out, int align,
                       double scale, int dbl, int64_t* i0, int64_t* i1,
                       double* l0, double* l1) {
  if (out == in) {
    *i0 = *i1 = o;
    *l0 = 1;
    *l1 = 0;
    return;
  }
  double real, lam;
  if (dbl) {
    double r = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0)
                     : (scale > 0 ? 1.0 / scale : (double)in / (double)out);
    real = align ? r * (double)o : r * ((double)o + 0.5) - 0.5;
    if (!align && real < 0) real = 0;
    int64_t i = (int64_t)floorf((float)real);
    *i0 = i < in - 1 ? i : in - 1;
    lam = real - (double)*i0;
    lam = lam < 0 ? 0 : (lam > 1 ? 1 : lam);
    *l1 = lam;
    *l0 = 1.0 - lam;
  } else {
    float r = align ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f)
                    : (scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out);
    float rf = align ? r * (float)o : r * ((float)o + 0.5f) - 0.5f;
    if (!align && rf < 0) rf = 0;
    int64_t i = (int64_t)floorf(rf);
    *i0 = i < in - 1 ? i : in - 1;
    float lf = rf - (float)*i0;
    lf = lf < 0 ? 0 : (lf > 1 ? 1 : lf);
    *l1 = lf;
    *l0 = 1.0f - lf;
  }
  *i1 = *i0 + (*i0 < in - 1 ? 1 : 0);
}

/* upsample_linear1d / upsample_bilinear2d / upsample_trilinear3d
 * (self, output_size, align_corners, scales...) and their backwards
 * (grad_output, output_size, input_size, align_corners, scales...):
 * separable, one dim at a time. */
static ttpu_status* lower_upsample_linear(ttpu_lower* L, int backward) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  int n = upsample_dims(L);
  ttpu_val v = ttpu_l_tensor(L, 0);
  ttpu_type tin = ttpu_l_type(L, v), out = ttpu_l_out_type(L, 0);
  ttpu_type big = backward ? tin : out, small = backward ? out : tin;
  int lead = out.ndim - n;
  int align = ttpu_l_bool(L, backward ? 3 : 2, 0), sarg = backward ? 4 : 3;
  if (lead < 0 || tin.ndim != out.ndim)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "upsample: bad rank");
  /* uint8 bilinear: the CPU's fixed-point path (ops/upsample_u8.c); its
   * out= form is the functional op's result copied into out */
  if (n == 2 && !backward && out.dtype == TTPU_U8 && tin.dtype == TTPU_U8) return ttpu_upsample_u8(L, 0, 0, 0);
  if (!require_float(L, "compute_indices_weights_linear", out.dtype)) return NULL;
  ttpu_dtype acc = acc_dtype(out.dtype);
  v = ttpu_hlo_convert(h, v, acc);
  for (int d = 0; d < n; ++d) {
    int64_t O = big.dims[lead + d], H = small.dims[lead + d];
    double sc = scale_arg(L, sarg + d);
    int64_t* ii = malloc(sizeof(int64_t) * (size_t)(2 * O + 1));
    double* ww = malloc(sizeof(double) * (size_t)(2 * O + 1));
    if (!ii || !ww) {
      free(ii);
      free(ww);
      return ttpu_status_oom();
    }
    for (int64_t o = 0; o < O; ++o)
      linear_src(o, H, O, align, sc, out.dtype == TTPU_F64, &ii[2 * o],
                 &ii[2 * o + 1], &ww[2 * o], &ww[2 * o + 1]);
    if (!backward) {
      v = gather_sum(L, v, lead + d, O, 2, ii, ww);
    } else {
      int64_t* i0 = malloc(sizeof(int64_t) * (size_t)(2 * O + 1));
      double* w0 = malloc(sizeof(double) * (size_t)(2 * O + 1));
      int64_t km = 0, *idx = NULL;
      double* wt = NULL;
      int ok = i0 && w0;
      if (ok) {
        for (int64_t o = 0; o < O; ++o) {
          i0[o] = ii[2 * o];
          i0[O + o] = ii[2 * o + 1];
          w0[o] = ww[2 * o];
          w0[O + o] = ww[2 * o + 1];
        }
        ok = invert_maps(i0, w0, i0 + O, w0 + O, O, H, &km, &idx, &wt);
      }
      if (ok) v = gather_sum(L, v, lead + d, H, km, idx, wt);
      free(i0);
      free(w0);
      free(idx);
      free(wt);
      if (!ok) {
        free(ii);
        free(ww);
        return ttpu_status_oom();
      }
    }
    free(ii);
    free(ww);
  }
  ttpu_l_set_out(L, 0, v);
  return NULL;
}

static ttpu_status* lower_upsample_linear_fwd(ttpu_lower* L) {
  return lower_upsample_linear(L, 0);
}
static ttpu_status* lower_upsample_linear_bwd(ttpu_lower* L) {
  return lower_upsample_linear(L, 1);
}

/* convolution_overrideable / convolution_backward_overrideable are not
 * registered: `convolution` is caught first (autograd stays with
 * ConvolutionBackward0, which calls convolution_backward), and the
 * overrideables have no meta kernel to size their outputs. */
const ttpu_op_def ttpu_ops_conv[] = {
    {"convolution", lower_convolution, .flags = 0},
    {"_convolution", lower_convolution, .flags = 0},
    {"convolution_backward", lower_convolution_backward, .flags = 0},
    {"max_pool2d_with_indices", lower_max_pool, .param = 2, .kinds = TTPU_K_NUM, .kernel = "max_pool2d"},
    {"max_pool3d_with_indices", lower_max_pool, .param = 3, .kinds = TTPU_K_NUM, .kernel = "max_pool3d"},
    {"max_pool2d_with_indices_backward", lower_max_pool_with_indices_backward, .param = 2},
    {"max_pool3d_with_indices_backward", lower_max_pool_with_indices_backward, .param = 3},
    {"adaptive_max_pool2d", lower_adaptive_max_pool2d, .kinds = TTPU_K_FLOAT, .kernel = "adaptive_max_pool2d"},
    {"adaptive_max_pool3d", lower_adaptive_max_pool3d, .kinds = TTPU_K_FLOAT, .kernel = "adaptive_max_pool3d"},
    {"adaptive_max_pool2d_backward", lower_adaptive_max_pool_backward, .param = 2},
    {"adaptive_max_pool3d_backward", lower_adaptive_max_pool_backward, .param = 3},
    {"avg_pool2d", lower_avg_pool, .param = 2, .kinds = TTPU_K_NUM, .kernel = "avg_pool2d"},
    {"avg_pool3d", lower_avg_pool, .param = 3, .kinds = TTPU_K_NUM, .kernel = "avg_pool3d"},
    {"avg_pool2d_backward", lower_avg_pool_backward, .param = 2},
    {"avg_pool3d_backward", lower_avg_pool_backward, .param = 3},
    {"_adaptive_avg_pool2d", lower_adaptive_avg_pool, .param = 2, .kinds = TTPU_K_FLOAT, .kernel = "adaptive_avg_pool2d"},
    {"_adaptive_avg_pool3d", lower_adaptive_avg_pool, .param = 3, .kinds = TTPU_K_FLOAT, .kernel = "adaptive_avg_pool3d"},
    {"_adaptive_avg_pool2d_backward", lower_adaptive_avg_pool_backward, .param = 2},
    {"_adaptive_avg_pool3d_backward", lower_adaptive_avg_pool_backward, .param = 3},
    {"upsample_nearest1d", lower_upsample_nearest_fwd, .param = 1},
    {"upsample_nearest2d", lower_upsample_nearest_fwd, .param = 2},
    {"upsample_nearest3d", lower_upsample_nearest_fwd, .param = 3},
    {"_upsample_nearest_exact1d", lower_upsample_nearest_fwd, .param = 1 | UPSAMPLE_EXACT},
    {"_upsample_nearest_exact2d", lower_upsample_nearest_fwd, .param = 2 | UPSAMPLE_EXACT},
    {"_upsample_nearest_exact3d", lower_upsample_nearest_fwd, .param = 3 | UPSAMPLE_EXACT},
    {"upsample_nearest1d_backward", lower_upsample_nearest_bwd, .param = 1},
    {"upsample_nearest2d_backward", lower_upsample_nearest_bwd, .param = 2},
    {"upsample_nearest3d_backward", lower_upsample_nearest_bwd, .param = 3},
    {"_upsample_nearest_exact1d_backward", lower_upsample_nearest_bwd, .param = 1 | UPSAMPLE_EXACT},
    {"_upsample_nearest_exact2d_backward", lower_upsample_nearest_bwd, .param = 2 | UPSAMPLE_EXACT},
    {"_upsample_nearest_exact3d_backward", lower_upsample_nearest_bwd, .param = 3 | UPSAMPLE_EXACT},
    {"upsample_linear1d", lower_upsample_linear_fwd, .param = 1},
    {"upsample_bilinear2d", lower_upsample_linear_fwd, .param = 2},
    {"upsample_trilinear3d", lower_upsample_linear_fwd, .param = 3},
    {"upsample_linear1d_backward", lower_upsample_linear_bwd, .param = 1},
    {"upsample_bilinear2d_backward", lower_upsample_linear_bwd, .param = 2},
    {"upsample_trilinear3d_backward", lower_upsample_linear_bwd, .param = 3},
    {0},
};
