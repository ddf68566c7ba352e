/* unique.c - unique values or slices: _unique2, unique_consecutive,
 * unique_dim, unique_dim_consecutive, in their .out forms (_unique is
 * _unique2 without the counts, in the glue).
 *
 * How many there are depends on the data, and programs have static
 * shapes, so the PyTorch glue (csrc/torch/aten/unique_kernels.cpp) calls
 * these with outputs sized for the most there can be (one per element or
 * slice) and then reads the count back (aten/dynamic_shape.h). A lowering
 * fills the first K values and counts and leaves zeros after them; it
 * does not need K itself, so whatever size the outputs have it writes
 * what fits (an output of size 0 is one not asked for).
 *
 * Method: the slices (elements, or the slices along `dim` flattened to
 * rows) are sorted, stably, lexicographically for rows (one stable sort
 * per column, last column first, in a while loop); a slice starts a new
 * group when it differs from the one before it (NaN differs from
 * everything, as on the CPU); its group number is the running count of
 * group starts. Values are scattered from group starts, counts added up
 * per group, and the inverse scattered back through the sort's
 * permutation. The consecutive forms skip the sort. */
#include "ttpu_lower.h"

static ttpu_val kc(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

typedef struct {
  ttpu_val rows; /* (n, m) */
  int64_t n, m;
} lex;

static ttpu_val lex_cond(ttpu_hlo* b, void* ctx, const ttpu_val* st) {
  (void)ctx;
  return ttpu_hlo_compare(b, TTPU_GE, st[0], ttpu_hlo_const_i(b, TTPU_I64, 0));
}

/* One pass of the least-significant-column-first sort: reorder the
 * permutation stably by column c of the rows it points at. */
static void lex_body(ttpu_hlo* b, void* ctx, const ttpu_val* st, ttpu_val* next) {
  const lex* x = ctx;
  ttpu_val starts[2] = {ttpu_hlo_const_i(b, TTPU_I64, 0), st[0]};
  int64_t sizes[2] = {x->n, 1};
  ttpu_val col = ttpu_hlo_reshape(b, ttpu_hlo_dynamic_slice(b, x->rows, starts, sizes), 1, &x->n);
  ttpu_val key = ttpu_hlo_take(b, col, st[1]), sorted[2];
  ttpu_hlo_sort(b, key, &st[1], 1, 0, 0, sorted);
  next[1] = sorted[1];
  next[0] = ttpu_hlo_binary(b, TTPU_SUB, st[0], ttpu_hlo_const_i(b, TTPU_I64, 1));
}

/* The unique slices of x along the dim at arg dim_arg (none, or None:
 * of its elements) into the outputs (values, inverse, counts). The CPU
 * sorts whatever `sorted` says (sorting is its fastest way), so every
 * non-consecutive form sorts here too. */
static ttpu_status* lower_unique(ttpu_lower* L) {
  int dim_arg = (int)ttpu_l_param_at(L, 0);
  int is_sorted = (int)ttpu_l_param_at(L, 1);
  enum { out_values, out_inverse, out_counts };
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  ttpu_type ov = ttpu_l_out_type(L, out_values), oi = ttpu_l_out_type(L, out_inverse);
  ttpu_type oc = ttpu_l_out_type(L, out_counts);
  int dim = -1;
  if (dim_arg >= 0 && !ttpu_l_is_none(L, dim_arg)) dim = (int)ttpu_l_dim(L, ttpu_l_int(L, dim_arg, 0), tx.ndim);
  if (ttpu_hlo_status(b)) return NULL;
  if (ttpu_type_numel(&tx) == 0) {
    ttpu_l_set_out(L, out_values, kc(b, ov, 0));
    ttpu_l_set_out(L, out_inverse, kc(b, oi, 0));
    ttpu_l_set_out(L, out_counts, kc(b, oc, 0));
    return NULL;
  }

  /* rows (n, m): the slices, dim moved first */
  int64_t n, m, perm[TTPU_MAX_DIMS];
  ttpu_type moved = tx;
  if (dim < 0) {
    n = ttpu_type_numel(&tx);
    m = 1;
  } else {
    int k = 0;
    perm[k++] = dim;
    for (int d = 0; d < tx.ndim; ++d)
      if (d != dim) perm[k++] = d;
    x = ttpu_hlo_transpose(b, x, perm);
    moved = ttpu_l_type(L, x);
    n = tx.dims[dim];
    m = ttpu_type_numel(&tx) / n;
  }
  int64_t nm[2] = {n, m};
  ttpu_val rows = ttpu_hlo_reshape(b, x, 2, nm);
  ttpu_type tn = ttpu_type_make(TTPU_I64, 1, &n);
  ttpu_val order = ttpu_hlo_iota(b, tn, 0);
  if (is_sorted) {
    if (m == 1) {
      ttpu_val s[2];
      ttpu_hlo_sort(b, ttpu_hlo_reshape(b, rows, 1, &n), &order, 1, 0, 0, s);
      order = s[1];
    } else {
      lex ctx = {rows, n, m};
      ttpu_val init[2] = {ttpu_hlo_const_i(b, TTPU_I64, m - 1), order}, fin[2];
      ttpu_hlo_while(b, init, 2, lex_cond, lex_body, &ctx, fin);
      order = fin[1];
    }
    rows = ttpu_l_gather_dim(b, rows, 0, order);
  }

  /* group starts and numbers */
  ttpu_val starts;
  if (n == 1) {
    starts = ttpu_hlo_const(b, ttpu_type_make(TTPU_BOOL, 1, &n), 1, 1);
  } else {
    int64_t lo[2] = {0, 0}, hi[2] = {n - 1, m}, mid[2] = {1, 0}, end[2] = {n, m}, st[2] = {1, 1};
    ttpu_val ne = ttpu_hlo_compare(b, TTPU_NE, ttpu_hlo_slice(b, rows, mid, end, st), ttpu_hlo_slice(b, rows, lo, hi, st));
    int64_t one = 1, last = 1;
    ttpu_val differs = ttpu_hlo_reduce(b, ne, TTPU_RED_OR, &last, 1);
    ttpu_val first = ttpu_hlo_const(b, ttpu_type_make(TTPU_BOOL, 1, &one), 1, 1);
    ttpu_val parts[2] = {first, differs};
    starts = ttpu_hlo_concat(b, parts, 2, 0);
  }
  ttpu_val group = ttpu_hlo_binary(b, TTPU_SUB, ttpu_hlo_cumulative(b, ttpu_hlo_convert(b, starts, TTPU_I64), TTPU_RED_SUM, 0),
                                   kc(b, tn, 1));

  /* values: each group's first row, scattered to its group number; rows
   * that start no group go out of range (dropped) */
  int64_t cap = dim < 0 ? ov.dims[0] : ov.dims[dim];
  ttpu_val dest = ttpu_hlo_select(b, starts, group, kc(b, tn, (double)cap));
  ttpu_type tvr = ttpu_type_make(tx.dtype, 2, (int64_t[]){cap, m});
  ttpu_val vals = ttpu_l_scatter_dim(b, kc(b, tvr, 0), 0, dest, rows, TTPU_SCATTER_SET);
  if (dim < 0) {
    vals = ttpu_l_reshape_to(b, vals, ov);
  } else {
    ttpu_type vm = moved;
    vm.dims[0] = cap;
    vals = ttpu_l_reshape_to(b, vals, vm);
    int64_t back[TTPU_MAX_DIMS];
    for (int d = 0; d < tx.ndim; ++d) back[perm[d]] = d;
    vals = ttpu_hlo_transpose(b, vals, back);
  }
  ttpu_l_set_out(L, out_values, vals);

  if (ttpu_type_numel(&oi) == 0) {
    ttpu_l_set_out(L, out_inverse, kc(b, oi, 0));
  } else {
    ttpu_val inv = is_sorted ? ttpu_hlo_put(b, kc(b, tn, 0), order, group, TTPU_SCATTER_SET) : group;
    ttpu_l_set_out(L, out_inverse, ttpu_l_reshape_to(b, inv, oi));
  }
  if (ttpu_type_numel(&oc) == 0)
    ttpu_l_set_out(L, out_counts, kc(b, oc, 0));
  else
    ttpu_l_set_out(L, out_counts, ttpu_hlo_put(b, kc(b, oc, 0), group, kc(b, tn, 1), TTPU_ADD));
  return NULL;
}

/* _unique2.out(self, sorted=True, return_inverse=False, return_counts=False, *, out0, out1, out2) */
/* unique_consecutive.out(self, return_inverse=False, return_counts=False, int? dim=None, *, out0, out1, out2) */
/* unique_dim.out(self, dim, sorted=True, return_inverse=False, return_counts=False, *, out0, out1, out2) */
/* unique_dim_consecutive.out(self, dim, return_inverse=False, return_counts=False, *, out0, out1, out2) */

const ttpu_op_def ttpu_ops_unique[] = {
    {"_unique2.out", lower_unique, .param = TTPU_PARAMS(-1, 1, 0)},
    {"unique_consecutive.out", lower_unique, .param = TTPU_PARAMS(3, 0, 0)},
    {"unique_dim.out", lower_unique, .param = TTPU_PARAMS(1, 1, 0)},
    {"unique_dim_consecutive.out", lower_unique, .param = TTPU_PARAMS(1, 0, 0)},
    {0},
};
