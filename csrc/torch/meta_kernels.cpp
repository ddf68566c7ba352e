// Meta kernels PyTorch does not ship for ops the engine implements. The
// engine kernel sizes its outputs (and reproduces CPU errors) by running
// each op on meta tensors first; these give those ops shapes only, no math.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace torchtpu {

namespace {

// _cummax_helper / _cummin_helper write into values and indices, which
// cummax/cummin have already sized like self.
void cum_extreme_helper_meta(const at::Tensor& self, at::Tensor& values,
                             at::Tensor& indices, int64_t dim) {
  at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(values.sizes() == self.sizes() && indices.sizes() == self.sizes(),
              "cumulative extreme: outputs must have the shape of self");
}

at::Tensor logcumsumexp_meta(const at::Tensor& self, int64_t dim) {
  at::maybe_wrap_dim(dim, self.dim());
  return at::empty_like(self);
}

at::Tensor& logcumsumexp_out_meta(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  at::maybe_wrap_dim(dim, self.dim());
  out.resize_(self.sizes());
  return out;
}

// Margin-loss backwards: the gradient has self's shape and dtype.
at::Tensor multi_margin_loss_backward_meta(const at::Tensor& /*grad_output*/, const at::Tensor& self,
                                           const at::Tensor& /*target*/, const at::Scalar& /*p*/,
                                           const at::Scalar& /*margin*/,
                                           const std::optional<at::Tensor>& /*weight*/,
                                           int64_t /*reduction*/) {
  return at::empty_like(self);
}

at::Tensor multilabel_margin_loss_backward_meta(const at::Tensor& /*grad_output*/, const at::Tensor& self,
                                                const at::Tensor& /*target*/, int64_t /*reduction*/,
                                                const at::Tensor& /*is_target*/) {
  return at::empty_like(self);
}

// geqrf: the factored matrix like self, tau (batch..., min(m, n)).
std::tuple<at::Tensor, at::Tensor> geqrf_meta(const at::Tensor& self) {
  TORCH_CHECK(self.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  auto tau_shape = self.sizes().vec();
  const int64_t m = tau_shape[self.dim() - 2], n = tau_shape[self.dim() - 1];
  tau_shape.pop_back();
  tau_shape.back() = std::min(m, n);
  return {at::empty_like(self), at::empty(tau_shape, self.options())};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("geqrf", geqrf_meta);
  m.impl("multi_margin_loss_backward", multi_margin_loss_backward_meta);
  m.impl("multilabel_margin_loss_backward", multilabel_margin_loss_backward_meta);
  m.impl("_cummax_helper", cum_extreme_helper_meta);
  m.impl("_cummin_helper", cum_extreme_helper_meta);
  m.impl("_logcumsumexp", logcumsumexp_meta);
  m.impl("_logcumsumexp.out", logcumsumexp_out_meta);
}

}  // namespace torchtpu
