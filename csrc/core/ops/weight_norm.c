/* weight_norm.c - _weight_norm_interface(v, g, dim) -> (w, norms) and its
 * backward, the fused kernels behind torch._weight_norm (weight_norm
 * parametrizations: wav2vec2's positional convolution) for dim 0 or the
 * last dim. norms is the 2-norm of v over every dim but `dim`, of g's
 * shape, in opmath (float32 for half types), as the CPU kernel keeps it;
 * w = v * (g / norms). The backward follows the CPU kernel's formula:
 * s = sum(grad_w * v), a = g / norms, grad_v = a * grad_w -
 * a * s / norms^2 * v, grad_g = s / norms. */
#include "elementwise.h"

/* What forward and backward share: v (argument `v_arg`) in opmath, its
 * type, and the mask of the dims that are not `dim` (argument `dim_arg`),
 * which the norms reduce. Outputs 0 (w, grad_v) have v's shape. */
typedef struct {
  ttpu_val v;
  ttpu_type t;
  int mask[TTPU_MAX_DIMS];
} wn_parts;

static void wn_setup(ttpu_lower* L, int v_arg, int dim_arg, wn_parts* p) {
  ttpu_val v = ttpu_l_tensor(L, v_arg);
  p->t = ttpu_l_type(L, v);
  p->t.dtype = ttpu_ew_opmath(p->t.dtype);
  p->v = ttpu_hlo_convert(ttpu_l_hlo(L), v, p->t.dtype);
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, dim_arg, 0), p->t.ndim);
  for (int d = 0; d < p->t.ndim; ++d) p->mask[d] = d != dim;
}

/* sum over the masked dims of x, as a value of x's rank with 1s there */
static ttpu_val sum_keep(ttpu_lower* L, ttpu_val x, const int* mask) {
  ttpu_type k = ttpu_l_type(L, x);
  for (int d = 0; d < k.ndim; ++d)
    if (mask[d]) k.dims[d] = 1;
  return ttpu_l_reshape_to(ttpu_l_hlo(L), ttpu_l_reduce_mask(L, x, TTPU_RED_SUM, mask), k);
}

static ttpu_val full(ttpu_hlo* b, ttpu_val x, const ttpu_type* t) {
  return ttpu_hlo_broadcast_to(b, x, t->ndim, t->dims);
}

static ttpu_status* lower_weight_norm(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  wn_parts p;
  wn_setup(L, 0, 2, &p);
  ttpu_val n = ttpu_hlo_unary(b, TTPU_SQRT, sum_keep(L, ttpu_hlo_binary(b, TTPU_MUL, p.v, p.v), p.mask));
  ttpu_val a = ttpu_hlo_binary(b, TTPU_DIV, ttpu_ew_in(L, 1, p.t.dtype), full(b, n, &p.t));
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, TTPU_MUL, p.v, a));
  ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, n, ttpu_l_out_type(L, 1)));
  return NULL;
}

/* _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms,
 * dim) -> (grad_v, grad_g) */
static ttpu_status* lower_weight_norm_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  wn_parts p;
  wn_setup(L, 1, 4, &p);
  ttpu_val gw = ttpu_ew_in(L, 0, p.t.dtype);
  ttpu_val s = sum_keep(L, ttpu_hlo_binary(b, TTPU_MUL, gw, p.v), p.mask);
  ttpu_type ts = ttpu_l_type(L, s);
  ttpu_val n = ttpu_l_reshape_to(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 3), p.t.dtype), ts);
  ttpu_val g = ttpu_l_reshape_to(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 2), p.t.dtype), ts);
  ttpu_val a = ttpu_hlo_binary(b, TTPU_DIV, g, n);
  ttpu_val c = ttpu_hlo_binary(b, TTPU_DIV, ttpu_hlo_binary(b, TTPU_MUL, a, s),
                               ttpu_hlo_binary(b, TTPU_MUL, n, n));
  ttpu_val gv = ttpu_hlo_binary(b, TTPU_SUB, ttpu_hlo_binary(b, TTPU_MUL, full(b, a, &p.t), gw),
                                ttpu_hlo_binary(b, TTPU_MUL, full(b, c, &p.t), p.v));
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
