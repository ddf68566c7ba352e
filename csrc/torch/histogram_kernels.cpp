// Meta kernels for torch.histogram (histogram.bin_ct, histogram.bins_tensor
// and their out= forms) and torch.histogramdd's pieces
// (_histogramdd_bin_edges, _histogramdd_from_bin_cts,
// _histogramdd_from_bin_tensors), which PyTorch ships for the CPU only: the engine
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
#include <vector>

namespace torchtpu {

namespace {

// weight_numel: the number of points (elements, or rows for histogramdd).
void check_input(const at::Tensor& self, const std::optional<at::Tensor>& weight, int64_t points) {
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() == at::kFloat || self.scalar_type() == at::kDouble,
                              "\"histogramdd\" not implemented for '", toString(self.scalar_type()), "'");
  if (weight.has_value() && weight->defined()) {
    TORCH_CHECK(weight->scalar_type() == self.scalar_type(),
                "torch.histogramdd: if weight tensor is provided, input tensor and weight tensor should have the "
                "same dtype, but got input(", self.scalar_type(), "), and weight(", weight->scalar_type(), ")");
    TORCH_CHECK(weight->numel() == points,
                "torch.histogramdd: if weight tensor is provided it should have the same shape as the input "
                "tensor excluding its innermost dimension, but got input with shape ", self.sizes(),
                " and weight with shape ", weight->sizes());
  }
}

// Bin counts of each dim, and the range (two values per dim) when given.
void check_bin_cts(const at::Tensor& self, at::IntArrayRef bins, std::optional<at::ArrayRef<double>> range,
                   const std::optional<at::Tensor>& weight, int64_t points) {
  const size_t dims = bins.size();
  for (size_t k = 0; k < dims; ++k) {
    TORCH_CHECK(bins[k] > 0, "torch.histogram(): bins must be > 0, but got ", bins[k], " for dimension ", k);
  }
  if (range.has_value()) {
    TORCH_CHECK(range->size() == 2 * dims, "torch.histogramdd: for a ", dims, "-dimensional histogram range should ",
                "have ", 2 * dims, " elements, but got ", range->size());
    for (size_t k = 0; k < dims; ++k) {
      const double lo = (*range)[2 * k], hi = (*range)[2 * k + 1];
      TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histogramdd: dimension ", k, "'s range [", lo,
                  ", ", hi, "] is not finite");
      TORCH_CHECK(lo <= hi, "torch.histogramdd: min should not exceed max, but got min ", lo, " max ", hi,
                  " for dimension ", k);
    }
  }
  check_input(self, weight, points);
}

void check_bin_ct(const at::Tensor& self, int64_t bins, std::optional<at::ArrayRef<double>> range,
                  const std::optional<at::Tensor>& weight) {
  check_bin_cts(self, {bins}, range, weight, self.numel());
}

void check_edges(const at::Tensor& self, const at::Tensor& bins, size_t k) {
  TORCH_CHECK(bins.scalar_type() == self.scalar_type(),
              "torch.histogramdd: input tensor and bins tensors should have the same dtype, but got input with "
              "dtype ", self.scalar_type(), " and bins for dimension ", k, " with dtype ", bins.scalar_type());
  TORCH_CHECK(bins.dim() == 1, "torch.histogramdd: bins tensor should have one dimension, but got ", bins.dim(),
              " dimensions in the bins tensor for dimension ", k);
  TORCH_CHECK(bins.numel() > 0, "torch.histogramdd: bins tensor should have at least 1 element, but got ",
              bins.numel(), " elements in the bins tensor for dimension ", k);
}

void check_bins_tensor(const at::Tensor& self, const at::Tensor& bins, const std::optional<at::Tensor>& weight) {
  check_input(self, weight, self.numel());
  check_edges(self, bins, 0);
}

// histogramdd's input: points (..., D); the number of points.
int64_t check_points(const at::Tensor& self, size_t bins) {
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions");
  const int64_t dims = self.size(-1);
  TORCH_CHECK(static_cast<int64_t>(bins) == dims,
              "histogramdd: The size of bins must be equal to the innermost dimension of the input.");
  return dims ? self.numel() / dims : 0;
}

std::vector<at::Tensor> histogramdd_bin_edges_meta(const at::Tensor& self, at::IntArrayRef bins,
                                                   std::optional<at::ArrayRef<double>> range,
                                                   const std::optional<at::Tensor>& weight, bool /*density*/) {
  check_bin_cts(self, bins, range, weight, check_points(self, bins.size()));
  std::vector<at::Tensor> edges;
  for (int64_t b : bins) {
    edges.push_back(at::empty({b + 1}, self.options()));
  }
  return edges;
}

at::Tensor histogramdd_from_bin_cts_meta(const at::Tensor& self, at::IntArrayRef bins,
                                         std::optional<at::ArrayRef<double>> range,
                                         const std::optional<at::Tensor>& weight, bool /*density*/) {
  check_bin_cts(self, bins, range, weight, check_points(self, bins.size()));
  return at::empty(bins, self.options());
}

at::Tensor histogramdd_from_bin_tensors_meta(const at::Tensor& self, at::TensorList bins,
                                             const std::optional<at::Tensor>& weight, bool /*density*/) {
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions");
  TORCH_CHECK(static_cast<int64_t>(bins.size()) == self.size(-1), "torch.histogramdd: expected ", self.size(-1),
              " sequences of bin edges for a ", self.size(-1), "-dimensional histogram but got ", bins.size());
  const int64_t points = self.size(-1) ? self.numel() / self.size(-1) : 0;
  check_input(self, weight, points);
  std::vector<int64_t> shape;
  for (size_t k = 0; k < bins.size(); ++k) {
    check_edges(self, bins[k], k);
    shape.push_back(bins[k].numel() - 1);
  }
  return at::empty(shape, self.options());
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
  m.impl("_histogramdd_bin_edges", TORCH_FN(histogramdd_bin_edges_meta));
  m.impl("_histogramdd_from_bin_cts", TORCH_FN(histogramdd_from_bin_cts_meta));
  m.impl("_histogramdd_from_bin_tensors", TORCH_FN(histogramdd_from_bin_tensors_meta));
}

}  // namespace torchtpu
