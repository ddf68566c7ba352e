/* sort.c - sorting and order statistics: sort, topk, kthvalue, median,
 * nanmedian, and binary search (searchsorted, bucketize). The first are
 * one stable sort (the builder orders NaN as PyTorch
 * does: largest) carrying an iota along for the indices.
 *
 * A stable sort is a valid result for stable=False, but CPU's unstable sort
 * may order the indices of equal elements differently. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ttpu_lower.h"

#define ERR TTPU_VAL_ERROR

/* Sorted values and their original positions (i64) along dim. */
static void sort_with_index(ttpu_hlo* b, ttpu_val x, int dim, int descending,
                            ttpu_val* values, ttpu_val* index) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) {
    *values = *index = ERR;
    return;
  }
  ttpu_type ti = *tp;
  ti.dtype = TTPU_I64;
  ttpu_val io = ttpu_hlo_iota(b, ti, dim), outs[2];
  ttpu_hlo_sort(b, x, &io, 1, dim, descending, outs);
  *values = outs[0];
  *index = outs[1];
}

/* The (values, indices) outputs, each reshaped to its output's shape (a
 * 0-d self was sorted as 1-d). */
static void set_values_indices(ttpu_lower* L, ttpu_val values, ttpu_val index) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, values, ttpu_l_out_type(L, 0)));
  ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, index, ttpu_l_out_type(L, 1)));
}

/* x[..., 0:k, ...] along dim. */
static ttpu_val first_k(ttpu_hlo* b, ttpu_val x, int dim, int64_t lo, int64_t hi) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return ERR;
  int64_t s[TTPU_MAX_DIMS] = {0}, e[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
  for (int i = 0; i < tp->ndim; ++i) {
    e[i] = tp->dims[i];
    st[i] = 1;
  }
  s[dim] = lo;
  e[dim] = hi;
  return ttpu_hlo_slice(b, x, s, e, st);
}

/* Rank-0 values become rank 1 so there is a dim to sort. */
static ttpu_val at_least_1d(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t || t->ndim > 0) return x;
  int64_t one = 1;
  return ttpu_hlo_reshape(b, x, 1, &one);
}

/* sort.stable(Tensor self, *, bool? stable, int dim=-1,
 * bool descending=False) -> (values, indices) (and .values_stable) */
static ttpu_status* lower_sort(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  int nd = ttpu_l_type(L, x).ndim;
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 2, -1), nd);
  int desc = ttpu_l_bool(L, 3, 0);
  ttpu_val v, i;
  sort_with_index(b, at_least_1d(b, x), dim, desc, &v, &i);
  set_values_indices(L, v, i);
  return NULL;
}

/* topk(Tensor self, SymInt k, int dim=-1, bool largest=True,
 * bool sorted=True) -> (values, indices) (and .values). Always sorted,
 * which is one valid order for sorted=False. */
static ttpu_status* lower_topk(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  int nd = ttpu_l_type(L, x).ndim;
  int64_t k = ttpu_l_int(L, 1, 1);
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 2, -1), nd);
  int largest = ttpu_l_bool(L, 3, 1);
  x = at_least_1d(b, x);
  ttpu_val v, i;
  sort_with_index(b, x, dim, largest, &v, &i);
  v = first_k(b, v, dim, 0, k);
  i = first_k(b, i, dim, 0, k);
  set_values_indices(L, v, i);
  return NULL;
}

/* kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False)
 * -> (values, indices): the k-th smallest (NaN largest). */
static ttpu_status* lower_kthvalue(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  int nd = ttpu_l_type(L, x).ndim;
  int64_t k = ttpu_l_int(L, 1, 1);
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 2, -1), nd);
  x = at_least_1d(b, x);
  int64_t n = ttpu_l_type(L, x).dims[dim];
  if (k < 1 || k > n)
    return ttpu_status_make(TTPU_INDEX_ERROR,
                            "kthvalue(): selected number k out of range for "
                            "dimension %d", dim);
  ttpu_val v, i;
  sort_with_index(b, x, dim, 0, &v, &i);
  v = first_k(b, v, dim, k - 1, k);
  i = first_k(b, i, dim, k - 1, k);
  set_values_indices(L, v, i);
  return NULL;
}

/* x at position pos (x's shape with dim -> 1, i64) along dim. */
static ttpu_val take_at(ttpu_hlo* b, ttpu_val x, int dim, ttpu_val pos) {
  const ttpu_type* tp = ttpu_hlo_type(b, pos);
  const ttpu_type* tx = ttpu_hlo_type(b, x);
  if (!tp || !tx) return ERR;
  ttpu_type t = *tp, out = *tp;
  out.dtype = tx->dtype;
  int r = t.ndim;
  int64_t d1[TTPU_MAX_DIMS + 1], idx_map[TTPU_MAX_DIMS], ones[TTPU_MAX_DIMS];
  memcpy(d1, t.dims, sizeof(int64_t) * (size_t)r);
  d1[r] = 1;
  ttpu_val parts[TTPU_MAX_DIMS];
  for (int d = 0; d < r; ++d) {
    parts[d] = ttpu_hlo_reshape(b, d == dim ? pos : ttpu_hlo_iota(b, t, d), r + 1, d1);
    idx_map[d] = d;
    ones[d] = 1;
  }
  ttpu_val c = ttpu_hlo_concat(b, parts, r, r);
  ttpu_gather_dims dn;
  memset(&dn, 0, sizeof(dn));
  dn.n_collapsed_slice_dims = r;
  dn.collapsed_slice_dims = idx_map;
  dn.n_start_index_map = r;
  dn.start_index_map = idx_map;
  dn.index_vector_dim = r;
  dn.slice_sizes = ones;
  return ttpu_hlo_gather(b, x, c, &dn, out);
}

/* The lower median along dim. CPU: any NaN makes the median NaN, with the
 * index of the first NaN; nanmedian ignores NaNs (all NaN: NaN, index 0).
 * Both are one position of the stable ascending sort, where NaNs come last
 * in their original order. */
static void median_along(ttpu_hlo* b, ttpu_val x, int dim, int ignore_nan,
                         ttpu_val* value, ttpu_val* index) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) {
    *value = *index = ERR;
    return;
  }
  ttpu_type tx = *tp;
  int64_t n = tx.dims[dim];
  ttpu_val v, i;
  sort_with_index(b, x, dim, 0, &v, &i);
  ttpu_type tk = tx; /* dim kept as 1 */
  tk.dims[dim] = 1;
  tk.dtype = TTPU_I64;
  ttpu_val pos = ttpu_hlo_const(b, tk, 0, (n - 1) / 2);
  if (ttpu_dtype_is_float(tx.dtype)) {
    int64_t d = dim;
    ttpu_val nan = ttpu_hlo_compare(b, TTPU_NE, x, x);
    ttpu_val cnt = ttpu_hlo_reduce(b, ttpu_hlo_convert(b, nan, TTPU_I64),
                                   TTPU_RED_SUM, &d, 1);
    cnt = ttpu_l_reshape_to(b, cnt, tk);
    ttpu_val nn = ttpu_hlo_binary(b, TTPU_SUB, ttpu_hlo_const(b, tk, 0, n), cnt);
    if (ignore_nan) {
      /* (valid - 1) / 2, or 0 when nothing is valid */
      ttpu_val p = ttpu_hlo_binary(b, TTPU_DIV,
                                   ttpu_hlo_binary(b, TTPU_SUB, nn, ttpu_hlo_const(b, tk, 0, 1)),
                                   ttpu_hlo_const(b, tk, 0, 2));
      pos = ttpu_hlo_binary(b, TTPU_MAX, p, ttpu_hlo_const(b, tk, 0, 0));
    } else {
      ttpu_val any = ttpu_hlo_compare(b, TTPU_GT, cnt, ttpu_hlo_const(b, tk, 0, 0));
      pos = ttpu_hlo_select(b, any, nn, pos);
    }
  }
  *value = take_at(b, v, dim, pos);
  *index = take_at(b, i, dim, pos);
}

/* median.dim / nanmedian.dim(Tensor self, int dim, bool keepdim=False)
 * -> (values, indices) */
static ttpu_status* median_dim(ttpu_lower* L) {
  int ignore_nan = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  int nd = ttpu_l_type(L, x).ndim;
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 1, 0), nd);
  x = at_least_1d(b, x);
  if (ttpu_l_type(L, x).dims[dim] == 0)
    return ttpu_status_make(TTPU_INDEX_ERROR,
                            "median(): Expected reduction dim %d to have "
                            "non-zero size.", dim);
  ttpu_val v, i;
  median_along(b, x, dim, ignore_nan, &v, &i);
  set_values_indices(L, v, i);
  return NULL;
}

/* median / nanmedian(Tensor self): over all elements; an empty input
 * gives NaN, as CPU. */
static ttpu_status* median_all(ttpu_lower* L) {
  int ignore_nan = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  int64_t n = ttpu_type_numel(&tx);
  if (n == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ot, NAN, 0));
    return NULL;
  }
  x = ttpu_hlo_reshape(b, x, 1, &n);
  ttpu_val v, i;
  median_along(b, x, 0, ignore_nan, &v, &i);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, v, ot));
  return NULL;
}

/* ------------------------------------------------------------ searchsorted */

/* The dtype both operands are compared in: PyTorch's promotion of the two
 * (a float beats an integer, the wider type wins, f16 with bf16 is f32). */
static ttpu_dtype promote2(ttpu_dtype a, ttpu_dtype b) {
  if (a == b) return a;
  int fa = ttpu_dtype_is_float(a), fb = ttpu_dtype_is_float(b);
  if (fa != fb) return fa ? a : b;
  if (fa) {
    if ((a == TTPU_F16 && b == TTPU_BF16) || (a == TTPU_BF16 && b == TTPU_F16))
      return TTPU_F32;
    return ttpu_dtype_size(a) >= ttpu_dtype_size(b) ? a : b;
  }
  if (a == TTPU_BOOL) return b;
  if (b == TTPU_BOOL) return a;
  if (a == TTPU_U8 || b == TTPU_U8) { /* u8 with a signed type */
    ttpu_dtype o = a == TTPU_U8 ? b : a;
    return o == TTPU_I8 ? TTPU_I16 : o;
  }
  return ttpu_dtype_size(a) >= ttpu_dtype_size(b) ? a : b;
}

/* seq (1-d, or the values' leading dims + [N]) along its last dim at the
 * per-value positions pos (the values' shape, i64). */
static ttpu_val seq_at(ttpu_hlo* b, ttpu_val seq, ttpu_val pos) {
  const ttpu_type* ts = ttpu_hlo_type(b, seq);
  if (!ts) return ERR;
  if (ts->ndim == 1) return ttpu_hlo_take(b, seq, pos);
  const ttpu_type* tp = ttpu_hlo_type(b, pos);
  if (!tp) return ERR;
  return take_at(b, seq, tp->ndim - 1, pos);
}

/* CPU's binary search, unrolled: floor(log2(N)) + 1 halvings of [lo, hi)
 * reproduce its result exactly, also for NaN and unsorted input. left:
 * first i with !(seq[i] < v) as `!(seq[mid] >= v)` moves right; right:
 * `!(seq[mid] > v)`. */
static ttpu_status* search_common(ttpu_lower* L, int seq_arg, int val_arg,
                                  int right, int sorter_arg) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val seq = ttpu_l_tensor(L, seq_arg);
  ttpu_type tq = ttpu_l_type(L, seq);
  ttpu_val v;
  if (ttpu_l_kind(L, val_arg) == TTPU_ARG_TENSOR) {
    v = ttpu_l_tensor(L, val_arg);
  } else {
    ttpu_dtype sd = ttpu_l_scalar_dtype(L, val_arg);
    v = ttpu_l_scalar(L, val_arg, sd == TTPU_F64 ? (ttpu_dtype_is_float(tq.dtype) ? tq.dtype : TTPU_F32) : tq.dtype);
  }
  ttpu_type tv0 = ttpu_l_type(L, v);
  ttpu_dtype ct = promote2(tq.dtype, tv0.dtype);
  /* CPU promotes with result_type, where a 0-d value tensor only decides
   * beyond the sequence's category: int8 -5 against a uint8 sequence is
   * compared as uint8 251 (a 1-d int8 value as int16 -5). */
  if (tv0.ndim == 0 && tq.ndim > 0 && !ttpu_dtype_is_float(tq.dtype) &&
      tq.dtype != TTPU_BOOL && !ttpu_dtype_is_float(tv0.dtype))
    ct = tq.dtype;
  if (ct == TTPU_BOOL)
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "\"searchsorted_out_cpu\" not implemented for 'Bool'");
  seq = ttpu_hlo_convert(b, seq, ct);
  v = ttpu_hlo_convert(b, v, ct);
  if (sorter_arg >= 0 && !ttpu_l_is_none(L, sorter_arg)) {
    ttpu_val so = ttpu_hlo_convert(b, ttpu_l_tensor(L, sorter_arg), TTPU_I64);
    seq = tq.ndim == 1 ? ttpu_hlo_take(b, seq, so) : take_at(b, seq, tq.ndim - 1, so);
  }
  ttpu_type tv = ttpu_l_type(L, v);
  ttpu_type ti = tv;
  ti.dtype = TTPU_I64;
  int64_t n = tq.ndim ? tq.dims[tq.ndim - 1] : 1;
  ttpu_val lo = ttpu_hlo_const(b, ti, 0, 0), hi = ttpu_hlo_const(b, ti, 0, n);
  if (n > 0 && ttpu_type_numel(&tv) > 0) {
    ttpu_val one = ttpu_hlo_const(b, ti, 0, 1);
    ttpu_val last = ttpu_hlo_const(b, ti, 0, n - 1);
    int rounds = 1;
    while ((INT64_C(1) << rounds) <= n) ++rounds;
    for (int r = 0; r < rounds; ++r) {
      ttpu_val active = ttpu_hlo_compare(b, TTPU_LT, lo, hi);
      ttpu_val mid = ttpu_hlo_binary(
          b, TTPU_ADD, lo,
          ttpu_hlo_binary(b, TTPU_SHR_A, ttpu_hlo_binary(b, TTPU_SUB, hi, lo), one));
      ttpu_val mv = seq_at(b, seq, ttpu_hlo_binary(b, TTPU_MIN, mid, last));
      ttpu_val stop = ttpu_hlo_compare(b, right ? TTPU_GT : TTPU_GE, mv, v);
      ttpu_val go = ttpu_hlo_binary(b, TTPU_AND, active, ttpu_hlo_unary(b, TTPU_NOT, stop));
      ttpu_val back = ttpu_hlo_binary(b, TTPU_AND, active, stop);
      lo = ttpu_hlo_select(b, go, ttpu_hlo_binary(b, TTPU_ADD, mid, one), lo);
      hi = ttpu_hlo_select(b, back, mid, hi);
    }
  }
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, lo, ot));
  return NULL;
}

/* searchsorted.Tensor/.Scalar(Tensor sorted_sequence, Tensor|Scalar self,
 * *, bool out_int32=False, bool right=False, str? side=None,
 * Tensor? sorter=None) */
static ttpu_status* lower_searchsorted(ttpu_lower* L) {
  const char* side = ttpu_l_str(L, 4, NULL);
  int right = ttpu_l_bool(L, 3, 0) || (side && !strcmp(side, "right"));
  return search_common(L, 0, 1, right, 5);
}

/* bucketize.Tensor/.Scalar(Tensor|Scalar self, Tensor boundaries, *,
 * bool out_int32=False, bool right=False) */
static ttpu_status* lower_bucketize(ttpu_lower* L) {
  return search_common(L, 1, 0, ttpu_l_bool(L, 3, 0), -1);
}

const ttpu_op_def ttpu_ops_sort[] = {
    {"sort.stable", lower_sort, .flags = 0},
    {"sort.values_stable", lower_sort, .flags = 0},
    {"topk", lower_topk, .flags = 0},
    {"topk.values", lower_topk, .flags = 0},
    {"kthvalue", lower_kthvalue, .flags = 0},
    {"kthvalue.values", lower_kthvalue, .flags = 0},
    {"median", median_all, .param = 0, .variants = TTPU_V_OUT},
    {"median.dim", median_dim, .param = 0},
    {"median.dim_values", median_dim, .param = 0},
    {"nanmedian", median_all, .param = 1, .variants = TTPU_V_OUT},
    {"nanmedian.dim", median_dim, .param = 1},
    {"nanmedian.dim_values", median_dim, .param = 1},
    {"searchsorted.Tensor", lower_searchsorted, .flags = 0},
    {"searchsorted.Scalar", lower_searchsorted, .flags = 0},
    {"bucketize.Tensor", lower_bucketize, .flags = 0},
    {"bucketize.Scalar", lower_bucketize, .flags = 0},
    {0},
};
