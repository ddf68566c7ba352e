/* hlo_sort_rng.c - stable sort with PyTorch's NaN order; random bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"
#include "ttpu_hlo.h"

void ttpu_hlo_sort(ttpu_hlo* b, ttpu_val keys, const ttpu_val* extra,
                   int n_extra, int dim, int descending, ttpu_val* outs) {
  const char* what = "stablehlo.sort";
  if (n_extra < 0) n_extra = 0;
  for (int i = 0; i <= n_extra; i++) outs[i] = TTPU_VAL_ERROR;
  const ttpu_type* tk = ttpu_hloi_check(b, keys, what);
  if (!tk) return;
  ttpu_type kt = *tk;
  if (dim < 0 || dim >= kt.ndim) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                  "%s: dimension %d out of range (rank %d)", what, dim,
                  kt.ndim);
    return;
  }
  int n = 1 + n_extra;
  ttpu_val* ops = malloc((size_t)n * sizeof *ops);
  ttpu_type* types = malloc((size_t)n * sizeof *types);
  ttpu_type* args = malloc((size_t)(2 * n) * sizeof *args);
  ttpu_val* a = malloc((size_t)(2 * n) * sizeof *a);
  if (!ops || !types || !args || !a) {
    ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "%s: oom", what);
    goto done;
  }
  ops[0] = keys;
  types[0] = kt;
  for (int i = 0; i < n_extra; i++) {
    const ttpu_type* t = ttpu_hloi_check(b, extra[i], what);
    if (!t) goto done;
    if (!ttpu_hloi_same_dims(t, &kt)) {
      ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                    "%s: operand %d has different dims from the keys", what,
                    i + 1);
      goto done;
    }
    ops[1 + i] = extra[i];
    types[1 + i] = *t;
  }
  /* The comparator sees (lhs, rhs) of every operand in turn; only the keys'
   * pair matters, the rest ride along. */
  for (int i = 0; i < n; i++)
    args[2 * i] = args[2 * i + 1] = ttpu_hloi_scalar_type(types[i].dtype);
  ttpu_hloi_region_begin(b, args, 2 * n, a);
  ttpu_val lhs = a[0], rhs = a[1], less;
  if (ttpu_hloi_is_floatlike(kt.dtype)) {
    /* TOTALORDER compare is not in every parser version, so NaN is placed
     * by hand: PyTorch treats it as larger than everything (last when
     * ascending, first when descending); NaN vs NaN is "equal", which the
     * stable sort keeps in input order. */
    ttpu_val ln = ttpu_hlo_compare(b, TTPU_NE, lhs, lhs);
    ttpu_val rn = ttpu_hlo_compare(b, TTPU_NE, rhs, rhs);
    ttpu_val ord = ttpu_hlo_compare(b, descending ? TTPU_GT : TTPU_LT, lhs, rhs);
    ttpu_val nan_order =
        descending ? ttpu_hlo_binary(b, TTPU_AND, ln,
                                     ttpu_hlo_unary(b, TTPU_NOT, rn))
                   : ttpu_hlo_binary(b, TTPU_AND,
                                     ttpu_hlo_unary(b, TTPU_NOT, ln), rn);
    less = ttpu_hlo_binary(b, TTPU_OR, ord, nan_order);
  } else {
    less = ttpu_hlo_compare(b, descending ? TTPU_GT : TTPU_LT, lhs, rhs);
  }
  char* region = ttpu_hloi_region_end(b, &less, 1);
  if (!region) goto done;
  ttpu_hloi_buf rs = {0};
  ttpu_hloi_buf_put(&rs, "(");
  ttpu_hloi_buf_put(&rs, region);
  ttpu_hloi_buf_put(&rs, ")");
  free(region);
  char* regions = ttpu_hloi_buf_take(&rs);
  char attrs[80];
  snprintf(attrs, sizeof attrs, "dimension = %d : i64, is_stable = true", dim);
  if (regions)
    ttpu_hloi_emit(b, what, ops, n, regions, attrs, types, n, outs);
  else
    ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "%s: oom", what);
  free(regions);
done:
  free(ops);
  free(types);
  free(args);
  free(a);
}

void ttpu_hlo_rng_bits(ttpu_hlo* b, ttpu_val state, ttpu_type bits,
                       ttpu_val* new_state, ttpu_val* out) {
  const char* what = "stablehlo.rng_bit_generator";
  *new_state = *out = TTPU_VAL_ERROR;
  const ttpu_type* ts = ttpu_hloi_check(b, state, what);
  if (!ts || !ttpu_hloi_type_ok(b, &bits, what)) return;
  if (ts->dtype != TTPU_U64 || ts->ndim != 1 || ts->dims[0] != 2) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                  "%s: state must be uint64[2]", what);
    return;
  }
  if (!ttpu_hloi_is_unsigned(bits.dtype)) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                  "%s: bits must be an unsigned integer dtype, got %s", what,
                  ttpu_dtype_name(bits.dtype));
    return;
  }
  ttpu_type res[2] = {*ts, bits};
  ttpu_val outs[2];
  ttpu_hloi_emit(b, what, &state, 1, NULL,
                 "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>", res, 2,
                 outs);
  *new_state = outs[0];
  *out = outs[1];
}
