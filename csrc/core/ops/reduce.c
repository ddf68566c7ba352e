/* reduce.c - reductions: sum/mean/prod, max/min and their index forms,
 * var/std, any/all, logsumexp, cumulative sums/products, vector norms.
 *
 * Shapes, output dtypes and argument errors come from PyTorch's meta
 * kernels before a lowering runs; a lowering computes values. Reduced
 * dims are dropped by the reduce and the result is reshaped to the
 * output's shape, which covers keepdim (it only inserts 1s). */
#include <math.h>
#include <string.h>

#include "complex.h"
#include "ttpu_lower.h"

/* bf16/f16 accumulate in f32, as PyTorch's CPU kernels do. */
static ttpu_dtype acc_of(ttpu_dtype dt) {
  return dt == TTPU_BF16 || dt == TTPU_F16 ? TTPU_F32 : dt;
}

/* Fills mask[0..ndim) from a dim argument (None, an int or an int list).
 * None means every dim, and so does an empty list when empty_all is set.
 * Rank-0 tensors accept dim 0/-1 and reduce nothing. Returns the count
 * of reduced dims. */
static int dim_mask(ttpu_lower* L, int arg, int ndim, int empty_all,
                    int* mask) {
  for (int d = 0; d < ndim; ++d) mask[d] = 0;
  int n = 0;
  const int64_t* dims = ttpu_l_ints(L, arg, &n);
  if (ttpu_l_is_none(L, arg) || (n == 0 && empty_all)) {
    for (int d = 0; d < ndim; ++d) mask[d] = 1;
    return ndim;
  }
  int count = 0;
  for (int i = 0; i < n; ++i) {
    int64_t d = ttpu_l_dim(L, dims[i], ndim);
    if (ndim == 0) continue;
    if (mask[d]) {
      ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INVALID_ARGUMENT,
                    "dim %lld appears multiple times in the list of dims",
                    (long long)d);
      return 0;
    }
    mask[d] = 1;
    ++count;
  }
  return count;
}

/* dim_mask for the overloads that take a dim list at dim_arg, with -1
 * standing for the overloads without one (which reduce every dim). */
static void dims_or_all(ttpu_lower* L, int dim_arg, int ndim, int* mask) {
  if (dim_arg < 0)
    for (int d = 0; d < ndim; ++d) mask[d] = 1;
  else
    dim_mask(L, dim_arg, ndim, 1, mask);
}

static int64_t masked_numel(ttpu_type t, const int* mask) {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d)
    if (mask[d]) n *= t.dims[d];
  return n;
}

/* max/min that propagate NaN whatever the backend's maximum does. */
static ttpu_val reduce_extreme(ttpu_lower* L, ttpu_val x, int is_max,
                               const int* mask) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val r = ttpu_l_reduce_mask(L, x, is_max ? TTPU_RED_MAX : TTPU_RED_MIN, mask);
  if (!ttpu_dtype_is_float(ttpu_l_type(L, x).dtype)) return r;
  ttpu_val nan = ttpu_hlo_compare(b, TTPU_NE, x, x);
  ttpu_val any_nan = ttpu_l_reduce_mask(L, nan, TTPU_RED_OR, mask);
  return ttpu_hlo_select(b, any_nan, ttpu_l_const_like(L, r, NAN), r);
}

/* ------------------------------------------------------------ sum/mean/prod */

/* The input in the output dtype (a dtype= argument casts first), then in
 * the accumulation dtype. */
static ttpu_val input_for_out(ttpu_lower* L, int k) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype od = ttpu_l_out_type(L, k).dtype;
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), od);
  return ttpu_hlo_convert(b, x, acc_of(od));
}

/* sum/prod/mean/nansum over a dim argument at dim_arg (-1: all dims). */
static ttpu_status* lower_sum_like(ttpu_lower* L, int dim_arg, ttpu_redop op,
                                   int mean, int nan_as_zero) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type out = ttpu_l_out_type(L, 0);
  ttpu_val x = input_for_out(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  int mask[TTPU_MAX_DIMS];
  dims_or_all(L, dim_arg, tx.ndim, mask);
  if (nan_as_zero && ttpu_dtype_is_float(tx.dtype))
    x = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_NE, x, x),
                        ttpu_l_const_like(L, x, 0.0), x);
  ttpu_val r = ttpu_l_reduce_mask(L, x, op, mask);
  /* A bucketed call (prog/bucket.c) reduces padded dims at their bucket's
   * size, the padding zeroed: the count is the true one. */
  int dyn = mean ? ttpu_l_dyn_dims(L, 0, -1) : 0, padded = 0;
  for (int d = 0; d < tx.ndim; ++d)
    if (mask[d] && dyn >> d & 1) padded++;
  if (mean && padded) {
    int fixed[TTPU_MAX_DIMS];
    for (int d = 0; d < tx.ndim; ++d) fixed[d] = mask[d] && !(dyn >> d & 1);
    ttpu_type tr = ttpu_l_type(L, r);
    ttpu_val n = ttpu_hlo_convert(b, ttpu_l_dyn_size(L), tr.dtype);
    ttpu_val count = ttpu_l_const_like(L, n, (double)masked_numel(tx, fixed));
    for (int k = 0; k < padded; ++k) count = ttpu_hlo_binary(b, TTPU_MUL, count, n);
    int64_t no_dims[1] = {0};
    count = ttpu_hlo_broadcast_in_dim(b, count, tr, no_dims);
    r = ttpu_hlo_binary(b, TTPU_DIV, r, count);
  } else if (mean) {
    r = ttpu_hlo_binary(b, TTPU_DIV, r,
                        ttpu_l_const_like(L, r, (double)masked_numel(tx, mask)));
  }
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, out));
  return NULL;
}

static ttpu_status* lower_sum(ttpu_lower* L) {
  return lower_sum_like(L, -1, TTPU_RED_SUM, 0, 0);
}
static ttpu_status* lower_sum_dim(ttpu_lower* L) {
  return lower_sum_like(L, 1, TTPU_RED_SUM, 0, 0);
}
static ttpu_status* lower_nansum(ttpu_lower* L) {
  return lower_sum_like(L, 1, TTPU_RED_SUM, 0, 1);
}
static ttpu_status* lower_mean(ttpu_lower* L) {
  return lower_sum_like(L, -1, TTPU_RED_SUM, 1, 0);
}
static ttpu_status* lower_mean_dim(ttpu_lower* L) {
  return lower_sum_like(L, 1, TTPU_RED_SUM, 1, 0);
}
static ttpu_status* lower_prod(ttpu_lower* L) {
  return lower_sum_like(L, -1, TTPU_RED_PROD, 0, 0);
}
static ttpu_status* lower_prod_dim(ttpu_lower* L) {
  return lower_sum_like(L, 1, TTPU_RED_PROD, 0, 0);
}

/* ------------------------------------------------------------ max/min */

/* amax/amin(self, int[1] dim=[], keepdim); max/min(self) reduce all.
 * param: TTPU_PARAMS(is_max, has_dim, 0). max()/min() of every element
 * have no identity to return for none (the meta kernel gives them a 0-d
 * result all the same). */
static ttpu_status* lower_extreme(ttpu_lower* L) {
  int is_max = ttpu_l_param_at(L, 0), has_dim = ttpu_l_param_at(L, 1);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  if (!has_dim && ttpu_type_numel(&tx) == 0)
    return ttpu_status_make(
        TTPU_INVALID_ARGUMENT,
        "%s(): Expected reduction dim to be specified for input.numel() == "
        "0. Specify the reduction dim with the 'dim' argument.",
        is_max ? "max" : "min");
  int mask[TTPU_MAX_DIMS];
  if (has_dim)
    dim_mask(L, 1, tx.ndim, 1, mask);
  else
    for (int d = 0; d < tx.ndim; ++d) mask[d] = 1;
  ttpu_val r = reduce_extreme(L, x, is_max, mask);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(ttpu_l_hlo(L), r, ttpu_l_out_type(L, 0)));
  return NULL;
}


/* Value and first index of the extreme along dim (NaN wins). A 0-d input
 * is its own extreme at index 0. */
static void arg_extreme(ttpu_lower* L, ttpu_val x, int64_t dim, int is_max,
                        ttpu_val* value, ttpu_val* index) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (ttpu_l_type(L, x).ndim == 0) {
    *value = x;
    *index = ttpu_hlo_const_i(b, TTPU_I64, 0);
    return;
  }
  ttpu_hlo_reduce_arg(b, x, (int)dim, is_max, value, index);
}

/* max.dim/min.dim(self, int dim, keepdim) -> (values, indices) */
static ttpu_status* lower_extreme_dim(ttpu_lower* L) {
  int is_max = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  int64_t dim = ttpu_l_dim(L, ttpu_l_int(L, 1, 0), tx.ndim);
  if (tx.ndim > 0 && dim >= 0 && dim < tx.ndim && tx.dims[dim] == 0)
    return ttpu_status_make(TTPU_INDEX_ERROR,
                            "%s(): Expected reduction dim %lld to have non-zero size.",
                            is_max ? "max" : "min", (long long)dim);
  ttpu_val v, i;
  arg_extreme(L, x, dim, is_max, &v, &i);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, v, ttpu_l_out_type(L, 0)));
  ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, i, ttpu_l_out_type(L, 1)));
  return NULL;
}

/* argmax/argmin(self, int? dim=None, keepdim): None flattens. */
static ttpu_status* lower_argextreme(ttpu_lower* L) {
  int is_max = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  /* the meta kernel lets bool through; the CPU kernel does not */
  if (tx.dtype == TTPU_BOOL)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "%s(): does not support bool input",
                            is_max ? "argmax" : "argmin");
  int64_t dim = 0;
  if (ttpu_l_is_none(L, 1)) {
    int64_t n = ttpu_type_numel(&tx);
    x = ttpu_hlo_reshape(b, x, 1, &n);
  } else {
    dim = ttpu_l_dim(L, ttpu_l_int(L, 1, 0), tx.ndim);
  }
  ttpu_val v, i;
  arg_extreme(L, x, dim, is_max, &v, &i);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, i, ttpu_l_out_type(L, 0)));
  return NULL;
}

/* aminmax(self, *, int? dim=None, keepdim) -> (min, max) */
static ttpu_status* lower_aminmax(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  int mask[TTPU_MAX_DIMS];
  dim_mask(L, 1, tx.ndim, 0, mask);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, reduce_extreme(L, x, 0, mask),
                                  ttpu_l_out_type(L, 0)));
  ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, reduce_extreme(L, x, 1, mask),
                                  ttpu_l_out_type(L, 1)));
  return NULL;
}

/* ------------------------------------------------------------ var/std */

/* var/std/var_mean/std_mean.correction(self, int[1]? dim, *, Scalar?
 * correction, keepdim). Two passes (mean, then squared deviations) in the
 * accumulation dtype; the divisor max(N - correction, 0) is computed at
 * run time because correction is a runtime Scalar. */
/* var/std(_mean).correction. A complex input's variance is the mean
 * squared modulus of its deviations, var(re) + var(im), as on the CPU
 * (real, of the component dtype); its mean stays complex. */
static ttpu_status* lower_var_like(ttpu_lower* L) {
  int take_sqrt = (int)ttpu_l_param_at(L, 0);
  int with_mean = (int)ttpu_l_param_at(L, 1);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type out = ttpu_l_out_type(L, 0);
  ttpu_dtype acc = acc_of(out.dtype);
  ttpu_val z = ttpu_l_tensor(L, 0);
  ttpu_type tz = ttpu_l_type(L, z);
  int cx = ttpu_dtype_is_complex(tz.dtype);
  ttpu_val parts[2] = {ttpu_hlo_convert(b, cx ? ttpu_hlo_real(b, z) : z, acc),
                       cx ? ttpu_hlo_convert(b, ttpu_hlo_imag(b, z), acc) : TTPU_VAL_ERROR};
  ttpu_type tx = ttpu_l_type(L, parts[0]);
  int mask[TTPU_MAX_DIMS];
  dim_mask(L, 1, tx.ndim, 1, mask);
  double n = (double)masked_numel(tx, mask);
  ttpu_val means[2] = {TTPU_VAL_ERROR, TTPU_VAL_ERROR}, m2 = TTPU_VAL_ERROR;
  for (int k = 0; k < 1 + cx; ++k) {
    ttpu_val x = parts[k];
    ttpu_val mean = ttpu_l_reduce_mask(L, x, TTPU_RED_SUM, mask);
    means[k] = mean = ttpu_hlo_binary(b, TTPU_DIV, mean, ttpu_l_const_like(L, mean, n));
    ttpu_val dev = ttpu_hlo_binary(b, TTPU_SUB, x, ttpu_l_bcast_back(L, mean, tx, mask));
    ttpu_val sq = ttpu_l_reduce_mask(L, ttpu_hlo_binary(b, TTPU_MUL, dev, dev), TTPU_RED_SUM, mask);
    m2 = k ? ttpu_hlo_binary(b, TTPU_ADD, m2, sq) : sq;
  }
  ttpu_val corr = ttpu_l_is_none(L, 2) ? ttpu_hlo_const_f(b, acc, 1.0)
                                       : ttpu_l_scalar(L, 2, acc);
  ttpu_val div = ttpu_hlo_binary(b, TTPU_SUB, ttpu_hlo_const_f(b, acc, n), corr);
  div = ttpu_hlo_binary(b, TTPU_MAX, div, ttpu_hlo_const_f(b, acc, 0.0));
  ttpu_type tm = ttpu_l_type(L, m2);
  div = ttpu_hlo_broadcast_to(b, div, tm.ndim, tm.dims);
  ttpu_val var = ttpu_hlo_binary(b, TTPU_DIV, m2, div);
  if (take_sqrt) var = ttpu_hlo_unary(b, TTPU_SQRT, var);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, var, out));
  if (with_mean) {
    ttpu_val mean = cx ? ttpu_hlo_complex(b, means[0], means[1]) : means[0];
    ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, mean, ttpu_l_out_type(L, 1)));
  }
  return NULL;
}

/* ------------------------------------------------------------ any/all */

/* any/all(self), .dim(self, int dim, keepdim), .dims(self, int[]? dim,
 * keepdim): None reduces every dim, an empty list none (as on CPU). The
 * output is bool, or uint8 for uint8 input. */
/* x != 0 as bool; a complex value is nonzero when either part is. */
static ttpu_val nonzero(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (t && ttpu_dtype_is_complex(t->dtype))
    return ttpu_hlo_compare(b, TTPU_NE, x, ttpu_hlo_const_c(b, *t, 0, 0));
  return ttpu_hlo_convert(b, x, TTPU_BOOL);
}

static ttpu_status* lower_any_all(ttpu_lower* L) {
  int is_any = (int)ttpu_l_param_at(L, 0);
  int has_dim = (int)ttpu_l_param_at(L, 1);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype out = ttpu_l_out_type(L, 0).dtype;
  if (out != TTPU_BOOL && out != TTPU_U8) /* uint8 for compatibility, as the CPU */
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "%s only supports bool tensor for result, got: %s",
                            is_any ? "any" : "all", ttpu_dtype_torch_title(out));
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  int mask[TTPU_MAX_DIMS];
  if (has_dim)
    dim_mask(L, 1, tx.ndim, 0, mask);
  else
    for (int d = 0; d < tx.ndim; ++d) mask[d] = 1;
  ttpu_val r = ttpu_l_reduce_mask(L, nonzero(b, x), is_any ? TTPU_RED_OR : TTPU_RED_AND, mask);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ttpu_l_out_type(L, 0)));
  return NULL;
}

/* count_nonzero(self, int? dim=None), .dim_IntList(self, int[] dim): None
 * and an empty list both count over every dim, as on CPU. */
static ttpu_status* lower_count_nonzero(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  int mask[TTPU_MAX_DIMS];
  dim_mask(L, 1, tx.ndim, 1, mask);
  ttpu_val nz = ttpu_hlo_convert(b, nonzero(b, x), TTPU_I64);
  ttpu_val r = ttpu_l_reduce_mask(L, nz, TTPU_RED_SUM, mask);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ttpu_l_out_type(L, 0)));
  return NULL;
}

/* ------------------------------------------------------------ logsumexp */

/* logsumexp(self, int[1] dim, keepdim): max-shifted as PyTorch does, with
 * an infinite max replaced by 0 so all -inf (or +inf) slices come out
 * right. */
static ttpu_status* lower_logsumexp(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type out = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), acc_of(out.dtype));
  ttpu_type tx = ttpu_l_type(L, x);
  int mask[TTPU_MAX_DIMS];
  dim_mask(L, 1, tx.ndim, 1, mask);
  ttpu_val m = ttpu_l_reduce_mask(L, x, TTPU_RED_MAX, mask);
  ttpu_val inf = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_unary(b, TTPU_ABS, m),
                                  ttpu_l_const_like(L, m, INFINITY));
  m = ttpu_hlo_select(b, inf, ttpu_l_const_like(L, m, 0.0), m);
  ttpu_val sh = ttpu_hlo_binary(b, TTPU_SUB, x, ttpu_l_bcast_back(L, m, tx, mask));
  ttpu_val e = ttpu_hlo_unary(b, TTPU_EXP, sh);
  ttpu_val s = ttpu_hlo_unary(b, TTPU_LOG, ttpu_l_reduce_mask(L, e, TTPU_RED_SUM, mask));
  ttpu_val r = ttpu_hlo_binary(b, TTPU_ADD, s, m);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, out));
  return NULL;
}

/* logsumexp of complex values, as the CPU: shifted by the largest real
 * part (0 where that is infinite), log(sum(exp(x - m))) + m with exp's
 * special values. */
static ttpu_status* lower_logsumexp_complex(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type out = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), out.dtype);
  ttpu_type tx = ttpu_l_type(L, x);
  int mask[TTPU_MAX_DIMS];
  dim_mask(L, 1, tx.ndim, 1, mask);
  ttpu_val m = ttpu_l_reduce_mask(L, ttpu_hlo_real(b, x), TTPU_RED_MAX, mask);
  ttpu_val inf = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_unary(b, TTPU_ABS, m), ttpu_l_const_like(L, m, INFINITY));
  m = ttpu_hlo_select(b, inf, ttpu_l_const_like(L, m, 0.0), m);
  ttpu_val mc = ttpu_hlo_complex(b, m, ttpu_l_const_like(L, m, 0.0));
  ttpu_val e = ttpu_complex_exp_v(b, ttpu_hlo_binary(b, TTPU_SUB, x, ttpu_l_bcast_back(L, mc, tx, mask)));
  ttpu_val s = ttpu_hlo_unary(b, TTPU_LOG, ttpu_l_reduce_mask(L, e, TTPU_RED_SUM, mask));
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, ttpu_hlo_binary(b, TTPU_ADD, s, mc), out));
  return NULL;
}

/* ------------------------------------------------------------ cumulative */

/* cumsum/cumprod(self, int dim, *, dtype) and their in-place forms. */
static ttpu_status* lower_cumulative(ttpu_lower* L, ttpu_redop op) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  /* The CPU kernel dispatches on the result's dtype and has no bool one:
   * an in-place form on a bool self, dtype=torch.bool or a bool out= all
   * raise, although a bool input alone computes in int64. */
  if (ttpu_l_out_type(L, 0).dtype == TTPU_BOOL) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"%s_out_cpu\" not implemented for 'Bool'",
                  op == TTPU_RED_SUM ? "cumsum" : "cumprod");
    return NULL;
  }
  ttpu_val x = input_for_out(L, 0);
  int64_t dim = ttpu_l_dim(L, ttpu_l_int(L, 1, 0), ttpu_l_type(L, x).ndim);
  ttpu_l_set_out(L, 0, ttpu_hlo_cumulative(b, x, op, (int)dim));
  return NULL;
}

static ttpu_status* lower_cumsum(ttpu_lower* L) {
  return lower_cumulative(L, TTPU_RED_SUM);
}
static ttpu_status* lower_cumprod(ttpu_lower* L) {
  return lower_cumulative(L, TTPU_RED_PROD);
}

/* ------------------------------------------------------------ norms */

/* The vector p-norm over the masked dims. p is a runtime Scalar (a new
 * order never recompiles), so the special orders are chosen by select:
 * inf -> max|x|, -inf -> min|x|, 0 -> count of non-zeros, 1 and 2 exactly,
 * anything else (sum |x|^p)^(1/p). XLA fuses the three reductions into one
 * pass over x. */
static ttpu_val vector_norm(ttpu_lower* L, ttpu_val x, ttpu_val p,
                            const int* mask) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type tx = ttpu_l_type(L, x);
  ttpu_val a = ttpu_hlo_unary(b, TTPU_ABS, x);
  ttpu_val pb = ttpu_hlo_broadcast_to(b, p, tx.ndim, tx.dims);
  ttpu_val is0 = ttpu_hlo_compare(b, TTPU_EQ, pb, ttpu_l_const_like(L, pb, 0.0));
  ttpu_val is1 = ttpu_hlo_compare(b, TTPU_EQ, pb, ttpu_l_const_like(L, pb, 1.0));
  ttpu_val is2 = ttpu_hlo_compare(b, TTPU_EQ, pb, ttpu_l_const_like(L, pb, 2.0));
  ttpu_val nz = ttpu_hlo_convert(
      b, ttpu_hlo_compare(b, TTPU_NE, a, ttpu_l_const_like(L, a, 0.0)), tx.dtype);
  ttpu_val t = ttpu_hlo_binary(b, TTPU_POW, a, pb);
  t = ttpu_hlo_select(b, is2, ttpu_hlo_binary(b, TTPU_MUL, a, a), t);
  t = ttpu_hlo_select(b, is1, a, t);
  t = ttpu_hlo_select(b, is0, nz, t);
  ttpu_val s = ttpu_l_reduce_mask(L, t, TTPU_RED_SUM, mask);
  ttpu_type ts = ttpu_l_type(L, s);
  ttpu_val ps = ttpu_hlo_broadcast_to(b, p, ts.ndim, ts.dims);
  ttpu_val root = ttpu_hlo_binary(
      b, TTPU_POW, s, ttpu_hlo_binary(b, TTPU_DIV, ttpu_l_const_like(L, ps, 1.0), ps));
  ttpu_val eq0 = ttpu_hlo_compare(b, TTPU_EQ, ps, ttpu_l_const_like(L, ps, 0.0));
  ttpu_val eq1 = ttpu_hlo_compare(b, TTPU_EQ, ps, ttpu_l_const_like(L, ps, 1.0));
  ttpu_val eq2 = ttpu_hlo_compare(b, TTPU_EQ, ps, ttpu_l_const_like(L, ps, 2.0));
  ttpu_val pinf = ttpu_hlo_compare(b, TTPU_EQ, ps, ttpu_l_const_like(L, ps, INFINITY));
  ttpu_val ninf = ttpu_hlo_compare(b, TTPU_EQ, ps, ttpu_l_const_like(L, ps, -INFINITY));
  ttpu_val r = ttpu_hlo_select(b, eq2, ttpu_hlo_unary(b, TTPU_SQRT, s), root);
  r = ttpu_hlo_select(b, ttpu_hlo_binary(b, TTPU_OR, eq0, eq1), s, r);
  /* max/min of an empty set is refused by the meta kernel for +-inf;
   * other orders never read these. */
  r = ttpu_hlo_select(b, pinf, reduce_extreme(L, a, 1, mask), r);
  r = ttpu_hlo_select(b, ninf, reduce_extreme(L, a, 0, mask), r);
  return r;
}

/* The norm overloads: p at arg 1 (None = 2), dims at arg param (-1: all
 * dims). The input is cast to the output dtype first (dtype=).
 * linalg_vector_norm(self, Scalar ord=2, int[1]? dim, keepdim, *, dtype),
 * norm.ScalarOpt_dim(self, p?, int[1] dim, keepdim) and _dim_dtype: 2;
 * norm.Scalar(self, Scalar p=2), norm.ScalarOpt_dtype(self, p?, *, dtype):
 * -1. */
static ttpu_status* lower_norm_at(ttpu_lower* L) {
  const int p_arg = 1, dim_arg = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type out = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  if (ttpu_dtype_is_complex(ttpu_l_type(L, x).dtype)) {
    /* a complex input's norm is its magnitudes' (the output is real: the
     * magnitudes are taken in the complex type of the output's dtype) */
    x = ttpu_hlo_convert(b, x, ttpu_dtype_complex_of(out.dtype));
    x = ttpu_hlo_convert(b, ttpu_hlo_unary(b, TTPU_ABS, x), acc_of(out.dtype));
  } else {
    x = input_for_out(L, 0);
  }
  ttpu_type tx = ttpu_l_type(L, x);
  int mask[TTPU_MAX_DIMS];
  dims_or_all(L, dim_arg, tx.ndim, mask);
  ttpu_val p = ttpu_l_is_none(L, p_arg) ? ttpu_hlo_const_f(b, tx.dtype, 2.0)
                                        : ttpu_l_scalar(L, p_arg, tx.dtype);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, vector_norm(L, x, p, mask), out));
  return NULL;
}


/* any/all over everything, one dim or dims, and their out= forms
 * ("op.all_out" does not follow the variants' naming rule). */
#define ANY_ALL_DEFS(op, is_any)                                                   \
  {#op, lower_any_all, .flags = TTPU_OP_COMPLEX_AS_IS,                             \
   .param = TTPU_PARAMS(is_any, 0, 0)},                                            \
  {#op ".all_out", lower_any_all, .flags = TTPU_OP_COMPLEX_AS_IS,                  \
   .param = TTPU_PARAMS(is_any, 0, 0)},                                            \
  {#op ".dim", lower_any_all, .flags = TTPU_OP_COMPLEX_AS_IS,                      \
   .param = TTPU_PARAMS(is_any, 1, 0), .variants = TTPU_V_OUT},                    \
  {#op ".dims", lower_any_all, .flags = TTPU_OP_COMPLEX_AS_IS,                     \
   .param = TTPU_PARAMS(is_any, 1, 0), .variants = TTPU_V_OV_OUT}

const ttpu_op_def ttpu_ops_reduce[] = {
    {"sum", lower_sum, .param = TTPU_CX_ALL, .complex_fn = ttpu_complex_reduce},
    {"sum.dim_IntList", lower_sum_dim, .complex_fn = ttpu_complex_reduce},
    {"sum.IntList_out", lower_sum_dim, .complex_fn = ttpu_complex_reduce},
    {"nansum", lower_nansum, .flags = 0},
    {"mean", lower_mean, .param = TTPU_CX_MEAN | TTPU_CX_ALL, .complex_fn = ttpu_complex_reduce},
    {"mean.dim", lower_mean_dim, .param = TTPU_CX_MEAN, .complex_fn = ttpu_complex_reduce},
    /* a product of complex values reduces with the complex multiply, so
     * the real lowering is the complex one */
    {"prod", lower_prod, .complex_fn = lower_prod},
    {"prod.dim_int", lower_prod_dim, .complex_fn = lower_prod_dim},
    {"amax", lower_extreme, .param = TTPU_PARAMS(1, 1, 0), .variants = TTPU_V_OUT},
    {"amin", lower_extreme, .param = TTPU_PARAMS(0, 1, 0), .variants = TTPU_V_OUT},
    {"max", lower_extreme, .param = TTPU_PARAMS(1, 0, 0)},
    {"min", lower_extreme, .param = TTPU_PARAMS(0, 0, 0)},
    {"max.dim", lower_extreme_dim, .param = 1},
    {"min.dim", lower_extreme_dim, .param = 0},
    {"argmax", lower_argextreme, .param = 1},
    {"argmin", lower_argextreme, .param = 0},
    {"aminmax", lower_aminmax, .flags = 0},
    {"var.correction", lower_var_like, .flags = TTPU_OP_COMPLEX_AS_IS, .param = TTPU_PARAMS(0, 0, 0)},
    {"std.correction", lower_var_like, .flags = TTPU_OP_COMPLEX_AS_IS, .param = TTPU_PARAMS(1, 0, 0)},
    {"var_mean.correction", lower_var_like, .flags = TTPU_OP_COMPLEX_AS_IS, .param = TTPU_PARAMS(0, 1, 0)},
    {"std_mean.correction", lower_var_like, .flags = TTPU_OP_COMPLEX_AS_IS, .param = TTPU_PARAMS(1, 1, 0)},
    ANY_ALL_DEFS(any, 1),
    ANY_ALL_DEFS(all, 0),
    {"count_nonzero", lower_count_nonzero, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_OUT},
    {"count_nonzero.dim_IntList", lower_count_nonzero, .flags = TTPU_OP_COMPLEX_AS_IS,
     .variants = TTPU_V_OV_OUT},
    {"logsumexp", lower_logsumexp, .complex_fn = lower_logsumexp_complex},
    {"cumsum", lower_cumsum, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE},
    {"cumprod", lower_cumprod, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_INPLACE},
    {"linalg_vector_norm", lower_norm_at, .param = 2, .complex_fn = lower_norm_at},
    {"norm.Scalar", lower_norm_at, .param = -1, .complex_fn = lower_norm_at},
    {"norm.ScalarOpt_dtype", lower_norm_at, .param = -1, .complex_fn = lower_norm_at},
    {"norm.ScalarOpt_dim", lower_norm_at, .param = 2, .complex_fn = lower_norm_at},
    {"norm.ScalarOpt_dim_dtype", lower_norm_at, .param = 2, .complex_fn = lower_norm_at},
    {0},
};
