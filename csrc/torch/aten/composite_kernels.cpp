// Ops composed from other ops on the tpu tensors: results that are not
// tensors (the engine's programs return tensors only), and copies that
// PyTorch would otherwise share.
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

// torch._lazy_clone: a copy-on-write clone on the CPU. The engine writes
// storages through its own handles, never through a data pointer that
// could materialize the copy, so the clone is made now: the whole storage
// copied, and the same geometry on the copy.
at::Tensor lazy_clone(const at::Tensor& self) {
  const c10::Storage& storage = self.storage();
  const int64_t n = static_cast<int64_t>(storage.nbytes()) / self.element_size();
  at::Tensor whole = at::empty({0}, self.options()).set_(storage, 0, {n}, {1});
  at::Tensor copy = whole.clone();
  return at::empty({0}, self.options())
      .set_(copy.storage(), self.storage_offset(), self.sizes(), self.strides());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("equal", equal_kernel);
  m.impl("_lazy_clone", lazy_clone);
}

}  // namespace torchtpu
