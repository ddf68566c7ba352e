/* histogram.c - torch.histogram (histogram.bin_ct: equal bins over a
 * range, the input's min..max by default; histogram.bins_tensor: given
 * edges; with their out= forms) and torch.histogramdd's pieces
 * (_histogramdd_bin_edges, _histogramdd_from_bin_cts,
 * _histogramdd_from_bin_tensors), all on one D-dimensional core: the input
 * is a set of points (n, D), histogram the case D = 1. Output sizes are
 * known (the bin counts); only the edges without a range depend on the
 * data, and they are computed on the device.
 *
 * A coordinate's bin is found as the CPU finds it: upper_bound over that
 * dim's edges (the same binary search, step for step, so even edges that
 * are not increasing give the CPU's answer), minus one; the last edge
 * belongs to the last bin; a point with a coordinate outside [first edge,
 * last edge] (NaN included) is not counted. The counts (or summed
 * weights) are a scatter-add into the flattened histogram. */
#include <math.h>

#include "ttpu_lower.h"

enum { kMaxHistDims = TTPU_MAX_DIMS };

static ttpu_val kc(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

static ttpu_val bin(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, op, x, y);
}

/* 1-d slice [lo, hi) of v. */
static ttpu_val part(ttpu_hlo* b, ttpu_val v, int64_t lo, int64_t hi) {
  int64_t st = 1;
  return ttpu_hlo_slice(b, v, &lo, &hi, &st);
}

/* Points (n, D) of the input (..., D), or of all its elements (D = 1). */
static ttpu_val points(ttpu_lower* L, int arg, int dd, int64_t* n, int64_t* d) {
  ttpu_val x = ttpu_l_tensor(L, arg);
  ttpu_type t = ttpu_l_type(L, x);
  *d = dd && t.ndim ? t.dims[t.ndim - 1] : 1;
  int64_t numel = ttpu_type_numel(&t);
  *n = *d ? numel / *d : 0;
  int64_t nd[2] = {*n, *d};
  return ttpu_hlo_reshape(ttpu_l_hlo(L), x, 2, nd);
}

/* Column k of the points (n). */
static ttpu_val coord(ttpu_hlo* b, ttpu_val x, int64_t n, int64_t k) {
  int64_t lo[2] = {0, k}, hi[2] = {n, k + 1}, st[2] = {1, 1};
  return ttpu_hlo_reshape(b, ttpu_hlo_slice(b, x, lo, hi, st), 1, &n);
}

/* The equal-width edges of every dim (bins[k] + 1 each, dtype dt): over
 * range (2 per dim) when given, else each coordinate's min..max (0..1
 * when there are no points), an empty range widened by one unit as
 * numpy; a min..max that is not finite fails the call (the CPU's check,
 * made once the data is known). */
static void outer_edges(ttpu_lower* L, ttpu_val x, int64_t n, int64_t dims, const int64_t* bins, const double* range,
                        ttpu_dtype dt, ttpu_val* edges) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val bad = TTPU_VAL_ERROR;
  for (int64_t k = 0; k < dims; ++k) {
    ttpu_val lo, hi;
    if (range) {
      lo = ttpu_hlo_const_f(b, TTPU_F64, range[2 * k]);
      hi = ttpu_hlo_const_f(b, TTPU_F64, range[2 * k + 1]);
    } else if (n == 0) {
      lo = ttpu_hlo_const_f(b, TTPU_F64, 0);
      hi = ttpu_hlo_const_f(b, TTPU_F64, 1);
    } else {
      /* min and max, NaN propagating as the CPU's aminmax */
      ttpu_val c = coord(b, x, n, k);
      int64_t d0 = 0;
      ttpu_val any_nan = ttpu_hlo_reduce(b, ttpu_hlo_compare(b, TTPU_NE, c, c), TTPU_RED_OR, &d0, 1);
      ttpu_val nan = ttpu_hlo_const_f(b, TTPU_F64, NAN);
      lo = ttpu_hlo_select(b, any_nan, nan, ttpu_hlo_convert(b, ttpu_hlo_reduce(b, c, TTPU_RED_MIN, &d0, 1), TTPU_F64));
      hi = ttpu_hlo_select(b, any_nan, nan, ttpu_hlo_convert(b, ttpu_hlo_reduce(b, c, TTPU_RED_MAX, &d0, 1), TTPU_F64));
      ttpu_val ok = bin(b, TTPU_AND, ttpu_hlo_unary(b, TTPU_IS_FINITE, lo), ttpu_hlo_unary(b, TTPU_IS_FINITE, hi));
      ttpu_val not_ok = ttpu_hlo_unary(b, TTPU_NOT, ok);
      bad = bad == TTPU_VAL_ERROR ? not_ok : bin(b, TTPU_OR, bad, not_ok);
      /* harmless values while the check fails the call */
      lo = ttpu_hlo_select(b, ok, lo, ttpu_hlo_const_f(b, TTPU_F64, 0));
      hi = ttpu_hlo_select(b, ok, hi, ttpu_hlo_const_f(b, TTPU_F64, 1));
    }
    ttpu_val same = ttpu_hlo_compare(b, TTPU_EQ, lo, hi);
    lo = ttpu_hlo_select(b, same, bin(b, TTPU_SUB, lo, ttpu_hlo_const_f(b, TTPU_F64, 0.5)), lo);
    hi = ttpu_hlo_select(b, same, bin(b, TTPU_ADD, hi, ttpu_hlo_const_f(b, TTPU_F64, 0.5)), hi);
    edges[k] = ttpu_l_linspace(b, ttpu_hlo_convert(b, lo, dt), ttpu_hlo_convert(b, hi, dt),
                               bins[k] + 1, dt);
  }
  if (bad != TTPU_VAL_ERROR) {
    int64_t one = 1;
    ttpu_val zero = ttpu_hlo_const_i(b, TTPU_I64, 0);
    ttpu_val parts[4] = {ttpu_hlo_convert(b, bad, TTPU_I64), zero, zero, zero};
    for (int i = 0; i < 4; ++i) parts[i] = ttpu_hlo_reshape(b, parts[i], 1, &one);
    ttpu_l_check(L, ttpu_hlo_concat(b, parts, 4, 0), TTPU_INVALID_ARGUMENT,
                 "torch.histogramdd: the range of the input's values is not finite");
  }
}

/* Bin of each coordinate c (n) among edges (ne), and whether it falls
 * inside them. */
static ttpu_val locate(ttpu_hlo* b, ttpu_val c, ttpu_val edges, int64_t n, int64_t ne, ttpu_val* inside) {
  ttpu_type tn = ttpu_type_make(TTPU_I64, 1, &n);
  int64_t nb = ne - 1;
  /* std::upper_bound's loop, per element: first, len */
  ttpu_val first = kc(b, tn, 0), len = kc(b, tn, (double)ne);
  for (int64_t span = ne; span > 0; span >>= 1) {
    ttpu_val half = bin(b, TTPU_SHR_A, len, kc(b, tn, 1));
    ttpu_val mid = bin(b, TTPU_ADD, first, half);
    ttpu_val edge = ttpu_hlo_take(b, edges, ttpu_hlo_clamp(b, kc(b, tn, 0), mid, kc(b, tn, (double)(ne - 1))));
    ttpu_val active = ttpu_hlo_compare(b, TTPU_GT, len, kc(b, tn, 0));
    ttpu_val left = ttpu_hlo_compare(b, TTPU_LT, c, edge);
    ttpu_val right = bin(b, TTPU_AND, active, ttpu_hlo_unary(b, TTPU_NOT, left));
    first = ttpu_hlo_select(b, right, bin(b, TTPU_ADD, mid, kc(b, tn, 1)), first);
    len = ttpu_hlo_select(b, active,
                          ttpu_hlo_select(b, left, half, bin(b, TTPU_SUB, bin(b, TTPU_SUB, len, half), kc(b, tn, 1))),
                          kc(b, tn, 0));
  }
  ttpu_val pos = bin(b, TTPU_SUB, first, kc(b, tn, 1));
  pos = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, pos, kc(b, tn, (double)nb)), kc(b, tn, (double)(nb - 1)), pos);
  ttpu_val lo = ttpu_hlo_broadcast_to(b, part(b, edges, 0, 1), 1, &n);
  ttpu_val hi = ttpu_hlo_broadcast_to(b, part(b, edges, ne - 1, ne), 1, &n);
  *inside = bin(b, TTPU_AND, ttpu_hlo_compare(b, TTPU_GE, c, lo), ttpu_hlo_compare(b, TTPU_LE, c, hi));
  return pos;
}

/* The histogram (out's shape: the bin counts) of points x (n, dims) over
 * the edges of each dim, weights w (n, or VAL_ERROR for ones), normalized
 * to a density when asked: hist / sum / each dim's bin widths. */
static ttpu_val histogram_dd(ttpu_hlo* b, ttpu_val x, int64_t n, int64_t dims, const ttpu_val* edges, ttpu_val w,
                             int density, ttpu_type out) {
  if (n == 0) return kc(b, out, density ? NAN : 0); /* 0 / 0 when normalized, as the CPU */
  int64_t total = ttpu_type_numel(&out);
  ttpu_type tn = ttpu_type_make(TTPU_I64, 1, &n);
  ttpu_val flat = kc(b, tn, 0), inside = TTPU_VAL_ERROR;
  int64_t stride = total;
  for (int64_t k = 0; k < dims; ++k) {
    ttpu_val in_k;
    ttpu_val pos = locate(b, coord(b, x, n, k), edges[k], n, out.dims[k] + 1, &in_k);
    stride /= out.dims[k];
    flat = bin(b, TTPU_ADD, flat, bin(b, TTPU_MUL, pos, kc(b, tn, (double)stride)));
    inside = k ? bin(b, TTPU_AND, inside, in_k) : in_k;
  }
  flat = ttpu_hlo_select(b, inside, flat, kc(b, tn, (double)total)); /* outside: dropped */
  ttpu_type th = ttpu_type_make(out.dtype, 1, &total), tx = ttpu_type_make(out.dtype, 1, &n);
  ttpu_val hist = ttpu_hlo_put(b, kc(b, th, 0), flat, w == TTPU_VAL_ERROR ? kc(b, tx, 1) : w, TTPU_ADD);
  hist = ttpu_l_reshape_to(b, hist, out);
  if (!density) return hist;
  int64_t all[kMaxHistDims];
  for (int k = 0; k < out.ndim; ++k) all[k] = k;
  ttpu_val sum = ttpu_hlo_reduce(b, hist, TTPU_RED_SUM, all, out.ndim);
  hist = bin(b, TTPU_DIV, hist, ttpu_hlo_broadcast_to(b, sum, out.ndim, out.dims));
  for (int64_t k = 0; k < dims; ++k) {
    int64_t ne = out.dims[k] + 1, map = k;
    ttpu_val widths = bin(b, TTPU_SUB, part(b, edges[k], 1, ne), part(b, edges[k], 0, ne - 1));
    hist = bin(b, TTPU_DIV, hist, ttpu_hlo_broadcast_in_dim(b, widths, out, &map));
  }
  return hist;
}

/* The weights flattened, or VAL_ERROR when None. */
static ttpu_val weights(ttpu_lower* L, int arg) {
  if (ttpu_l_is_none(L, arg)) return TTPU_VAL_ERROR;
  ttpu_val w = ttpu_l_tensor(L, arg);
  ttpu_type t = ttpu_l_type(L, w);
  int64_t n = ttpu_type_numel(&t);
  return ttpu_hlo_reshape(ttpu_l_hlo(L), w, 1, &n);
}

/* histogram.bin_ct(self, bins=100, *, range=None, weight=None,
 * density=False) -> (hist, bin_edges), and bin_ct_out. */
static ttpu_status* lower_histogram_bin_ct(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type oh = ttpu_l_out_type(L, 0);
  int64_t n, dims, bins = oh.dims[0];
  ttpu_val x = points(L, 0, 0, &n, &dims), edges;
  int nr = 0;
  const double* range = ttpu_l_floats(L, 2, &nr);
  outer_edges(L, x, n, 1, &bins, nr == 2 ? range : NULL, oh.dtype, &edges);
  ttpu_l_set_out(L, 0, histogram_dd(b, x, n, 1, &edges, weights(L, 3), ttpu_l_bool(L, 4, 0), oh));
  ttpu_l_set_out(L, 1, edges);
  return NULL;
}

/* histogram.bins_tensor(self, bins, *, weight=None, density=False) ->
 * (hist, bin_edges), and bins_tensor_out. */
static ttpu_status* lower_histogram_bins_tensor(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  int64_t n, dims;
  ttpu_val x = points(L, 0, 0, &n, &dims), edges = ttpu_l_tensor(L, 1);
  ttpu_l_set_out(L, 0, histogram_dd(b, x, n, 1, &edges, weights(L, 2), ttpu_l_bool(L, 3, 0), ttpu_l_out_type(L, 0)));
  ttpu_l_set_out(L, 1, edges);
  return NULL;
}

/* _histogramdd_bin_edges(self, bins, *, range=None, weight=None,
 * density=False) -> Tensor[] and _histogramdd_from_bin_cts(same) -> hist:
 * the equal-width edges of each dim, and the histogram over them. */
static ttpu_status* lower_histogramdd_cts(ttpu_lower* L) {
  int want_edges = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  int64_t n, dims;
  int nb = 0, nr = 0;
  ttpu_val x = points(L, 0, 1, &n, &dims);
  const int64_t* bins = ttpu_l_ints(L, 1, &nb);
  const double* range = ttpu_l_floats(L, 2, &nr);
  if (nb != dims || dims > kMaxHistDims)
    return ttpu_status_make(dims > kMaxHistDims ? TTPU_UNIMPLEMENTED : TTPU_INVALID_ARGUMENT,
                            "histogramdd: %lld bin counts for %lld dims (at most %d on tpu)", (long long)nb,
                            (long long)dims, kMaxHistDims);
  ttpu_val edges[kMaxHistDims];
  ttpu_dtype dt = ttpu_l_type(L, x).dtype;
  outer_edges(L, x, n, dims, bins, nr == 2 * dims ? range : NULL, dt, edges);
  if (want_edges) {
    for (int64_t k = 0; k < dims; ++k) ttpu_l_set_out(L, (int)k, edges[k]);
  } else {
    ttpu_l_set_out(L, 0, histogram_dd(b, x, n, dims, edges, weights(L, 3), ttpu_l_bool(L, 4, 0), ttpu_l_out_type(L, 0)));
  }
  return NULL;
}

/* _histogramdd_from_bin_tensors(self, bins: Tensor[], *, weight=None,
 * density=False) -> hist */
static ttpu_status* lower_histogramdd_from_bin_tensors(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  int64_t n, dims;
  ttpu_val x = points(L, 0, 1, &n, &dims);
  if (ttpu_l_count(L, 1) != dims || dims > kMaxHistDims)
    return ttpu_status_make(dims > kMaxHistDims ? TTPU_UNIMPLEMENTED : TTPU_INVALID_ARGUMENT,
                            "histogramdd: %d edge tensors for %lld dims (at most %d on tpu)", ttpu_l_count(L, 1),
                            (long long)dims, kMaxHistDims);
  ttpu_val edges[kMaxHistDims];
  for (int64_t k = 0; k < dims; ++k) edges[k] = ttpu_l_tensor_at(L, 1, (int)k);
  ttpu_l_set_out(L, 0, histogram_dd(b, x, n, dims, edges, weights(L, 2), ttpu_l_bool(L, 3, 0), ttpu_l_out_type(L, 0)));
  return NULL;
}

const ttpu_op_def ttpu_ops_histogram[] = {
    {"histogram.bin_ct", lower_histogram_bin_ct, .variants = TTPU_V_OV_OUT},
    {"histogram.bins_tensor", lower_histogram_bins_tensor, .variants = TTPU_V_OV_OUT},
    {"_histogramdd_bin_edges", lower_histogramdd_cts, .param = 1},
    {"_histogramdd_from_bin_cts", lower_histogramdd_cts, .param = 0},
    {"_histogramdd_from_bin_tensors", lower_histogramdd_from_bin_tensors, .flags = 0},
    {0},
};
