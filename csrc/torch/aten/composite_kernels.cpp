// Ops composed from other ops on the tpu tensors: results that are not
// tensors (the engine's programs return tensors only).
#include <ATen/ATen.h>

#include <c10/util/Exception.h>
#include <torch/library.h>

namespace torchtpu {

namespace {

// torch.equal: same sizes and every element equal (NaN never is), any
// dtypes (compared after promotion, as on the CPU). One host read.
bool equal_kernel(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(),
              "Cannot compare two tensors on different devices. Got: ",
              self.device(), " and ", other.device());
  if (!self.is_same_size(other)) {
    return false;
  }
  return at::eq(self, other).all().item<bool>();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("equal", equal_kernel);
}

}  // namespace torchtpu
