/* histogram.c - torch.histogram: histogram.bin_ct (bins equal bins over a
 * range, the input's min..max by default) and histogram.bins_tensor
 * (given edges), with their out= forms. Output sizes are known (bins and
 * bins + 1); only the edges of bin_ct without a range depend on the data,
 * and they are computed on the device.
 *
 * An element's bin is found as the CPU finds it: upper_bound over the
 * edges (the same binary search, step for step, so even edges that are not
 * increasing give the CPU's answer), minus one; the last edge belongs to
 * the last bin; elements outside [first edge, last edge] (NaN included)
 * are not counted. The counts (or summed weights) are a scatter-add. */
#include <math.h>

#include "ttpu_lower.h"

static ttpu_val kc(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

static ttpu_val bin(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, op, x, y);
}

/* 0-d x as a 1-element vector. */
static ttpu_val as_vec(ttpu_hlo* b, ttpu_val x) {
  int64_t one = 1;
  return ttpu_hlo_reshape(b, x, 1, &one);
}

/* The bin_ct edges: linspace(lo, hi, bins + 1) in dtype dt, computed as
 * the CPU's linspace (from both ends towards the middle). lo and hi are
 * 0-d f64 values. */
static ttpu_val linspace(ttpu_hlo* b, ttpu_val lo, ttpu_val hi, int64_t steps, ttpu_dtype dt) {
  ttpu_val start = ttpu_hlo_convert(b, lo, dt), end = ttpu_hlo_convert(b, hi, dt);
  ttpu_val step = bin(b, TTPU_DIV, bin(b, TTPU_SUB, end, start), ttpu_hlo_const_f(b, dt, (double)(steps > 1 ? steps - 1 : 1)));
  ttpu_type ti = ttpu_type_make(TTPU_I64, 1, &steps);
  ttpu_val i = ttpu_hlo_iota(b, ti, 0);
  ttpu_val fi = ttpu_hlo_convert(b, i, dt);
  ttpu_val back = ttpu_hlo_convert(b, bin(b, TTPU_SUB, kc(b, ti, (double)(steps - 1)), i), dt);
  ttpu_val sv = ttpu_hlo_broadcast_to(b, step, 1, &steps);
  ttpu_val from_start = bin(b, TTPU_ADD, ttpu_hlo_broadcast_to(b, start, 1, &steps), bin(b, TTPU_MUL, sv, fi));
  ttpu_val from_end = bin(b, TTPU_SUB, ttpu_hlo_broadcast_to(b, end, 1, &steps), bin(b, TTPU_MUL, sv, back));
  ttpu_val first_half = ttpu_hlo_compare(b, TTPU_LT, i, kc(b, ti, (double)(steps / 2)));
  return ttpu_hlo_select(b, first_half, from_start, from_end);
}

/* hist (bins) of the flattened x (n) over edges (bins + 1), weights w
 * (n, or VAL_ERROR for ones), normalized to a density when asked. */
static ttpu_val count(ttpu_hlo* b, ttpu_val x, ttpu_val edges, ttpu_val w, int64_t n, int64_t ne, int density) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_dtype dt = tp->dtype;
  ttpu_type tn = ttpu_type_make(TTPU_I64, 1, &n), tx = ttpu_type_make(dt, 1, &n);
  int64_t nb = ne - 1;
  ttpu_type th = ttpu_type_make(dt, 1, &nb);
  /* std::upper_bound's loop, per element: first, len */
  ttpu_val first = kc(b, tn, 0), len = kc(b, tn, (double)ne);
  for (int64_t span = ne; span > 0; span >>= 1) {
    ttpu_val half = bin(b, TTPU_SHR_A, len, kc(b, tn, 1));
    ttpu_val mid = bin(b, TTPU_ADD, first, half);
    ttpu_val edge = ttpu_hlo_take(b, edges, ttpu_hlo_clamp(b, kc(b, tn, 0), mid, kc(b, tn, (double)(ne - 1))));
    ttpu_val active = ttpu_hlo_compare(b, TTPU_GT, len, kc(b, tn, 0));
    ttpu_val left = ttpu_hlo_compare(b, TTPU_LT, x, edge);
    ttpu_val right = bin(b, TTPU_AND, active, ttpu_hlo_unary(b, TTPU_NOT, left));
    first = ttpu_hlo_select(b, right, bin(b, TTPU_ADD, mid, kc(b, tn, 1)), first);
    len = ttpu_hlo_select(b, active,
                          ttpu_hlo_select(b, left, half, bin(b, TTPU_SUB, bin(b, TTPU_SUB, len, half), kc(b, tn, 1))),
                          kc(b, tn, 0));
  }
  ttpu_val pos = bin(b, TTPU_SUB, first, kc(b, tn, 1));
  pos = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, pos, kc(b, tn, (double)nb)), kc(b, tn, (double)(nb - 1)), pos);
  int64_t z[1] = {0}, e1[1] = {1}, l0[1] = {ne - 1}, l1[1] = {ne}, st[1] = {1};
  ttpu_val lo = ttpu_hlo_broadcast_to(b, ttpu_hlo_slice(b, edges, z, e1, st), 1, &n);
  ttpu_val hi = ttpu_hlo_broadcast_to(b, ttpu_hlo_slice(b, edges, l0, l1, st), 1, &n);
  ttpu_val inside = bin(b, TTPU_AND, ttpu_hlo_compare(b, TTPU_GE, x, lo), ttpu_hlo_compare(b, TTPU_LE, x, hi));
  pos = ttpu_hlo_select(b, inside, pos, kc(b, tn, (double)nb)); /* out of range: dropped */
  ttpu_val hist = ttpu_hlo_put(b, kc(b, th, 0), pos, w == TTPU_VAL_ERROR ? kc(b, tx, 1) : w, TTPU_ADD);
  if (!density) return hist;
  int64_t all = 0;
  ttpu_val total = ttpu_hlo_broadcast_to(b, ttpu_hlo_reduce(b, hist, TTPU_RED_SUM, &all, 1), 1, &nb);
  int64_t a0[1] = {0}, a1[1] = {nb}, b0[1] = {1}, b1[1] = {ne};
  ttpu_val widths = bin(b, TTPU_SUB, ttpu_hlo_slice(b, edges, b0, b1, st), ttpu_hlo_slice(b, edges, a0, a1, st));
  return bin(b, TTPU_DIV, bin(b, TTPU_DIV, hist, total), widths);
}

/* The input flattened, and the weight flattened (or VAL_ERROR). */
static ttpu_val flat(ttpu_lower* L, int arg, int64_t* n) {
  ttpu_val x = ttpu_l_tensor(L, arg);
  ttpu_type t = ttpu_l_type(L, x);
  *n = ttpu_type_numel(&t);
  return ttpu_hlo_reshape(ttpu_l_hlo(L), x, 1, n);
}

/* histogram.bin_ct(self, bins=100, *, range=None, weight=None, density=False)
 * and histogram.bin_ct_out(..., hist, bin_edges). */
static ttpu_status* lower_histogram_bin_ct(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type oe = ttpu_l_out_type(L, 1);
  int64_t n, nw, ne = oe.dims[0];
  ttpu_val x = flat(L, 0, &n);
  ttpu_dtype dt = oe.dtype;
  ttpu_val lo, hi;
  int nr = 0;
  const double* range = ttpu_l_floats(L, 2, &nr);
  if (nr == 2) {
    lo = ttpu_hlo_const_f(b, TTPU_F64, range[0]);
    hi = ttpu_hlo_const_f(b, TTPU_F64, range[1]);
  } else if (n == 0) {
    lo = ttpu_hlo_const_f(b, TTPU_F64, 0);
    hi = ttpu_hlo_const_f(b, TTPU_F64, 1);
  } else {
    /* the data's min and max (NaN propagating, as the CPU's aminmax) */
    int64_t d0 = 0;
    ttpu_val isnan = ttpu_hlo_compare(b, TTPU_NE, x, x);
    ttpu_val any_nan = ttpu_hlo_reduce(b, isnan, TTPU_RED_OR, &d0, 1);
    ttpu_val nan = ttpu_hlo_const_f(b, TTPU_F64, NAN);
    lo = ttpu_hlo_select(b, any_nan, nan, ttpu_hlo_convert(b, ttpu_hlo_reduce(b, x, TTPU_RED_MIN, &d0, 1), TTPU_F64));
    hi = ttpu_hlo_select(b, any_nan, nan, ttpu_hlo_convert(b, ttpu_hlo_reduce(b, x, TTPU_RED_MAX, &d0, 1), TTPU_F64));
    ttpu_val ok = bin(b, TTPU_AND, ttpu_hlo_unary(b, TTPU_IS_FINITE, lo), ttpu_hlo_unary(b, TTPU_IS_FINITE, hi));
    ttpu_val flag = ttpu_hlo_convert(b, ttpu_hlo_unary(b, TTPU_NOT, ok), TTPU_I64);
    ttpu_val zero = as_vec(b, ttpu_hlo_const_i(b, TTPU_I64, 0));
    ttpu_val parts[4] = {as_vec(b, flag), zero, zero, zero};
    ttpu_l_check(L, ttpu_hlo_concat(b, parts, 4, 0), TTPU_INVALID_ARGUMENT,
                 "torch.histogramdd: dimension 0's range is not finite");
    /* keep the program harmless when the check fires */
    lo = ttpu_hlo_select(b, ok, lo, ttpu_hlo_const_f(b, TTPU_F64, 0));
    hi = ttpu_hlo_select(b, ok, hi, ttpu_hlo_const_f(b, TTPU_F64, 1));
  }
  /* an empty range widens to one unit, as numpy */
  ttpu_val same = ttpu_hlo_compare(b, TTPU_EQ, lo, hi);
  lo = ttpu_hlo_select(b, same, bin(b, TTPU_SUB, lo, ttpu_hlo_const_f(b, TTPU_F64, 0.5)), lo);
  hi = ttpu_hlo_select(b, same, bin(b, TTPU_ADD, hi, ttpu_hlo_const_f(b, TTPU_F64, 0.5)), hi);
  ttpu_val edges = linspace(b, lo, hi, ne, dt);
  ttpu_val w = ttpu_l_is_none(L, 3) ? TTPU_VAL_ERROR : flat(L, 3, &nw);
  ttpu_l_set_out(L, 0, n ? count(b, x, edges, w, n, ne, ttpu_l_bool(L, 4, 0))
                         : kc(b, ttpu_l_out_type(L, 0), ttpu_l_bool(L, 4, 0) ? NAN : 0));
  ttpu_l_set_out(L, 1, edges);
  return NULL;
}

/* histogram.bins_tensor(self, bins, *, weight=None, density=False) and
 * histogram.bins_tensor_out(..., hist, bin_edges). */
static ttpu_status* lower_histogram_bins_tensor(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  int64_t n, nw, ne;
  ttpu_val x = flat(L, 0, &n);
  ttpu_val edges = flat(L, 1, &ne);
  ttpu_val w = ttpu_l_is_none(L, 2) ? TTPU_VAL_ERROR : flat(L, 2, &nw);
  int density = ttpu_l_bool(L, 3, 0);
  ttpu_type oh = ttpu_l_out_type(L, 0);
  ttpu_val hist;
  if (n)
    hist = count(b, x, edges, w, n, ne, density);
  else if (!density)
    hist = kc(b, oh, 0);
  else
    hist = kc(b, oh, NAN); /* 0 / 0, as the CPU's normalization */
  ttpu_l_set_out(L, 0, hist);
  ttpu_l_set_out(L, 1, edges);
  return NULL;
}

const ttpu_op_def ttpu_ops_histogram[] = {
    {"histogram.bin_ct", lower_histogram_bin_ct, 0},
    {"histogram.bin_ct_out", lower_histogram_bin_ct, 0},
    {"histogram.bins_tensor", lower_histogram_bins_tensor, 0},
    {"histogram.bins_tensor_out", lower_histogram_bins_tensor, 0},
    {NULL, NULL, 0},
};
