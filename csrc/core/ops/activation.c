/* activation.c - activation functions and the backward ops autograd calls
 * for them (threshold_backward for relu, gelu_backward, ...), each with
 * CPU's formula and NaN behaviour. Scalars (slopes, limits) are runtime
 * data converted to the math type; they do not take part in promotion, so
 * the math type is the output's, not the glue's result type. */
#include <math.h>

#include "complex.h"
#include "elementwise.h"

static const double kSqrt1_2 = 0.707106781186547524400844362104849039;
static const double k2_SqrtPi = 1.12837916709551257389615890312154517;
static const double kSqrt2 = 1.41421356237309504880168872420969808;

/* opmath of output 0's dtype, if the op accepts its kind. */
static int act_type(ttpu_lower* L, int kinds, const char* name,
                    ttpu_dtype* md) {
  ttpu_dtype dt = ttpu_l_out_type(L, 0).dtype;
  *md = ttpu_ew_opmath(dt);
  return ttpu_ew_accepts(L, dt, kinds, name);
}

/* ------------------------------------------------------------ relu family */

/* relu: clamp_min(x, 0), NaN propagating. */
static ttpu_status* lower_relu(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (ttpu_l_out_type(L, 0).dtype == TTPU_BOOL) {
    /* NotImplementedError, as torch 2.14 raises it (a RuntimeError). */
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "Boolean inputs not supported for relu");
    return NULL;
  }
  if (!act_type(L, TTPU_EW_NUM, "clamp_min_scalar_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md);
  ttpu_l_set_out(L, 0, ttpu_ew_max(b, x, ttpu_ew_k(b, x, 0)));
  return NULL;
}

/* threshold(self, threshold, value): x <= threshold ? value : x, the
 * scalars converted to self's type as CPU does (1.5 is 1 for integers). */
static ttpu_status* lower_threshold(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_NUM, "threshold_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md);
  ttpu_val th = ttpu_ew_in(L, 1, md), v = ttpu_ew_in(L, 2, md);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_LE, x, th), v, x));
  return NULL;
}

/* threshold_backward(grad_output, self, threshold) */
static ttpu_status* lower_threshold_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_NUM, "threshold_cpu", &md)) return NULL;
  ttpu_dtype cd = ttpu_ew_opmath(ttpu_ew_common(L));
  ttpu_val g = ttpu_ew_in(L, 0, md);
  ttpu_val x = ttpu_ew_in(L, 1, cd), th = ttpu_ew_in(L, 2, cd);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_LE, x, th),
                                       ttpu_ew_k(b, g, 0), g));
  return NULL;
}

/* ------------------------------------------------------------ gelu */

static int gelu_tanh(ttpu_lower* L, int arg) {
  const char* a = ttpu_l_str(L, arg, "none");
  return a[0] == 't';
}

/* gelu(self, *, approximate): x/2 (1 + erf(x/sqrt2)), or the tanh form
 * x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
ttpu_val ttpu_ew_gelu(ttpu_hlo* b, ttpu_val x, int tanh_form) {
  if (tanh_form) {
    const double beta = kSqrt2 * k2_SqrtPi * 0.5, kappa = 0.044715;
    ttpu_val cube = ttpu_ew_mul(b, ttpu_ew_mul(b, x, x), x);
    ttpu_val inner = ttpu_ew_mulk(b, ttpu_ew_add(b, x, ttpu_ew_mulk(b, cube, kappa)), beta);
    return ttpu_ew_mul(b, ttpu_ew_mulk(b, x, 0.5),
                       ttpu_ew_addk(b, ttpu_hlo_unary(b, TTPU_TANH, inner), 1));
  }
  ttpu_val e = ttpu_ew_erf(b, ttpu_ew_mulk(b, x, kSqrt1_2));
  return ttpu_ew_mul(b, ttpu_ew_mulk(b, x, 0.5), ttpu_ew_addk(b, e, 1));
}

static ttpu_status* lower_gelu(ttpu_lower* L) {
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "GeluKernelImpl", &md)) return NULL;
  ttpu_l_set_out(L, 0, ttpu_ew_gelu(ttpu_l_hlo(L), ttpu_ew_in(L, 0, md), gelu_tanh(L, 1)));
  return NULL;
}

/* gelu_backward(grad_output, self, *, approximate) */
static ttpu_status* lower_gelu_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "GeluBackwardKernelImpl", &md)) return NULL;
  ttpu_val dy = ttpu_ew_in(L, 0, md), x = ttpu_ew_in(L, 1, md), d;
  if (gelu_tanh(L, 2)) {
    const double beta = kSqrt2 * k2_SqrtPi * 0.5, kappa = 0.044715;
    ttpu_val sq = ttpu_ew_mul(b, x, x);
    ttpu_val cube = ttpu_ew_mul(b, sq, x);
    ttpu_val inner = ttpu_ew_mulk(b, ttpu_ew_add(b, x, ttpu_ew_mulk(b, cube, kappa)), beta);
    ttpu_val t = ttpu_hlo_unary(b, TTPU_TANH, inner);
    ttpu_val left = ttpu_ew_mulk(b, x, 0.5);
    ttpu_val right = ttpu_ew_addk(b, t, 1);
    ttpu_val dleft = ttpu_ew_mulk(b, right, 0.5);
    ttpu_val sech2 = ttpu_ew_ksub(b, 1, ttpu_ew_mul(b, t, t));
    ttpu_val dinner = ttpu_ew_mulk(b, ttpu_ew_addk(b, ttpu_ew_mulk(b, sq, 3 * kappa), 1), beta);
    ttpu_val dright = ttpu_ew_mul(b, ttpu_ew_mul(b, left, sech2), dinner);
    d = ttpu_ew_add(b, dleft, dright);
  } else {
    ttpu_val cdf = ttpu_ew_mulk(
        b, ttpu_ew_addk(b, ttpu_ew_erf(b, ttpu_ew_mulk(b, x, kSqrt1_2)), 1), 0.5);
    ttpu_val pdf = ttpu_ew_mulk(
        b, ttpu_hlo_unary(b, TTPU_EXP, ttpu_ew_mulk(b, ttpu_ew_mul(b, x, x), -0.5)),
        k2_SqrtPi * kSqrt1_2 * 0.5);
    d = ttpu_ew_add(b, cdf, ttpu_ew_mul(b, x, pdf));
  }
  ttpu_l_set_out(L, 0, ttpu_ew_mul(b, dy, d));
  return NULL;
}

/* ------------------------------------------------------------ sigmoid-like */

/* silu: x / (1 + exp(-x)) */
static ttpu_status* lower_silu(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "silu_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md);
  ttpu_val e = ttpu_hlo_unary(b, TTPU_EXP, ttpu_hlo_unary(b, TTPU_NEG, x));
  ttpu_l_set_out(L, 0, ttpu_ew_div(b, x, ttpu_ew_addk(b, e, 1)));
  return NULL;
}

/* silu_backward(grad_output, self): CPU's formula, s = 1 / (1 + exp(-x)),
 * g s (1 + x (1 - s)). PyTorch's composite for other devices builds a
 * tensor of ones the size of the input and runs six ops over it. */
static ttpu_status* lower_silu_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "silu_backward_cpu", &md)) return NULL;
  ttpu_val g = ttpu_ew_in(L, 0, md), x = ttpu_ew_in(L, 1, md);
  ttpu_val e = ttpu_hlo_unary(b, TTPU_EXP, ttpu_hlo_unary(b, TTPU_NEG, x));
  ttpu_val s = ttpu_ew_kdiv(b, 1, ttpu_ew_addk(b, e, 1));
  ttpu_val r = ttpu_ew_addk(b, ttpu_ew_mul(b, x, ttpu_ew_ksub(b, 1, s)), 1);
  ttpu_l_set_out(L, 0, ttpu_ew_mul(b, ttpu_ew_mul(b, g, s), r));
  return NULL;
}

/* mish: x tanh(log1p(exp(x))) */
static ttpu_status* lower_mish(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "mish_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md);
  ttpu_val sp = ttpu_hlo_unary(b, TTPU_LOG1P, ttpu_hlo_unary(b, TTPU_EXP, x));
  ttpu_l_set_out(L, 0, ttpu_ew_mul(b, x, ttpu_hlo_unary(b, TTPU_TANH, sp)));
  return NULL;
}

/* sigmoid_backward(grad_output, output): g (1 - y) y */
static ttpu_status* lower_sigmoid_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "sigmoid_backward_cpu", &md)) return NULL;
  ttpu_val g = ttpu_ew_in(L, 0, md), y = ttpu_ew_in(L, 1, md);
  ttpu_l_set_out(L, 0, ttpu_ew_mul(b, ttpu_ew_mul(b, g, ttpu_ew_ksub(b, 1, y)), y));
  return NULL;
}

/* tanh_backward(grad_output, output): g (1 - y^2) */
static ttpu_status* lower_tanh_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "tanh_backward_cpu", &md)) return NULL;
  ttpu_val g = ttpu_ew_in(L, 0, md), y = ttpu_ew_in(L, 1, md);
  ttpu_l_set_out(L, 0, ttpu_ew_mul(b, g, ttpu_ew_ksub(b, 1, ttpu_ew_mul(b, y, y))));
  return NULL;
}

/* log_sigmoid_forward(self) -> (output, buffer): CPU's buffer holds
 * z = exp(-|x|); output = min(x, 0) - log1p(z). */
static ttpu_status* lower_log_sigmoid_forward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  /* The CPU kernel checks its input's kind, then that both outputs have
   * its dtype; the meta kernel checks neither. */
  const ttpu_tensor* in = ttpu_l_tensor_desc(L, 0, -1);
  if (in && !ttpu_ew_accepts(L, in->dtype, TTPU_EW_FLOAT, "log_sigmoid_cpu")) return NULL;
  for (int k = 0; in && k < 2; ++k)
    if (ttpu_l_out_type(L, k).dtype != in->dtype)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT, "expected scalar type %s but found %s",
                              ttpu_dtype_torch_title(in->dtype),
                              ttpu_dtype_torch_title(ttpu_l_out_type(L, k).dtype));
  if (!act_type(L, TTPU_EW_FLOAT, "log_sigmoid_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md);
  ttpu_val z = ttpu_hlo_unary(b, TTPU_EXP, ttpu_hlo_unary(
      b, TTPU_NEG, ttpu_hlo_unary(b, TTPU_ABS, x)));
  ttpu_val m = ttpu_hlo_binary(b, TTPU_MIN, x, ttpu_ew_k(b, x, 0));
  ttpu_l_set_out(L, 0, ttpu_ew_sub(b, m, ttpu_hlo_unary(b, TTPU_LOG1P, z)));
  ttpu_type bt = ttpu_l_out_type(L, 1);
  ttpu_l_set_out(L, 1, ttpu_type_numel(&bt) == 0
                           ? ttpu_hlo_const(b, bt, 0, 0)
                           : ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, z, bt.dtype),
                                                   bt.ndim, bt.dims));
  return NULL;
}

/* log_sigmoid_backward(grad_output, self, buffer): z is recomputed from
 * self (the values CPU's buffer holds), so a buffer of any shape works. */
static ttpu_status* lower_log_sigmoid_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "log_sigmoid_backward_cpu", &md)) return NULL;
  ttpu_val g = ttpu_ew_in(L, 0, md), x = ttpu_ew_in(L, 1, md);
  ttpu_val z = ttpu_hlo_unary(b, TTPU_EXP, ttpu_hlo_unary(
      b, TTPU_NEG, ttpu_hlo_unary(b, TTPU_ABS, x)));
  ttpu_val neg = ttpu_ew_cmpk(b, TTPU_LT, x, 0);
  ttpu_val max_deriv = ttpu_hlo_select(b, neg, ttpu_ew_k(b, x, 1), ttpu_ew_k(b, x, 0));
  ttpu_val sign = ttpu_hlo_select(b, neg, ttpu_ew_k(b, x, 1), ttpu_ew_k(b, x, -1));
  ttpu_val q = ttpu_ew_div(b, z, ttpu_ew_addk(b, z, 1));
  ttpu_l_set_out(L, 0, ttpu_ew_mul(b, ttpu_ew_sub(b, max_deriv, ttpu_ew_mul(b, sign, q)), g));
  return NULL;
}

/* ------------------------------------------------------------ piecewise */

/* Fails the call (a data-dependent check) when scalar arg `arg` < 0. */
static void check_not_negative(ttpu_lower* L, int arg, const char* msg) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_ew_check(L, ttpu_ew_cmpk(b, TTPU_LT, ttpu_l_scalar(L, arg, TTPU_F32), 0), msg);
}

/* leaky_relu(self, negative_slope): x > 0 ? x : x * slope */
static ttpu_status* lower_leaky_relu(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "leaky_relu_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md), s = ttpu_ew_in(L, 1, md);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_GT, x, 0), x,
                                       ttpu_ew_mul(b, x, s)));
  return NULL;
}

/* leaky_relu_backward(grad_output, self, negative_slope, self_is_result) */
static ttpu_status* lower_leaky_relu_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "leaky_relu_backward_cpu", &md)) return NULL;
  if (ttpu_l_bool(L, 3, 0))
    check_not_negative(
        L, 2,
        "In-place leakyReLu backward calculation is triggered with a negative "
        "slope which is not supported. This is caused by calling in-place "
        "forward function with a negative slope, please call out-of-place "
        "version instead.");
  ttpu_val g = ttpu_ew_in(L, 0, md), x = ttpu_ew_in(L, 1, md);
  ttpu_val s = ttpu_ew_in(L, 2, md);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_GT, x, 0), g,
                                       ttpu_ew_mul(b, g, s)));
  return NULL;
}

/* hardtanh(self, min_val, max_val): clamp (the meta kernel refuses
 * negative limits for unsigned types). */
static ttpu_status* lower_hardtanh(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_NUM, "hardtanh_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md);
  x = ttpu_ew_max(b, x, ttpu_ew_in(L, 1, md));
  ttpu_l_set_out(L, 0, ttpu_ew_min(b, x, ttpu_ew_in(L, 2, md)));
  return NULL;
}

/* hardtanh_backward(grad_output, self, min_val, max_val) */
static ttpu_status* lower_hardtanh_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "hardshrink_backward_cpu", &md)) return NULL;
  ttpu_val g = ttpu_ew_in(L, 0, md), x = ttpu_ew_in(L, 1, md);
  ttpu_val lo = ttpu_ew_in(L, 2, md), hi = ttpu_ew_in(L, 3, md);
  ttpu_val out = ttpu_ew_or(b, ttpu_hlo_compare(b, TTPU_LE, x, lo),
                            ttpu_hlo_compare(b, TTPU_GE, x, hi));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, out, ttpu_ew_k(b, g, 0), g));
  return NULL;
}

/* elu with coefficients: x <= 0 ? expm1(x * in_scale) * alpha * scale
 * : x * scale. */
static ttpu_val elu_values(ttpu_hlo* b, ttpu_val x, ttpu_val alpha,
                           ttpu_val scale, ttpu_val in_scale) {
  ttpu_val neg = ttpu_ew_mul(b, ttpu_hlo_unary(b, TTPU_EXPM1, ttpu_ew_mul(b, x, in_scale)),
                             ttpu_ew_mul(b, alpha, scale));
  return ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LE, x, 0), neg,
                         ttpu_ew_mul(b, x, scale));
}

/* elu(self, alpha, scale, input_scale) */
static ttpu_status* lower_elu(ttpu_lower* L) {
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "elu_cpu", &md)) return NULL;
  ttpu_l_set_out(L, 0, elu_values(ttpu_l_hlo(L), ttpu_ew_in(L, 0, md),
                                   ttpu_ew_in(L, 1, md), ttpu_ew_in(L, 2, md),
                                   ttpu_ew_in(L, 3, md)));
  return NULL;
}

/* celu(self, alpha): elu(self, alpha, 1, 1 / alpha) (CPU refuses alpha 0
 * before it gets here). */
static ttpu_status* lower_celu(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "elu_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md), a = ttpu_ew_in(L, 1, md);
  ttpu_l_set_out(L, 0, elu_values(b, x, a, ttpu_ew_k(b, x, 1), ttpu_ew_kdiv(b, 1, a)));
  return NULL;
}

/* elu_backward(grad_output, alpha, scale, input_scale, is_result,
 * self_or_result) */
static ttpu_status* lower_elu_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "elu_backward_cpu", &md)) return NULL;
  int is_result = ttpu_l_bool(L, 4, 0);
  if (is_result)
    check_not_negative(
        L, 1,
        "In-place elu backward calculation is triggered with a negative slope "
        "which is not supported. This is caused by calling in-place forward "
        "function with a negative slope, please call out-of-place version "
        "instead.");
  ttpu_val g = ttpu_ew_in(L, 0, md), y = ttpu_ew_in(L, 5, md);
  ttpu_val scale = ttpu_ew_in(L, 2, md), in_scale = ttpu_ew_in(L, 3, md);
  ttpu_val negcoef = ttpu_ew_mul(b, ttpu_ew_in(L, 1, md), scale);
  ttpu_val neg;
  if (is_result) {
    neg = ttpu_ew_mul(b, ttpu_ew_mul(b, g, in_scale), ttpu_ew_add(b, y, negcoef));
  } else {
    neg = ttpu_ew_mul(b, ttpu_ew_mul(b, ttpu_ew_mul(b, g, in_scale), negcoef),
                      ttpu_hlo_unary(b, TTPU_EXP, ttpu_ew_mul(b, y, in_scale)));
  }
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LE, y, 0), neg,
                                       ttpu_ew_mul(b, g, scale)));
  return NULL;
}

/* softplus(self, beta, threshold): linear past threshold. */
static ttpu_status* lower_softplus(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "softplus_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md), beta = ttpu_ew_in(L, 1, md);
  ttpu_val th = ttpu_ew_in(L, 2, md);
  ttpu_val xb = ttpu_ew_mul(b, x, beta);
  ttpu_val soft = ttpu_ew_div(
      b, ttpu_hlo_unary(b, TTPU_LOG1P, ttpu_hlo_unary(b, TTPU_EXP, xb)), beta);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, xb, th), x, soft));
  return NULL;
}

/* softplus_backward(grad_output, self, beta, threshold) */
static ttpu_status* lower_softplus_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "softplus_backward_cpu", &md)) return NULL;
  ttpu_val g = ttpu_ew_in(L, 0, md), x = ttpu_ew_in(L, 1, md);
  ttpu_val beta = ttpu_ew_in(L, 2, md), th = ttpu_ew_in(L, 3, md);
  ttpu_val xb = ttpu_ew_mul(b, x, beta);
  ttpu_val z = ttpu_hlo_unary(b, TTPU_EXP, xb);
  ttpu_val soft = ttpu_ew_div(b, ttpu_ew_mul(b, g, z), ttpu_ew_addk(b, z, 1));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, xb, th), g, soft));
  return NULL;
}

/* min(max(x + 3, 0), 6) / 6, NaN propagating */
static ttpu_val relu6_of_x3(ttpu_hlo* b, ttpu_val x) {
  ttpu_val r = ttpu_ew_max(b, ttpu_ew_addk(b, x, 3), ttpu_ew_k(b, x, 0));
  return ttpu_ew_min(b, r, ttpu_ew_k(b, x, 6));
}

static ttpu_status* lower_hardsigmoid(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "hardsigmoid_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md);
  ttpu_l_set_out(L, 0, ttpu_ew_div(b, relu6_of_x3(b, x), ttpu_ew_k(b, x, 6)));
  return NULL;
}

/* hardsigmoid_backward(grad_output, self): g / 6 inside (-3, 3). */
static ttpu_status* lower_hardsigmoid_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "hardsigmoid_backward", &md)) return NULL;
  ttpu_val g = ttpu_ew_in(L, 0, md), x = ttpu_ew_in(L, 1, md);
  ttpu_val in = ttpu_ew_and(b, ttpu_ew_cmpk(b, TTPU_GT, x, -3), ttpu_ew_cmpk(b, TTPU_LT, x, 3));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, in, ttpu_ew_mulk(b, g, 1.0 / 6), ttpu_ew_k(b, g, 0)));
  return NULL;
}

static ttpu_status* lower_hardswish(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "hardswish_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md);
  ttpu_l_set_out(L, 0, ttpu_ew_div(b, ttpu_ew_mul(b, x, relu6_of_x3(b, x)),
                                   ttpu_ew_k(b, x, 6)));
  return NULL;
}

/* hardswish_backward(grad_output, self) */
static ttpu_status* lower_hardswish_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "hardswish_backward_cpu", &md)) return NULL;
  ttpu_val g = ttpu_ew_in(L, 0, md), x = ttpu_ew_in(L, 1, md);
  ttpu_val mid = ttpu_ew_mul(b, g, ttpu_ew_addk(b, ttpu_ew_div(b, x, ttpu_ew_k(b, x, 3)), 0.5));
  ttpu_val r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LE, x, 3), mid, g);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, x, -3),
                                       ttpu_ew_k(b, g, 0), r));
  return NULL;
}

/* softshrink(self, lambd): shrink toward 0 by lambd (x * 0 keeps NaN). */
static ttpu_status* lower_softshrink(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "softshrink_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md), l = ttpu_ew_in(L, 1, md);
  ttpu_val nl = ttpu_hlo_unary(b, TTPU_NEG, l);
  ttpu_val r = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_LT, x, nl), ttpu_ew_add(b, x, l),
                               ttpu_ew_mulk(b, x, 0));
  r = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, x, l), ttpu_ew_sub(b, x, l), r);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* |x| <= lambd, as CPU tests it: x >= -lambd && x <= lambd */
static ttpu_val in_band(ttpu_hlo* b, ttpu_val x, ttpu_val l) {
  return ttpu_ew_and(b, ttpu_hlo_compare(b, TTPU_GE, x, ttpu_hlo_unary(b, TTPU_NEG, l)),
                     ttpu_hlo_compare(b, TTPU_LE, x, l));
}

static ttpu_status* lower_hardshrink(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "hardshrink_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md), l = ttpu_ew_in(L, 1, md);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, in_band(b, x, l), ttpu_ew_k(b, x, 0), x));
  return NULL;
}

/* softshrink_backward / hardshrink_backward(grad_output, self, lambd) */
static ttpu_status* lower_shrink_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "shrink_backward_cpu", &md)) return NULL;
  ttpu_val g = ttpu_ew_in(L, 0, md), x = ttpu_ew_in(L, 1, md);
  ttpu_val l = ttpu_ew_in(L, 2, md);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, in_band(b, x, l), ttpu_ew_k(b, g, 0), g));
  return NULL;
}

/* _prelu_kernel(self, weight): x > 0 ? x : w x (weight already shaped to
 * broadcast by prelu's decomposition). */
static ttpu_status* lower_prelu_kernel(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "prelu_cpu", &md)) return NULL;
  ttpu_val x = ttpu_ew_in(L, 0, md), w = ttpu_ew_in(L, 1, md);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_GT, x, 0), x,
                                       ttpu_ew_mul(b, w, x)));
  return NULL;
}

/* _prelu_kernel_backward(grad_output, self, weight) -> (grad_self,
 * grad_weight), both of the broadcast shape (autograd sums the weight's). */
static ttpu_status* lower_prelu_kernel_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md;
  if (!act_type(L, TTPU_EW_FLOAT, "prelu_backward_cpu", &md)) return NULL;
  ttpu_val g = ttpu_ew_in(L, 0, md), x = ttpu_ew_in(L, 1, md);
  ttpu_val w = ttpu_ew_in(L, 2, md);
  ttpu_val pos = ttpu_ew_cmpk(b, TTPU_GT, x, 0);
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, pos, g, ttpu_ew_mul(b, w, g)));
  ttpu_l_set_out(L, 1, ttpu_hlo_select(b, pos, ttpu_ew_k(b, g, 0), ttpu_ew_mul(b, x, g)));
  return NULL;
}

/* ------------------------------------------------------------ glu */

/* The halves of v along dim (the meta kernel checked it is even). */
static void halves(ttpu_hlo* b, ttpu_val v, int dim, ttpu_val* a, ttpu_val* c) {
  ttpu_type t = *ttpu_hlo_type(b, v);
  int64_t start[TTPU_MAX_DIMS], limit[TTPU_MAX_DIMS], step[TTPU_MAX_DIMS];
  for (int d = 0; d < t.ndim; ++d) {
    start[d] = 0;
    limit[d] = t.dims[d];
    step[d] = 1;
  }
  int64_t h = t.dims[dim] / 2;
  limit[dim] = h;
  *a = ttpu_hlo_slice(b, v, start, limit, step);
  start[dim] = h;
  limit[dim] = 2 * h;
  *c = ttpu_hlo_slice(b, v, start, limit, step);
}

/* glu(self, dim): a * sigmoid(b) for the halves a, b along dim. */
static ttpu_status* lower_glu(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_l_out_type(L, 0).dtype;
  if (!ttpu_ew_accepts(L, dt, TTPU_EW_FLOAT, "glu_cpu")) return NULL;
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), ttpu_ew_opmath(dt));
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t) return NULL;
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 1, -1), t->ndim);
  ttpu_val a, c;
  halves(b, x, dim, &a, &c);
  ttpu_l_set_out(L, 0, ttpu_ew_mul(b, a, ttpu_hlo_unary(b, TTPU_LOGISTIC, c)));
  return NULL;
}

/* glu_backward(grad_output, self, dim): the halves' gradients, joined. */
static ttpu_status* lower_glu_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_l_out_type(L, 0).dtype;
  if (!ttpu_ew_accepts(L, dt, TTPU_EW_FLOAT, "glu_backward_cpu")) return NULL;
  ttpu_dtype md = ttpu_ew_opmath(dt);
  ttpu_val g = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), md);
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 1), md);
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t) return NULL;
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 2, -1), t->ndim);
  ttpu_val a, c;
  halves(b, x, dim, &a, &c);
  ttpu_val s = ttpu_hlo_unary(b, TTPU_LOGISTIC, c);
  ttpu_val ga = ttpu_ew_mul(b, g, s);
  ttpu_val gc = ttpu_ew_mul(b, ttpu_ew_mul(b, ttpu_ew_mul(b, g, a), s), ttpu_ew_ksub(b, 1, s));
  ttpu_val parts[2] = {ga, gc};
  ttpu_l_set_out(L, 0, ttpu_hlo_concat(b, parts, 2, dim));
  return NULL;
}

const ttpu_op_def ttpu_ops_activation[] = {
    {"relu", lower_relu, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"threshold", lower_threshold, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"threshold_backward", lower_threshold_backward, .flags = 0},
    {"threshold_backward.grad_input", lower_threshold_backward, .flags = 0},
    {"gelu", lower_gelu, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .kinds = TTPU_K_FLOAT, .kernel = "GeluKernelImpl"},
    {"gelu_backward", lower_gelu_backward, .flags = 0},
    {"gelu_backward.grad_input", lower_gelu_backward, .flags = 0},
    {"silu", lower_silu, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .kinds = TTPU_K_FLOAT, .kernel = "silu_cpu"},
    {"silu_backward", lower_silu_backward, .flags = 0},
    {"silu_backward.grad_input", lower_silu_backward, .flags = 0},
    {"mish", lower_mish, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .kinds = TTPU_K_FLOAT, .kernel = "mish_cpu"},
    {"sigmoid_backward", lower_sigmoid_backward, .complex_fn = ttpu_complex_sigmoid_backward},
    {"sigmoid_backward.grad_input", lower_sigmoid_backward,
     .complex_fn = ttpu_complex_sigmoid_backward},
    {"tanh_backward", lower_tanh_backward, .flags = 0},
    {"tanh_backward.grad_input", lower_tanh_backward, .flags = 0},
    {"log_sigmoid_forward", lower_log_sigmoid_forward, .flags = TTPU_OP_REAL_INTO_COMPLEX},
    {"log_sigmoid_forward.output", lower_log_sigmoid_forward, .flags = TTPU_OP_REAL_INTO_COMPLEX},
    {"log_sigmoid_backward", lower_log_sigmoid_backward, .flags = 0},
    {"log_sigmoid_backward.grad_input", lower_log_sigmoid_backward, .flags = 0},
    {"leaky_relu", lower_leaky_relu, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .kinds = TTPU_K_FLOAT, .kernel = "leaky_relu_cpu"},
    {"leaky_relu_backward", lower_leaky_relu_backward, .flags = 0},
    {"leaky_relu_backward.grad_input", lower_leaky_relu_backward, .flags = 0},
    {"hardtanh", lower_hardtanh, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"hardtanh_backward", lower_hardtanh_backward, .flags = 0},
    {"hardtanh_backward.grad_input", lower_hardtanh_backward, .flags = 0},
    {"elu", lower_elu, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .kinds = TTPU_K_FLOAT, .kernel = "elu_cpu"},
    {"elu_backward", lower_elu_backward, .flags = 0},
    {"elu_backward.grad_input", lower_elu_backward, .flags = 0},
    {"celu", lower_celu, .variants = TTPU_V_INPLACE, .kinds = TTPU_K_FLOAT, .kernel = "elu_cpu"},
    {"softplus", lower_softplus, .flags = TTPU_OP_SAME_DTYPE_OUT, .variants = TTPU_V_OUT},
    {"softplus_backward", lower_softplus_backward, .flags = 0},
    {"softplus_backward.grad_input", lower_softplus_backward, .flags = 0},
    {"hardsigmoid", lower_hardsigmoid, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .kinds = TTPU_K_FLOAT, .kernel = "hardsigmoid_cpu"},
    {"hardsigmoid_backward", lower_hardsigmoid_backward, .flags = 0},
    {"hardsigmoid_backward.grad_input", lower_hardsigmoid_backward, .flags = 0},
    {"hardswish", lower_hardswish, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .kinds = TTPU_K_FLOAT, .kernel = "hardswish_cpu"},
    {"hardswish_backward", lower_hardswish_backward, .variants = TTPU_V_OUT},
    {"softshrink", lower_softshrink, .flags = TTPU_OP_SAME_DTYPE_OUT, .variants = TTPU_V_OUT},
    {"softshrink_backward", lower_shrink_backward, .flags = 0},
    {"softshrink_backward.grad_input", lower_shrink_backward, .flags = 0},
    {"hardshrink", lower_hardshrink, .flags = TTPU_OP_SAME_DTYPE_OUT, .variants = TTPU_V_OUT},
    {"hardshrink_backward", lower_shrink_backward, .flags = 0},
    {"hardshrink_backward.grad_input", lower_shrink_backward, .flags = 0},
    {"_prelu_kernel", lower_prelu_kernel, .flags = 0},
    {"_prelu_kernel_backward", lower_prelu_kernel_backward, .flags = 0},
    {"glu", lower_glu, .variants = TTPU_V_OUT},
    {"glu_backward", lower_glu_backward, .flags = 0},
    {"glu_backward.grad_input", lower_glu_backward, .flags = 0},
    {0},
};
