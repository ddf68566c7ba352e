/* hlo_reduce.c - reduce, arg-reduce, reduce_window and cumulative ops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"
#include "ttpu_hlo.h"

/* On bool, sum/max are "any" and prod/min are "all", as i1 arithmetic is. */
static ttpu_binop red_binop(ttpu_redop op, ttpu_dtype dt) {
  int bo = dt == TTPU_BOOL;
  switch (op) {
    case TTPU_RED_SUM: return bo ? TTPU_OR : TTPU_ADD;
    case TTPU_RED_PROD: return bo ? TTPU_AND : TTPU_MUL;
    case TTPU_RED_MAX: return bo ? TTPU_OR : TTPU_MAX;
    case TTPU_RED_MIN: return bo ? TTPU_AND : TTPU_MIN;
    case TTPU_RED_AND: return TTPU_AND;
    case TTPU_RED_OR: return TTPU_OR;
  }
  return TTPU_ADD;
}

static int red_valid(ttpu_hlo* b, ttpu_redop op, ttpu_dtype dt,
                     const char* what) {
  if ((int)op < TTPU_RED_SUM || op > TTPU_RED_OR) {
    ttpu_hlo_fail(b, TTPU_INTERNAL, "%s: unknown reduction %d", what, (int)op);
    return 0;
  }
  if (ttpu_hloi_is_complex(dt) && op != TTPU_RED_SUM && op != TTPU_RED_PROD) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s: complex values are unordered",
                  what);
    return 0;
  }
  if ((op == TTPU_RED_AND || op == TTPU_RED_OR) &&
      ttpu_hloi_is_floatlike(dt)) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s: and/or on float %s", what,
                  ttpu_dtype_name(dt));
    return 0;
  }
  return 1;
}

ttpu_val ttpu_hloi_identity(ttpu_hlo* b, ttpu_redop op, ttpu_dtype dt) {
  ttpu_type t = ttpu_hloi_scalar_type(dt);
  int bits = ttpu_hloi_bits(dt);
  int fl = ttpu_hloi_is_floatlike(dt);
  int un = ttpu_hloi_is_unsigned(dt);
  /* lowest/highest of the integer dtype; for unsigned 64 the all-ones
   * pattern is -1 wrapped by the printer (unused for float and complex
   * types, whose bit widths reach 128) */
  int64_t hi = fl || bits > 64 ? 0
               : un ? (bits == 64 ? -1 : (int64_t)((UINT64_C(1) << bits) - 1))
                    : (int64_t)((UINT64_C(1) << (bits - 1)) - 1);
  int64_t lo = un ? 0 : -hi - 1;
  if (dt == TTPU_BOOL) {
    hi = 1;
    lo = 0;
  }
  switch (op) {
    case TTPU_RED_SUM:
      return ttpu_hlo_const(b, t, 0.0, 0);
    case TTPU_RED_PROD:
      return ttpu_hlo_const(b, t, 1.0, 1);
    case TTPU_RED_MAX:
      return ttpu_hlo_const(b, t, fl ? -INFINITY : 0.0, lo);
    case TTPU_RED_MIN:
      return ttpu_hlo_const(b, t, fl ? INFINITY : 0.0, hi);
    case TTPU_RED_AND:
      return ttpu_hlo_const(b, t, 0.0, dt == TTPU_BOOL ? 1 : -1);
    case TTPU_RED_OR:
      return ttpu_hlo_const(b, t, 0.0, 0);
  }
  return ttpu_hlo_fail(b, TTPU_INTERNAL, "identity: unknown reduction");
}

char* ttpu_hloi_reducer_region(ttpu_hlo* b, ttpu_redop op, ttpu_dtype dt) {
  ttpu_type st[2] = {ttpu_hloi_scalar_type(dt), ttpu_hloi_scalar_type(dt)};
  ttpu_val a[2];
  ttpu_hloi_region_begin(b, st, 2, a);
  ttpu_val r = ttpu_hlo_binary(b, red_binop(op, dt), a[0], a[1]);
  return ttpu_hloi_region_end(b, &r, 1);
}

/* Renders a region list "({...})" from one region text. */
static char* one_region(const char* region) {
  if (!region) return NULL;
  ttpu_hloi_buf s = {0};
  ttpu_hloi_buf_put(&s, "(");
  ttpu_hloi_buf_put(&s, region);
  ttpu_hloi_buf_put(&s, ")");
  return ttpu_hloi_buf_take(&s);
}

/* Result dims of reducing `dims` away; 0 on a bad dim list. */
static int reduced_type(ttpu_hlo* b, const ttpu_type* tx, const int64_t* dims,
                        int n, ttpu_type* r, const char* what) {
  int drop[TTPU_MAX_DIMS] = {0};
  if (n < 0 || n > tx->ndim) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s: bad dimension count %d", what,
                  n);
    return 0;
  }
  for (int i = 0; i < n; i++) {
    if (dims[i] < 0 || dims[i] >= tx->ndim || drop[dims[i]]) {
      ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                    "%s: dimension %lld out of range or repeated (rank %d)",
                    what, (long long)dims[i], tx->ndim);
      return 0;
    }
    drop[dims[i]] = 1;
  }
  *r = *tx;
  r->ndim = 0;
  for (int i = 0; i < tx->ndim; i++)
    if (!drop[i]) r->dims[r->ndim++] = tx->dims[i];
  return 1;
}

ttpu_val ttpu_hlo_reduce(ttpu_hlo* b, ttpu_val x, ttpu_redop op,
                         const int64_t* dims, int n) {
  const char* what = "stablehlo.reduce";
  const ttpu_type* tx = ttpu_hloi_check(b, x, what);
  if (!tx) return TTPU_VAL_ERROR;
  ttpu_type t = *tx, r;
  if (!red_valid(b, op, t.dtype, what)) return TTPU_VAL_ERROR;
  if (!reduced_type(b, &t, dims, n, &r, what)) return TTPU_VAL_ERROR;
  if (n == 0) return x;
  /* The dims attribute must be sorted for some verifiers; the result does
   * not depend on the order. */
  int64_t sorted[TTPU_MAX_DIMS];
  int k = 0;
  for (int d = 0; d < t.ndim; d++)
    for (int i = 0; i < n; i++)
      if (dims[i] == d) sorted[k++] = d;
  ttpu_val init = ttpu_hloi_identity(b, op, t.dtype);
  char* region = ttpu_hloi_reducer_region(b, op, t.dtype);
  char* regions = one_region(region);
  ttpu_hloi_buf a = {0};
  ttpu_hloi_buf_put(&a, "dimensions = ");
  ttpu_hloi_put_array(&a, sorted, n);
  char* attrs = ttpu_hloi_buf_take(&a);
  ttpu_val ops[2] = {x, init};
  ttpu_val v = TTPU_VAL_ERROR;
  if (regions && attrs)
    v = ttpu_hloi_emit(b, what, ops, 2, regions, attrs, &r, 1, NULL);
  else
    ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "%s: oom", what);
  free(region);
  free(regions);
  free(attrs);
  return v;
}

void ttpu_hlo_reduce_arg(ttpu_hlo* b, ttpu_val x, int dim, int is_max,
                         ttpu_val* value, ttpu_val* index) {
  const char* what = "stablehlo.reduce (arg)";
  *value = *index = TTPU_VAL_ERROR;
  const ttpu_type* tx = ttpu_hloi_check(b, x, what);
  if (!tx) return;
  ttpu_type t = *tx, r;
  int64_t d64 = dim;
  if (!reduced_type(b, &t, &d64, 1, &r, what)) return;
  ttpu_dtype dt = t.dtype;
  int fl = ttpu_hloi_is_floatlike(dt);

  ttpu_type it = t;
  it.dtype = TTPU_I64;
  ttpu_val iota = ttpu_hlo_iota(b, it, dim);
  ttpu_val init_v = ttpu_hloi_identity(b, is_max ? TTPU_RED_MAX : TTPU_RED_MIN,
                                       dt);
  ttpu_val init_i = ttpu_hlo_const_i(b, TTPU_I64, 0);

  /* Comparator over (acc value, acc index, new value, new index). It is a
   * total order on (value, index) pairs with NaN above everything, so the
   * result does not depend on XLA's reduction tree: the winner is the
   * extreme value, NaN if any, and among equals the lowest index. The init
   * pair (identity, 0) only wins when every element equals the identity,
   * and then index 0 is the right answer too. */
  ttpu_type s[4] = {ttpu_hloi_scalar_type(dt), ttpu_hloi_scalar_type(TTPU_I64),
                    ttpu_hloi_scalar_type(dt), ttpu_hloi_scalar_type(TTPU_I64)};
  ttpu_val a[4];
  ttpu_hloi_region_begin(b, s, 4, a);
  ttpu_val av = a[0], ai = a[1], bv = a[2], bi = a[3];
  ttpu_val better = ttpu_hlo_compare(b, is_max ? TTPU_GT : TTPU_LT, av, bv);
  ttpu_val eq = ttpu_hlo_compare(b, TTPU_EQ, av, bv);
  ttpu_val lower = ttpu_hlo_compare(b, TTPU_LT, ai, bi);
  ttpu_val tie = ttpu_hlo_binary(b, TTPU_AND, eq, lower);
  ttpu_val pick = ttpu_hlo_binary(b, TTPU_OR, better, tie);
  if (fl) {
    ttpu_val an = ttpu_hlo_compare(b, TTPU_NE, av, av);
    ttpu_val bn = ttpu_hlo_compare(b, TTPU_NE, bv, bv);
    ttpu_val not_bn = ttpu_hlo_unary(b, TTPU_NOT, bn);
    /* a NaN: a wins unless b is NaN with a lower index. */
    ttpu_val a_nan_wins = ttpu_hlo_binary(
        b, TTPU_AND, an, ttpu_hlo_binary(b, TTPU_OR, not_bn, lower));
    /* neither NaN: ordinary order (compares are false with a NaN b). */
    ttpu_val no_nan = ttpu_hlo_binary(
        b, TTPU_AND, ttpu_hlo_unary(b, TTPU_NOT, an), not_bn);
    pick = ttpu_hlo_binary(b, TTPU_OR, a_nan_wins,
                           ttpu_hlo_binary(b, TTPU_AND, no_nan, pick));
  }
  ttpu_val rv = ttpu_hlo_select(b, pick, av, bv);
  ttpu_val ri = ttpu_hlo_select(b, pick, ai, bi);
  ttpu_val rets[2] = {rv, ri};
  char* region = ttpu_hloi_region_end(b, rets, 2);
  char* regions = one_region(region);
  char attrs[64];
  snprintf(attrs, sizeof attrs, "dimensions = array<i64: %d>", dim);
  ttpu_type res[2] = {r, r};
  res[1].dtype = TTPU_I64;
  ttpu_val ops[4] = {x, iota, init_v, init_i};
  ttpu_val outs[2] = {TTPU_VAL_ERROR, TTPU_VAL_ERROR};
  if (regions)
    ttpu_hloi_emit(b, "stablehlo.reduce", ops, 4, regions, attrs, res, 2, outs);
  else
    ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "%s: oom", what);
  free(region);
  free(regions);
  *value = outs[0];
  *index = outs[1];
}

ttpu_val ttpu_hlo_reduce_window(ttpu_hlo* b, ttpu_val x, ttpu_redop op,
                                ttpu_val init, const int64_t* window,
                                const int64_t* strides,
                                const int64_t* base_dilation,
                                const int64_t* window_dilation,
                                const int64_t* padding) {
  const char* what = "stablehlo.reduce_window";
  const ttpu_type* tx = ttpu_hloi_check(b, x, what);
  if (!tx) return TTPU_VAL_ERROR;
  ttpu_type t = *tx, r = *tx;
  if (!red_valid(b, op, t.dtype, what)) return TTPU_VAL_ERROR;
  int nd = t.ndim;
  int64_t st[TTPU_MAX_DIMS], bd[TTPU_MAX_DIMS], wd[TTPU_MAX_DIMS],
      pad[2 * TTPU_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    st[i] = strides ? strides[i] : 1;
    bd[i] = base_dilation ? base_dilation[i] : 1;
    wd[i] = window_dilation ? window_dilation[i] : 1;
    pad[2 * i] = padding ? padding[2 * i] : 0;
    pad[2 * i + 1] = padding ? padding[2 * i + 1] : 0;
    if (window[i] < 1 || st[i] < 1 || bd[i] < 1 || wd[i] < 1)
      return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                           "%s: window/stride/dilation must be >= 1", what);
    int64_t padded = (t.dims[i] > 0 ? (t.dims[i] - 1) * bd[i] + 1 : 0) +
                     pad[2 * i] + pad[2 * i + 1];
    int64_t span = (window[i] - 1) * wd[i] + 1;
    r.dims[i] = padded < span ? 0 : (padded - span) / st[i] + 1;
  }
  if (init == TTPU_VAL_ERROR) {
    init = ttpu_hloi_identity(b, op, t.dtype);
  } else {
    const ttpu_type* ti = ttpu_hloi_check(b, init, what);
    if (!ti) return TTPU_VAL_ERROR;
    if (ti->ndim != 0 || ti->dtype != t.dtype)
      return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                           "%s: init must be 0-d %s", what,
                           ttpu_dtype_name(t.dtype));
  }
  char* region = ttpu_hloi_reducer_region(b, op, t.dtype);
  char* regions = one_region(region);
  ttpu_hloi_buf a = {0};
  ttpu_hloi_buf_put(&a, "window_dimensions = ");
  ttpu_hloi_put_array(&a, window, nd);
  ttpu_hloi_buf_put(&a, ", window_strides = ");
  ttpu_hloi_put_array(&a, st, nd);
  ttpu_hloi_buf_put(&a, ", base_dilations = ");
  ttpu_hloi_put_array(&a, bd, nd);
  ttpu_hloi_buf_put(&a, ", window_dilations = ");
  ttpu_hloi_put_array(&a, wd, nd);
  /* padding stays a 2-d DenseIntElementsAttr in StableHLO (not an array) */
  if (nd > 0) {
    ttpu_hloi_buf_put(&a, ", padding = dense<[");
    for (int i = 0; i < nd; i++)
      ttpu_hloi_buf_printf(&a, i ? ", [%lld, %lld]" : "[%lld, %lld]",
                           (long long)pad[2 * i], (long long)pad[2 * i + 1]);
    ttpu_hloi_buf_printf(&a, "]> : tensor<%dx2xi64>", nd);
  }
  char* attrs = ttpu_hloi_buf_take(&a);
  ttpu_val ops[2] = {x, init};
  ttpu_val v = TTPU_VAL_ERROR;
  if (regions && attrs)
    v = ttpu_hloi_emit(b, what, ops, 2, regions, attrs, &r, 1, NULL);
  else
    ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "%s: oom", what);
  free(region);
  free(regions);
  free(attrs);
  return v;
}

ttpu_val ttpu_hlo_cumulative(ttpu_hlo* b, ttpu_val x, ttpu_redop op, int dim) {
  const ttpu_type* tx = ttpu_hloi_check(b, x, "cumulative");
  if (!tx) return TTPU_VAL_ERROR;
  ttpu_type t = *tx;
  if (t.ndim == 0) return x;
  if (dim < 0 || dim >= t.ndim)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "cumulative: dimension %d out of range (rank %d)", dim,
                         t.ndim);
  if (t.dims[dim] <= 1) return x;
  int64_t win[TTPU_MAX_DIMS], pad[2 * TTPU_MAX_DIMS];
  for (int i = 0; i < t.ndim; i++) {
    win[i] = 1;
    pad[2 * i] = pad[2 * i + 1] = 0;
  }
  /* A window spanning the whole dim, padded in front by size-1 identity
   * elements: output i sees exactly inputs 0..i. This is XLA's own
   * lowering of cumsum, which its backends recognise and turn into a scan. */
  win[dim] = t.dims[dim];
  pad[2 * dim] = t.dims[dim] - 1;
  return ttpu_hlo_reduce_window(b, x, op, TTPU_VAL_ERROR, win, NULL, NULL,
                                NULL, pad);
}
