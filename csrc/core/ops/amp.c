/* amp.c - the two ops of torch.amp.GradScaler: unscale gradients while
 * looking for inf/NaN, and update the loss scale. Both keep their state in
 * 1-element device tensors, so a training step never reads the host to
 * decide whether the scale grows. */
#include "ttpu_lower.h"

/* The 1-element tensor arg `arg` (of dtype `want`) as a 0-d value; fails
 * with PyTorch's message (`what` names it) otherwise. */
static ttpu_val one_element(ttpu_lower* L, int arg, ttpu_dtype want,
                            const char* what, const char* kind) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  const ttpu_tensor* t = ttpu_l_tensor_desc(L, arg, -1);
  if (!t) return ttpu_hlo_fail(h, TTPU_INVALID_ARGUMENT, "%s must be a tensor", what);
  int64_t n = 1;
  for (int d = 0; d < t->ndim; ++d) n *= t->sizes[d];
  if (n != 1)
    return ttpu_hlo_fail(h, TTPU_INVALID_ARGUMENT,
                         "%s must be a 1-element tensor.", what);
  if (t->dtype != want)
    return ttpu_hlo_fail(h, TTPU_INVALID_ARGUMENT, "%s must be a %s tensor.",
                         what, kind);
  return ttpu_hlo_reshape(h, ttpu_l_tensor(L, arg), 0, NULL);
}

/* v (0-d) shaped as output k (a 1-element tensor of any rank). */
static void set_one_element(ttpu_lower* L, int k, ttpu_val v) {
  ttpu_type t = ttpu_l_out_type(L, k);
  ttpu_l_set_out(L, k, ttpu_l_reshape_to(ttpu_l_hlo(L), v, t));
}

/* _amp_foreach_non_finite_check_and_unscale_(Tensor(a!)[] self,
 * Tensor(b!) found_inf, Tensor inv_scale): every element of every tensor
 * is multiplied by inv_scale (in float32 for 16-bit tensors); found_inf
 * becomes 1 if any element was inf or NaN before, and is left as it was
 * otherwise. Outputs: the list's tensors, then found_inf. */
static ttpu_status* lower_unscale(ttpu_lower* L) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_val inv = one_element(L, 2, TTPU_F32, "inv_scale", "float");
  ttpu_val found = one_element(L, 1, TTPU_F32, "found_inf", "float");
  ttpu_val zero = ttpu_hlo_const_f(h, TTPU_F32, 0);
  ttpu_val any = ttpu_hlo_compare(h, TTPU_NE, found, zero);
  int n = ttpu_l_count(L, 0);
  for (int k = 0; k < n; ++k) {
    const ttpu_tensor* d = ttpu_l_tensor_desc(L, 0, k);
    if (!ttpu_dtype_is_float(d->dtype)) {
      ttpu_hlo_fail(h, TTPU_UNIMPLEMENTED,
                    "_amp_foreach_non_finite_check_and_unscale_ needs "
                    "floating-point tensors");
      break;
    }
    ttpu_val g = ttpu_l_tensor_at(L, 0, k);
    ttpu_type t = ttpu_l_type(L, g);
    ttpu_dtype math = t.dtype == TTPU_F64 ? TTPU_F64 : TTPU_F32;
    ttpu_val gm = ttpu_hlo_convert(h, g, math);
    ttpu_val finite = ttpu_hlo_unary(h, TTPU_IS_FINITE, gm);
    int64_t all_dims[TTPU_MAX_DIMS];
    for (int i = 0; i < t.ndim; ++i) all_dims[i] = i;
    ttpu_val all_finite =
        ttpu_hlo_reduce(h, finite, TTPU_RED_AND, all_dims, t.ndim);
    any = ttpu_hlo_binary(h, TTPU_OR, any, ttpu_hlo_unary(h, TTPU_NOT, all_finite));
    ttpu_val s = ttpu_hlo_broadcast_to(h, ttpu_hlo_convert(h, inv, math),
                                       t.ndim, t.dims);
    ttpu_l_set_out(L, k, ttpu_hlo_convert(h, ttpu_hlo_binary(h, TTPU_MUL, gm, s),
                                          t.dtype));
  }
  ttpu_val one = ttpu_hlo_const_f(h, TTPU_F32, 1);
  set_one_element(L, n, ttpu_hlo_select(h, any, one, found));
  return NULL;
}

/* _amp_update_scale_(Tensor(a!) self, Tensor(b!) growth_tracker,
 * Tensor found_inf, float scale_growth_factor, float scale_backoff_factor,
 * int growth_interval) -> Tensor(a!): after an overflow the scale backs
 * off and the count of clean steps restarts; after growth_interval clean
 * steps the scale grows (unless that overflows float32) and the count
 * restarts. Outputs: self, growth_tracker. */
static ttpu_status* lower_update_scale(ttpu_lower* L) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_val tracker = one_element(L, 1, TTPU_I32, "growth_tracker", "int");
  ttpu_val scale = one_element(L, 0, TTPU_F32, "current_scale", "float");
  ttpu_val found = one_element(L, 2, TTPU_F32, "found_inf", "float");
  double growth = ttpu_l_float(L, 3, 2.0), backoff = ttpu_l_float(L, 4, 0.5);
  int64_t interval = ttpu_l_int(L, 5, 2000);

  ttpu_val inf = ttpu_hlo_compare(h, TTPU_NE, found,
                                  ttpu_hlo_const_f(h, TTPU_F32, 0));
  ttpu_val zero_i = ttpu_hlo_const_i(h, TTPU_I32, 0);
  ttpu_val clean = ttpu_hlo_binary(h, TTPU_ADD, tracker,
                                   ttpu_hlo_const_i(h, TTPU_I32, 1));
  ttpu_val grow = ttpu_hlo_compare(h, TTPU_EQ, clean,
                                   ttpu_hlo_const_i(h, TTPU_I32, interval));
  ttpu_val grown = ttpu_hlo_binary(h, TTPU_MUL, scale,
                                   ttpu_hlo_const_f(h, TTPU_F32, growth));
  ttpu_val grown_ok = ttpu_hlo_unary(h, TTPU_IS_FINITE, grown);
  ttpu_val kept = ttpu_hlo_select(
      h, grow, ttpu_hlo_select(h, grown_ok, grown, scale), scale);
  ttpu_val backed = ttpu_hlo_binary(h, TTPU_MUL, scale,
                                    ttpu_hlo_const_f(h, TTPU_F32, backoff));
  ttpu_val new_scale = ttpu_hlo_select(h, inf, backed, kept);
  ttpu_val new_tracker = ttpu_hlo_select(
      h, inf, zero_i, ttpu_hlo_select(h, grow, zero_i, clean));
  set_one_element(L, 0, new_scale);
  set_one_element(L, 1, new_tracker);
  return NULL;
}

const ttpu_op_def ttpu_ops_amp[] = {
    {"_amp_foreach_non_finite_check_and_unscale_", lower_unscale, .flags = 0},
    {"_amp_update_scale_", lower_update_scale, .flags = 0},
    {0},
};
