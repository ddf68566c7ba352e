// Meta kernels for torch.histogram (histogram.bin_ct, histogram.bins_tensor
// and their out= forms), which PyTorch ships for the CPU only: the engine
// kernel sizes outputs and raises the CPU's errors by running an op on
// meta tensors first. Output sizes do not depend on the data (bins, and
// bins + 1 edges); the checks are the CPU kernel's, with its exception
// types. The one data-dependent check (a min..max range that is not
// finite) is the engine's (ops/histogram.c).
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cmath>
#include <optional>
#include <tuple>

namespace torchtpu {

namespace {

void check_input(const at::Tensor& self, const std::optional<at::Tensor>& weight) {
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() == at::kFloat || self.scalar_type() == at::kDouble,
                              "\"histogramdd\" not implemented for '", toString(self.scalar_type()), "'");
  if (weight.has_value() && weight->defined()) {
    TORCH_CHECK(weight->scalar_type() == self.scalar_type(),
                "torch.histogramdd: if weight tensor is provided, input tensor and weight tensor should have the "
                "same dtype, but got input(", self.scalar_type(), "), and weight(", weight->scalar_type(), ")");
    TORCH_CHECK(weight->numel() == self.numel(),
                "torch.histogramdd: if weight tensor is provided it should have the same shape as the input "
                "tensor excluding its innermost dimension, but got input with shape ", self.sizes(),
                " and weight with shape ", weight->sizes());
  }
}

void check_bin_ct(const at::Tensor& self, int64_t bins, std::optional<at::ArrayRef<double>> range,
                  const std::optional<at::Tensor>& weight) {
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  if (range.has_value()) {
    TORCH_CHECK(range->size() == 2, "torch.histogramdd: for a 1-dimensional histogram range should have 2 elements",
                ", but got ", range->size());
    const double lo = (*range)[0], hi = (*range)[1];
    TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histogramdd: dimension 0's range [", lo, ", ", hi,
                "] is not finite");
    TORCH_CHECK(lo <= hi, "torch.histogramdd: min should not exceed max, but got min ", lo, " max ", hi,
                " for dimension 0");
  }
  check_input(self, weight);
}

void check_bins_tensor(const at::Tensor& self, const at::Tensor& bins, const std::optional<at::Tensor>& weight) {
  check_input(self, weight);
  TORCH_CHECK(bins.scalar_type() == self.scalar_type(),
              "torch.histogramdd: input tensor and bins tensors should have the same dtype, but got input with "
              "dtype ", self.scalar_type(), " and bins for dimension 0 with dtype ", bins.scalar_type());
  TORCH_CHECK(bins.dim() == 1, "torch.histogramdd: bins tensor should have one dimension, but got ", bins.dim(),
              " dimensions in the bins tensor for dimension 0");
  TORCH_CHECK(bins.numel() > 0, "torch.histogramdd: bins tensor should have at least 1 element, but got ",
              bins.numel(), " elements in the bins tensor for dimension 0");
}

std::tuple<at::Tensor, at::Tensor> bin_ct_meta(const at::Tensor& self, int64_t bins,
                                               std::optional<at::ArrayRef<double>> range,
                                               const std::optional<at::Tensor>& weight, bool /*density*/) {
  check_bin_ct(self, bins, range, weight);
  return {at::empty({bins}, self.options()), at::empty({bins + 1}, self.options())};
}

std::tuple<at::Tensor&, at::Tensor&> bin_ct_out_meta(const at::Tensor& self, int64_t bins,
                                                     std::optional<at::ArrayRef<double>> range,
                                                     const std::optional<at::Tensor>& weight, bool /*density*/,
                                                     at::Tensor& hist, at::Tensor& edges) {
  check_bin_ct(self, bins, range, weight);
  hist.resize_({bins});
  edges.resize_({bins + 1});
  return {hist, edges};
}

std::tuple<at::Tensor, at::Tensor> bins_tensor_meta(const at::Tensor& self, const at::Tensor& bins,
                                                    const std::optional<at::Tensor>& weight, bool /*density*/) {
  check_bins_tensor(self, bins, weight);
  return {at::empty({bins.numel() - 1}, self.options()), at::empty({bins.numel()}, self.options())};
}

std::tuple<at::Tensor&, at::Tensor&> bins_tensor_out_meta(const at::Tensor& self, const at::Tensor& bins,
                                                          const std::optional<at::Tensor>& weight, bool /*density*/,
                                                          at::Tensor& hist, at::Tensor& edges) {
  check_bins_tensor(self, bins, weight);
  hist.resize_({bins.numel() - 1});
  edges.resize_({bins.numel()});
  return {hist, edges};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("histogram.bin_ct", TORCH_FN(bin_ct_meta));
  m.impl("histogram.bin_ct_out", TORCH_FN(bin_ct_out_meta));
  m.impl("histogram.bins_tensor", TORCH_FN(bins_tensor_meta));
  m.impl("histogram.bins_tensor_out", TORCH_FN(bins_tensor_out_meta));
}

}  // namespace torchtpu
