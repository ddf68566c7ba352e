/* setops.c - membership and frequency: isin, mode, histc. isin and mode
 * compare every element with every other (or every test element): O(n*m)
 * elementwise work that XLA fuses, with no data-dependent shapes. */
#include "ttpu_lower.h"

/* A tensor arg, or a Scalar one as a 0-d value, of dtype dt. */
static ttpu_val operand(ttpu_lower* L, int arg, ttpu_dtype dt) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (ttpu_l_kind(L, arg) == TTPU_ARG_TENSOR) return ttpu_hlo_convert(b, ttpu_l_tensor(L, arg), dt);
  return ttpu_l_scalar(L, arg, dt);
}

/* isin(elements, test_elements, *, assume_unique=False, invert=False) in
 * its Tensor/Scalar forms: compared in the two operands' result type. */
static ttpu_status* lower_isin(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype dt = ttpu_l_common_dtype(L);
  if (dt == TTPU_DTYPE_NONE) {
    const ttpu_tensor* d = ttpu_l_tensor_desc(L, 0, -1);
    dt = d ? d->dtype : ttpu_l_tensor_desc(L, 1, -1)->dtype;
  }
  if (dt == TTPU_BOOL) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "Unsupported input type encountered for isin(): Bool");
    return NULL;
  }
  ttpu_val e = ttpu_hlo_broadcast_to(b, operand(L, 0, dt), ot.ndim, ot.dims);
  ttpu_val t = operand(L, 1, dt);
  ttpu_type tt = ttpu_l_type(L, t);
  int64_t m = ttpu_type_numel(&tt);
  ttpu_val hit;
  if (m == 0) {
    hit = ttpu_hlo_const(b, ttpu_type_make(TTPU_BOOL, ot.ndim, ot.dims), 0, 0);
  } else {
    t = ttpu_hlo_reshape(b, t, 1, &m);
    ttpu_type big = ot;
    big.dtype = dt;
    big.dims[big.ndim++] = m;
    int64_t map_e[TTPU_MAX_DIMS], map_t[1] = {ot.ndim};
    for (int d = 0; d < ot.ndim; ++d) map_e[d] = d;
    ttpu_val eq = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_broadcast_in_dim(b, e, big, map_e),
                                   ttpu_hlo_broadcast_in_dim(b, t, big, map_t));
    int64_t last = ot.ndim;
    hit = ttpu_hlo_reduce(b, eq, TTPU_RED_OR, &last, 1);
  }
  if (ttpu_l_bool(L, 3, 0)) hit = ttpu_hlo_unary(b, TTPU_NOT, hit);
  ttpu_l_set_out(L, 0, hit);
  return NULL;
}

/* mode(self, dim=-1, keepdim=False) -> (values, indices): the most frequent
 * value along dim, the smallest of equally frequent ones, and the last
 * position holding it (as the CPU's sort-based kernel). */
static ttpu_status* lower_mode(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ov = ttpu_l_out_type(L, 0), oi = ttpu_l_out_type(L, 1);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type t = ttpu_l_type(L, x);
  if (t.ndim == 0) {
    ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, x, ov));
    ttpu_l_set_out(L, 1, ttpu_hlo_const(b, oi, 0, 0));
    return NULL;
  }
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 1, -1), t.ndim);
  int64_t perm[TTPU_MAX_DIMS], k = 0;
  for (int d = 0; d < t.ndim; ++d)
    if (d != dim) perm[k++] = d;
  perm[k] = dim;
  x = ttpu_hlo_transpose(b, x, perm);
  t = ttpu_l_type(L, x);
  int nl = t.ndim - 1;
  int64_t n = t.dims[nl];
  if (n == 0 || ttpu_type_numel(&t) == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ov, 0, 0));
    ttpu_l_set_out(L, 1, ttpu_hlo_const(b, oi, 0, 0));
    return NULL;
  }
  ttpu_type sq = t;
  sq.dims[sq.ndim++] = n;
  int64_t map_i[TTPU_MAX_DIMS], map_j[TTPU_MAX_DIMS];
  for (int d = 0; d < nl; ++d) map_i[d] = map_j[d] = d;
  map_i[nl] = nl;
  map_j[nl] = nl + 1;
  ttpu_val eq = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_broadcast_in_dim(b, x, sq, map_i),
                                 ttpu_hlo_broadcast_in_dim(b, x, sq, map_j));
  int64_t last = nl + 1, lastx = nl;
  ttpu_val count = ttpu_hlo_reduce(b, ttpu_hlo_convert(b, eq, TTPU_I64), TTPU_RED_SUM, &last, 1);
  ttpu_val top = ttpu_hlo_reduce(b, count, TTPU_RED_MAX, &lastx, 1);
  int64_t map_b[TTPU_MAX_DIMS];
  for (int d = 0; d < nl; ++d) map_b[d] = d;
  ttpu_type ti = t;
  ti.dtype = TTPU_I64;
  ttpu_val cand = ttpu_hlo_compare(b, TTPU_EQ, count, ttpu_hlo_broadcast_in_dim(b, top, ti, map_b));
  ttpu_val big = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_reduce(b, x, TTPU_RED_MAX, &lastx, 1), t, map_b);
  ttpu_val v = ttpu_hlo_reduce(b, ttpu_hlo_select(b, cand, x, big), TTPU_RED_MIN, &lastx, 1);
  ttpu_val at = ttpu_hlo_compare(b, TTPU_EQ, x, ttpu_hlo_broadcast_in_dim(b, v, t, map_b));
  ttpu_val pos = ttpu_hlo_select(b, at, ttpu_hlo_iota(b, ti, nl), ttpu_hlo_const(b, ti, 0, -1));
  ttpu_val idx = ttpu_hlo_reduce(b, pos, TTPU_RED_MAX, &lastx, 1);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, v, ov));
  ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, idx, oi));
  return NULL;
}

/* histc(self, bins=100, min=0, max=0): counts in equal-width bins over
 * [min, max] (the data's range when min == max, widened by 1 each way when
 * that is empty too); values outside are ignored, max falls in the last
 * bin. A scatter-add of ones at each element's bin. Integer inputs count
 * as CUDA counts them (the CPU refuses them): min and max in the input's
 * type, the bin (x - min) * bins / (max - min) in 64-bit integers. */
static ttpu_status* lower_histc(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (ot.dtype == TTPU_BOOL || ttpu_dtype_is_complex(ot.dtype)) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"histogram_cpu\" not implemented for '%s'",
                  ttpu_dtype_torch_title(ot.dtype));
    return NULL;
  }
  int is_int = !ttpu_dtype_is_float(ot.dtype);
  ttpu_dtype md = is_int ? TTPU_I64
                  : ot.dtype == TTPU_BF16 || ot.dtype == TTPU_F16 ? TTPU_F32 : ot.dtype;
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), md);
  ttpu_type tx = ttpu_l_type(L, x);
  int64_t n = ttpu_type_numel(&tx), bins = ttpu_l_int(L, 1, 100);
  if (n == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ot, 0, 0));
    return NULL;
  }
  x = ttpu_hlo_reshape(b, x, 1, &n);
  ttpu_type t1 = ttpu_type_make(md, 1, &n), t0 = ttpu_type_make(md, 0, NULL);
  ttpu_val lo = ttpu_l_scalar(L, 2, is_int ? ot.dtype : md);
  ttpu_val hi = ttpu_l_scalar(L, 3, is_int ? ot.dtype : md);
  lo = ttpu_hlo_convert(b, lo, md);
  hi = ttpu_hlo_convert(b, hi, md);
  int64_t zero = 0;
  ttpu_val same = ttpu_hlo_compare(b, TTPU_EQ, lo, hi);
  lo = ttpu_hlo_select(b, same, ttpu_hlo_reduce(b, x, TTPU_RED_MIN, &zero, 1), lo);
  hi = ttpu_hlo_select(b, same, ttpu_hlo_reduce(b, x, TTPU_RED_MAX, &zero, 1), hi);
  ttpu_val empty = ttpu_hlo_compare(b, TTPU_EQ, lo, hi);
  ttpu_val one = ttpu_hlo_const(b, t0, 1, 1);
  lo = ttpu_hlo_select(b, empty, ttpu_hlo_binary(b, TTPU_SUB, lo, one), lo);
  hi = ttpu_hlo_select(b, empty, ttpu_hlo_binary(b, TTPU_ADD, hi, one), hi);
  ttpu_val lob = ttpu_hlo_broadcast_to(b, lo, 1, &n), hib = ttpu_hlo_broadcast_to(b, hi, 1, &n);
  ttpu_val pos = ttpu_hlo_binary(b, TTPU_DIV,
                                 ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_binary(b, TTPU_SUB, x, lob),
                                                 ttpu_hlo_const(b, t1, (double)bins, bins)),
                                 ttpu_hlo_binary(b, TTPU_SUB, hib, lob));
  ttpu_type ti = ttpu_type_make(TTPU_I64, 1, &n);
  /* inside [lo, hi] the quotient is >= 0: an integer division is its floor */
  ttpu_val idx = is_int ? pos : ttpu_hlo_convert(b, ttpu_hlo_unary(b, TTPU_FLOOR, pos), TTPU_I64);
  idx = ttpu_hlo_binary(b, TTPU_MIN, idx, ttpu_hlo_const(b, ti, 0, bins - 1));
  ttpu_val inside = ttpu_hlo_binary(b, TTPU_AND, ttpu_hlo_compare(b, TTPU_GE, x, lob),
                                    ttpu_hlo_compare(b, TTPU_LE, x, hib));
  idx = ttpu_hlo_select(b, inside, idx, ttpu_hlo_const(b, ti, 0, bins)); /* dropped */
  ttpu_type tb = ttpu_type_make(md, 1, &bins);
  ttpu_val h = ttpu_hlo_put(b, ttpu_hlo_const(b, tb, 0, 0), idx, ttpu_hlo_const(b, t1, 1, 1), TTPU_ADD);
  ttpu_l_set_out(L, 0, h);
  return NULL;
}

const ttpu_op_def ttpu_ops_setops[] = {
    {"histc", lower_histc, .variants = TTPU_V_OUT},
    {"isin.Tensor_Tensor", lower_isin, .variants = TTPU_V_OV_OUT},
    {"isin.Tensor_Scalar", lower_isin, .variants = TTPU_V_OV_OUT},
    {"isin.Scalar_Tensor", lower_isin, .variants = TTPU_V_OV_OUT},
    {"mode", lower_mode, .flags = 0},
    {"mode.values", lower_mode, .flags = 0},
    {0},
};
