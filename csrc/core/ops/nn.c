/* nn.c - softmax, normalisation layers and losses, forward and backward.
 *
 * Everything is computed in f32 for bf16/f16 inputs (f64 stays f64) and
 * converted to the output dtypes the meta kernels chose, which is what
 * PyTorch's CPU kernels do with their accumulation types. Backward
 * formulas are the ones ATen's CPU kernels implement. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "elementwise.h"
#include "ttpu_lower.h"

enum { RED_NONE = 0, RED_MEAN = 1, RED_SUM = 2 }; /* at::Reduction */

/* ------------------------------------------------------------ helpers */

/* The compute dtype for values of dtype a and b: f64 if either is. */
static ttpu_dtype acc2(ttpu_dtype a, ttpu_dtype b) {
  return a == TTPU_F64 || b == TTPU_F64 ? TTPU_F64 : TTPU_F32;
}

static ttpu_val bin(ttpu_lower* L, ttpu_binop op, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(ttpu_l_hlo(L), op, x, y);
}

/* x op scalar c. */
static ttpu_val bin_c(ttpu_lower* L, ttpu_binop op, ttpu_val x, double c) {
  return ttpu_hlo_binary(ttpu_l_hlo(L), op, x, ttpu_l_const_like(L, x, c));
}

static ttpu_val un(ttpu_lower* L, ttpu_unop op, ttpu_val x) {
  return ttpu_hlo_unary(ttpu_l_hlo(L), op, x);
}

/* A tensor arg converted to dt; a 0-d CPU tensor arrives as a Scalar. */
static ttpu_val tensor_as(ttpu_lower* L, int arg, ttpu_dtype dt) {
  if (ttpu_l_kind(L, arg) == TTPU_ARG_SCALAR) return ttpu_l_scalar(L, arg, dt);
  return ttpu_hlo_convert(ttpu_l_hlo(L), ttpu_l_tensor(L, arg), dt);
}

static int has_tensor(ttpu_lower* L, int arg) {
  ttpu_arg_kind k = ttpu_l_kind(L, arg);
  return k == TTPU_ARG_TENSOR || k == TTPU_ARG_SCALAR;
}

static ttpu_dtype arg_dtype(ttpu_lower* L, int arg) {
  if (ttpu_l_kind(L, arg) == TTPU_ARG_SCALAR) return ttpu_l_scalar_dtype(L, arg);
  const ttpu_tensor* t = ttpu_l_tensor_desc(L, arg, -1);
  return t ? t->dtype : TTPU_DTYPE_NONE;
}

/* Output k exists (a backward's output_mask may leave it undefined) and
 * the bool[3] mask at mask_arg (if >= 0) asks for it. */
static int wanted(ttpu_lower* L, int k, int mask_arg) {
  if (k >= ttpu_l_nout(L)) return 0;
  const ttpu_tensor* t = &ttpu_l_call(L)->outputs[k];
  if (!t->buffer || t->dtype == TTPU_DTYPE_NONE) return 0;
  if (mask_arg >= 0) {
    int n = 0;
    const int64_t* m = ttpu_l_ints(L, mask_arg, &n);
    if (k < n && !m[k]) return 0;
  }
  return 1;
}

/* Sets output k to v reshaped to the output's shape. */
static void set_out(ttpu_lower* L, int k, ttpu_val v) {
  ttpu_type t = ttpu_l_out_type(L, k);
  ttpu_l_set_out(L, k, ttpu_hlo_reshape(ttpu_l_hlo(L), v, t.ndim, t.dims));
}

/* Output k as an all-zero value (empty placeholders such as reserve). */
static void set_zero(ttpu_lower* L, int k) {
  ttpu_type t = ttpu_l_out_type(L, k);
  ttpu_l_set_out(L, k, ttpu_hlo_const(ttpu_l_hlo(L), t, 0.0, 0));
}

/* A per-channel vector (C) broadcast along dim `axis` of type t. */
static ttpu_val along(ttpu_lower* L, ttpu_val v, ttpu_type t, int axis) {
  ttpu_type r = t;
  r.dtype = ttpu_l_type(L, v).dtype;
  int64_t map = axis;
  return ttpu_hlo_broadcast_in_dim(ttpu_l_hlo(L), v, r, &map);
}

/* Mask of every dim but `keep`. */
static void all_but(int ndim, int keep, int* mask) {
  for (int d = 0; d < ndim; ++d) mask[d] = d != keep;
}

/* Fails the call after it runs when any element of the bool value `bad`
 * is set, reporting `shown` (an i64 value of bad's shape; the largest
 * offending one) through ttpu_l_check. */
static void check_none(ttpu_lower* L, ttpu_val bad, ttpu_val shown,
                       ttpu_code code, const char* fmt) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type t = ttpu_l_type(L, bad);
  int mask[TTPU_MAX_DIMS];
  for (int d = 0; d < t.ndim; ++d) mask[d] = 1;
  ttpu_val flag = ttpu_hlo_convert(b, ttpu_l_reduce_mask(L, bad, TTPU_RED_OR, mask),
                                   TTPU_I64);
  ttpu_val v = ttpu_hlo_const_i(b, TTPU_I64, 0);
  if (shown != TTPU_VAL_ERROR) {
    ttpu_type st = ttpu_l_type(L, shown);
    ttpu_val low = ttpu_hlo_const(b, st, 0, INT64_MIN);
    v = ttpu_l_reduce_mask(L, ttpu_hlo_select(b, bad, shown, low), TTPU_RED_MAX, mask);
  }
  int64_t one = 1;
  ttpu_val parts[4] = {flag, v, ttpu_hlo_const_i(b, TTPU_I64, 0),
                       ttpu_hlo_const_i(b, TTPU_I64, 0)};
  for (int i = 0; i < 4; ++i) parts[i] = ttpu_hlo_reshape(b, parts[i], 1, &one);
  ttpu_l_check(L, ttpu_hlo_concat(b, parts, 4, 0), code, fmt);
}

/* ------------------------------------------------------------ softmax */

/* _softmax/_log_softmax(self, int dim, bool half_to_float): the output
 * dtype (f32 when half_to_float) comes from the meta kernel. */
static ttpu_status* lower_softmax_like(ttpu_lower* L) {
  int log = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type out = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  x = ttpu_hlo_convert(b, x, acc2(tx.dtype, out.dtype));
  tx = ttpu_l_type(L, x);
  int64_t dim = ttpu_l_dim(L, ttpu_l_int(L, 1, 0), tx.ndim);
  int mask[TTPU_MAX_DIMS] = {0};
  if (tx.ndim > 0) mask[dim] = 1;
  ttpu_val m =
      ttpu_l_bcast_back(L, ttpu_l_reduce_mask(L, x, TTPU_RED_MAX, mask), tx, mask);
  ttpu_val sh = bin(L, TTPU_SUB, x, m);
  ttpu_val e = un(L, TTPU_EXP, sh);
  ttpu_val s =
      ttpu_l_bcast_back(L, ttpu_l_reduce_mask(L, e, TTPU_RED_SUM, mask), tx, mask);
  ttpu_val r = log ? bin(L, TTPU_SUB, sh, un(L, TTPU_LOG, s))
                   : bin(L, TTPU_DIV, e, s);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* _softmax_backward_data / _log_softmax_backward_data(grad_output, output,
 * int dim, ScalarType input_dtype) */
static ttpu_status* lower_softmax_bwd_like(ttpu_lower* L, int log) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype acc = acc2(arg_dtype(L, 0), arg_dtype(L, 1));
  ttpu_val g = tensor_as(L, 0, acc), y = tensor_as(L, 1, acc);
  ttpu_type t = ttpu_l_type(L, y);
  g = ttpu_hlo_broadcast_to(b, g, t.ndim, t.dims);
  int64_t dim = ttpu_l_dim(L, ttpu_l_int(L, 2, 0), t.ndim);
  int mask[TTPU_MAX_DIMS] = {0};
  if (t.ndim > 0) mask[dim] = 1;
  ttpu_val r;
  if (log) {
    ttpu_val s =
        ttpu_l_bcast_back(L, ttpu_l_reduce_mask(L, g, TTPU_RED_SUM, mask), t, mask);
    r = bin(L, TTPU_SUB, g, bin(L, TTPU_MUL, un(L, TTPU_EXP, y), s));
  } else {
    ttpu_val gy = bin(L, TTPU_MUL, g, y);
    ttpu_val s =
        ttpu_l_bcast_back(L, ttpu_l_reduce_mask(L, gy, TTPU_RED_SUM, mask), t, mask);
    r = bin(L, TTPU_MUL, y, bin(L, TTPU_SUB, g, s));
  }
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

static ttpu_status* lower_softmax_bwd(ttpu_lower* L) {
  return lower_softmax_bwd_like(L, 0);
}
static ttpu_status* lower_log_softmax_bwd(ttpu_lower* L) {
  return lower_softmax_bwd_like(L, 1);
}

/* ------------------------------------------------------------ layer norm */

/* The input as (M, N) rows in dtype acc, where N covers the trailing
 * normalized dims given at arg shape_arg. */
static ttpu_val rows_of(ttpu_lower* L, ttpu_val x, int shape_arg, int64_t* M,
                        int64_t* N) {
  ttpu_type t = ttpu_l_type(L, x);
  int k = 0;
  ttpu_l_ints(L, shape_arg, &k);
  int axis = t.ndim - k;
  if (axis < 0) axis = 0;
  *M = 1;
  *N = 1;
  for (int d = 0; d < t.ndim; ++d) *(d < axis ? M : N) *= t.dims[d];
  int64_t mn[2] = {*M, *N};
  return ttpu_hlo_reshape(ttpu_l_hlo(L), x, 2, mn);
}

/* A (N) vector broadcast over (M, N) rows, or a (M) one over columns. */
static ttpu_val over_rows(ttpu_lower* L, ttpu_val v, int64_t M, int64_t N,
                          int axis) {
  int64_t mn[2] = {M, N};
  ttpu_type t = ttpu_type_make(ttpu_l_type(L, v).dtype, 2, mn);
  int64_t n = axis ? N : M;
  v = ttpu_hlo_reshape(ttpu_l_hlo(L), v, 1, &n);
  return along(L, v, t, axis);
}

/* native_layer_norm(input, SymInt[] normalized_shape, Tensor? weight,
 * Tensor? bias, float eps) -> (out, mean, rstd) */
static ttpu_status* lower_layer_norm(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype acc = acc2(arg_dtype(L, 0), TTPU_F32);
  ttpu_val x = tensor_as(L, 0, acc);
  ttpu_type tx = ttpu_l_type(L, x);
  double eps = ttpu_l_float(L, 4, 1e-5);
  int64_t M, N;
  ttpu_val x2 = rows_of(L, x, 1, &M, &N);
  int cols[2] = {0, 1};
  ttpu_val mean = bin_c(L, TTPU_DIV, ttpu_l_reduce_mask(L, x2, TTPU_RED_SUM, cols),
                        (double)N);
  ttpu_val xc = bin(L, TTPU_SUB, x2, over_rows(L, mean, M, N, 0));
  ttpu_val var = bin_c(L, TTPU_DIV,
                       ttpu_l_reduce_mask(L, bin(L, TTPU_MUL, xc, xc),
                                          TTPU_RED_SUM, cols),
                       (double)N);
  ttpu_val rstd = un(L, TTPU_RSQRT, bin_c(L, TTPU_ADD, var, eps));
  ttpu_val y = bin(L, TTPU_MUL, xc, over_rows(L, rstd, M, N, 0));
  if (has_tensor(L, 2))
    y = bin(L, TTPU_MUL, y, over_rows(L, tensor_as(L, 2, acc), M, N, 1));
  if (has_tensor(L, 3))
    y = bin(L, TTPU_ADD, y, over_rows(L, tensor_as(L, 3, acc), M, N, 1));
  ttpu_l_set_out(L, 0, ttpu_hlo_reshape(b, y, tx.ndim, tx.dims));
  if (wanted(L, 1, -1)) set_out(L, 1, mean);
  if (wanted(L, 2, -1)) set_out(L, 2, rstd);
  return NULL;
}

/* native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
 * weight?, bias?, bool[3] output_mask) -> (grad_input, grad_weight,
 * grad_bias) */
static ttpu_status* lower_layer_norm_bwd(ttpu_lower* L) {
  ttpu_dtype acc = acc2(arg_dtype(L, 1), arg_dtype(L, 0));
  ttpu_val g = tensor_as(L, 0, acc), x = tensor_as(L, 1, acc);
  int64_t M, N;
  ttpu_val x2 = rows_of(L, x, 2, &M, &N);
  ttpu_val g2 = rows_of(L, g, 2, &M, &N);
  ttpu_val mean = over_rows(L, tensor_as(L, 3, acc), M, N, 0);
  ttpu_val rstd = over_rows(L, tensor_as(L, 4, acc), M, N, 0);
  ttpu_val xhat = bin(L, TTPU_MUL, bin(L, TTPU_SUB, x2, mean), rstd);
  int rows[2] = {1, 0}, cols[2] = {0, 1};
  if (wanted(L, 0, 7)) {
    ttpu_val gh = g2;
    if (has_tensor(L, 5))
      gh = bin(L, TTPU_MUL, gh, over_rows(L, tensor_as(L, 5, acc), M, N, 1));
    ttpu_val m1 = bin_c(L, TTPU_DIV, ttpu_l_reduce_mask(L, gh, TTPU_RED_SUM, cols),
                        (double)N);
    ttpu_val m2 = bin_c(L, TTPU_DIV,
                        ttpu_l_reduce_mask(L, bin(L, TTPU_MUL, gh, xhat), TTPU_RED_SUM,
                                    cols),
                        (double)N);
    ttpu_val gi = bin(L, TTPU_SUB, gh, over_rows(L, m1, M, N, 0));
    gi = bin(L, TTPU_SUB, gi, bin(L, TTPU_MUL, xhat, over_rows(L, m2, M, N, 0)));
    set_out(L, 0, bin(L, TTPU_MUL, gi, rstd));
  }
  if (wanted(L, 1, 7))
    set_out(L, 1, ttpu_l_reduce_mask(L, bin(L, TTPU_MUL, g2, xhat), TTPU_RED_SUM, rows));
  if (wanted(L, 2, 7)) set_out(L, 2, ttpu_l_reduce_mask(L, g2, TTPU_RED_SUM, rows));
  return NULL;
}

/* ------------------------------------------------------------ batch norm */

/* Where each batch-norm flavour keeps its arguments and where it puts the
 * updated running statistics. */
typedef struct {
  int rmean, rvar;    /* arg indices of the running stats, -1: none */
  int training_arg;   /* arg index of `training`, -1: fixed below */
  int training;
  int momentum, eps;  /* arg indices */
  int stats_out;      /* output index of the new running mean (var next),
                         -1: the op does not update them */
  int reserve_out;    /* output index of the empty reserve, -1: none */
} bn_layout;

/* The output that receives running statistic `arg`: the in-place ones
 * alias it (the glue leaves out None, or passes an undefined output for
 * an undefined tensor), the functional ones are the return at `first`. */
static int stat_output(ttpu_lower* L, int first, int arg, int present) {
  if (!present) return -1;
  const ttpu_tensor* a = ttpu_l_tensor_desc(L, arg, -1);
  for (int k = first; a && k < ttpu_l_nout(L); ++k) {
    const ttpu_tensor* o = &ttpu_l_call(L)->outputs[k];
    if (o->buffer == a->buffer && o->offset == a->offset) return k;
  }
  return wanted(L, first, -1) ? first : -1;
}

static ttpu_status* batch_norm(ttpu_lower* L, const bn_layout* lay) {
  ttpu_dtype acc = acc2(arg_dtype(L, 0), TTPU_F32);
  ttpu_val x = tensor_as(L, 0, acc);
  ttpu_type tx = ttpu_l_type(L, x);
  if (tx.ndim < 2)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "batch_norm: input must have at least 2 dims");
  int training = lay->training_arg >= 0 ? ttpu_l_bool(L, lay->training_arg, 0)
                                        : lay->training;
  int has_rm = lay->rmean >= 0 && has_tensor(L, lay->rmean);
  int has_rv = lay->rvar >= 0 && has_tensor(L, lay->rvar);
  if (!has_rm || !has_rv) training = 1; /* nothing else to normalise by */
  double momentum = ttpu_l_float(L, lay->momentum, 0.1);
  double eps = ttpu_l_float(L, lay->eps, 1e-5);
  int mask[TTPU_MAX_DIMS];
  all_but(tx.ndim, 1, mask);
  int64_t C = tx.dims[1];
  double cnt = (double)(ttpu_type_numel(&tx) / (C > 0 ? C : 1));
  ttpu_val mean, var, invstd;
  if (training) {
    mean = bin_c(L, TTPU_DIV, ttpu_l_reduce_mask(L, x, TTPU_RED_SUM, mask), cnt);
    ttpu_val xc = bin(L, TTPU_SUB, x, along(L, mean, tx, 1));
    var = bin_c(L, TTPU_DIV,
                ttpu_l_reduce_mask(L, bin(L, TTPU_MUL, xc, xc),
                                   TTPU_RED_SUM, mask),
                cnt);
  } else {
    mean = tensor_as(L, lay->rmean, acc);
    var = tensor_as(L, lay->rvar, acc);
  }
  invstd = un(L, TTPU_RSQRT, bin_c(L, TTPU_ADD, var, eps));
  ttpu_val y = bin(L, TTPU_MUL, bin(L, TTPU_SUB, x, along(L, mean, tx, 1)),
                   along(L, invstd, tx, 1));
  if (has_tensor(L, 1)) y = bin(L, TTPU_MUL, y, along(L, tensor_as(L, 1, acc), tx, 1));
  if (has_tensor(L, 2)) y = bin(L, TTPU_ADD, y, along(L, tensor_as(L, 2, acc), tx, 1));
  ttpu_l_set_out(L, 0, y);
  /* save_mean / save_invstd: empty in eval mode where the meta kernel
   * says so; else the statistics used. */
  for (int k = 1; k <= 2; ++k) {
    if (!wanted(L, k, -1)) continue;
    ttpu_type t = ttpu_l_out_type(L, k);
    if (ttpu_type_numel(&t) == 0)
      set_zero(L, k);
    else
      set_out(L, k, k == 1 ? mean : invstd);
  }
  if (lay->reserve_out >= 0 && wanted(L, lay->reserve_out, -1))
    set_zero(L, lay->reserve_out);
  if (lay->stats_out >= 0) {
    int k_rm = stat_output(L, lay->stats_out, lay->rmean, has_rm);
    int k_rv = stat_output(L, lay->stats_out + (k_rm >= 0), lay->rvar, has_rv);
    if (k_rm >= 0) {
      ttpu_val rm = tensor_as(L, lay->rmean, acc);
      if (training)
        rm = bin(L, TTPU_ADD, bin_c(L, TTPU_MUL, rm, 1.0 - momentum),
                 bin_c(L, TTPU_MUL, mean, momentum));
      set_out(L, k_rm, rm);
    }
    if (k_rv >= 0) {
      ttpu_val rv = tensor_as(L, lay->rvar, acc);
      if (training) {
        /* the running variance is unbiased */
        ttpu_val unb = bin_c(L, TTPU_MUL, var, cnt / (cnt - 1.0));
        rv = bin(L, TTPU_ADD, bin_c(L, TTPU_MUL, rv, 1.0 - momentum),
                 bin_c(L, TTPU_MUL, unb, momentum));
      }
      set_out(L, k_rv, rv);
    }
  }
  return NULL;
}

/* native_batch_norm(input, weight?, bias?, running_mean?, running_var?,
 * bool training, float momentum, float eps): updates the running stats
 * in place although its schema does not say so; the glue passes them as
 * extra outputs after the three returns. The same layout serves
 * _native_batch_norm_legit (Tensor(a!) running stats) and its _functional
 * variant (the new stats are returns 3 and 4). */
static ttpu_status* lower_native_batch_norm(ttpu_lower* L) {
  const bn_layout lay = {3, 4, 5, 0, 6, 7, 3, -1};
  return batch_norm(L, &lay);
}
/* _native_batch_norm_legit.no_stats(input, weight?, bias?, bool training,
 * float momentum, float eps) */
static ttpu_status* lower_bn_legit_no_stats(ttpu_lower* L) {
  const bn_layout lay = {-1, -1, 3, 0, 4, 5, -1, -1};
  return batch_norm(L, &lay);
}
/* _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean,
 * running_var, float momentum, float eps) */
static ttpu_status* lower_bn_legit_no_training(ttpu_lower* L) {
  const bn_layout lay = {3, 4, -1, 0, 5, 6, -1, -1};
  return batch_norm(L, &lay);
}
/* _batch_norm_with_update(input, weight?, bias?, Tensor(a!) running_mean,
 * Tensor(b!) running_var, float momentum, float eps) -> (out, save_mean,
 * save_rstd, reserve) [+ running stats], and its _functional variant. */
static ttpu_status* lower_bn_with_update(ttpu_lower* L) {
  const bn_layout lay = {3, 4, -1, 1, 5, 6, 4, 3};
  return batch_norm(L, &lay);
}
/* _batch_norm_no_update(input, weight?, bias?, running_mean?, running_var?,
 * float momentum, float eps) -> (out, save_mean, save_rstd, reserve) */
static ttpu_status* lower_bn_no_update(ttpu_lower* L) {
  const bn_layout lay = {3, 4, -1, 0, 5, 6, -1, 3};
  return batch_norm(L, &lay);
}

/* native_batch_norm_backward(grad_out, input, weight?, running_mean?,
 * running_var?, save_mean?, save_invstd?, bool train, float eps,
 * bool[3] output_mask) and batch_norm_backward (same, with `update` for
 * train and a trailing reserve). */
static ttpu_status* lower_batch_norm_bwd(ttpu_lower* L) {
  ttpu_dtype acc = acc2(arg_dtype(L, 1), arg_dtype(L, 0));
  ttpu_val g = tensor_as(L, 0, acc), x = tensor_as(L, 1, acc);
  ttpu_type tx = ttpu_l_type(L, x);
  if (tx.ndim < 2)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "batch_norm: input must have at least 2 dims");
  int train = ttpu_l_bool(L, 7, 1);
  double eps = ttpu_l_float(L, 8, 1e-5);
  int mask[TTPU_MAX_DIMS];
  all_but(tx.ndim, 1, mask);
  int64_t C = tx.dims[1];
  double cnt = (double)(ttpu_type_numel(&tx) / (C > 0 ? C : 1));
  ttpu_val mean, invstd;
  if (train || !has_tensor(L, 3)) {
    mean = tensor_as(L, 5, acc);
    invstd = tensor_as(L, 6, acc);
  } else {
    mean = tensor_as(L, 3, acc);
    invstd = un(L, TTPU_RSQRT, bin_c(L, TTPU_ADD, tensor_as(L, 4, acc), eps));
  }
  ttpu_val xhat = bin(L, TTPU_MUL, bin(L, TTPU_SUB, x, along(L, mean, tx, 1)),
                      along(L, invstd, tx, 1));
  ttpu_val sum_g = ttpu_l_reduce_mask(L, g, TTPU_RED_SUM, mask);
  ttpu_val sum_gx = ttpu_l_reduce_mask(L, bin(L, TTPU_MUL, g, xhat), TTPU_RED_SUM, mask);
  if (wanted(L, 0, 9)) {
    ttpu_val scale = invstd;
    if (has_tensor(L, 2)) scale = bin(L, TTPU_MUL, scale, tensor_as(L, 2, acc));
    ttpu_val gi = g;
    if (train) {
      gi = bin(L, TTPU_SUB, gi, along(L, bin_c(L, TTPU_DIV, sum_g, cnt), tx, 1));
      gi = bin(L, TTPU_SUB, gi,
               bin(L, TTPU_MUL, xhat,
                   along(L, bin_c(L, TTPU_DIV, sum_gx, cnt), tx, 1)));
    }
    set_out(L, 0, bin(L, TTPU_MUL, gi, along(L, scale, tx, 1)));
  }
  if (wanted(L, 1, 9)) set_out(L, 1, sum_gx);
  if (wanted(L, 2, 9)) set_out(L, 2, sum_g);
  return NULL;
}

/* ------------------------------------------------------------ group norm */

/* The input as (N, G, D) with D = C/G * HxW. */
static ttpu_val groups_of(ttpu_lower* L, ttpu_val x, int64_t N, int64_t G,
                          int64_t D) {
  int64_t s[3] = {N, G, D};
  return ttpu_hlo_reshape(ttpu_l_hlo(L), x, 3, s);
}

/* A per-channel (C) vector over (N, C, HxW). */
static ttpu_val per_channel(ttpu_lower* L, ttpu_val v, int64_t N, int64_t C,
                            int64_t HxW) {
  int64_t s[3] = {N, C, HxW};
  return along(L, v, ttpu_type_make(ttpu_l_type(L, v).dtype, 3, s), 1);
}

/* A per-group (N, G) value over (N, G, D). */
static ttpu_val per_group(ttpu_lower* L, ttpu_val v, int64_t N, int64_t G,
                          int64_t D) {
  int64_t s[3] = {N, G, D}, map[2] = {0, 1}, ng[2] = {N, G};
  v = ttpu_hlo_reshape(ttpu_l_hlo(L), v, 2, ng);
  return ttpu_hlo_broadcast_in_dim(
      ttpu_l_hlo(L), v, ttpu_type_make(ttpu_l_type(L, v).dtype, 3, s), map);
}

/* native_group_norm(input, weight?, bias?, N, C, HxW, int group, float eps)
 * -> (out, mean (N, G), rstd (N, G)) */
static ttpu_status* lower_group_norm(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype acc = acc2(arg_dtype(L, 0), TTPU_F32);
  ttpu_val x = tensor_as(L, 0, acc);
  ttpu_type tx = ttpu_l_type(L, x);
  int64_t N = ttpu_l_int(L, 3, 0), C = ttpu_l_int(L, 4, 0),
          HxW = ttpu_l_int(L, 5, 0), G = ttpu_l_int(L, 6, 1);
  double eps = ttpu_l_float(L, 7, 1e-5);
  if (G <= 0 || C % G)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "group_norm: C must be divisible by group");
  int64_t D = C / G * HxW;
  ttpu_val x3 = groups_of(L, x, N, G, D);
  int last[3] = {0, 0, 1};
  ttpu_val mean = bin_c(L, TTPU_DIV, ttpu_l_reduce_mask(L, x3, TTPU_RED_SUM, last),
                        (double)D);
  ttpu_val xc = bin(L, TTPU_SUB, x3, per_group(L, mean, N, G, D));
  ttpu_val var = bin_c(L, TTPU_DIV,
                       ttpu_l_reduce_mask(L, bin(L, TTPU_MUL, xc, xc),
                                          TTPU_RED_SUM, last),
                       (double)D);
  ttpu_val rstd = un(L, TTPU_RSQRT, bin_c(L, TTPU_ADD, var, eps));
  ttpu_val y = bin(L, TTPU_MUL, xc, per_group(L, rstd, N, G, D));
  int64_t s3[3] = {N, C, HxW};
  y = ttpu_hlo_reshape(b, y, 3, s3);
  if (has_tensor(L, 1))
    y = bin(L, TTPU_MUL, y, per_channel(L, tensor_as(L, 1, acc), N, C, HxW));
  if (has_tensor(L, 2))
    y = bin(L, TTPU_ADD, y, per_channel(L, tensor_as(L, 2, acc), N, C, HxW));
  ttpu_l_set_out(L, 0, ttpu_hlo_reshape(b, y, tx.ndim, tx.dims));
  if (wanted(L, 1, -1)) set_out(L, 1, mean);
  if (wanted(L, 2, -1)) set_out(L, 2, rstd);
  return NULL;
}

/* native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C,
 * HxW, int group, bool[3] output_mask) */
static ttpu_status* lower_group_norm_bwd(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype acc = acc2(arg_dtype(L, 1), arg_dtype(L, 0));
  int64_t N = ttpu_l_int(L, 5, 0), C = ttpu_l_int(L, 6, 0),
          HxW = ttpu_l_int(L, 7, 0), G = ttpu_l_int(L, 8, 1);
  if (G <= 0 || C % G)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "group_norm: C must be divisible by group");
  int64_t D = C / G * HxW, s3[3] = {N, C, HxW};
  ttpu_val g = ttpu_hlo_reshape(b, tensor_as(L, 0, acc), 3, s3);
  ttpu_val x = ttpu_hlo_reshape(b, tensor_as(L, 1, acc), 3, s3);
  ttpu_val mean = per_group(L, tensor_as(L, 2, acc), N, G, D);
  ttpu_val rstd = per_group(L, tensor_as(L, 3, acc), N, G, D);
  ttpu_val xhat = bin(L, TTPU_MUL, bin(L, TTPU_SUB, groups_of(L, x, N, G, D), mean),
                      rstd);
  ttpu_val xhat_c = ttpu_hlo_reshape(b, xhat, 3, s3);
  int chan[3] = {1, 0, 1}, last[3] = {0, 0, 1};
  if (wanted(L, 0, 9)) {
    ttpu_val gh = g;
    if (has_tensor(L, 4))
      gh = bin(L, TTPU_MUL, gh, per_channel(L, tensor_as(L, 4, acc), N, C, HxW));
    gh = groups_of(L, gh, N, G, D);
    ttpu_val m1 = bin_c(L, TTPU_DIV, ttpu_l_reduce_mask(L, gh, TTPU_RED_SUM, last),
                        (double)D);
    ttpu_val m2 = bin_c(L, TTPU_DIV,
                        ttpu_l_reduce_mask(L, bin(L, TTPU_MUL, gh, xhat), TTPU_RED_SUM,
                                    last),
                        (double)D);
    ttpu_val gi = bin(L, TTPU_SUB, gh, per_group(L, m1, N, G, D));
    gi = bin(L, TTPU_SUB, gi, bin(L, TTPU_MUL, xhat, per_group(L, m2, N, G, D)));
    set_out(L, 0, bin(L, TTPU_MUL, gi, rstd));
  }
  if (wanted(L, 1, 9))
    set_out(L, 1, ttpu_l_reduce_mask(L, bin(L, TTPU_MUL, g, xhat_c), TTPU_RED_SUM, chan));
  if (wanted(L, 2, 9)) set_out(L, 2, ttpu_l_reduce_mask(L, g, TTPU_RED_SUM, chan));
  return NULL;
}

/* ------------------------------------------------------------ losses */

/* Applies at::Reduction to an elementwise loss. */
/* The number of elements of x (the broadcast shape of tensor args 0 and
 * 1), as a 0-d value of x's dtype, or a negative count when it is static
 * (returned in *fixed). A bucketed call (prog/bucket.c) counts its padded
 * dims at their true size. */
static ttpu_val loss_count(ttpu_lower* L, ttpu_val x, double* fixed) {
  ttpu_type t = ttpu_l_type(L, x);
  int dyn = 0;
  for (int a = 0; a < 2 && a < ttpu_l_nargs(L); ++a) {
    int m = ttpu_l_dyn_dims(L, a, -1);
    if (!m) continue;
    ttpu_type ta = ttpu_l_type(L, ttpu_l_tensor(L, a));
    dyn |= m << (t.ndim - ta.ndim);
  }
  double n_fixed = 1;
  int padded = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (dyn >> d & 1) padded++;
    else n_fixed *= (double)t.dims[d];
  }
  *fixed = padded ? -1 : n_fixed;
  if (!padded) return TTPU_VAL_ERROR;
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val n = ttpu_hlo_convert(b, ttpu_l_dyn_size(L), t.dtype);
  ttpu_val count = ttpu_l_const_like(L, n, n_fixed);
  for (int k = 0; k < padded; ++k) count = ttpu_hlo_binary(b, TTPU_MUL, count, n);
  return count;
}

static ttpu_val reduce_loss(ttpu_lower* L, ttpu_val loss, int64_t reduction) {
  if (reduction == RED_NONE) return loss;
  ttpu_type t = ttpu_l_type(L, loss);
  int mask[TTPU_MAX_DIMS];
  for (int d = 0; d < t.ndim; ++d) mask[d] = 1;
  ttpu_val s = ttpu_l_reduce_mask(L, loss, TTPU_RED_SUM, mask);
  if (reduction == RED_MEAN) {
    double fixed;
    ttpu_val count = loss_count(L, loss, &fixed);
    s = fixed >= 0 ? bin_c(L, TTPU_DIV, s, fixed)
                   : ttpu_hlo_binary(ttpu_l_hlo(L), TTPU_DIV, s, count);
  }
  return s;
}

/* The common broadcast shape of n values, each broadcast to it. */
static void bcast_all(ttpu_lower* L, ttpu_val* v, int n) {
  ttpu_type r = ttpu_l_type(L, v[0]);
  for (int i = 1; i < n; ++i) {
    ttpu_type t = ttpu_l_type(L, v[i]);
    int nd = r.ndim > t.ndim ? r.ndim : t.ndim;
    int64_t dims[TTPU_MAX_DIMS];
    for (int d = 0; d < nd; ++d) {
      int ir = d - (nd - r.ndim), it = d - (nd - t.ndim);
      int64_t a = ir >= 0 ? r.dims[ir] : 1, c = it >= 0 ? t.dims[it] : 1;
      dims[d] = a == 1 ? c : a;
    }
    r.ndim = nd;
    memcpy(r.dims, dims, sizeof(int64_t) * (size_t)nd);
  }
  for (int i = 0; i < n; ++i)
    v[i] = ttpu_hlo_broadcast_to(ttpu_l_hlo(L), v[i], r.ndim, r.dims);
}

/* 1 / numel of the loss for mean reduction, 1 otherwise. */
static double loss_norm(ttpu_lower* L, ttpu_val x, int64_t reduction) {
  ttpu_type t = ttpu_l_type(L, x);
  return reduction == RED_MEAN ? 1.0 / (double)ttpu_type_numel(&t) : 1.0;
}

/* The loss's compute dtype: that of its float output (f32 for bf16). */
static ttpu_dtype loss_acc(ttpu_lower* L) {
  return acc2(ttpu_l_out_type(L, 0).dtype, TTPU_F32);
}

/* mse_loss(self, target, int reduction=Mean) */
static ttpu_status* lower_mse_loss(ttpu_lower* L) {
  ttpu_dtype acc = loss_acc(L);
  ttpu_val v[2] = {tensor_as(L, 0, acc), tensor_as(L, 1, acc)};
  bcast_all(L, v, 2);
  ttpu_val d = bin(L, TTPU_SUB, v[0], v[1]);
  set_out(L, 0, reduce_loss(L, bin(L, TTPU_MUL, d, d), ttpu_l_int(L, 2, RED_MEAN)));
  return NULL;
}

/* mse_loss_backward(grad_output, self, target, int reduction) */
static ttpu_status* lower_mse_loss_bwd(ttpu_lower* L) {
  ttpu_dtype acc = loss_acc(L);
  int64_t red = ttpu_l_int(L, 3, RED_MEAN);
  ttpu_val v[3] = {tensor_as(L, 1, acc), tensor_as(L, 2, acc),
                   tensor_as(L, 0, acc)};
  bcast_all(L, v, 3);
  ttpu_val d = bin(L, TTPU_SUB, v[0], v[1]);
  ttpu_val gi;
  double fixed = 1;
  ttpu_val count = red == RED_MEAN ? loss_count(L, v[0], &fixed) : TTPU_VAL_ERROR;
  if (red == RED_MEAN && fixed < 0) {
    /* bucketed: 2 / the true count */
    ttpu_hlo* b = ttpu_l_hlo(L);
    ttpu_val two = ttpu_l_const_like(L, count, 2.0);
    ttpu_val scale = ttpu_hlo_binary(b, TTPU_DIV, two, count);
    int64_t no_dims[1] = {0};
    scale = ttpu_hlo_broadcast_in_dim(b, scale, ttpu_l_type(L, d), no_dims);
    gi = bin(L, TTPU_MUL, bin(L, TTPU_MUL, d, scale), v[2]);
  } else {
    gi = bin(L, TTPU_MUL, bin_c(L, TTPU_MUL, d, 2.0 * loss_norm(L, v[0], red)), v[2]);
  }
  set_out(L, 0, gi);
  return NULL;
}

/* binary_cross_entropy(self, target, weight?, int reduction): log terms
 * clamped at -100 as PyTorch does. */
static ttpu_status* lower_bce(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype acc = loss_acc(L);
  ttpu_val v[2] = {tensor_as(L, 0, acc), tensor_as(L, 1, acc)};
  bcast_all(L, v, 2);
  ttpu_val x = v[0], t = v[1];
  /* NaN fails the check too, as on CPU */
  ttpu_val ok = bin(L, TTPU_AND,
                    ttpu_hlo_compare(b, TTPU_GE, x, ttpu_l_const_like(L, x, 0.0)),
                    ttpu_hlo_compare(b, TTPU_LE, x, ttpu_l_const_like(L, x, 1.0)));
  check_none(L, un(L, TTPU_NOT, ok), TTPU_VAL_ERROR, TTPU_INVALID_ARGUMENT,
             "all elements of input should be between 0 and 1");
  ttpu_val lx = bin_c(L, TTPU_MAX, un(L, TTPU_LOG, x), -100.0);
  ttpu_val l1x = bin_c(L, TTPU_MAX, un(L, TTPU_LOG1P, un(L, TTPU_NEG, x)), -100.0);
  ttpu_val loss = bin(L, TTPU_SUB, bin(L, TTPU_MUL, bin_c(L, TTPU_SUB, t, 1.0), l1x),
                      bin(L, TTPU_MUL, t, lx));
  if (has_tensor(L, 2)) {
    ttpu_val w[2] = {loss, tensor_as(L, 2, acc)};
    bcast_all(L, w, 2);
    loss = bin(L, TTPU_MUL, w[0], w[1]);
  }
  set_out(L, 0, reduce_loss(L, loss, ttpu_l_int(L, 3, RED_MEAN)));
  return NULL;
}

/* binary_cross_entropy_backward(grad_output, self, target, weight?,
 * int reduction) */
static ttpu_status* lower_bce_bwd(ttpu_lower* L) {
  ttpu_dtype acc = loss_acc(L);
  int64_t red = ttpu_l_int(L, 4, RED_MEAN);
  ttpu_val v[4] = {tensor_as(L, 1, acc), tensor_as(L, 2, acc),
                   tensor_as(L, 0, acc), 0};
  int n = 3;
  if (has_tensor(L, 3)) v[n++] = tensor_as(L, 3, acc);
  bcast_all(L, v, n);
  ttpu_val x = v[0], t = v[1], g = v[2];
  ttpu_val den = bin_c(L, TTPU_MAX,
                       bin(L, TTPU_MUL, un(L, TTPU_NEG, bin_c(L, TTPU_SUB, x, 1.0)), x),
                       1e-12);
  ttpu_val gi = bin(L, TTPU_DIV, bin(L, TTPU_MUL, g, bin(L, TTPU_SUB, x, t)), den);
  if (n == 4) gi = bin(L, TTPU_MUL, gi, v[3]);
  if (red == RED_MEAN) gi = bin_c(L, TTPU_MUL, gi, loss_norm(L, x, red));
  set_out(L, 0, gi);
  return NULL;
}

static ttpu_val rnd(ttpu_lower* L, ttpu_val v, ttpu_dtype dt) {
  return ttpu_ew_round(ttpu_l_hlo(L), v, dt);
}

/* binary_cross_entropy_with_logits(self, target, weight?, pos_weight?,
 * int reduction): (1 - t) x - log_sigmoid(x) * (1 + (pw - 1) t). The CPU
 * composes it from tensor ops, each rounding to the input dtype, and the
 * terms cancel for large |x|: the same roundings keep bf16 results equal. */
static ttpu_status* lower_bce_logits(ttpu_lower* L) {
  ttpu_dtype acc = loss_acc(L), dt = ttpu_l_out_type(L, 0).dtype;
  ttpu_val v[4];
  int n = 0, iw = -1, ipw = -1;
  v[n++] = tensor_as(L, 0, acc);
  v[n++] = tensor_as(L, 1, acc);
  if (has_tensor(L, 2)) { iw = n; v[n++] = tensor_as(L, 2, acc); }
  if (has_tensor(L, 3)) { ipw = n; v[n++] = tensor_as(L, 3, acc); }
  bcast_all(L, v, n);
  ttpu_val x = v[0], t = v[1];
  /* log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)) */
  ttpu_val ls = bin(L, TTPU_SUB, bin_c(L, TTPU_MIN, x, 0.0),
                    un(L, TTPU_LOG1P, un(L, TTPU_EXP, un(L, TTPU_NEG, un(L, TTPU_ABS, x)))));
  ls = rnd(L, ls, dt);
  if (ipw >= 0) {
    ttpu_val lw = rnd(L, bin_c(L, TTPU_SUB, v[ipw], 1.0), dt);
    lw = rnd(L, bin(L, TTPU_MUL, lw, t), dt);
    lw = rnd(L, bin_c(L, TTPU_ADD, lw, 1.0), dt);
    ls = rnd(L, bin(L, TTPU_MUL, ls, lw), dt);
  }
  ttpu_val omt = rnd(L, un(L, TTPU_NEG, bin_c(L, TTPU_SUB, t, 1.0)), dt);
  ttpu_val loss = rnd(L, bin(L, TTPU_MUL, omt, x), dt);
  loss = rnd(L, bin(L, TTPU_SUB, loss, ls), dt);
  if (iw >= 0) loss = rnd(L, bin(L, TTPU_MUL, loss, v[iw]), dt);
  set_out(L, 0, reduce_loss(L, loss, ttpu_l_int(L, 4, RED_MEAN)));
  return NULL;
}

/* smooth_l1_loss(self, target, int reduction, float beta) and
 * huber_loss(self, target, int reduction, float delta). */
static ttpu_status* lower_smooth_like(ttpu_lower* L) {
  int huber = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype acc = loss_acc(L);
  double beta = ttpu_l_float(L, 3, 1.0);
  ttpu_val v[2] = {tensor_as(L, 0, acc), tensor_as(L, 1, acc)};
  bcast_all(L, v, 2);
  ttpu_val z = un(L, TTPU_ABS, bin(L, TTPU_SUB, v[0], v[1]));
  ttpu_val small = ttpu_hlo_compare(b, TTPU_LT, z, ttpu_l_const_like(L, z, beta));
  ttpu_val quad = bin_c(L, TTPU_MUL, bin(L, TTPU_MUL, z, z), 0.5);
  ttpu_val loss;
  if (huber) {
    ttpu_val lin = bin_c(L, TTPU_MUL, bin_c(L, TTPU_SUB, z, 0.5 * beta), beta);
    loss = ttpu_hlo_select(b, small, quad, lin);
  } else if (beta == 0.0) {
    loss = z; /* PyTorch takes l1_loss for beta == 0 */
  } else {
    loss = ttpu_hlo_select(b, small, bin_c(L, TTPU_DIV, quad, beta),
                           bin_c(L, TTPU_SUB, z, 0.5 * beta));
  }
  set_out(L, 0, reduce_loss(L, loss, ttpu_l_int(L, 2, RED_MEAN)));
  return NULL;
}

/* smooth_l1_loss_backward / huber_loss_backward(grad_output, self, target,
 * int reduction, float beta|delta) */
static ttpu_status* lower_smooth_like_bwd(ttpu_lower* L, int huber) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype acc = loss_acc(L);
  int64_t red = ttpu_l_int(L, 3, RED_MEAN);
  double beta = ttpu_l_float(L, 4, 1.0);
  ttpu_val v[3] = {tensor_as(L, 1, acc), tensor_as(L, 2, acc),
                   tensor_as(L, 0, acc)};
  bcast_all(L, v, 3);
  ttpu_val x = bin(L, TTPU_SUB, v[0], v[1]);
  ttpu_val g = bin_c(L, TTPU_MUL, v[2], loss_norm(L, v[0], red));
  ttpu_val lo = ttpu_hlo_compare(b, TTPU_LE, x, ttpu_l_const_like(L, x, -beta));
  ttpu_val hi = ttpu_hlo_compare(b, TTPU_GE, x, ttpu_l_const_like(L, x, beta));
  ttpu_val edge = huber ? bin_c(L, TTPU_MUL, g, beta) : g;
  ttpu_val mid = bin(L, TTPU_MUL, x, g);
  if (!huber) mid = bin_c(L, TTPU_DIV, mid, beta);
  ttpu_val gi = ttpu_hlo_select(b, hi, edge, mid);
  gi = ttpu_hlo_select(b, lo, un(L, TTPU_NEG, edge), gi);
  set_out(L, 0, gi);
  return NULL;
}

static ttpu_status* lower_smooth_l1_bwd(ttpu_lower* L) {
  return lower_smooth_like_bwd(L, 0);
}
static ttpu_status* lower_huber_bwd(ttpu_lower* L) {
  return lower_smooth_like_bwd(L, 1);
}

/* ------------------------------------------------------------ nll loss */

/* The pieces of nll_loss for input x (C), (N, C) or (N, C, d...) and
 * target of x's shape without the class dim: the one-hot mask of the
 * target class (x's shape), and each target's weight (target's shape),
 * 0 where the target is ignore_index. A target outside [0, C) selects
 * nothing (the CPU kernel raises instead; a device cannot). */
typedef struct {
  ttpu_val onehot, weight, valid;
  int cdim;
  ttpu_type tx;
} nll_parts;

static nll_parts nll_prepare(ttpu_lower* L, ttpu_val x, int target_arg,
                             int weight_arg, int64_t ignore, ttpu_dtype acc) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  nll_parts p;
  p.tx = ttpu_l_type(L, x);
  p.cdim = p.tx.ndim >= 2 ? 1 : 0;
  ttpu_val t = ttpu_hlo_convert(b, ttpu_l_tensor(L, target_arg), TTPU_I64);
  ttpu_type tt = ttpu_l_type(L, t);
  ttpu_type it = p.tx;
  it.dtype = TTPU_I64;
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0, k = 0; d < p.tx.ndim; ++d)
    if (d != p.cdim) map[k++] = d;
  ttpu_val tb = ttpu_hlo_broadcast_in_dim(b, t, it, map);
  p.onehot = ttpu_hlo_compare(b, TTPU_EQ, tb, ttpu_hlo_iota(b, it, p.cdim));
  p.valid = ttpu_hlo_compare(b, TTPU_NE, t, ttpu_hlo_const(b, tt, 0, ignore));
  ttpu_val oob = bin(L, TTPU_OR,
                     ttpu_hlo_compare(b, TTPU_LT, t, ttpu_hlo_const(b, tt, 0, 0)),
                     ttpu_hlo_compare(b, TTPU_GE, t,
                                      ttpu_hlo_const(b, tt, 0, p.tx.dims[p.cdim])));
  check_none(L, bin(L, TTPU_AND, p.valid, oob), t, TTPU_INDEX_ERROR,
             "Target %lld is out of bounds.");
  tt.dtype = acc;
  ttpu_val w;
  if (has_tensor(L, weight_arg)) {
    ttpu_type wt = p.tx;
    wt.dtype = acc;
    ttpu_val wb = along(L, tensor_as(L, weight_arg, acc), wt, p.cdim);
    wb = ttpu_hlo_select(b, p.onehot, wb, ttpu_hlo_const(b, wt, 0.0, 0));
    int64_t cd = p.cdim;
    w = ttpu_hlo_reduce(b, wb, TTPU_RED_SUM, &cd, 1);
  } else {
    w = ttpu_hlo_const(b, tt, 1.0, 1);
  }
  p.weight = ttpu_hlo_select(b, p.valid, w, ttpu_hlo_const(b, tt, 0.0, 0));
  return p;
}

/* nll_loss_forward / nll_loss2d_forward(self, target, weight?,
 * int reduction, SymInt ignore_index) -> (output, total_weight) */
static ttpu_status* lower_nll_loss(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype acc = loss_acc(L);
  int64_t red = ttpu_l_int(L, 3, RED_MEAN);
  ttpu_val x = tensor_as(L, 0, acc);
  nll_parts p = nll_prepare(L, x, 1, 2, ttpu_l_int(L, 4, -100), acc);
  /* select, not multiply: NaN/inf in other classes or ignored rows must
   * not leak in. */
  ttpu_val picked = ttpu_hlo_select(b, p.onehot, x, ttpu_l_const_like(L, x, 0.0));
  int64_t cd = p.cdim;
  picked = ttpu_hlo_reduce(b, picked, TTPU_RED_SUM, &cd, 1);
  ttpu_val loss = un(L, TTPU_NEG, bin(L, TTPU_MUL, picked, p.weight));
  loss = ttpu_hlo_select(b, p.valid, loss, ttpu_l_const_like(L, loss, 0.0));
  ttpu_val total = reduce_loss(L, p.weight, RED_SUM);
  if (red == RED_NONE) {
    set_out(L, 0, loss);
    set_zero(L, 1);
    return NULL;
  }
  ttpu_val s = reduce_loss(L, loss, RED_SUM);
  if (red == RED_MEAN) s = bin(L, TTPU_DIV, s, total);
  set_out(L, 0, s);
  set_out(L, 1, total);
  return NULL;
}

/* nll_loss_backward / nll_loss2d_backward(grad_output, self, target,
 * weight?, int reduction, SymInt ignore_index, total_weight) */
static ttpu_status* lower_nll_loss_bwd(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype acc = loss_acc(L);
  int64_t red = ttpu_l_int(L, 4, RED_MEAN);
  ttpu_val x = tensor_as(L, 1, acc);
  nll_parts p = nll_prepare(L, x, 2, 3, ttpu_l_int(L, 5, -100), acc);
  ttpu_val g = tensor_as(L, 0, acc);
  ttpu_type tw = ttpu_l_type(L, p.weight);
  if (red == RED_MEAN) g = bin(L, TTPU_DIV, g, tensor_as(L, 6, acc));
  g = ttpu_hlo_broadcast_to(b, g, tw.ndim, tw.dims);
  ttpu_val coef = un(L, TTPU_NEG, bin(L, TTPU_MUL, p.weight, g));
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0, k = 0; d < p.tx.ndim; ++d)
    if (d != p.cdim) map[k++] = d;
  ttpu_val cb = ttpu_hlo_broadcast_in_dim(b, coef, p.tx, map);
  ttpu_val vb = ttpu_hlo_broadcast_in_dim(
      b, p.valid, ttpu_type_make(TTPU_BOOL, p.tx.ndim, p.tx.dims), map);
  ttpu_val hit = bin(L, TTPU_AND, p.onehot, vb);
  set_out(L, 0, ttpu_hlo_select(b, hit, cb, ttpu_hlo_const(b, p.tx, 0.0, 0)));
  return NULL;
}

const ttpu_op_def ttpu_ops_nn[] = {
    {"_softmax", lower_softmax_like, .param = 0, .kinds = TTPU_K_FLOAT, .kernel = "softmax_lastdim_kernel_impl"},
    {"_log_softmax", lower_softmax_like, .param = 1, .kinds = TTPU_K_FLOAT,
     .kernel = "log_softmax_lastdim_kernel_impl"},
    {"_softmax_backward_data", lower_softmax_bwd, .flags = 0},
    {"_log_softmax_backward_data", lower_log_softmax_bwd, .flags = 0},
    {"native_layer_norm", lower_layer_norm, .flags = 0},
    {"native_layer_norm_backward", lower_layer_norm_bwd, .flags = 0},
    {"native_batch_norm", lower_native_batch_norm, .flags = 0},
    {"_native_batch_norm_legit", lower_native_batch_norm, .flags = 0},
    {"_native_batch_norm_legit_functional", lower_native_batch_norm, .flags = 0},
    {"_native_batch_norm_legit.no_stats", lower_bn_legit_no_stats, .flags = 0},
    {"_native_batch_norm_legit_no_training", lower_bn_legit_no_training, .flags = 0},
    {"_batch_norm_with_update", lower_bn_with_update, .flags = 0},
    {"_batch_norm_with_update_functional", lower_bn_with_update, .flags = 0},
    {"_batch_norm_no_update", lower_bn_no_update, .flags = 0},
    {"native_batch_norm_backward", lower_batch_norm_bwd, .flags = 0},
    {"batch_norm_backward", lower_batch_norm_bwd, .flags = 0},
    {"native_group_norm", lower_group_norm, .flags = 0},
    {"native_group_norm_backward", lower_group_norm_bwd, .flags = 0},
    {"nll_loss_forward", lower_nll_loss, .flags = 0},
    {"nll_loss2d_forward", lower_nll_loss, .flags = 0},
    {"nll_loss_backward", lower_nll_loss_bwd, .flags = 0},
    {"nll_loss2d_backward", lower_nll_loss_bwd, .flags = 0},
    {"mse_loss", lower_mse_loss, .flags = 0},
    {"mse_loss_backward", lower_mse_loss_bwd, .flags = 0},
    {"binary_cross_entropy", lower_bce, .flags = 0},
    {"binary_cross_entropy_backward", lower_bce_bwd, .flags = 0},
    {"binary_cross_entropy_with_logits", lower_bce_logits, .flags = 0},
    {"smooth_l1_loss", lower_smooth_like, .param = 0},
    {"smooth_l1_loss_backward", lower_smooth_l1_bwd, .flags = 0},
    {"huber_loss", lower_smooth_like, .param = 1},
    {"huber_loss_backward", lower_huber_bwd, .flags = 0},
    {0},
};
