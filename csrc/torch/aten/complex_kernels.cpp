// Complex views: view_as_real / view_as_complex reinterpret a storage's
// bytes with another dtype, exactly as on the CPU. The engine keeps a
// complex storage as its interleaved real components (csrc/core/prog/
// assemble.c), so both views read and write the same bytes.
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

namespace torchtpu {
namespace {

at::Tensor view_as_real(const at::Tensor& self) {
  return at::native::view_as_real(self);
}

at::Tensor view_as_complex(const at::Tensor& self) {
  return at::native::view_as_complex(self);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view_as_real", TORCH_FN(view_as_real));
  m.impl("view_as_complex", TORCH_FN(view_as_complex));
}

}  // namespace
}  // namespace torchtpu
