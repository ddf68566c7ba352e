/* index.c - indexing: index_select/gather/scatter families, advanced
 * indexing (index, index_put), masks, take/put, embedding backward,
 * nonzero_static and repeat_interleave.
 *
 * Index values are data, so an out-of-range index cannot be caught while
 * the program is built, and XLA would hide it (gathers clamp, scatters drop
 * the update). Every op here therefore also computes on the device whether
 * an index was out of range and hands that to ttpu_l_check: the engine
 * reads it back and raises CPU's error at the op (TORCHTPU_CHECK_INDICES=0
 * skips the read). Whether negative indices wrap follows CPU per op:
 * index/index_put/index_fill/take/put wrap, index_select/gather/scatter/
 * index_add/index_copy do not.
 *
 * Nothing here has a data-dependent shape: nonzero, masked_select and
 * indexing with boolean masks need the count of true elements first, which
 * the PyTorch glue reads to the host before calling nonzero_static/index.
 * The one exception, index_put with a single boolean mask, has a static
 * shape (the values' shape is known) and is lowered here with no host read.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ttpu_lower.h"

#define ERR TTPU_VAL_ERROR

static const char kOutOfBounds[] =
    "index %lld is out of bounds for dimension %lld with size %lld";

/* ------------------------------------------------------------ helpers */

static ttpu_val flatten(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t) return ERR;
  int64_t n = ttpu_type_numel(t);
  return ttpu_hlo_reshape(b, x, 1, &n);
}

/* A tensor argument, or a CPU 0-d tensor the glue passed as a Scalar. */
static ttpu_val tensor_arg(ttpu_lower* L, int arg, ttpu_dtype scalar_dt) {
  if (ttpu_l_kind(L, arg) == TTPU_ARG_TENSOR) return ttpu_l_tensor(L, arg);
  ttpu_dtype dt = ttpu_l_scalar_dtype(L, arg);
  return ttpu_l_scalar(L, arg, dt == TTPU_DTYPE_NONE ? scalar_dt : dt);
}

/* An index argument as i64 (int32 indices are accepted like on CPU). */
static ttpu_val index_arg(ttpu_lower* L, int arg) {
  return ttpu_hlo_convert(ttpu_l_hlo(L), tensor_arg(L, arg, TTPU_I64), TTPU_I64);
}

/* The dtype of a tensor (or CPU-scalar) argument. */
static ttpu_dtype arg_dtype(ttpu_lower* L, int arg) {
  const ttpu_tensor* d = ttpu_l_tensor_desc(L, arg, -1);
  return d ? d->dtype : ttpu_l_scalar_dtype(L, arg);
}

/* CPU's index dtype check (meta kernels skip it for some ops): int64, or
 * also int32 when allow_int32; fmt has one %s for the dtype's name. */
static int index_dtype_ok(ttpu_lower* L, int arg, int allow_int32,
                          ttpu_code code, const char* fmt) {
  ttpu_dtype dt = arg_dtype(L, arg);
  if (dt == TTPU_I64 || (allow_int32 && dt == TTPU_I32)) return 1;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  ttpu_hlo_fail(ttpu_l_hlo(L), code, fmt, ttpu_dtype_torch_title(dt));
#pragma GCC diagnostic pop
  return 0;
}

/* CPU requires source and self of one dtype here (the meta kernels do not
 * check); fmt takes self's then the source's c10 name. */
static int same_dtype_ok(ttpu_lower* L, int self_arg, int src_arg,
                         const char* fmt) {
  ttpu_dtype a = arg_dtype(L, self_arg), c = arg_dtype(L, src_arg);
  if (a == c) return 1;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INVALID_ARGUMENT, fmt, ttpu_dtype_torch_title(a),
                ttpu_dtype_torch_title(c));
#pragma GCC diagnostic pop
  return 0;
}

/* size as a value of idx's type t: the constant, or n (0-d i64, the true
 * size of a bucketed dim) where n is not ERR. */
static ttpu_val size_like(ttpu_hlo* b, ttpu_type t, int64_t size, ttpu_val n) {
  return n == ERR ? ttpu_hlo_const(b, t, 0, (double)size)
                  : ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, n, t.dtype), t.ndim, t.dims);
}

/* x + size where x < 0 (i64, any shape); size is n where n is not ERR. */
static ttpu_val wrap_n(ttpu_hlo* b, ttpu_val idx, int64_t size, ttpu_val n) {
  const ttpu_type* tp = ttpu_hlo_type(b, idx);
  if (!tp) return ERR;
  ttpu_type t = *tp;
  ttpu_val neg = ttpu_hlo_compare(b, TTPU_LT, idx, ttpu_hlo_const(b, t, 0, 0));
  return ttpu_hlo_select(
      b, neg, ttpu_hlo_binary(b, TTPU_ADD, idx, size_like(b, t, size, n)), idx);
}

static ttpu_val wrap(ttpu_hlo* b, ttpu_val idx, int64_t size) {
  return wrap_n(b, idx, size, ERR);
}

/* i64[4] {flag, v0, v1, v2} from 0-d i64 values. */
static ttpu_val info4(ttpu_hlo* b, ttpu_val flag, ttpu_val v0, ttpu_val v1,
                      ttpu_val v2) {
  int64_t one = 1;
  ttpu_val parts[4] = {flag, v0, v1, v2};
  for (int i = 0; i < 4; ++i)
    parts[i] = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, parts[i], TTPU_I64), 1,
                                &one);
  return ttpu_hlo_concat(b, parts, 4, 0);
}

/* Check info {any bad, first bad index, dim, size} for idx (i64, any
 * shape) against [lo, size), lo = -size when negative indices wrap; size
 * is dyn (0-d i64) where dyn is not ERR. ERR (no check) for an empty idx. */
static ttpu_val oob_info_n(ttpu_hlo* b, ttpu_val idx, int wraps, int64_t dim,
                           int64_t size, ttpu_val dyn) {
  ttpu_val f = flatten(b, idx);
  const ttpu_type* tp = ttpu_hlo_type(b, f);
  if (!tp || tp->dims[0] == 0) return ERR;
  ttpu_type t = *tp;
  int64_t n = t.dims[0], one = 1, zero = 0;
  ttpu_val hi = size_like(b, t, size, dyn);
  ttpu_val lo = wraps ? ttpu_hlo_unary(b, TTPU_NEG, hi) : ttpu_hlo_const(b, t, 0, 0);
  ttpu_val bad = ttpu_hlo_binary(b, TTPU_OR, ttpu_hlo_compare(b, TTPU_LT, f, lo),
                                 ttpu_hlo_compare(b, TTPU_GE, f, hi));
  ttpu_val pos = ttpu_hlo_select(b, bad, ttpu_hlo_iota(b, t, 0),
                                 ttpu_hlo_const(b, t, 0, n));
  ttpu_val first = ttpu_hlo_reduce(b, pos, TTPU_RED_MIN, &zero, 1);
  ttpu_val flag = ttpu_hlo_compare(b, TTPU_LT, first,
                                   ttpu_hlo_const_i(b, TTPU_I64, n));
  ttpu_val at = ttpu_hlo_binary(b, TTPU_MIN, first,
                                ttpu_hlo_const_i(b, TTPU_I64, n - 1));
  ttpu_val value = ttpu_hlo_reshape(b, ttpu_hlo_dynamic_slice(b, f, &at, &one),
                                    0, NULL);
  return info4(b, flag, value, ttpu_hlo_const_i(b, TTPU_I64, dim),
               dyn == ERR ? ttpu_hlo_const_i(b, TTPU_I64, size) : dyn);
}

static ttpu_val oob_info(ttpu_hlo* b, ttpu_val idx, int wraps, int64_t dim,
                         int64_t size) {
  return oob_info_n(b, idx, wraps, dim, size, ERR);
}

/* The first of two check infos that fired (either may be ERR: none). */
static ttpu_val merge_info(ttpu_hlo* b, ttpu_val first, ttpu_val second) {
  if (first == ERR) return second;
  if (second == ERR) return first;
  int64_t lo = 0, hi = 1, st = 1, four = 4;
  ttpu_val f = ttpu_hlo_slice(b, first, &lo, &hi, &st);
  ttpu_val fired = ttpu_hlo_compare(b, TTPU_NE, f,
                                    ttpu_hlo_const(b, ttpu_type_make(TTPU_I64, 1, &hi), 0, 0));
  fired = ttpu_hlo_broadcast_to(b, fired, 1, &four);
  return ttpu_hlo_select(b, fired, first, second);
}

static void check(ttpu_lower* L, ttpu_val info, ttpu_code code,
                  const char* fmt) {
  if (info != ERR) ttpu_l_check(L, info, code, fmt);
}

/* Full coordinates for element-wise gather/scatter along dim: idx (i64,
 * shape S, rank >= 1) is the position in dim, iotas give the others.
 * Result S + [rank]. */
static ttpu_val coords(ttpu_hlo* b, ttpu_val idx, int dim) {
  const ttpu_type* tp = ttpu_hlo_type(b, idx);
  if (!tp) return ERR;
  ttpu_type t = *tp;
  int r = t.ndim;
  int64_t d1[TTPU_MAX_DIMS + 1];
  memcpy(d1, t.dims, sizeof(int64_t) * (size_t)r);
  d1[r] = 1;
  ttpu_val parts[TTPU_MAX_DIMS];
  for (int d = 0; d < r; ++d) {
    ttpu_val v = d == dim ? idx : ttpu_hlo_iota(b, t, d);
    parts[d] = ttpu_hlo_reshape(b, v, r + 1, d1);
  }
  return ttpu_hlo_concat(b, parts, r, r);
}

/* x at every coordinate of c (S + [rank x]): shape S. */
static ttpu_val gather_elems(ttpu_hlo* b, ttpu_val x, ttpu_val c) {
  const ttpu_type* tx = ttpu_hlo_type(b, x);
  const ttpu_type* tc = ttpu_hlo_type(b, c);
  if (!tx || !tc) return ERR;
  int r = tx->ndim;
  int64_t ones[TTPU_MAX_DIMS], all[TTPU_MAX_DIMS];
  for (int i = 0; i < r; ++i) {
    ones[i] = 1;
    all[i] = i;
  }
  ttpu_type out = ttpu_type_make(tx->dtype, tc->ndim - 1, tc->dims);
  ttpu_gather_dims dn;
  memset(&dn, 0, sizeof(dn));
  dn.n_collapsed_slice_dims = r;
  dn.collapsed_slice_dims = all;
  dn.n_start_index_map = r;
  dn.start_index_map = all;
  dn.index_vector_dim = tc->ndim - 1;
  dn.slice_sizes = ones;
  return ttpu_hlo_gather(b, x, c, &dn, out);
}

/* x with upd (shape S) combined in at the coordinates c (S + [rank x]). */
static ttpu_val scatter_elems(ttpu_hlo* b, ttpu_val x, ttpu_val c,
                              ttpu_val upd, int combine) {
  const ttpu_type* tx = ttpu_hlo_type(b, x);
  const ttpu_type* tc = ttpu_hlo_type(b, c);
  if (!tx || !tc) return ERR;
  int64_t all[TTPU_MAX_DIMS];
  for (int i = 0; i < tx->ndim; ++i) all[i] = i;
  ttpu_scatter_dims dn;
  memset(&dn, 0, sizeof(dn));
  dn.n_inserted_window_dims = tx->ndim;
  dn.inserted_window_dims = all;
  dn.n_scatter_dims_to_operand_dims = tx->ndim;
  dn.scatter_dims_to_operand_dims = all;
  dn.index_vector_dim = tc->ndim - 1;
  return ttpu_hlo_scatter(b, x, c, upd, &dn, combine);
}

/* Rank-0 values become rank 1 so every gather/scatter has a dim. */
static ttpu_val at_least_1d(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t || t->ndim > 0) return x;
  int64_t one = 1;
  return ttpu_hlo_reshape(b, x, 1, &one);
}

/* The dim argument (arg 1) of a (self, int dim, index, ...) op, normalised
 * against self's rank; *x (self) is raised to rank 1 after, as the CPU
 * treats a 0-d self as one element along dim 0. */
static int dim_of_self(ttpu_lower* L, ttpu_val* x) {
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 1, 0), ttpu_l_type(L, *x).ndim);
  *x = at_least_1d(ttpu_l_hlo(L), *x);
  return dim;
}

static ttpu_val zeros(ttpu_hlo* b, ttpu_type t) {
  return ttpu_hlo_const(b, t, 0, 0);
}

/* ADD/MUL/MAX/MIN of a combiner as bool arithmetic (or/and). */
static int combiner_for(int op, ttpu_dtype dt) {
  if (dt != TTPU_BOOL || op == TTPU_SCATTER_SET) return op;
  return op == TTPU_ADD || op == TTPU_MAX ? TTPU_OR : TTPU_AND;
}

/* ------------------------------------------------------------ index_select */

/* The output of index_select and embedding: x's slices at idx (1-d) along
 * dim, checked in range, in the output's shape. */
static void set_selected(ttpu_lower* L, ttpu_val x, int dim, ttpu_val idx) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  int64_t size = ttpu_l_type(L, x).dims[dim];
  /* a dim that holds a bucket: checked against its true size */
  int dyn = ttpu_l_dyn_dims(L, 0, -1) >> dim & 1;
  check(L, oob_info_n(b, idx, 0, dim, size, dyn ? ttpu_l_dyn_size(L) : ERR),
        TTPU_INDEX_ERROR, "index out of range in self");
  ttpu_val r = size == 0 || ttpu_type_numel(&ot) == 0
                   ? zeros(b, ot)
                   : ttpu_l_gather_dim(b, x, dim, idx);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
}

/* index_select(Tensor self, int dim, Tensor index) (and .out) */
static ttpu_status* lower_index_select(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (!index_dtype_ok(L, 2, 1, TTPU_INVALID_ARGUMENT,
                      "index_select(): Expected dtype int32 or int64 for index"))
    return NULL;
  ttpu_val x = ttpu_l_tensor(L, 0);
  int dim = dim_of_self(L, &x);
  set_selected(L, x, dim, flatten(b, index_arg(L, 2)));
  return NULL;
}

/* embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1,
 * bool scale_grad_by_freq=False, bool sparse=False): weight's rows that
 * indices name, written in the output's shape (indices' dims, then the
 * row), so layers reading it see the layout they see from any other op;
 * the last three arguments only shape the backward. */
static ttpu_status* lower_embedding(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (!index_dtype_ok(L, 1, 1, TTPU_INVALID_ARGUMENT,
                      "Expected tensor for argument #1 'indices' to have one "
                      "of the following scalar types: Long, Int; but got torch.%sTensor "
                      "instead (while checking arguments for embedding)"))
    return NULL;
  ttpu_val w = ttpu_l_tensor(L, 0);
  if (ttpu_l_type(L, w).ndim != 2) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "'weight' must be 2-D");
    return NULL;
  }
  set_selected(L, w, 0, flatten(b, index_arg(L, 1)));
  return NULL;
}

/* ------------------------------------------------------------ index_add/copy */

/* index_add(Tensor self, int dim, Tensor index, Tensor source, *,
 * Scalar alpha=1) (also index_add_ and .out) */
static ttpu_status* lower_index_add(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (!index_dtype_ok(L, 2, 1, TTPU_INVALID_ARGUMENT,
                      "index_add_(): Expected dtype int32/int64 for index but "
                      "got: %s"))
    return NULL;
  if (!same_dtype_ok(L, 0, 3, "index_add_(): self (%s) and source (%s) must "
                     "have the same scalar type"))
    return NULL;
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), ot.dtype);
  int dim = dim_of_self(L, &x);
  ttpu_type tx = ttpu_l_type(L, x);
  ttpu_val idx = flatten(b, index_arg(L, 2));
  int64_t n = ttpu_l_type(L, idx).dims[0];
  ttpu_val src = ttpu_hlo_convert(b, ttpu_l_tensor(L, 3), ot.dtype);
  ttpu_type ts = tx;
  ts.dims[dim] = n;
  src = ttpu_l_reshape_to(b, src, ts);
  if (!ttpu_l_is_none(L, 4)) {
    ttpu_val a = ttpu_hlo_broadcast_to(b, ttpu_l_scalar(L, 4, ot.dtype),
                                       ts.ndim, ts.dims);
    src = ttpu_hlo_binary(b, ot.dtype == TTPU_BOOL ? TTPU_AND : TTPU_MUL, src, a);
  }
  check(L, oob_info(b, idx, 0, dim, tx.dims[dim]), TTPU_INVALID_ARGUMENT,
        kOutOfBounds);
  ttpu_val r = ttpu_l_scatter_dim(b, x, dim, idx, src, combiner_for(TTPU_ADD, ot.dtype));
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

/* index_copy(Tensor self, int dim, Tensor index, Tensor source) (and _) */
static ttpu_status* lower_index_copy(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (!index_dtype_ok(L, 2, 0, TTPU_INVALID_ARGUMENT,
                      "index_copy_(): Expected a long tensor for index, but "
                      "got %s"))
    return NULL;
  if (!same_dtype_ok(L, 0, 3, "index_copy_(): self and source expected to "
                     "have the same dtype, but got (self) %s and (source) %s"))
    return NULL;
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  int dim = dim_of_self(L, &x);
  ttpu_type tx = ttpu_l_type(L, x);
  ttpu_val idx = flatten(b, index_arg(L, 2));
  ttpu_type ts = tx;
  ts.dims[dim] = ttpu_l_type(L, idx).dims[0];
  ttpu_val src = ttpu_l_reshape_to(
      b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 3), ot.dtype), ts);
  if (ttpu_l_dyn_dims(L, 2, -1) && ts.dims[dim] > 0) {
    /* Bucketed (prog/bucket.c): index and source padded alike along dim.
     * The padding writes entry 0 again (the same value at the same
     * place), so nothing beyond the true size lands anywhere else. */
    int64_t B = ts.dims[dim], zero = 0, one = 1, step = 1;
    ttpu_val first = ttpu_hlo_slice(b, idx, &zero, &one, &step);
    idx = ttpu_hlo_select(b, ttpu_l_dyn_past(L, ttpu_type_make(TTPU_I64, 1, &B), 0),
                          ttpu_hlo_broadcast_to(b, first, 1, &B), idx);
    int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
    for (int j = 0; j < ts.ndim; ++j) {
      hi[j] = j == dim ? 1 : ts.dims[j];
      st[j] = 1;
    }
    ttpu_val row0 = ttpu_hlo_slice(b, src, lo, hi, st);
    src = ttpu_hlo_select(b, ttpu_l_dyn_past(L, ts, dim),
                          ttpu_hlo_broadcast_to(b, row0, ts.ndim, ts.dims), src);
  }
  check(L, oob_info(b, idx, 0, dim, tx.dims[dim]), TTPU_INDEX_ERROR,
        "index_copy_(): index %lld is out of bounds for dimension %lld with "
        "size %lld");
  ttpu_val r = ttpu_l_scatter_dim(b, x, dim, idx, src, TTPU_SCATTER_SET);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

/* index_fill_.int_Scalar / .int_Tensor(Tensor(a!) self, int dim,
 * Tensor index, Scalar|Tensor value) and the functional forms */
static ttpu_status* lower_index_fill(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (!index_dtype_ok(L, 2, 0, TTPU_INDEX_ERROR,
                      "index_fill_(): Expected dtype int64 for index.%.0s"))
    return NULL;
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  int dim = dim_of_self(L, &x);
  ttpu_type tx = ttpu_l_type(L, x);
  if (ttpu_l_kind(L, 3) != TTPU_ARG_TENSOR &&
      ttpu_dtype_is_complex(ttpu_l_scalar_dtype(L, 3)) && !ttpu_dtype_is_complex(tx.dtype)) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                  "index_fill_(): Converting complex Scalar to non-complex type is not supported");
    return NULL;
  }
  int64_t size = tx.dims[dim];
  ttpu_val idx = flatten(b, index_arg(L, 2));
  int64_t n = ttpu_l_type(L, idx).dims[0];
  check(L, oob_info(b, idx, 1, dim, size), TTPU_INDEX_ERROR, kOutOfBounds);
  ttpu_val hit = ttpu_hlo_put(
      b, zeros(b, ttpu_type_make(TTPU_BOOL, 1, &size)), wrap(b, idx, size),
      ttpu_hlo_const(b, ttpu_type_make(TTPU_BOOL, 1, &n), 0, 1),
      TTPU_SCATTER_SET);
  int64_t map = dim;
  ttpu_type tm = tx;
  tm.dtype = TTPU_BOOL;
  hit = ttpu_hlo_broadcast_in_dim(b, hit, tm, &map);
  ttpu_val v = ttpu_hlo_convert(b, tensor_arg(L, 3, tx.dtype), tx.dtype);
  v = ttpu_hlo_broadcast_to(b, ttpu_l_reshape_to(b, v, ttpu_type_make(tx.dtype, 0, NULL)),
                            tx.ndim, tx.dims);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, ttpu_hlo_select(b, hit, v, x), ot));
  return NULL;
}

/* ------------------------------------------------------------ gather/scatter */

/* gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) */
static ttpu_status* lower_gather(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  int dim = dim_of_self(L, &x);
  ttpu_val idx = at_least_1d(b, index_arg(L, 2));
  int64_t size = ttpu_l_type(L, x).dims[dim];
  check(L, oob_info(b, idx, 0, dim, size), TTPU_INVALID_ARGUMENT, kOutOfBounds);
  ttpu_val r = size == 0 ? zeros(b, ot) : gather_elems(b, x, coords(b, idx, dim));
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

typedef enum { RED_NONE, RED_SUM, RED_PROD, RED_MEAN, RED_AMAX, RED_AMIN } red_kind;

static red_kind parse_reduce(ttpu_lower* L, const char* s) {
  if (!s) return RED_NONE;
  if (!strcmp(s, "add") || !strcmp(s, "sum")) return RED_SUM;
  if (!strcmp(s, "multiply") || !strcmp(s, "prod")) return RED_PROD;
  if (!strcmp(s, "mean")) return RED_MEAN;
  if (!strcmp(s, "amax")) return RED_AMAX;
  if (!strcmp(s, "amin")) return RED_AMIN;
  ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INVALID_ARGUMENT,
                "reduce argument must be either sum, prod, mean, amax or "
                "amin, got %s", s);
  return RED_NONE;
}

/* floor(a / b) for integers with b > 0 (CPU's mean of integer scatters). */
static ttpu_val floor_div_pos(ttpu_hlo* b, ttpu_val a, ttpu_val d) {
  const ttpu_type* tp = ttpu_hlo_type(b, a);
  if (!tp) return ERR;
  ttpu_type t = *tp;
  ttpu_val q = ttpu_hlo_binary(b, TTPU_DIV, a, d);
  ttpu_val r = ttpu_hlo_binary(b, TTPU_REM, a, d);
  ttpu_val fix = ttpu_hlo_compare(b, TTPU_LT, r, zeros(b, t));
  return ttpu_hlo_select(
      b, fix, ttpu_hlo_binary(b, TTPU_SUB, q, ttpu_hlo_const(b, t, 0, 1)), q);
}

/* The scatter family. src_arg holds a tensor or a Scalar; reduce is the
 * reduction (RED_NONE: plain assignment); include_self as scatter_reduce.
 * along_dim: the index is 1-d along dim of src (index_reduce) and applies
 * to every slice. */
static ttpu_status* scatter_common(ttpu_lower* L, red_kind red,
                                   int include_self, int along_dim) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype dt = ot.dtype;
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), dt);
  int dim = dim_of_self(L, &x);
  ttpu_type tx = ttpu_l_type(L, x);
  /* A scatter's complex products round otherwise than a sequence of
   * complex multiplies (XLA's combiner may contract them), so PyTorch's
   * exact comparisons would see last-bit differences: refused, not wrong. */
  if (red == RED_PROD && ttpu_dtype_is_complex(dt))
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "a scatter reducing complex values by product is not supported "
                            "on device 'tpu' (its rounding would differ from the CPU's)");
  if ((red == RED_AMAX || red == RED_AMIN) && ttpu_dtype_is_complex(dt))
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "\"scatter_gather_tensor_cpu_reduce_%s\" not implemented for '%s'",
                            red == RED_AMAX ? "amax" : "amin", ttpu_dtype_torch_title(dt));
  ttpu_val idx = at_least_1d(b, index_arg(L, 2));
  if (along_dim) {
    ttpu_type tsrc = ttpu_l_type(L, at_least_1d(b, ttpu_l_tensor(L, 3)));
    tsrc.dtype = TTPU_I64;
    int64_t map[1] = {dim};
    idx = ttpu_hlo_broadcast_in_dim(b, idx, tsrc, map);
  }
  ttpu_type ti = ttpu_l_type(L, idx);
  if (ttpu_type_numel(&ti) == 0 || ttpu_type_numel(&tx) == 0) {
    ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, x, ot));
    return NULL;
  }
  /* Only the part of src the index covers is used. */
  ttpu_type ts = ti;
  ts.dtype = dt;
  ttpu_val src;
  if (ttpu_l_kind(L, 3) == TTPU_ARG_TENSOR) {
    src = at_least_1d(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 3), dt));
    int64_t lo[TTPU_MAX_DIMS] = {0}, st[TTPU_MAX_DIMS];
    for (int i = 0; i < ts.ndim; ++i) st[i] = 1;
    src = ttpu_hlo_slice(b, src, lo, ts.dims, st);
  } else {
    src = ttpu_hlo_broadcast_to(b, ttpu_l_scalar(L, 3, dt), ts.ndim, ts.dims);
  }
  check(L, oob_info(b, idx, 0, dim, tx.dims[dim]), TTPU_INVALID_ARGUMENT,
        kOutOfBounds);
  ttpu_val c = coords(b, idx, dim);
  ttpu_val r;
  if (red == RED_NONE) {
    r = scatter_elems(b, x, c, src, TTPU_SCATTER_SET);
  } else {
    ttpu_val base = x;
    if (!include_self) {
      /* Positions an index hits start from the reduction's identity. */
      ttpu_type tb = tx, tbs = ts;
      tb.dtype = tbs.dtype = TTPU_BOOL;
      ttpu_val hit = scatter_elems(b, zeros(b, tb), c,
                                   ttpu_hlo_const(b, tbs, 0, 1), TTPU_SCATTER_SET);
      ttpu_redop id = red == RED_PROD ? TTPU_RED_PROD
                      : red == RED_AMAX ? TTPU_RED_MAX
                      : red == RED_AMIN ? TTPU_RED_MIN : TTPU_RED_SUM;
      /* The identity as a full tensor: reduce an empty dim away. */
      ttpu_type te = tx;
      te.ndim = tx.ndim + 1;
      te.dims[tx.ndim] = 0;
      int64_t last = tx.ndim;
      ttpu_val ident = ttpu_hlo_reduce(b, zeros(b, te), id, &last, 1);
      base = ttpu_hlo_select(b, hit, ident, x);
    }
    int op = red == RED_PROD ? TTPU_MUL
             : red == RED_AMAX ? TTPU_MAX
             : red == RED_AMIN ? TTPU_MIN : TTPU_ADD;
    r = scatter_elems(b, base, c, src, combiner_for(op, dt));
    if ((red == RED_AMAX || red == RED_AMIN) && ttpu_dtype_is_float(dt)) {
      /* XLA's scatter max/min need not propagate NaN; CPU's does. */
      ttpu_type tb = tx, tbs = ts;
      tb.dtype = tbs.dtype = TTPU_BOOL;
      ttpu_val nan_src = ttpu_hlo_compare(b, TTPU_NE, src, src);
      ttpu_val nan = scatter_elems(b, zeros(b, tb), c, nan_src, TTPU_OR);
      ttpu_val nan_self = ttpu_hlo_compare(b, TTPU_NE, base, base);
      nan = ttpu_hlo_binary(b, TTPU_OR, nan, nan_self);
      r = ttpu_hlo_select(b, nan, ttpu_hlo_const(b, tx, NAN, 0), r);
    }
    if (red == RED_MEAN) {
      ttpu_val ones = ttpu_hlo_const(b, ts, 1, 1);
      ttpu_val cnt = scatter_elems(b, ttpu_hlo_const(b, tx, include_self, include_self),
                                   c, ones, TTPU_ADD);
      ttpu_val none = ttpu_hlo_compare(b, TTPU_EQ, cnt, zeros(b, tx));
      cnt = ttpu_hlo_select(b, none, ttpu_hlo_const(b, tx, 1, 1), cnt);
      r = ttpu_dtype_is_float(dt) || ttpu_dtype_is_complex(dt)
              ? ttpu_hlo_binary(b, TTPU_DIV, r, cnt)
              : floor_div_pos(b, r, cnt);
    }
  }
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

/* index_reduce(self, int dim, Tensor index, Tensor source, str reduce, *,
 * bool include_self=True): scatter_reduce with index along dim. */
static ttpu_status* lower_index_reduce(ttpu_lower* L) {
  const char* s = ttpu_l_str(L, 4, "");
  if (strcmp(s, "prod") && strcmp(s, "mean") && strcmp(s, "amax") && strcmp(s, "amin"))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "index_reduce(): Expected reduce to be one of prod, "
                            "mean, amax or amin.");
  if (!index_dtype_ok(L, 2, 1, TTPU_INVALID_ARGUMENT,
                      "index_reduce_(): Expected dtype int32/int64 for index but got: %s"))
    return NULL;
  return scatter_common(L, parse_reduce(L, s), ttpu_l_bool(L, 5, 1), 1);
}

/* max_unpool2d(self, indices, output_size) / max_unpool3d(self, indices,
 * output_size, stride, padding): each value goes to its flat index within
 * its plane of the output's last k dims; the rest is zero. */
static ttpu_status* max_unpool(ttpu_lower* L) {
  int k = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!ttpu_dtype_is_float(ot.dtype)) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"max_unpool%dd\" not implemented for '%s'", k,
                  ttpu_dtype_torch_title(ot.dtype));
    return NULL;
  }
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), ot.dtype);
  ttpu_type tx = ttpu_l_type(L, x);
  if (!index_dtype_ok(L, 1, 0, TTPU_INVALID_ARGUMENT,
                      "elements in indices should be type int64 but got: %s"))
    return NULL;
  int64_t plane = 1, in_plane = 1;
  for (int d = ot.ndim - k; d < ot.ndim; ++d) plane *= ot.dims[d];
  for (int d = tx.ndim - k; d < tx.ndim; ++d) in_plane *= tx.dims[d];
  int64_t planes = plane ? ttpu_type_numel(&ot) / plane : 0;
  if (planes == 0 || in_plane == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ot, 0, 0));
    return NULL;
  }
  int64_t d2[2] = {planes, in_plane}, o2[2] = {planes, plane};
  ttpu_val v = ttpu_hlo_reshape(b, x, 2, d2);
  ttpu_val idx = ttpu_hlo_reshape(b, index_arg(L, 1), 2, d2);
  char fmt[160];
  int n = snprintf(fmt, sizeof fmt, "Found an invalid max index: %%lld (output volumes are of size ");
  for (int d = ot.ndim - k; d < ot.ndim && n > 0 && n < (int)sizeof fmt; ++d)
    n += snprintf(fmt + n, sizeof fmt - (size_t)n, d > ot.ndim - k ? "x%lld" : "%lld",
                  (long long)ot.dims[d]);
  if (n > 0 && n < (int)sizeof fmt) snprintf(fmt + n, sizeof fmt - (size_t)n, ")");
  check(L, oob_info(b, idx, 0, 1, plane), TTPU_INVALID_ARGUMENT, fmt);
  ttpu_val r = scatter_elems(b, zeros(b, ttpu_type_make(ot.dtype, 2, o2)), coords(b, idx, 1),
                             v, TTPU_SCATTER_SET);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

/* scatter.src / scatter.value (and in place) */
static ttpu_status* lower_scatter(ttpu_lower* L) {
  return scatter_common(L, RED_NONE, 1, 0);
}

/* scatter.reduce / scatter.value_reduce: *, str reduce ("add"/"multiply") */
static ttpu_status* lower_scatter_reduce_str(ttpu_lower* L) {
  const char* s = ttpu_l_str(L, 4, "");
  if (strcmp(s, "add") && strcmp(s, "multiply"))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "reduce argument must be either add or multiply.");
  return scatter_common(L, parse_reduce(L, s), 1, 0);
}

/* scatter_add(Tensor self, int dim, Tensor index, Tensor src) */
static ttpu_status* lower_scatter_add(ttpu_lower* L) {
  return scatter_common(L, RED_SUM, 1, 0);
}

/* scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src,
 * str reduce, *, bool include_self=True) */
static ttpu_status* lower_scatter_reduce(ttpu_lower* L) {
  red_kind r = parse_reduce(L, ttpu_l_str(L, 4, ""));
  if (r == RED_NONE) return NULL; /* the builder holds the error */
  return scatter_common(L, r, ttpu_l_bool(L, 5, 1), 0);
}

/* ------------------------------------------------------------ advanced index */

/* The gather/scatter description of self[indices] for integer indices. */
typedef struct {
  int m;                        /* index tensors */
  int64_t pos[TTPU_MAX_DIMS];   /* the dims they index, increasing */
  ttpu_val coords;              /* B + [m], wrapped, i64 */
  int nb;                       /* rank of the broadcast index shape B */
  ttpu_type result;             /* shape of self[indices] */
  int n_off;
  int64_t off[TTPU_MAX_DIMS];   /* result dims that are self's own dims */
  int64_t slice[TTPU_MAX_DIMS]; /* gather slice sizes */
  int empty_dim;                /* an indexed dim of self has size 0 */
  ttpu_val info;                /* bounds check */
} adv_index;

static int is_mask_dtype(ttpu_dtype dt) { return dt == TTPU_BOOL || dt == TTPU_U8; }

/* Fills a for self (type tx) indexed by the Tensor?[] at arg. 0 with the
 * builder's error set on failure. */
static int adv_index_build(ttpu_lower* L, ttpu_type tx, int arg, adv_index* a) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  memset(a, 0, sizeof(*a));
  a->coords = a->info = ERR;
  int nl = ttpu_l_count(L, arg);
  if (nl > tx.ndim) {
    ttpu_hlo_fail(b, TTPU_INDEX_ERROR,
                  "too many indices for tensor of dimension %d", tx.ndim);
    return 0;
  }
  ttpu_val vals[TTPU_MAX_DIMS];
  int64_t bd[TTPU_MAX_DIMS];
  int nb = 0;
  /* A bucketed self (index.Tensor over a padded storage): an indexed dim
   * that holds a bucket wraps and checks its indices against the true
   * size, not the bucket's. */
  int sdyn = ttpu_l_dyn_dims(L, 0, -1);
  ttpu_val true_n = sdyn ? ttpu_l_dyn_size(L) : ERR;
  for (int k = 0; k < nl; ++k) {
    const ttpu_tensor* d = ttpu_l_tensor_desc(L, arg, k);
    /* None; an empty index tensor has no buffer but still indexes */
    if (!d || d->dtype == TTPU_DTYPE_NONE) continue;
    if (is_mask_dtype(d->dtype)) {
      ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED,
                    "boolean mask indices must be turned into integer indices "
                    "(nonzero) before the engine sees them");
      return 0;
    }
    if (d->dtype != TTPU_I64 && d->dtype != TTPU_I32) {
      ttpu_hlo_fail(b, TTPU_INDEX_ERROR,
                    "tensors used as indices must be long, int, byte or bool "
                    "tensors");
      return 0;
    }
    ttpu_val v = ttpu_hlo_convert(b, ttpu_l_tensor_at(L, arg, k), TTPU_I64);
    ttpu_type tv = ttpu_l_type(L, v);
    /* broadcast shape, trailing-aligned */
    int n = tv.ndim > nb ? tv.ndim : nb;
    int64_t nd[TTPU_MAX_DIMS];
    for (int i = 0; i < n; ++i) {
      int iv = i - (n - tv.ndim), ib = i - (n - nb);
      int64_t sv = iv >= 0 ? tv.dims[iv] : 1, sb = ib >= 0 ? bd[ib] : 1;
      if (sv != sb && sv != 1 && sb != 1) {
        ttpu_hlo_fail(b, TTPU_INDEX_ERROR,
                      "shape mismatch: indexing tensors could not be "
                      "broadcast together");
        return 0;
      }
      nd[i] = sv == 1 ? sb : sv;
    }
    memcpy(bd, nd, sizeof(int64_t) * (size_t)n);
    nb = n;
    int64_t size = tx.dims[k];
    if (size == 0) a->empty_dim = 1;
    /* CPU names the index tensor's position among the index tensors as
     * the dimension in its message, not the dim of self it indexes. */
    a->info = merge_info(b, a->info,
                         oob_info_n(b, v, 1, a->m, size, sdyn >> k & 1 ? true_n : ERR));
    vals[a->m] = v;
    a->pos[a->m++] = k;
  }
  a->nb = nb;
  int64_t b1[TTPU_MAX_DIMS + 1];
  memcpy(b1, bd, sizeof(int64_t) * (size_t)nb);
  b1[nb] = 1;
  ttpu_val parts[TTPU_MAX_DIMS];
  for (int j = 0; j < a->m; ++j) {
    ttpu_val v = ttpu_hlo_broadcast_to(b, vals[j], nb, bd);
    v = wrap_n(b, v, tx.dims[a->pos[j]], sdyn >> a->pos[j] & 1 ? true_n : ERR);
    parts[j] = ttpu_hlo_reshape(b, v, nb + 1, b1);
  }
  a->coords = a->m ? ttpu_hlo_concat(b, parts, a->m, nb) : ERR;
  int adjacent = 1;
  for (int j = 1; j < a->m; ++j) adjacent &= a->pos[j] == a->pos[j - 1] + 1;
  /* Result: B replaces the indexed dims where they are adjacent, and goes
   * first when a slice separates them (NumPy's rule). */
  int before = adjacent && a->m ? (int)a->pos[0] : 0;
  ttpu_type r = tx;
  r.ndim = 0;
  int taken[TTPU_MAX_DIMS] = {0};
  for (int j = 0; j < a->m; ++j) taken[a->pos[j]] = 1;
  for (int i = 0; i < before; ++i) {
    a->off[a->n_off++] = r.ndim;
    r.dims[r.ndim++] = tx.dims[i];
  }
  for (int i = 0; i < nb; ++i) r.dims[r.ndim++] = bd[i];
  for (int i = before; i < tx.ndim; ++i) {
    if (taken[i]) continue;
    a->off[a->n_off++] = r.ndim;
    r.dims[r.ndim++] = tx.dims[i];
  }
  for (int i = 0; i < tx.ndim; ++i) a->slice[i] = taken[i] ? 1 : tx.dims[i];
  a->result = r;
  return ttpu_hlo_status(b) == NULL;
}

/* index.Tensor(Tensor self, Tensor?[] indices) */
static ttpu_status* lower_index(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  adv_index a;
  if (!adv_index_build(L, ttpu_l_type(L, x), 1, &a)) return NULL;
  check(L, a.info, TTPU_INDEX_ERROR, kOutOfBounds);
  if (!a.m) { /* only None: a view-like copy */
    ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, x, ot));
    return NULL;
  }
  ttpu_val r;
  if (a.empty_dim || ttpu_type_numel(&a.result) == 0) {
    r = zeros(b, a.result);
  } else {
    ttpu_gather_dims dn;
    memset(&dn, 0, sizeof(dn));
    dn.n_offset_dims = a.n_off;
    dn.offset_dims = a.off;
    dn.n_collapsed_slice_dims = a.m;
    dn.collapsed_slice_dims = a.pos;
    dn.n_start_index_map = a.m;
    dn.start_index_map = a.pos;
    dn.index_vector_dim = a.nb;
    dn.slice_sizes = a.slice;
    r = ttpu_hlo_gather(b, x, a.coords, &dn, a.result);
  }
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

static void shape_str(const int64_t* d, int n, char* out, size_t cap) {
  size_t k = 0;
  out[k++] = '[';
  for (int i = 0; i < n && k + 24 < cap; ++i)
    k += (size_t)snprintf(out + k, cap - k, "%s%lld", i ? ", " : "", (long long)d[i]);
  snprintf(out + k, cap - k, "]");
}

/* values (type tv) broadcast to shape r, or fail like CPU. */
static ttpu_val values_to(ttpu_hlo* b, ttpu_val v, ttpu_type r) {
  const ttpu_type* tp = ttpu_hlo_type(b, v);
  if (!tp) return ERR;
  ttpu_type tv = *tp;
  int ok = tv.ndim <= r.ndim;
  for (int i = 0; ok && i < tv.ndim; ++i) {
    int64_t s = tv.dims[tv.ndim - 1 - i], t = r.dims[r.ndim - 1 - i];
    ok = s == t || s == 1;
  }
  /* strict, as the CPU's index_put_: `x[i] = v` drops v's leading
   * size-1 dims before it calls the op */
  if (!ok) {
    char a[160], c[160];
    shape_str(tv.dims, tv.ndim, a, sizeof(a));
    shape_str(r.dims, r.ndim, c, sizeof(c));
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "shape mismatch: value tensor of shape %s cannot be "
                         "broadcast to indexing result of shape %s", a, c);
  }
  return ttpu_hlo_broadcast_to(b, v, r.ndim, r.dims);
}

/* self[mask] (op)= values for a single boolean mask covering dims
 * [k, k + rank(mask)) of self: a select, with values taken in mask order
 * when they have one entry per true element. dtype_msg, when not NULL,
 * is the CPU's error for values of another dtype: it comes after the
 * shape check, as the CPU's does (the count of true elements decides
 * which of the two a call gets). */
static ttpu_status* index_put_mask(ttpu_lower* L, ttpu_val x, int k,
                                   ttpu_val mask, ttpu_val v, int accumulate,
                                   const char* dtype_msg) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type tx = ttpu_l_type(L, x), tm = ttpu_l_type(L, mask);
  int r = tm.ndim;
  for (int i = 0; i < r; ++i)
    if (k + i >= tx.ndim || tm.dims[i] != tx.dims[k + i]) {
      char ms[160], xs[160];
      shape_str(tm.dims, tm.ndim, ms, sizeof(ms));
      shape_str(tx.dims, tx.ndim, xs, sizeof(xs));
      return ttpu_status_make(TTPU_INDEX_ERROR,
                              "The shape of the mask %s at index %d does not "
                              "match the shape of the indexed tensor %s at "
                              "index %d", ms, i, xs, k + i);
    }
  mask = ttpu_hlo_convert(b, mask, TTPU_BOOL);
  /* The indexing result: self's dims with the mask's replaced by one dim
   * of (count) entries; values broadcast to it. */
  int rn = tx.ndim - r + 1;
  ttpu_type tv = ttpu_l_type(L, v);
  int cd = tv.ndim - (rn - k); /* the values' dim facing the count */
  ttpu_type vr = tx; /* values, with the count dim as 1, then the mask dims */
  vr.ndim = 0;
  for (int i = 0; i < k; ++i) vr.dims[vr.ndim++] = tx.dims[i];
  vr.dims[vr.ndim++] = 1;
  for (int i = k + r; i < tx.ndim; ++i) vr.dims[vr.ndim++] = tx.dims[i];
  ttpu_val full;
  int64_t count_at_values = -1;
  if (cd < 0 || tv.dims[cd] == 1) {
    full = values_to(b, v, vr);
    if (dtype_msg) {
      ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s", dtype_msg);
      return NULL;
    }
  } else {
    count_at_values = tv.dims[cd];
    vr.dims[k] = count_at_values;
    full = values_to(b, v, vr);
    ttpu_val mf = flatten(b, mask);
    /* count check: the values must have exactly one entry per element */
    int64_t zero = 0;
    ttpu_val count = ttpu_hlo_reduce(b, ttpu_hlo_convert(b, mf, TTPU_I64),
                                     TTPU_RED_SUM, &zero, 1);
    ttpu_val bad = ttpu_hlo_compare(b, TTPU_NE, count,
                                    ttpu_hlo_const_i(b, TTPU_I64, count_at_values));
    /* CPU's message names the indexing result's shape, count included */
    char vs[80], pre[64], post[64], fmt[480];
    shape_str(tv.dims, tv.ndim, vs, sizeof(vs));
    shape_str(tx.dims, k, pre, sizeof(pre));
    shape_str(tx.dims + k + r, tx.ndim - k - r, post, sizeof(post));
    pre[strlen(pre) - 1] = '\0'; /* drop "]" */
    snprintf(fmt, sizeof(fmt),
             "shape mismatch: value tensor of shape %s cannot be broadcast to "
             "indexing result of shape %s%s%%lld%s%s%s%s", vs, pre, k ? ", " : "",
             tx.ndim - k - r ? ", " : "", post + 1,
             dtype_msg ? TTPU_CHECK_ALT : "", dtype_msg ? dtype_msg : "");
    if (dtype_msg) /* 1: the shape's error, else 2: the dtype's */
      bad = ttpu_hlo_select(b, bad, ttpu_hlo_const_i(b, TTPU_I64, 1),
                            ttpu_hlo_const_i(b, TTPU_I64, 2));
    ttpu_l_check(L, info4(b, bad, count, count, count), TTPU_INVALID_ARGUMENT,
                 fmt);
    if (count_at_values == 0) { /* no values: the mask is all false */
      ttpu_l_set_out(L, 0, x);
      return NULL;
    }
    /* the j-th true element of the mask takes entry j */
    ttpu_val rank = ttpu_hlo_cumulative(b, ttpu_hlo_convert(b, mf, TTPU_I64),
                                        TTPU_RED_SUM, 0);
    ttpu_type tr = ttpu_l_type(L, rank);
    rank = ttpu_hlo_clamp(b, ttpu_hlo_const(b, tr, 0, 0),
                          ttpu_hlo_binary(b, TTPU_SUB, rank, ttpu_hlo_const(b, tr, 0, 1)),
                          ttpu_hlo_const(b, tr, 0, count_at_values - 1));
    full = ttpu_l_gather_dim(b, full, k, rank);
  }
  /* from (pre, count-or-1 / M, post) to self's shape */
  ttpu_type ex = tx;
  ex.ndim = 0;
  ttpu_type tf = ttpu_l_type(L, full);
  for (int i = 0; i < k; ++i) ex.dims[ex.ndim++] = tf.dims[i];
  for (int i = 0; i < r; ++i)
    ex.dims[ex.ndim++] = count_at_values >= 0 ? tm.dims[i] : 1;
  for (int i = k + 1; i < tf.ndim; ++i) ex.dims[ex.ndim++] = tf.dims[i];
  full = ttpu_l_reshape_to(b, full, ex);
  full = ttpu_hlo_broadcast_to(b, full, tx.ndim, tx.dims);
  int64_t map[TTPU_MAX_DIMS];
  for (int i = 0; i < r; ++i) map[i] = k + i;
  ttpu_type tmb = tx;
  tmb.dtype = TTPU_BOOL;
  ttpu_val mb = ttpu_hlo_broadcast_in_dim(b, mask, tmb, map);
  ttpu_val out;
  if (accumulate) {
    ttpu_val add = ttpu_hlo_select(b, mb, full, zeros(b, tx));
    out = ttpu_hlo_binary(b, tx.dtype == TTPU_BOOL ? TTPU_OR : TTPU_ADD, x, add);
  } else {
    out = ttpu_hlo_select(b, mb, full, x);
  }
  ttpu_l_set_out(L, 0, out);
  return NULL;
}

/* _index_put_impl_(Tensor(a!) self, Tensor?[] indices, Tensor values,
 * bool accumulate=False, bool unsafe=False) */
static ttpu_status* lower_index_put(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  int accumulate = ttpu_l_bool(L, 3, 0);
  int nl = ttpu_l_count(L, 1), n_def = 0, mask_at = -1;
  for (int k = 0; k < nl; ++k) {
    const ttpu_tensor* d = ttpu_l_tensor_desc(L, 1, k);
    /* None; an empty index tensor has no buffer but still indexes */
    if (!d || d->dtype == TTPU_DTYPE_NONE) continue;
    n_def++;
    if (is_mask_dtype(d->dtype)) mask_at = k;
  }
  /* CPU turns a single mask with one value into masked_fill_, which
   * converts the value; otherwise the dtypes must match. */
  const ttpu_tensor* vd = ttpu_l_tensor_desc(L, 2, -1);
  int64_t vn = 1;
  for (int i = 0; vd && i < vd->ndim; ++i) vn *= vd->sizes[i];
  /* the CPU kernel fails on an empty list too (with internal errors) */
  if (nl == 0) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                  "index_put_ needs at least one index tensor, got an empty list");
    return NULL;
  }
  int as_fill = !accumulate && n_def == 1 && mask_at >= 0 && vn == 1;
  char dtype_msg[160] = "";
  if (!as_fill && vd && arg_dtype(L, 0) != arg_dtype(L, 2))
    snprintf(dtype_msg, sizeof dtype_msg,
             "Index put requires the source and destination dtypes match, got "
             "%s for the destination and %s for the source.",
             ttpu_dtype_torch_title(arg_dtype(L, 0)),
             ttpu_dtype_torch_title(arg_dtype(L, 2)));
  ttpu_val v = ttpu_hlo_convert(b, tensor_arg(L, 2, tx.dtype), tx.dtype);
  /* a single boolean mask is lowered without nonzero */
  if (n_def == 1 && mask_at >= 0)
    return index_put_mask(L, x, mask_at, ttpu_l_tensor_at(L, 1, mask_at), v,
                          accumulate, dtype_msg[0] ? dtype_msg : NULL);
  if (dtype_msg[0]) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s", dtype_msg);
    return NULL;
  }
  adv_index a;
  if (!adv_index_build(L, tx, 1, &a)) return NULL;
  if (!a.m) {
    v = values_to(b, v, tx);
    ttpu_l_set_out(L, 0, accumulate ? ttpu_hlo_binary(b, combiner_for(TTPU_ADD, tx.dtype), x, v) : v);
    return NULL;
  }
  check(L, a.info, TTPU_INDEX_ERROR, kOutOfBounds);
  v = values_to(b, v, a.result);
  ttpu_val r = x;
  if (ttpu_type_numel(&a.result) > 0 && !a.empty_dim) {
    ttpu_scatter_dims dn;
    memset(&dn, 0, sizeof(dn));
    dn.n_update_window_dims = a.n_off;
    dn.update_window_dims = a.off;
    dn.n_inserted_window_dims = a.m;
    dn.inserted_window_dims = a.pos;
    dn.n_scatter_dims_to_operand_dims = a.m;
    dn.scatter_dims_to_operand_dims = a.pos;
    dn.index_vector_dim = a.nb;
    r = ttpu_hlo_scatter(b, x, a.coords, v, &dn,
                         accumulate ? combiner_for(TTPU_ADD, tx.dtype)
                                    : TTPU_SCATTER_SET);
  }
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

/* ------------------------------------------------------------ masks */

/* Position of each element among the true ones of the flat mask m (bool,
 * 1-d), as i64; meaningful where m is true. */
static ttpu_val mask_rank(ttpu_hlo* b, ttpu_val m) {
  ttpu_val c = ttpu_hlo_cumulative(b, ttpu_hlo_convert(b, m, TTPU_I64),
                                   TTPU_RED_SUM, 0);
  const ttpu_type* tp = ttpu_hlo_type(b, c);
  if (!tp) return ERR;
  return ttpu_hlo_binary(b, TTPU_SUB, c, ttpu_hlo_const(b, *tp, 0, 1));
}

/* masked_scatter_(Tensor(a!) self, Tensor mask, Tensor source) (and the
 * functional form) */
static ttpu_status* lower_masked_scatter(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  /* The functional form broadcasts self and mask together (a 1-d self
   * with a 2-d mask gives a 2-d result); the in-place one keeps self's
   * shape. Either way the output's shape is the one to fill. */
  ttpu_val x = ttpu_hlo_broadcast_to(b, ttpu_l_tensor(L, 0), ot.ndim, ot.dims);
  ttpu_type tx = ttpu_l_type(L, x);
  ttpu_val m = ttpu_hlo_convert(b, tensor_arg(L, 1, TTPU_BOOL), TTPU_BOOL);
  m = flatten(b, ttpu_hlo_broadcast_to(b, m, tx.ndim, tx.dims));
  ttpu_val src = flatten(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 2), tx.dtype));
  int64_t ns = ttpu_l_type(L, src).dims[0], n = ttpu_type_numel(&tx), zero = 0;
  if (n == 0) {
    ttpu_l_set_out(L, 0, x);
    return NULL;
  }
  ttpu_val rank = mask_rank(b, m);
  ttpu_val count = ttpu_hlo_reduce(b, ttpu_hlo_convert(b, m, TTPU_I64),
                                   TTPU_RED_SUM, &zero, 1);
  ttpu_val bad = ttpu_hlo_compare(b, TTPU_GT, count, ttpu_hlo_const_i(b, TTPU_I64, ns));
  ttpu_l_check(L, info4(b, bad, count, count, count), TTPU_INVALID_ARGUMENT,
               "Number of elements of source < number of ones in mask");
  ttpu_val xf = flatten(b, x), vals;
  if (ns == 0) {
    vals = xf;
  } else {
    ttpu_type tr = ttpu_l_type(L, rank);
    rank = ttpu_hlo_clamp(b, ttpu_hlo_const(b, tr, 0, 0), rank,
                          ttpu_hlo_const(b, tr, 0, ns - 1));
    vals = ttpu_hlo_take(b, src, rank);
  }
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, ttpu_hlo_select(b, m, vals, xf), ot));
  return NULL;
}

/* masked_scatter_backward(Tensor grad_output, Tensor mask, SymInt[] sizes):
 * the gradient of the source: grad at the true positions, in order, then
 * zeros. */
static ttpu_status* lower_masked_scatter_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val g = ttpu_l_tensor(L, 0);
  ttpu_val m = ttpu_hlo_convert(b, ttpu_l_tensor(L, 1), TTPU_BOOL);
  ttpu_type tg = ttpu_l_type(L, g), tm = ttpu_l_type(L, m);
  ttpu_type tb = tg.ndim >= tm.ndim ? tg : tm; /* broadcast shape */
  for (int i = 0; i < tb.ndim; ++i) {
    int ig = i - (tb.ndim - tg.ndim), im = i - (tb.ndim - tm.ndim);
    int64_t a = ig >= 0 ? tg.dims[ig] : 1, c = im >= 0 ? tm.dims[im] : 1;
    tb.dims[i] = a == 1 ? c : a;
  }
  g = flatten(b, ttpu_hlo_broadcast_to(b, g, tb.ndim, tb.dims));
  m = flatten(b, ttpu_hlo_broadcast_to(b, m, tb.ndim, tb.dims));
  int64_t n = ttpu_type_numel(&ot);
  ttpu_val rank = mask_rank(b, m);
  ttpu_type tr = ttpu_l_type(L, rank);
  rank = ttpu_hlo_select(b, m, rank, ttpu_hlo_const(b, tr, 0, n)); /* drop */
  ttpu_val r = ttpu_hlo_put(b, zeros(b, ttpu_type_make(tg.dtype, 1, &n)), rank,
                            g, TTPU_SCATTER_SET);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

/* ------------------------------------------------------------ take/put */

static const char kTakeRange[] =
    "out of range: tried to access index %lld on a tensor of %lld elements.";

/* take(Tensor self, Tensor index) */
static ttpu_status* lower_take(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = flatten(b, ttpu_l_tensor(L, 0));
  int64_t n = ttpu_l_type(L, x).dims[0];
  ttpu_val idx = index_arg(L, 1);
  check(L, oob_info(b, idx, 1, n, n), TTPU_INDEX_ERROR, kTakeRange);
  ttpu_val r = n == 0 ? zeros(b, ot) : ttpu_hlo_take(b, x, wrap(b, idx, n));
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

/* put_(Tensor(a!) self, Tensor index, Tensor source, bool accumulate=False)
 * (and the functional form) */
static ttpu_status* lower_put(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (!index_dtype_ok(L, 1, 0, TTPU_INVALID_ARGUMENT,
                      "put_(): Expected a long tensor for index, but got %s"))
    return NULL;
  if (!same_dtype_ok(L, 0, 2, "put_(): self and source expected to have the "
                     "same dtype, but got self.dtype = %s and source.dtype = "
                     "%s"))
    return NULL;
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = flatten(b, ttpu_l_tensor(L, 0));
  int64_t n = ttpu_l_type(L, x).dims[0];
  ttpu_val idx = flatten(b, index_arg(L, 1));
  ttpu_val src = flatten(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 2), ot.dtype));
  check(L, oob_info(b, idx, 1, n, n), TTPU_INDEX_ERROR, kTakeRange);
  int acc = ttpu_l_bool(L, 3, 0);
  ttpu_val r = ttpu_hlo_put(b, x, wrap(b, idx, n), src,
                            acc ? combiner_for(TTPU_ADD, ot.dtype) : TTPU_SCATTER_SET);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

/* ------------------------------------------------------------ embedding */

/* embedding_dense_backward(Tensor grad_output, Tensor indices,
 * SymInt num_weights, SymInt padding_idx, bool scale_grad_by_freq) */
static ttpu_status* lower_embedding_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  int64_t nw = ot.dims[0], dd = ot.dims[1];
  int64_t pad = ttpu_l_int(L, 3, -1);
  ttpu_val idx = flatten(b, index_arg(L, 1));
  int64_t n = ttpu_l_type(L, idx).dims[0];
  /* accumulate half types in f32 */
  ttpu_dtype acc = ot.dtype == TTPU_F64 ? TTPU_F64 : TTPU_F32;
  int64_t gd[2] = {n, dd};
  ttpu_val g = ttpu_hlo_reshape(
      b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), acc), 2, gd);
  ttpu_type ti = ttpu_l_type(L, idx);
  if (ttpu_l_bool(L, 4, 0)) {
    ttpu_val cnt = ttpu_hlo_put(b, zeros(b, ttpu_type_make(TTPU_I64, 1, &nw)), idx,
                                ttpu_hlo_const(b, ti, 0, 1), TTPU_ADD);
    ttpu_val f = ttpu_hlo_convert(b, ttpu_hlo_take(b, cnt, idx), acc);
    int64_t map = 0;
    f = ttpu_hlo_broadcast_in_dim(b, f, ttpu_type_make(acc, 2, gd), &map);
    g = ttpu_hlo_binary(b, TTPU_DIV, g, f);
  }
  if (pad >= 0) /* rows of the padding index are dropped (out of range) */
    idx = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, idx, ttpu_hlo_const(b, ti, 0, pad)),
                          ttpu_hlo_const(b, ti, 0, nw), idx);
  ttpu_type tw = ot;
  tw.dtype = acc;
  ttpu_val r = n == 0 ? zeros(b, tw)
                      : ttpu_l_scatter_dim(b, zeros(b, tw), 0, idx, g, TTPU_ADD);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* embedding_renorm_(Tensor(a!) self, Tensor indices, float max_norm,
 * float norm_type): rows named by indices whose norm exceeds max_norm are
 * scaled to max_norm / (norm + 1e-7). */
static ttpu_status* lower_embedding_renorm(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (ot.ndim != 2)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "embedding_renorm_: self must be 2-D");
  double max_norm = ttpu_l_float(L, 2, 0), p = ttpu_l_float(L, 3, 2);
  ttpu_dtype acc = ot.dtype == TTPU_F64 ? TTPU_F64 : TTPU_F32;
  ttpu_val w = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), acc);
  ttpu_type tw = ttpu_l_type(L, w);
  int64_t rows = tw.dims[0], one = 1;
  ttpu_val idx = flatten(b, index_arg(L, 1));
  ttpu_type ti = ttpu_l_type(L, idx);
  ttpu_val hit = ttpu_hlo_put(b, zeros(b, ttpu_type_make(TTPU_BOOL, 1, &rows)),
                              idx, ttpu_hlo_const(b, ttpu_type_make(TTPU_BOOL, 1, ti.dims), 0, 1),
                              TTPU_SCATTER_SET);
  ttpu_val a = ttpu_hlo_unary(b, TTPU_ABS, w), norm;
  if (p == 1) {
    norm = ttpu_hlo_reduce(b, a, TTPU_RED_SUM, &one, 1);
  } else if (p == 2) {
    norm = ttpu_hlo_unary(b, TTPU_SQRT,
                          ttpu_hlo_reduce(b, ttpu_hlo_binary(b, TTPU_MUL, w, w),
                                          TTPU_RED_SUM, &one, 1));
  } else if (p > 1e308) {
    norm = ttpu_hlo_reduce(b, a, TTPU_RED_MAX, &one, 1);
  } else if (p == 0) {
    norm = ttpu_hlo_reduce(b, ttpu_hlo_convert(b, ttpu_hlo_convert(b, w, TTPU_BOOL), acc),
                           TTPU_RED_SUM, &one, 1);
  } else {
    ttpu_val s = ttpu_hlo_reduce(b, ttpu_hlo_binary(b, TTPU_POW, a, ttpu_hlo_const(b, tw, p, 0)),
                                 TTPU_RED_SUM, &one, 1);
    norm = ttpu_hlo_binary(b, TTPU_POW, s,
                           ttpu_hlo_const(b, ttpu_type_make(acc, 1, &rows), 1.0 / p, 0));
  }
  ttpu_type tr = ttpu_type_make(acc, 1, &rows);
  ttpu_val over = ttpu_hlo_binary(
      b, TTPU_AND, hit, ttpu_hlo_compare(b, TTPU_GT, norm, ttpu_hlo_const(b, tr, max_norm, 0)));
  ttpu_val scale = ttpu_hlo_binary(
      b, TTPU_DIV, ttpu_hlo_const(b, tr, max_norm, 0),
      ttpu_hlo_binary(b, TTPU_ADD, norm, ttpu_hlo_const(b, tr, 1e-7, 0)));
  scale = ttpu_hlo_select(b, over, scale, ttpu_hlo_const(b, tr, 1, 0));
  int64_t map = 0;
  scale = ttpu_hlo_broadcast_in_dim(b, scale, tw, &map);
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, TTPU_MUL, w, scale));
  return NULL;
}

/* ------------------------------------------------------------ nonzero */

/* nonzero_static(Tensor self, *, SymInt size, int fill_value=-1): the
 * first `size` coordinates of nonzero elements, row-major, padded with
 * fill_value. */
static ttpu_status* lower_nonzero_static(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  int64_t size = ot.dims[0], fill = ttpu_l_int(L, 2, -1);
  int64_t n = ttpu_type_numel(&tx);
  if (n == 0) {
    /* nothing is nonzero: every row is fill (and no coordinate is computed:
     * a dim of size 0 would be a constant division by zero, which the
     * plugin's constant folder does not survive) */
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ot, 0, fill));
    return NULL;
  }
  ttpu_type ts = ttpu_type_make(TTPU_I64, 1, &size);
  ttpu_val m = flatten(b, ttpu_hlo_convert(b, x, TTPU_BOOL));
  ttpu_val rank = mask_rank(b, m);
  ttpu_type tr = ttpu_l_type(L, rank);
  rank = ttpu_hlo_select(b, m, rank, ttpu_hlo_const(b, tr, 0, size));
  ttpu_val flat_at = ttpu_hlo_put(b, ttpu_hlo_const(b, ts, 0, -1), rank,
                                  ttpu_hlo_iota(b, tr, 0), TTPU_SCATTER_SET);
  ttpu_val none = ttpu_hlo_compare(b, TTPU_LT, flat_at, zeros(b, ts));
  int64_t d1[2] = {size, 1};
  ttpu_val parts[TTPU_MAX_DIMS];
  int64_t stride = 1;
  for (int d = tx.ndim - 1; d >= 0; --d) {
    ttpu_val c = ttpu_hlo_binary(b, TTPU_DIV, flat_at, ttpu_hlo_const(b, ts, 0, stride));
    if (d > 0)
      c = ttpu_hlo_binary(b, TTPU_REM, c, ttpu_hlo_const(b, ts, 0, tx.dims[d]));
    c = ttpu_hlo_select(b, none, ttpu_hlo_const(b, ts, 0, fill), c);
    parts[d] = ttpu_hlo_reshape(b, c, 2, d1);
    stride *= tx.dims[d];
  }
  ttpu_l_set_out(L, 0, ttpu_hlo_concat(b, parts, tx.ndim, 1));
  return NULL;
}

/* repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None):
 * output_size is always given here (the glue computes it when absent).
 * out[j] = #{i : cumsum(repeats)[i] <= j}, built from a scatter of ones at
 * the cumulative sums and a second cumulative sum. */
static ttpu_status* lower_repeat_interleave(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (ttpu_l_is_none(L, 1))
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "repeat_interleave without output_size has a "
                            "data-dependent shape");
  ttpu_val rep = flatten(b, index_arg(L, 0));
  int64_t m = ot.dims[0], zero = 0;
  ttpu_type tr = ttpu_l_type(L, rep);
  ttpu_val neg = ttpu_hlo_reduce(
      b, ttpu_hlo_compare(b, TTPU_LT, rep, zeros(b, tr)), TTPU_RED_OR, &zero, 1);
  ttpu_l_check(L, info4(b, neg, neg, neg, neg), TTPU_INVALID_ARGUMENT,
               "repeats can not be negative");
  ttpu_val cum = ttpu_hlo_cumulative(b, rep, TTPU_RED_SUM, 0);
  ttpu_type tm = ttpu_type_make(TTPU_I64, 1, &m);
  ttpu_val marks = ttpu_hlo_put(b, zeros(b, tm), cum, ttpu_hlo_const(b, tr, 0, 1),
                                TTPU_ADD);
  ttpu_l_set_out(L, 0, ttpu_hlo_cumulative(b, marks, TTPU_RED_SUM, 0));
  return NULL;
}

const ttpu_op_def ttpu_ops_index[] = {
    {"index_select", lower_index_select, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_OUT},
    {"embedding", lower_embedding, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"index_add", lower_index_add, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"index_copy", lower_index_copy, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE},
    {"index_fill.int_Scalar", lower_index_fill, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE},
    {"index_fill.int_Tensor", lower_index_fill, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE},
    {"gather", lower_gather, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_OUT},
    {"scatter.src", lower_scatter, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE},
    {"scatter.value", lower_scatter, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE},
    {"scatter.reduce", lower_scatter_reduce_str, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE},
    {"scatter.value_reduce", lower_scatter_reduce_str, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE},
    {"max_unpool2d", max_unpool, .param = 2, .variants = TTPU_V_OUT},
    {"max_unpool3d", max_unpool, .param = 3, .variants = TTPU_V_OUT},
    {"index_reduce", lower_index_reduce, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"scatter_add", lower_scatter_add, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE},
    {"scatter_reduce.two", lower_scatter_reduce, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE | TTPU_V_OV_OUT},
    {"index.Tensor", lower_index, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"_index_put_impl_", lower_index_put, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"masked_scatter", lower_masked_scatter, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE},
    {"masked_scatter_backward", lower_masked_scatter_backward, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"take", lower_take, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_OUT},
    {"put", lower_put, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE},
    {"embedding_dense_backward", lower_embedding_backward, .flags = 0},
    {"embedding_renorm_", lower_embedding_renorm, .flags = 0},
    {"nonzero_static", lower_nonzero_static, .flags = 0},
    {"repeat_interleave.Tensor", lower_repeat_interleave, .flags = 0},
    {0},
};
