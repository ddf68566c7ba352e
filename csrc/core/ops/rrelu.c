/* rrelu.c - randomized leaky ReLU (rrelu_with_noise) and its backward.
 * Training draws each non-positive element's slope uniformly from [lower,
 * upper) on the device's generator and records it in `noise` (1 for the
 * positive ones); evaluation uses the mean slope and leaves noise alone. */
#include "ttpu_lower.h"

/* rrelu_with_noise(self, Tensor(b!) noise, lower, upper, training,
 * generator): outputs are the result, then noise. */
static ttpu_status* lower_rrelu(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0), on = ttpu_l_out_type(L, 1);
  ttpu_dtype md = ot.dtype == TTPU_BF16 || ot.dtype == TTPU_F16 ? TTPU_F32 : ot.dtype;
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), md);
  ttpu_type t = ttpu_l_type(L, x);
  ttpu_val lo = ttpu_hlo_broadcast_to(b, ttpu_l_scalar(L, 2, md), t.ndim, t.dims);
  ttpu_val hi = ttpu_hlo_broadcast_to(b, ttpu_l_scalar(L, 3, md), t.ndim, t.dims);
  ttpu_val neg = ttpu_hlo_compare(b, TTPU_LE, x, ttpu_hlo_const(b, t, 0, 0));
  ttpu_val slope, noise;
  if (ttpu_l_bool(L, 4, 0)) {
    ttpu_val u = ttpu_l_random_uniform(L, t);
    slope = ttpu_hlo_binary(b, TTPU_ADD, lo, ttpu_hlo_binary(b, TTPU_MUL, u, ttpu_hlo_binary(b, TTPU_SUB, hi, lo)));
    noise = ttpu_hlo_select(b, neg, slope, ttpu_hlo_const(b, t, 1, 1));
  } else {
    slope = ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_binary(b, TTPU_ADD, lo, hi), ttpu_hlo_const(b, t, 0.5, 0));
    noise = ttpu_l_tensor(L, 1);
  }
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, neg, ttpu_hlo_binary(b, TTPU_MUL, x, slope), x));
  ttpu_l_set_out(L, 1, ttpu_hlo_convert(b, noise, on.dtype));
  return NULL;
}

/* rrelu_with_noise_backward(grad, self, noise, lower, upper, training,
 * self_is_result): grad * noise when training with a real range, else
 * the leaky-ReLU gradient of the mean slope. */
static ttpu_status* lower_rrelu_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype md = ot.dtype == TTPU_BF16 || ot.dtype == TTPU_F16 ? TTPU_F32 : ot.dtype;
  ttpu_val g = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), md);
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 1), md);
  ttpu_type t = ttpu_l_type(L, g);
  x = ttpu_hlo_broadcast_to(b, x, t.ndim, t.dims);
  ttpu_val lo = ttpu_hlo_broadcast_to(b, ttpu_l_scalar(L, 3, md), t.ndim, t.dims);
  ttpu_val hi = ttpu_hlo_broadcast_to(b, ttpu_l_scalar(L, 4, md), t.ndim, t.dims);
  ttpu_val noise = ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 2), md), t.ndim, t.dims);
  ttpu_val mean = ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_binary(b, TTPU_ADD, lo, hi), ttpu_hlo_const(b, t, 0.5, 0));
  ttpu_val leaky = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, x, ttpu_hlo_const(b, t, 0, 0)), g,
                                   ttpu_hlo_binary(b, TTPU_MUL, g, mean));
  ttpu_val r = leaky;
  if (ttpu_l_bool(L, 5, 0)) {
    ttpu_val ranged = ttpu_hlo_compare(b, TTPU_GT, ttpu_hlo_binary(b, TTPU_SUB, hi, lo),
                                       ttpu_hlo_const(b, t, 1e-6, 0));
    r = ttpu_hlo_select(b, ranged, ttpu_hlo_binary(b, TTPU_MUL, g, noise), leaky);
  }
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

const ttpu_op_def ttpu_ops_rrelu[] = {
    {"rrelu_with_noise", lower_rrelu, .flags = TTPU_OP_RANDOM | TTPU_OP_KINDS_OF_OUT, .variants = TTPU_V_INPLACE | TTPU_V_OUT,
     .kinds = TTPU_K_FLOAT, .kernel = "rrelu_with_noise_out_cpu"},
    {"rrelu_with_noise_backward", lower_rrelu_backward, .variants = TTPU_V_OUT},
    {0},
};
