/* sort.c - sorting and order statistics: sort, topk, kthvalue, median,
 * nanmedian. All are one stable sort (the builder orders NaN as PyTorch
 * does: largest) carrying an iota along for the indices.
 *
 * A stable sort is a valid result for stable=False, but CPU's unstable sort
 * may order the indices of equal elements differently. */
#include <math.h>
#include <string.h>

#include "ttpu_lower.h"

#define ERR TTPU_VAL_ERROR

static ttpu_val reshape_to(ttpu_hlo* b, ttpu_val x, ttpu_type t) {
  return ttpu_hlo_reshape(b, x, t.ndim, t.dims);
}

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
  ttpu_l_set_out(L, 0, reshape_to(b, v, ttpu_l_out_type(L, 0)));
  ttpu_l_set_out(L, 1, reshape_to(b, i, ttpu_l_out_type(L, 1)));
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
  ttpu_l_set_out(L, 0, reshape_to(b, first_k(b, v, dim, 0, k), ttpu_l_out_type(L, 0)));
  ttpu_l_set_out(L, 1, reshape_to(b, first_k(b, i, dim, 0, k), ttpu_l_out_type(L, 1)));
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
  ttpu_l_set_out(L, 0, reshape_to(b, first_k(b, v, dim, k - 1, k), ttpu_l_out_type(L, 0)));
  ttpu_l_set_out(L, 1, reshape_to(b, first_k(b, i, dim, k - 1, k), ttpu_l_out_type(L, 1)));
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
    cnt = reshape_to(b, cnt, tk);
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
static ttpu_status* median_dim(ttpu_lower* L, int ignore_nan) {
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
  ttpu_l_set_out(L, 0, reshape_to(b, v, ttpu_l_out_type(L, 0)));
  ttpu_l_set_out(L, 1, reshape_to(b, i, ttpu_l_out_type(L, 1)));
  return NULL;
}

static ttpu_status* lower_median_dim(ttpu_lower* L) { return median_dim(L, 0); }
static ttpu_status* lower_nanmedian_dim(ttpu_lower* L) { return median_dim(L, 1); }

/* median / nanmedian(Tensor self): over all elements; an empty input
 * gives NaN, as CPU. */
static ttpu_status* median_all(ttpu_lower* L, int ignore_nan) {
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
  ttpu_l_set_out(L, 0, reshape_to(b, v, ot));
  return NULL;
}

static ttpu_status* lower_median(ttpu_lower* L) { return median_all(L, 0); }
static ttpu_status* lower_nanmedian(ttpu_lower* L) { return median_all(L, 1); }

const ttpu_op_def ttpu_ops_sort[] = {
    {"sort.stable", lower_sort, 0},
    {"sort.values_stable", lower_sort, 0},
    {"topk", lower_topk, 0},
    {"topk.values", lower_topk, 0},
    {"kthvalue", lower_kthvalue, 0},
    {"median", lower_median, 0},
    {"median.dim", lower_median_dim, 0},
    {"nanmedian", lower_nanmedian, 0},
    {"nanmedian.dim", lower_nanmedian_dim, 0},
    {NULL, NULL, 0},
};
