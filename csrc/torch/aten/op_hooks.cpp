// The per-op attributes of op_hooks.h, keyed by the lowering table's name.
#include "aten/op_hooks.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace torchtpu {

namespace {

// linalg_lstsq's rcond when None: the dtype's epsilon times the larger
// matrix dimension, as ATen's linalg_lstsq computes it.
std::optional<double> lstsq_default_rcond(int index, const c10::IValue* args) {
  if (index != 2 || !args[0].isTensor()) {
    return std::nullopt;
  }
  const at::Tensor& input = args[0].toTensor();
  if (input.dim() < 2) {
    return std::nullopt;
  }
  const c10::ScalarType real = c10::toRealValueType(input.scalar_type());
  double eps = 0;
  if (real == at::kDouble) {
    eps = std::numeric_limits<double>::epsilon();
  } else if (real == at::kFloat) {
    eps = std::numeric_limits<float>::epsilon();
  } else {
    return std::nullopt;
  }
  return eps * static_cast<double>(std::max<int64_t>(input.size(-2), input.size(-1)));
}

std::unordered_map<std::string, OpHooks> make_hooks() {
  std::unordered_map<std::string, OpHooks> hooks;
  // native_batch_norm updates running_mean/running_var (args 3, 4) in
  // training although its schema does not mark them mutable (the reason
  // _native_batch_norm_legit exists); they are written like Tensor(a!).
  hooks["native_batch_norm"].also_written = {3, 4};
  hooks["fill_.Scalar"].writes_one_value = true;
  hooks["fill_.Tensor"].writes_one_value = true;
  hooks["zero_"].writes_one_value = true;
  hooks["index_fill_.int_Scalar"].writes_one_value = true;
  hooks["index_fill_.int_Tensor"].writes_one_value = true;
  for (const char* range : {"arange.start_out", "range.out"}) {
    hooks[range].out_keeps_numel_geometry = true;
    hooks[range].warns_when_count_differs = true;
  }
  hooks["linspace.out"].out_keeps_numel_geometry = true;
  hooks["logspace.out"].out_keeps_numel_geometry = true;
  hooks["_index_put_impl_"].byte_mask_arg = 1;
  hooks["fill_.Scalar"].scalar_fits_self_arg = 1;
  for (const char* name : {"masked_fill.Scalar", "masked_fill_.Scalar", "masked_fill.Scalar_out"}) {
    hooks[name].scalar_fits_self_arg = 2;
  }
  for (const char* name : {"index_fill.int_Scalar", "index_fill_.int_Scalar"}) {
    hooks[name].scalar_fits_self_arg = 3;
  }
  for (const char* name : {"put", "put_"}) {
    hooks[name].deterministic_when_arg = 3;  // accumulate
    hooks[name].nondeterministic_name = "put_";
  }
  for (const char* name : {"median.dim", "median.dim_values", "nanmedian.dim", "nanmedian.dim_values",
                           "mode", "mode.values", "histc", "histc.out"}) {
    hooks[name].cuda_only_alert = true;
  }
  for (const char* name : {"nll_loss_forward", "nll_loss_forward.output"}) {
    hooks[name].long_or_byte_target_arg = 1;
  }
  for (const char* name : {"nll_loss_backward", "nll_loss_backward.grad_input"}) {
    hooks[name].long_or_byte_target_arg = 2;
  }
  hooks["max_pool3d_with_indices"].unbatched_as_batch_of_one = true;
  hooks["index_reduce_"].same_dtype_as_self_arg = 3;  // source
  hooks["_convert_weight_to_int4pack_for_cpu"].appends_cpu_int4_layout = true;
  hooks["_weight_int4pack_mm_for_cpu"].appends_cpu_int4_layout = true;
  for (const char* product : {"mm", "bmm", "mv", "dot", "vdot", "addmm", "addmv", "baddbmm", "addbmm",
                              "_addmm_activation"}) {
    for (const char* variant : {"", "_", ".out"}) {
      hooks[std::string(product) + variant].matrix_operands = MatrixOperands::kProduct;
    }
  }
  for (const char* solve : {"linalg_solve_triangular", "linalg_solve_triangular.out", "triangular_solve",
                            "triangular_solve.X"}) {
    hooks[solve].matrix_operands = MatrixOperands::kSolve;
  }
  hooks["linalg_lstsq.out"].runtime_float_args = {2};  // rcond
  hooks["linalg_lstsq.out"].none_float_means = lstsq_default_rcond;
  return hooks;
}

}  // namespace

const OpHooks& op_hooks_for(const std::string& name) {
  static const std::unordered_map<std::string, OpHooks> hooks = make_hooks();
  static const OpHooks none;
  auto found = hooks.find(name);
  return found == hooks.end() ? none : found->second;
}

}  // namespace torchtpu
