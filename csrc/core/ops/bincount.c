/* bincount.c - bincount(self, Tensor? weights, SymInt minlength): how many
 * times each value of the 1-d integer self occurs, or the sum of the
 * weights at its positions.
 *
 * The length (max(self) + 1, at least minlength) depends on the data: the
 * PyTorch glue (csrc/torch/aten/index_kernels.cpp) reads it to the host
 * and calls the op with it as minlength (aten/dynamic_shape.h), so the
 * output the lowering fills has the length already. The meta shape
 * (csrc/torch/aten/meta_shapes.cpp) gives the output's dtype as the CPU
 * does: int64 counts, float32 sums of float32 weights, float64 sums of
 * any other weights; it checks the arguments. The counts are one
 * scatter-add, in the output's dtype. */
#include "ttpu_lower.h"

static ttpu_status* lower_bincount(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type out = ttpu_l_out_type(L, 0);
  ttpu_val zeros = ttpu_hlo_const(b, out, 0, 0);
  ttpu_val idx = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), TTPU_I64);
  ttpu_type ti = ttpu_l_type(L, idx);
  if (ti.ndim != 1 || ti.dims[0] == 0) {
    ttpu_l_set_out(L, 0, zeros);
    return NULL;
  }
  ttpu_val upd = ttpu_l_kind(L, 1) == TTPU_ARG_TENSOR
                     ? ttpu_hlo_convert(b, ttpu_l_tensor(L, 1), out.dtype)
                     : ttpu_hlo_const(b, ttpu_type_make(out.dtype, 1, ti.dims), 1, 1);
  ttpu_l_set_out(L, 0, ttpu_hlo_put(b, zeros, idx, upd, TTPU_ADD));
  return NULL;
}

const ttpu_op_def ttpu_ops_bincount[] = {
    {"bincount", lower_bincount, .flags = 0},
    {0},
};
