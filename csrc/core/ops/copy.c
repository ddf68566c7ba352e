/* copy.c - copies and fills: the ops the device's own plumbing relies on
 * (tensor.to, printing, torch.zeros ...). */
#include "ttpu_lower.h"

/* Converts v to the type of output k and broadcasts it to its shape. */
static ttpu_val as_output(ttpu_lower* L, int k, ttpu_val v) {
  ttpu_type t = ttpu_l_out_type(L, k);
  ttpu_hlo* b = ttpu_l_hlo(L);
  return ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, v, t.dtype), t.ndim,
                               t.dims);
}

/* copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) */
static ttpu_status* lower_copy_(ttpu_lower* L) {
  ttpu_l_set_out(L, 0, as_output(L, 0, ttpu_l_tensor(L, 1)));
  return NULL;
}

/* clone(Tensor self, *, MemoryFormat? memory_format=None) */
static ttpu_status* lower_clone(ttpu_lower* L) {
  ttpu_l_set_out(L, 0, ttpu_l_tensor(L, 0));
  return NULL;
}

/* fill_.Scalar(Tensor(a!) self, Scalar value) */
static ttpu_status* lower_fill_scalar(ttpu_lower* L) {
  ttpu_type t = ttpu_l_out_type(L, 0);
  ttpu_l_set_out(L, 0, as_output(L, 0, ttpu_l_scalar(L, 1, t.dtype)));
  return NULL;
}

/* fill_.Tensor(Tensor(a!) self, Tensor value): value is 0-d */
static ttpu_status* lower_fill_tensor(ttpu_lower* L) {
  if (ttpu_l_kind(L, 1) == TTPU_ARG_SCALAR) return lower_fill_scalar(L);
  ttpu_l_set_out(L, 0, as_output(L, 0, ttpu_l_tensor(L, 1)));
  return NULL;
}

/* zero_(Tensor(a!) self) */
static ttpu_status* lower_zero_(ttpu_lower* L) {
  ttpu_type t = ttpu_l_out_type(L, 0);
  ttpu_l_set_out(L, 0, ttpu_hlo_const(ttpu_l_hlo(L), t, 0, 0));
  return NULL;
}

const ttpu_op_def ttpu_ops_copy[] = {
    {"copy_", lower_copy_, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"clone", lower_clone, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"fill_.Scalar", lower_fill_scalar, .flags = TTPU_OP_COMPLEX_AS_IS | TTPU_OP_FILL},
    {"fill_.Tensor", lower_fill_tensor, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"zero_", lower_zero_, .flags = TTPU_OP_COMPLEX_AS_IS | TTPU_OP_FILL},
    {0},
};
