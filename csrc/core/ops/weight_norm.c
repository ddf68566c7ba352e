/* weight_norm.c - _weight_norm_interface(v, g, dim) -> (w, norms) and its
 * backward, the fused kernels behind torch._weight_norm (weight_norm
 * parametrizations: wav2vec2's positional convolution) for dim 0 or the
 * last dim. norms is the 2-norm of v over every dim but `dim`, of g's
 * shape, in opmath (float32 for half types), as the CPU kernel keeps it;
 * w = v * (g / norms). The backward follows the CPU kernel's formula:
 * s = sum(grad_w * v), a = g / norms, grad_v = a * grad_w -
 * a * s / norms^2 * v, grad_g = s / norms. */
#include "elementwise.h"

/* mask of the dims that are not `dim`, and `dim` normalized */
static int reduce_dims(ttpu_lower* L, int arg, int ndim, int* mask) {
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, arg, 0), ndim);
  for (int d = 0; d < ndim; ++d) mask[d] = d != dim;
  return dim;
}

/* sum over the masked dims of x, as a value of x's rank with 1s there */
static ttpu_val sum_keep(ttpu_lower* L, ttpu_val x, const int* mask) {
  ttpu_type t = ttpu_l_type(L, x);
  ttpu_type k = t;
  for (int d = 0; d < t.ndim; ++d)
    if (mask[d]) k.dims[d] = 1;
  return ttpu_l_reshape_to(ttpu_l_hlo(L), ttpu_l_reduce_mask(L, x, TTPU_RED_SUM, mask), k);
}

static ttpu_val wide(ttpu_lower* L, ttpu_val x, ttpu_dtype md, const ttpu_type* to) {
  return ttpu_hlo_broadcast_to(ttpu_l_hlo(L), ttpu_hlo_convert(ttpu_l_hlo(L), x, md), to->ndim,
                               to->dims);
}

static ttpu_status* lower_weight_norm(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val v = ttpu_l_tensor(L, 0);
  ttpu_type tv = ttpu_l_type(L, v);
  ttpu_dtype md = ttpu_ew_opmath(tv.dtype);
  int mask[TTPU_MAX_DIMS];
  reduce_dims(L, 2, tv.ndim, mask);
  ttpu_type tm = tv;
  tm.dtype = md;
  ttpu_val vm = ttpu_hlo_convert(b, v, md);
  ttpu_val n = ttpu_hlo_unary(b, TTPU_SQRT, sum_keep(L, ttpu_hlo_binary(b, TTPU_MUL, vm, vm), mask));
  ttpu_val a = ttpu_hlo_binary(b, TTPU_DIV, wide(L, ttpu_l_tensor(L, 1), md, &tm),
                               ttpu_hlo_broadcast_to(b, n, tm.ndim, tm.dims));
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, TTPU_MUL, vm, a));
  ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, n, ttpu_l_out_type(L, 1)));
  return NULL;
}

/* _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms,
 * dim) -> (grad_v, grad_g) */
static ttpu_status* lower_weight_norm_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val v = ttpu_l_tensor(L, 1);
  ttpu_type tv = ttpu_l_type(L, v);
  ttpu_dtype md = ttpu_ew_opmath(tv.dtype);
  int mask[TTPU_MAX_DIMS];
  reduce_dims(L, 4, tv.ndim, mask);
  ttpu_type tm = tv;
  tm.dtype = md;
  ttpu_val vm = ttpu_hlo_convert(b, v, md);
  ttpu_val gw = wide(L, ttpu_l_tensor(L, 0), md, &tm);
  ttpu_val s = sum_keep(L, ttpu_hlo_binary(b, TTPU_MUL, gw, vm), mask);
  ttpu_type ts = ttpu_l_type(L, s);
  ttpu_val n = ttpu_l_reshape_to(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 3), md), ts);
  ttpu_val g = ttpu_l_reshape_to(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 2), md), ts);
  ttpu_val a = ttpu_hlo_binary(b, TTPU_DIV, g, n);
  ttpu_val c = ttpu_hlo_binary(b, TTPU_DIV, ttpu_hlo_binary(b, TTPU_MUL, a, s),
                               ttpu_hlo_binary(b, TTPU_MUL, n, n));
  ttpu_val gv = ttpu_hlo_binary(
      b, TTPU_SUB, ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_broadcast_to(b, a, tm.ndim, tm.dims), gw),
      ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_broadcast_to(b, c, tm.ndim, tm.dims), vm));
  ttpu_l_set_out(L, 0, gv);
  ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, ttpu_hlo_binary(b, TTPU_DIV, s, n), ttpu_l_out_type(L, 1)));
  return NULL;
}

const ttpu_op_def ttpu_ops_weight_norm[] = {
    {"_weight_norm_interface", lower_weight_norm, .kinds = TTPU_K_FLOAT,
     .kernel = "weight_norm_first_dim_kernel"},
    {"_weight_norm_interface_backward", lower_weight_norm_backward, .kinds = TTPU_K_FLOAT,
     .kernel = "weight_norm_backward_first_dim_kernel"},
    {0},
};
