// Whether `param.data = other` may swap a tensor's implementation in place.
// PyTorch answers yes only within one dense backend family it knows (CPU,
// CUDA, ...) and asks a PrivateUse1 backend to answer for itself. The
// answer decides what module.to("tpu") does: yes keeps every Parameter
// object and moves its data, no makes new Parameters per module, which
// silently unties shared weights (GPT-2's embedding and output layer would
// then train as two matrices). tpu tensors are plain dense TensorImpls,
// like CPU ones, so swapping between the two is as safe as CPU <-> CUDA.
#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>
#include <torch/library.h>

#include <typeinfo>

namespace torchtpu {
namespace {

bool is_plain_dense(const at::Tensor& tensor) {
  const c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
  return typeid(*impl) == typeid(c10::TensorImpl) &&
         tensor.layout() == c10::kStrided &&
         (tensor.is_cpu() || tensor.is_privateuseone());
}

bool has_compatible_shallow_copy_type(const at::Tensor& self,
                                      const at::Tensor& from) {
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(
             from.key_set()) ||
         (is_plain_dense(self) && is_plain_dense(from));
}

}  // namespace
}  // namespace torchtpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type",
         &torchtpu::has_compatible_shallow_copy_type);
}
