/* hlo_shape.c - reshape, transpose, broadcasts, slices, concat, pad,
 * reverse, dynamic slices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"
#include "ttpu_hlo.h"

static ttpu_val fail_dims(ttpu_hlo* b, const char* what, const ttpu_type* t,
                          const char* why) {
  char d[160];
  ttpu_hloi_type_desc(t, d, sizeof d);
  return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s: %s (operand %s)", what,
                       why, d);
}

/* Emits an op whose attributes are one dense array each; names[i] = NULL
 * ends the list. */
static char* arrays_attr(const char* const* names, const int64_t* const* v,
                         const int* n, int count) {
  ttpu_hloi_buf a = {0};
  for (int i = 0; i < count; i++) {
    if (i) ttpu_hloi_buf_put(&a, ", ");
    ttpu_hloi_buf_printf(&a, "%s = ", names[i]);
    ttpu_hloi_put_array(&a, v[i], n[i]);
  }
  return ttpu_hloi_buf_take(&a);
}

ttpu_val ttpu_hlo_reshape(ttpu_hlo* b, ttpu_val x, int ndim,
                          const int64_t* dims) {
  const ttpu_type* tx = ttpu_hloi_check(b, x, "stablehlo.reshape");
  if (!tx) return TTPU_VAL_ERROR;
  ttpu_type r = ttpu_type_make(tx->dtype, ndim, dims);
  if (!ttpu_hloi_type_ok(b, &r, "stablehlo.reshape")) return TTPU_VAL_ERROR;
  if (ttpu_type_numel(&r) != ttpu_type_numel(tx))
    return fail_dims(b, "stablehlo.reshape", tx,
                     "element count differs from the new shape");
  if (ttpu_hloi_same_dims(&r, tx)) return x;
  ttpu_val src;
  if (ttpu_hloi_def(b, x, &src, NULL) == TTPU_HLOI_DEF_RESHAPE) {
    /* a reshape of a reshape is one reshape */
    const ttpu_type* ts = ttpu_hlo_type(b, src);
    if (ttpu_hloi_same_dims(&r, ts)) return src;
    x = src;
  }
  ttpu_val v = ttpu_hloi_op(b, "stablehlo.reshape", &x, 1, NULL, r);
  ttpu_hloi_set_def(b, v, TTPU_HLOI_DEF_RESHAPE, x, NULL);
  return v;
}

ttpu_val ttpu_hlo_transpose(ttpu_hlo* b, ttpu_val x, const int64_t* perm) {
  const ttpu_type* tx = ttpu_hloi_check(b, x, "stablehlo.transpose");
  if (!tx) return TTPU_VAL_ERROR;
  ttpu_type r = *tx;
  int seen[TTPU_MAX_DIMS] = {0};
  int identity = 1;
  for (int i = 0; i < tx->ndim; i++) {
    if (perm[i] < 0 || perm[i] >= tx->ndim || seen[perm[i]])
      return fail_dims(b, "stablehlo.transpose", tx,
                       "permutation is not a permutation of the dims");
    seen[perm[i]] = 1;
    r.dims[i] = tx->dims[perm[i]];
    if (perm[i] != i) identity = 0;
  }
  if (identity) return x;
  ttpu_val src;
  int64_t inner[TTPU_MAX_DIMS], composed[TTPU_MAX_DIMS];
  if (ttpu_hloi_def(b, x, &src, inner) == TTPU_HLOI_DEF_TRANSPOSE) {
    /* transpose(transpose(s, q), p) is transpose(s, q[p[i]]) */
    identity = 1;
    for (int i = 0; i < tx->ndim; i++) {
      composed[i] = inner[perm[i]];
      if (composed[i] != i) identity = 0;
    }
    if (identity) return src;
    x = src;
    perm = composed;
  }
  const char* names[1] = {"permutation"};
  const int64_t* vals[1] = {perm};
  int n[1] = {tx->ndim};
  char* attrs = arrays_attr(names, vals, n, 1);
  ttpu_val v = ttpu_hloi_op(b, "stablehlo.transpose", &x, 1, attrs, r);
  free(attrs);
  ttpu_hloi_set_def(b, v, TTPU_HLOI_DEF_TRANSPOSE, x, perm);
  return v;
}

ttpu_val ttpu_hlo_broadcast_in_dim(ttpu_hlo* b, ttpu_val x, ttpu_type to,
                                   const int64_t* map) {
  const ttpu_type* tx = ttpu_hloi_check(b, x, "stablehlo.broadcast_in_dim");
  if (!tx || !ttpu_hloi_type_ok(b, &to, "stablehlo.broadcast_in_dim"))
    return TTPU_VAL_ERROR;
  if (to.dtype != tx->dtype)
    return fail_dims(b, "stablehlo.broadcast_in_dim", tx,
                     "result dtype differs");
  int used[TTPU_MAX_DIMS] = {0};
  for (int i = 0; i < tx->ndim; i++) {
    if (map[i] < 0 || map[i] >= to.ndim || used[map[i]])
      return fail_dims(b, "stablehlo.broadcast_in_dim", tx,
                       "dimension map out of range or repeated");
    used[map[i]] = 1;
    if (tx->dims[i] != 1 && tx->dims[i] != to.dims[map[i]])
      return fail_dims(b, "stablehlo.broadcast_in_dim", tx,
                       "operand dim is neither 1 nor the result size");
  }
  ttpu_val src;
  int64_t inner[TTPU_MAX_DIMS], composed[TTPU_MAX_DIMS];
  int def = ttpu_hloi_def(b, x, &src, inner);
  const ttpu_type* ts = def ? ttpu_hlo_type(b, src) : NULL;
  if (def == TTPU_HLOI_DEF_BROADCAST && ts) {
    /* a broadcast of a broadcast is one broadcast: src's dim i goes to
     * x's dim inner[i], which goes to map[inner[i]] */
    for (int i = 0; i < ts->ndim; i++) composed[i] = map[inner[i]];
    x = src;
    tx = ts;
    map = composed;
  } else if (def == TTPU_HLOI_DEF_RESHAPE && ts && tx->ndim == 0 &&
             ts->ndim == 1 && ts->dims[0] == 1 && to.ndim > 0) {
    /* a one-element vector reshaped to a scalar broadcasts as it is */
    composed[0] = to.ndim - 1;
    x = src;
    tx = ts;
    map = composed;
  }
  const char* names[1] = {"broadcast_dimensions"};
  const int64_t* vals[1] = {map};
  int n[1] = {tx->ndim};
  char* attrs = arrays_attr(names, vals, n, 1);
  ttpu_val v = ttpu_hloi_op(b, "stablehlo.broadcast_in_dim", &x, 1, attrs, to);
  free(attrs);
  ttpu_hloi_set_def(b, v, TTPU_HLOI_DEF_BROADCAST, x, map);
  return v;
}

ttpu_val ttpu_hlo_broadcast_to(ttpu_hlo* b, ttpu_val x, int ndim,
                               const int64_t* dims) {
  const ttpu_type* tx = ttpu_hloi_check(b, x, "broadcast_to");
  if (!tx) return TTPU_VAL_ERROR;
  ttpu_type r = ttpu_type_make(tx->dtype, ndim, dims);
  if (!ttpu_hloi_type_ok(b, &r, "broadcast_to")) return TTPU_VAL_ERROR;
  if (ndim < tx->ndim)
    return fail_dims(b, "broadcast_to", tx, "target has lower rank");
  if (ttpu_hloi_same_dims(&r, tx)) return x;
  int64_t map[TTPU_MAX_DIMS];
  for (int i = 0; i < tx->ndim; i++) {
    map[i] = ndim - tx->ndim + i;
    if (tx->dims[i] != 1 && tx->dims[i] != dims[map[i]])
      return fail_dims(b, "broadcast_to", tx,
                       "sizes are not broadcast-compatible");
  }
  return ttpu_hlo_broadcast_in_dim(b, x, r, map);
}

ttpu_val ttpu_hlo_slice(ttpu_hlo* b, ttpu_val x, const int64_t* start,
                        const int64_t* limit, const int64_t* stride) {
  const ttpu_type* tx = ttpu_hloi_check(b, x, "stablehlo.slice");
  if (!tx) return TTPU_VAL_ERROR;
  ttpu_type r = *tx;
  int64_t st[TTPU_MAX_DIMS];
  int whole = 1;
  for (int i = 0; i < tx->ndim; i++) {
    st[i] = stride ? stride[i] : 1;
    if (st[i] < 1 || start[i] < 0 || start[i] > limit[i] ||
        limit[i] > tx->dims[i])
      return fail_dims(b, "stablehlo.slice", tx,
                       "need 0 <= start <= limit <= size and stride >= 1");
    r.dims[i] = (limit[i] - start[i] + st[i] - 1) / st[i];
    if (r.dims[i] != tx->dims[i]) whole = 0;
  }
  if (whole) return x;
  const char* names[3] = {"start_indices", "limit_indices", "strides"};
  const int64_t* vals[3] = {start, limit, st};
  int n[3] = {tx->ndim, tx->ndim, tx->ndim};
  char* attrs = arrays_attr(names, vals, n, 3);
  ttpu_val v = ttpu_hloi_op(b, "stablehlo.slice", &x, 1, attrs, r);
  free(attrs);
  return v;
}

ttpu_val ttpu_hlo_concat(ttpu_hlo* b, const ttpu_val* xs, int n, int dim) {
  if (ttpu_hloi_failed(b)) return TTPU_VAL_ERROR;
  if (n < 1)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "stablehlo.concatenate: no operands");
  const ttpu_type* t0 = ttpu_hloi_check(b, xs[0], "stablehlo.concatenate");
  if (!t0) return TTPU_VAL_ERROR;
  if (dim < 0 || dim >= t0->ndim)
    return fail_dims(b, "stablehlo.concatenate", t0, "dimension out of range");
  ttpu_type r = *t0;
  r.dims[dim] = 0;
  for (int i = 0; i < n; i++) {
    const ttpu_type* t = ttpu_hloi_check(b, xs[i], "stablehlo.concatenate");
    if (!t) return TTPU_VAL_ERROR;
    int ok = t->dtype == t0->dtype && t->ndim == t0->ndim;
    for (int k = 0; ok && k < t0->ndim; k++)
      if (k != dim && t->dims[k] != t0->dims[k]) ok = 0;
    if (!ok)
      return fail_dims(b, "stablehlo.concatenate", t,
                       "operands differ outside the concatenated dim");
    r.dims[dim] += t->dims[dim];
  }
  if (n == 1) return xs[0];
  char attrs[64];
  snprintf(attrs, sizeof attrs, "dimension = %d : i64", dim);
  return ttpu_hloi_op(b, "stablehlo.concatenate", xs, n, attrs, r);
}

ttpu_val ttpu_hlo_pad(ttpu_hlo* b, ttpu_val x, ttpu_val pad_value,
                      const int64_t* low, const int64_t* high,
                      const int64_t* interior) {
  const ttpu_type* tx = ttpu_hloi_check(b, x, "stablehlo.pad");
  const ttpu_type* tp = ttpu_hloi_check(b, pad_value, "stablehlo.pad");
  if (!tx || !tp) return TTPU_VAL_ERROR;
  if (tp->ndim != 0 || tp->dtype != tx->dtype)
    return fail_dims(b, "stablehlo.pad", tx,
                     "padding value must be 0-d of the operand's dtype");
  ttpu_type r = *tx;
  int64_t in[TTPU_MAX_DIMS];
  for (int i = 0; i < tx->ndim; i++) {
    in[i] = interior ? interior[i] : 0;
    if (in[i] < 0)
      return fail_dims(b, "stablehlo.pad", tx, "negative interior padding");
    int64_t d = tx->dims[i];
    r.dims[i] = low[i] + high[i] + d + (d > 0 ? (d - 1) * in[i] : 0);
    if (r.dims[i] < 0)
      return fail_dims(b, "stablehlo.pad", tx, "padding gives negative size");
  }
  const char* names[3] = {"edge_padding_low", "edge_padding_high",
                          "interior_padding"};
  const int64_t* vals[3] = {low, high, in};
  int n[3] = {tx->ndim, tx->ndim, tx->ndim};
  char* attrs = arrays_attr(names, vals, n, 3);
  ttpu_val ops[2] = {x, pad_value};
  ttpu_val v = ttpu_hloi_op(b, "stablehlo.pad", ops, 2, attrs, r);
  free(attrs);
  return v;
}

ttpu_val ttpu_hlo_reverse(ttpu_hlo* b, ttpu_val x, const int64_t* dims,
                          int n) {
  const ttpu_type* tx = ttpu_hloi_check(b, x, "stablehlo.reverse");
  if (!tx) return TTPU_VAL_ERROR;
  int seen[TTPU_MAX_DIMS] = {0};
  if (n < 0 || n > tx->ndim)
    return fail_dims(b, "stablehlo.reverse", tx, "bad dimension count");
  for (int i = 0; i < n; i++) {
    if (dims[i] < 0 || dims[i] >= tx->ndim || seen[dims[i]])
      return fail_dims(b, "stablehlo.reverse", tx,
                       "dimension out of range or repeated");
    seen[dims[i]] = 1;
  }
  if (n == 0) return x;
  ttpu_type r = *tx;
  const char* names[1] = {"dimensions"};
  const int64_t* vals[1] = {dims};
  int cnt[1] = {n};
  char* attrs = arrays_attr(names, vals, cnt, 1);
  ttpu_val v = ttpu_hloi_op(b, "stablehlo.reverse", &x, 1, attrs, r);
  free(attrs);
  return v;
}

/* Start indices: 0-d integers, all of one dtype (StableHLO requires it). */
static int check_starts(ttpu_hlo* b, const char* what, const ttpu_val* starts,
                        int n) {
  ttpu_dtype dt = TTPU_DTYPE_NONE;
  for (int i = 0; i < n; i++) {
    const ttpu_type* t = ttpu_hloi_check(b, starts[i], what);
    if (!t) return 0;
    if (t->ndim != 0 || !ttpu_hloi_is_intlike(t->dtype) ||
        (i && t->dtype != dt)) {
      ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                    "%s: start indices must be 0-d integers of one dtype",
                    what);
      return 0;
    }
    dt = t->dtype;
  }
  return 1;
}

ttpu_val ttpu_hlo_dynamic_slice(ttpu_hlo* b, ttpu_val x, const ttpu_val* starts,
                                const int64_t* sizes) {
  const ttpu_type* tx = ttpu_hloi_check(b, x, "stablehlo.dynamic_slice");
  if (!tx) return TTPU_VAL_ERROR;
  int nd = tx->ndim;
  if (!check_starts(b, "stablehlo.dynamic_slice", starts, nd))
    return TTPU_VAL_ERROR;
  ttpu_type r = *tx;
  for (int i = 0; i < nd; i++) {
    if (sizes[i] < 0 || sizes[i] > tx->dims[i])
      return fail_dims(b, "stablehlo.dynamic_slice", tx,
                       "slice size out of range");
    r.dims[i] = sizes[i];
  }
  ttpu_val ops[1 + TTPU_MAX_DIMS];
  ops[0] = x;
  memcpy(ops + 1, starts, (size_t)nd * sizeof *starts);
  const char* names[1] = {"slice_sizes"};
  const int64_t* vals[1] = {sizes};
  int cnt[1] = {nd};
  char* attrs = arrays_attr(names, vals, cnt, 1);
  ttpu_val v = ttpu_hloi_op(b, "stablehlo.dynamic_slice", ops, 1 + nd, attrs, r);
  free(attrs);
  return v;
}

ttpu_val ttpu_hlo_dynamic_update_slice(ttpu_hlo* b, ttpu_val x, ttpu_val upd,
                                       const ttpu_val* starts) {
  const char* what = "stablehlo.dynamic_update_slice";
  const ttpu_type* tx = ttpu_hloi_check(b, x, what);
  const ttpu_type* tu = ttpu_hloi_check(b, upd, what);
  if (!tx || !tu) return TTPU_VAL_ERROR;
  int nd = tx->ndim;
  if (tu->dtype != tx->dtype || tu->ndim != nd)
    return fail_dims(b, what, tu, "update dtype/rank differs from operand");
  for (int i = 0; i < nd; i++)
    if (tu->dims[i] > tx->dims[i])
      return fail_dims(b, what, tu, "update larger than operand");
  if (!check_starts(b, what, starts, nd)) return TTPU_VAL_ERROR;
  ttpu_val ops[2 + TTPU_MAX_DIMS];
  ops[0] = x;
  ops[1] = upd;
  memcpy(ops + 2, starts, (size_t)nd * sizeof *starts);
  ttpu_type r = *tx;
  return ttpu_hloi_op(b, what, ops, 2 + nd, NULL, r);
}
