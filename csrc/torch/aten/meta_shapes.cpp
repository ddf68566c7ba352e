// Meta shapes for engine ops PyTorch ships no meta kernel for, or one whose
// shapes differ from the CPU kernel's. The engine kernel (engine_kernel.cpp)
// sizes an op's outputs, and raises the CPU's argument errors, by running
// the op on meta copies of its arguments: for the ops here it calls the
// shape function of this registry instead of the dispatcher's Meta kernel. Nothing is registered with the dispatcher, so
// aten's Meta kernels stay what PyTorch makes them for every other user of
// the process. The functions give shapes and checks only, no math.
#include "aten/meta_shapes.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace torchtpu {

namespace {

// ------------------------------------------------------------ scans, margins, geqrf

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

// geqrf: the factored matrix of self's shape in column-major (batched
// Fortran) order, as LAPACK leaves it on the CPU; tau (batch..., min(m, n)).
std::tuple<at::Tensor, at::Tensor> geqrf_meta(const at::Tensor& self) {
  TORCH_CHECK(self.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  auto tau_shape = self.sizes().vec();
  const int64_t m = tau_shape[self.dim() - 2], n = tau_shape[self.dim() - 1];
  tau_shape.pop_back();
  tau_shape.back() = std::min(m, n);
  at::Tensor column_major = at::empty_like(self.mT(), at::MemoryFormat::Contiguous).mT();
  return {column_major, at::empty(tau_shape, self.options())};
}

// geqrf.a: the outs resized to geqrf's shapes; the results are cast into
// outs of another dtype, as on the CPU.
std::tuple<at::Tensor&, at::Tensor&> geqrf_out_meta(const at::Tensor& self, at::Tensor& a, at::Tensor& tau) {
  auto [qr, t] = geqrf_meta(self);
  for (auto [out, like] : {std::pair<at::Tensor&, const at::Tensor&>{a, qr}, {tau, t}}) {
    TORCH_CHECK(at::canCast(self.scalar_type(), out.scalar_type()), "result type ", self.scalar_type(),
                " can't be cast to the desired output type ", out.scalar_type());
    out.resize_(like.sizes());
  }
  return {a, tau};
}

// cat.out: the CPU refuses outs its inputs' result type cannot be cast to
// with a TypeError (PyTorch's reference meta says RuntimeError).
at::Tensor& cat_out_meta(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  std::vector<at::Tensor> list;
  for (const at::Tensor& t : tensors) {
    list.push_back(t);
  }
  const c10::ScalarType type = at::native::result_type(list);
  TORCH_CHECK_TYPE(at::canCast(type, out.scalar_type()), "torch.cat(): input types can't be cast to the desired output type ",
                   out.scalar_type());
  out.resize_(at::cat(list, dim).sizes());
  return out;
}

// Where the CPU kernel's shape differs from the meta function PyTorch
// ships, follow the CPU: multi_margin_loss and multilabel_margin_loss of a
// 1-D input with reduction='none' are 0-d on the CPU but (1,) from the
// decompositions that serve as their meta functions. kReduction is the
// reduction argument, kOut the out= argument of the .out overload, kLoss
// the loss's place among the returns counted from the last (1: the last).
template <size_t kReduction, size_t kOut, size_t kLoss>
void zero_dim_loss_meta(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/,
                        torch::jit::Stack* stack) {
  const size_t num_args = op.schema().arguments().size();
  const c10::IValue* args = stack->data() + (stack->size() - num_args);
  const bool to_scalar = num_args > kReduction && args[0].isTensor() &&
                         args[0].toTensor().dim() <= 1 && args[kReduction].isInt() &&
                         args[kReduction].toInt() == 0;
  std::optional<at::Tensor> out;
  if (num_args > kOut && args[kOut].isTensor()) {
    out = args[kOut].toTensor();
  }
  op.callBoxed(stack);
  if (!to_scalar || stack->size() < kLoss || !(*stack)[stack->size() - kLoss].isTensor()) {
    return;
  }
  if (out) {
    out->resize_({});
  } else {
    c10::IValue& loss = (*stack)[stack->size() - kLoss];
    loss = at::empty({}, loss.toTensor().options());
  }
}

// ---------------------------------------------------------------- ctc

at::Tensor ctc_loss_backward_meta(const at::Tensor& /*grad*/, const at::Tensor& log_probs,
                                  const at::Tensor& /*targets*/, at::IntArrayRef /*input_lengths*/,
                                  at::IntArrayRef /*target_lengths*/,
                                  const at::Tensor& /*neg_log_likelihood*/,
                                  const at::Tensor& /*log_alpha*/, int64_t /*blank*/,
                                  bool /*zero_infinity*/) {
  return at::empty_like(log_probs);
}

// ------------------------------------------------ lstsq, fractional pooling

using Lstsq = std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&>;

// Shapes as the CPU's LAPACK drivers leave them: the solution and the
// residuals over the broadcast batch; rank and singular values over
// input's own batch; an output a driver does not compute is (0,). The
// residuals of gelsd/gelss with m > n exist only when every matrix has
// full rank, a shape known after the math: they are sized for full rank
// here, and the lowering fails the call when a matrix turns out deficient.
Lstsq linalg_lstsq_out_meta(const at::Tensor& input, const at::Tensor& other,
                            std::optional<double> /*rcond*/,
                            std::optional<c10::string_view> driver_opt,
                            at::Tensor& solution, at::Tensor& residuals, at::Tensor& rank,
                            at::Tensor& singular_values) {
  TORCH_CHECK(input.dim() >= 2, "torch.linalg.lstsq: input must have at least 2 dimensions.");
  const int64_t dim_diff = input.dim() - other.dim();
  TORCH_CHECK(0 <= dim_diff && dim_diff <= 1,
              "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
              "(input.dim() - other.dim()) <= 1");
  const auto in_sizes = input.sizes();
  const bool vector_case =
      other.dim() == 1 || (dim_diff == 1 && other.sizes() == in_sizes.slice(0, input.dim() - 1));
  if (vector_case) {
    TORCH_CHECK(input.size(-2) == other.size(-1),
                "torch.linalg.lstsq: input.size(-2) should match other.size(-1)");
  } else {
    TORCH_CHECK(input.size(-2) == other.size(-2),
                "torch.linalg.lstsq: input.size(-2) should match other.size(-2)");
  }
  TORCH_CHECK(input.scalar_type() == other.scalar_type(),
              "torch.linalg.lstsq: Expected input and other to have the same dtype, but got "
              "input's dtype ",
              input.scalar_type(), " and other's dtype ", other.scalar_type());
  // The CPU checks its outs' dtypes before the driver (residuals under the
  // name of solution, as it does).
  const at::ScalarType real_dtype = c10::toRealValueType(input.scalar_type());
  const std::pair<at::ScalarType, const at::Tensor*> outs[] = {
      {input.scalar_type(), &solution}, {real_dtype, &residuals}, {at::kLong, &rank},
      {real_dtype, &singular_values}};
  const char* out_names[] = {"solution", "solution", "rank", "singular_values"};
  for (size_t i = 0; i < 4; ++i) {
    const at::ScalarType want = outs[i].first, got = outs[i].second->scalar_type();
    TORCH_CHECK(c10::canCast(want, got), "torch.linalg.lstsq: Expected ", out_names[i],
                " to be safely castable from ", want, " dtype, but got ", out_names[i],
                " with dtype ", got);
  }
  const std::string driver = driver_opt.has_value() ? std::string(*driver_opt) : "gelsy";
  TORCH_CHECK(driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss",
              "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");

  const int64_t m = input.size(-2), n = input.size(-1);
  const int64_t k = vector_case ? 1 : other.size(-1);
  std::vector<int64_t> in_batch(in_sizes.begin(), in_sizes.end() - 2);
  const auto o_sizes = other.sizes();
  std::vector<int64_t> o_batch(o_sizes.begin(), o_sizes.end() - (vector_case ? 1 : 2));
  std::vector<int64_t> batch = at::infer_size(in_batch, o_batch);
  // the CPU's epsilon of the real type: complex64/128 pass, half types not
  TORCH_CHECK(real_dtype == at::kFloat || real_dtype == at::kDouble,
              "This function doesn't handle types other than float and double");

  std::vector<int64_t> sol = batch;
  sol.push_back(n);
  if (!vector_case) sol.push_back(k);
  at::native::resize_output(solution, sol);
  if (m > n && driver != "gelsy") {
    std::vector<int64_t> res = batch;
    res.push_back(k);
    at::native::resize_output(residuals, res);
  } else {
    at::native::resize_output(residuals, {int64_t{0}});
  }
  if (driver == "gels") {
    at::native::resize_output(rank, {int64_t{0}});
  } else {
    at::native::resize_output(rank, in_batch);
  }
  if (driver == "gelsd" || driver == "gelss") {
    std::vector<int64_t> sv = in_batch;
    sv.push_back(std::min(m, n));
    at::native::resize_output(singular_values, sv);
  } else {
    at::native::resize_output(singular_values, {int64_t{0}});
  }
  return Lstsq(solution, residuals, rank, singular_values);
}

// The gradient has self's shape; grad_output's trailing dims must be
// output_size's, as the CPU kernel checks.
void check_fmp3d_grad(const at::Tensor& grad_output, const at::Tensor& self,
                      at::IntArrayRef output_size) {
  TORCH_CHECK(output_size.size() == 3, "fractional_max_pool3d_backward: output_size must have 3 entries");
  TORCH_CHECK(self.dim() == 4 || self.dim() == 5,
              "fractional_max_pool3d_backward: expected a 4D or 5D input");
  const int64_t off = self.dim() == 5 ? 1 : 0;
  TORCH_CHECK(grad_output.dim() == self.dim(),
              "fractional_max_pool3d_backward_out(): gradOutput time unexpected");
  TORCH_CHECK(output_size[0] == grad_output.size(off + 1),
              "fractional_max_pool3d_backward_out(): gradOutput time unexpected");
  TORCH_CHECK(output_size[1] == grad_output.size(off + 2),
              "fractional_max_pool3d_backward_out(): gradOutput height unexpected");
  TORCH_CHECK(output_size[2] == grad_output.size(off + 3),
              "fractional_max_pool3d_backward_out(): gradOutput width unexpected");
}

at::Tensor fmp3d_backward_meta(const at::Tensor& grad_output, const at::Tensor& self,
                               at::IntArrayRef /*kernel_size*/, at::IntArrayRef output_size,
                               const at::Tensor& /*indices*/) {
  check_fmp3d_grad(grad_output, self, output_size);
  return at::empty_like(self);
}

at::Tensor& fmp3d_backward_out_meta(const at::Tensor& grad_output, const at::Tensor& self,
                                    at::IntArrayRef /*kernel_size*/, at::IntArrayRef output_size,
                                    const at::Tensor& /*indices*/, at::Tensor& grad_input) {
  check_fmp3d_grad(grad_output, self, output_size);
  grad_input.resize_(self.sizes());
  return grad_input;
}

// ------------------------------------------------------------------ unique
// The .out overloads the unique kernels run with padded outputs
// (dynamic_shape.h): the sizes the caller gave are kept.

void check_outs(const at::Tensor& self, const at::Tensor& values, const at::Tensor& inverse,
                const at::Tensor& counts) {
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "unique: values must have the input's dtype");
  TORCH_CHECK(inverse.scalar_type() == at::kLong && counts.scalar_type() == at::kLong,
              "unique: inverse indices and counts must be int64");
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> unique2_out_meta(const at::Tensor& self, bool, bool, bool,
                                                                   at::Tensor& o0, at::Tensor& o1, at::Tensor& o2) {
  check_outs(self, o0, o1, o2);
  return {o0, o1, o2};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> unique_consecutive_out_meta(const at::Tensor& self, bool, bool,
                                                                              std::optional<int64_t> dim,
                                                                              at::Tensor& o0, at::Tensor& o1,
                                                                              at::Tensor& o2) {
  if (dim) {
    at::maybe_wrap_dim(*dim, self.dim());
  }
  check_outs(self, o0, o1, o2);
  return {o0, o1, o2};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> unique_dim_out_meta(const at::Tensor& self, int64_t dim, bool,
                                                                      bool, bool, at::Tensor& o0, at::Tensor& o1,
                                                                      at::Tensor& o2) {
  at::maybe_wrap_dim(dim, self.dim());
  check_outs(self, o0, o1, o2);
  return {o0, o1, o2};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> unique_dim_consecutive_out_meta(const at::Tensor& self,
                                                                                  int64_t dim, bool, bool,
                                                                                  at::Tensor& o0, at::Tensor& o1,
                                                                                  at::Tensor& o2) {
  at::maybe_wrap_dim(dim, self.dim());
  check_outs(self, o0, o1, o2);
  return {o0, o1, o2};
}

// --------------------------------------------------------------- histogram
// torch.histogram (histogram.bin_ct, histogram.bins_tensor and their out=
// forms) and torch.histogramdd's pieces (_histogramdd_bin_edges,
// _histogramdd_from_bin_cts, _histogramdd_from_bin_tensors), which PyTorch
// ships for the CPU only. Output sizes do not depend on the data (bins,
// and bins + 1 edges); the checks are the CPU kernel's, with its exception
// types. The one data-dependent check (a min..max range that is not
// finite) is the engine's (ops/histogram.c).

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

// ---------------------------------------------------------------- attention
// The fused inference kernels of PyTorch's transformer modules
// (ops/attention.c). PyTorch's meta function for
// _native_multi_head_attention sizes the weights (batch, L, L) and gives
// empty(0) when they are not asked for; the CPU kernel's weights are
// (batch, L, S) and undefined (None) then, and so are these.

void check_same_dtype(const at::Tensor& query, const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.scalar_type() == query.scalar_type(), what, " must have the query's dtype ",
              query.scalar_type(), ", got ", t.scalar_type());
}

// The checks of one attention call; the output's last size.
int64_t check_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                        int64_t embed_dim, int64_t num_head, const at::Tensor& qkv_weight,
                        const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
                        const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask,
                        std::optional<int64_t> mask_type, int64_t heads_out) {
  TORCH_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3,
              "expected query, key and value to be 3-D (batch, length, embed_dim), got ",
              query.sizes(), ", ", key.sizes(), " and ", value.sizes());
  TORCH_CHECK(num_head > 0 && embed_dim % num_head == 0 && query.size(2) == embed_dim,
              "embed_dim ", embed_dim, " must equal the query's last dimension and be "
              "divisible by num_head ", num_head);
  TORCH_CHECK(key.size(0) == query.size(0) && value.size(0) == query.size(0) &&
                  key.size(2) == embed_dim && value.size(2) == embed_dim &&
                  value.size(1) == key.size(1),
              "expected key and value to be (batch, source length, embed_dim) like the query, "
              "got ", key.sizes(), " and ", value.sizes());
  TORCH_CHECK(at::isFloatingType(query.scalar_type()),
              "\"native_multi_head_attention\" not implemented for '",
              toString(query.scalar_type()), "'");
  TORCH_CHECK(qkv_weight.dim() == 2 && qkv_weight.size(0) == 3 * embed_dim &&
                  qkv_weight.size(1) == embed_dim,
              "qkv_weight must be (3 * embed_dim, embed_dim), got ", qkv_weight.sizes());
  TORCH_CHECK(qkv_bias.dim() == 1 && qkv_bias.size(0) == 3 * embed_dim,
              "qkv_bias must be (3 * embed_dim), got ", qkv_bias.sizes());
  TORCH_CHECK(proj_weight.dim() == 2 && proj_weight.size(1) == embed_dim,
              "proj_weight must be (out_dim, embed_dim), got ", proj_weight.sizes());
  TORCH_CHECK(proj_bias.dim() == 1 && proj_bias.size(0) == proj_weight.size(0),
              "proj_bias must be (out_dim), got ", proj_bias.sizes());
  check_same_dtype(query, key, "key");
  check_same_dtype(query, value, "value");
  check_same_dtype(query, qkv_weight, "qkv_weight");
  check_same_dtype(query, qkv_bias, "qkv_bias");
  check_same_dtype(query, proj_weight, "proj_weight");
  check_same_dtype(query, proj_bias, "proj_bias");
  if (mask.has_value() && mask->defined()) {
    const at::Tensor& m = *mask;
    const int64_t batch = query.size(0), s = key.size(1);
    if (mask_type.value_or(m.dim() == 2 && m.size(0) == batch ? 1 : 0) == 1) {
      TORCH_CHECK(m.dim() == 2 && m.size(0) == batch && m.size(1) == s,
                  "key padding mask must be (batch, source length), got ", m.sizes());
    } else {
      const std::vector<int64_t> scores = {batch, heads_out, query.size(1), s};
      TORCH_CHECK(m.dim() <= 4 && at::infer_size(m.sizes(), scores) == scores,
                  "the attention mask ", m.sizes(), " does not broadcast to the scores ",
                  at::IntArrayRef(scores));
    }
  }
  return proj_weight.size(0);
}

std::tuple<at::Tensor, at::Tensor> native_multi_head_attention_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim,
    int64_t num_head, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
    const at::Tensor& proj_weight, const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask,
    bool need_weights, bool average_attn_weights, std::optional<int64_t> mask_type) {
  const int64_t out_dim = check_attention(query, key, value, embed_dim, num_head, qkv_weight,
                                          qkv_bias, proj_weight, proj_bias, mask, mask_type,
                                          num_head);
  const int64_t batch = query.size(0), l = query.size(1), s = key.size(1);
  at::Tensor out = at::empty({batch, l, out_dim}, query.options());
  if (!need_weights) {
    return {out, at::Tensor()};
  }
  at::Tensor weights = average_attn_weights ? at::empty({batch, l, s}, query.options())
                                            : at::empty({batch, num_head, l, s}, query.options());
  return {out, weights};
}

void check_vector(const at::Tensor& v, int64_t n, const char* what) {
  TORCH_CHECK(v.dim() == 1 && v.size(0) == n, what, " must be (", n, "), got ", v.sizes());
}

at::Tensor transformer_encoder_layer_fwd_meta(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    bool /*use_gelu*/, bool /*norm_first*/, double /*eps*/, const at::Tensor& norm_weight_1,
    const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2,
    const at::Tensor& ffn_weight_1, const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2,
    const at::Tensor& ffn_bias_2, const std::optional<at::Tensor>& mask,
    std::optional<int64_t> mask_type) {
  const int64_t out_dim = check_attention(src, src, src, embed_dim, num_heads, qkv_weight, qkv_bias,
                                          proj_weight, proj_bias, mask, mask_type, num_heads);
  TORCH_CHECK(out_dim == embed_dim, "proj_weight must be (embed_dim, embed_dim), got ",
              proj_weight.sizes());
  check_vector(norm_weight_1, embed_dim, "norm_weight_1");
  check_vector(norm_bias_1, embed_dim, "norm_bias_1");
  check_vector(norm_weight_2, embed_dim, "norm_weight_2");
  check_vector(norm_bias_2, embed_dim, "norm_bias_2");
  TORCH_CHECK(ffn_weight_1.dim() == 2 && ffn_weight_1.size(1) == embed_dim,
              "ffn_weight_1 must be (ffn_dim, embed_dim), got ", ffn_weight_1.sizes());
  const int64_t ffn_dim = ffn_weight_1.size(0);
  check_vector(ffn_bias_1, ffn_dim, "ffn_bias_1");
  TORCH_CHECK(ffn_weight_2.dim() == 2 && ffn_weight_2.size(0) == embed_dim &&
                  ffn_weight_2.size(1) == ffn_dim,
              "ffn_weight_2 must be (embed_dim, ffn_dim), got ", ffn_weight_2.sizes());
  check_vector(ffn_bias_2, embed_dim, "ffn_bias_2");
  for (const at::Tensor* t : {&norm_weight_1, &norm_bias_1, &norm_weight_2, &norm_bias_2,
                              &ffn_weight_1, &ffn_bias_1, &ffn_weight_2, &ffn_bias_2}) {
    check_same_dtype(src, *t, "the layer's weights");
  }
  return at::empty(src.sizes(), src.options());
}

// ---------------------------------------------------------------- bincount
// The engine op runs with the length as minlength (the glue has read
// max(self) + 1 and passes the larger of the two). The dtype and the
// checks are the CPU kernel's, in its order: int64 counts (also for an
// empty input with weights), float32 sums of float32 weights, float64
// sums of any other weights.
at::Tensor bincount_meta(const at::Tensor& self, const std::optional<at::Tensor>& weights,
                         int64_t minlength) {
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount_cpu\" not implemented for '",
                              toString(self.scalar_type()), "'");
  if (self.dim() == 1 && self.numel() == 0) {
    return at::empty({minlength}, self.options().dtype(at::kLong));
  }
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  const bool weighted = weights.has_value() && weights->defined();
  TORCH_CHECK(!weighted || (weights->dim() == 1 && weights->size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  const at::ScalarType dtype = !weighted                              ? at::kLong
                               : weights->scalar_type() == at::kFloat ? at::kFloat
                                                                      : at::kDouble;
  return at::empty({minlength}, self.options().dtype(dtype));
}

// ------------------------------------------------------------ fused RNN cells

// The gate sizes a fused cell of `factor` gates requires of its
// arguments (the checks of PyTorch's LSTM cell meta kernel).
void rnn_cell_check_sizes(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                          const std::optional<at::Tensor>& input_bias,
                          const std::optional<at::Tensor>& hidden_bias, int64_t factor,
                          const at::Tensor& prev_hidden) {
  TORCH_CHECK(input_gates.dim() == 2, input_gates.dim(), " != 2");
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(), input_gates.sizes(), " != ",
              hidden_gates.sizes());
  const int64_t gates_size = input_gates.size(1);
  if (input_bias.has_value() && input_bias->defined()) {
    TORCH_CHECK(input_bias->dim() == 1, input_bias->dim(), " != 1");
    TORCH_CHECK(input_bias->numel() == gates_size, input_bias->numel(), " != ", gates_size);
    TORCH_CHECK(hidden_bias.has_value() && hidden_bias->defined() &&
                    input_bias->sizes() == hidden_bias->sizes(),
                "input_bias and hidden_bias must have the same shape");
  }
  TORCH_CHECK(prev_hidden.dim() == 2, prev_hidden.dim(), " != 2");
  const int64_t expected = input_gates.size(0) * gates_size / factor;
  TORCH_CHECK(prev_hidden.numel() == expected, prev_hidden.numel(), " != ",
              input_gates.size(0), " * ", gates_size, " // ", factor, " (aka ", expected, ")");
}

// _thnn_fused_lstm_cell: hy and cy shaped like cx, a workspace like the
// gates. PyTorch's meta kernel fails for a cell without biases (it reads
// the device of a missing bias).
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_meta(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  rnn_cell_check_sizes(input_gates, hidden_gates, input_bias, hidden_bias, 4, cx);
  return {at::empty_like(cx, at::MemoryFormat::Contiguous),
          at::empty_like(cx, at::MemoryFormat::Contiguous),
          at::empty_like(input_gates, at::MemoryFormat::Contiguous)};
}

// _thnn_fused_gru_cell: hy shaped like hx, a (batch, 5 hidden) workspace.
std::tuple<at::Tensor, at::Tensor> fused_gru_cell_meta(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& hx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  rnn_cell_check_sizes(input_gates, hidden_gates, input_bias, hidden_bias, 3, hx);
  return {at::empty_like(hx, at::MemoryFormat::Contiguous),
          at::empty({hx.size(0), hx.size(1) * 5}, input_gates.options())};
}

// _thnn_fused_gru_cell_backward: the gates' gradients (batch, 3 hidden),
// hx's, and with has_bias the biases' (3 hidden).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward_meta(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  TORCH_CHECK(grad_hy.dim() == 2, "grad_hy must be 2-d, got ", grad_hy.dim(), "-d");
  const int64_t batch = grad_hy.size(0), hidden = grad_hy.size(1);
  TORCH_CHECK(workspace.dim() == 2 && workspace.size(0) == batch && workspace.size(1) == 5 * hidden,
              "workspace must be of shape [", batch, ", ", 5 * hidden, "], got ", workspace.sizes());
  const at::TensorOptions options = grad_hy.options();
  auto bias_grad = [&] { return has_bias ? at::empty({3 * hidden}, options) : at::Tensor(); };
  return {at::empty({batch, 3 * hidden}, options), at::empty({batch, 3 * hidden}, options),
          at::empty({batch, hidden}, options), bias_grad(), bias_grad()};
}

// ------------------------------------------------------------ weight-only quantized matmuls

// The CPU kernels' checks, in their order (its messages name the CPU
// kernels); PyTorch's meta kernels check less, and the one of
// _weight_int4pack_mm reads an attribute only fake tensors have. The
// CUDA-layout ops, which the CPU does not have, check what CUDA's do.

bool is_half_or_float(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf ||
         t.scalar_type() == at::kFloat;
}

// The kernels read the scales through the activation's type.
void check_scales_dtype(const at::Tensor& a, const at::Tensor& scales) {
  TORCH_CHECK(scales.scalar_type() == a.scalar_type(), "expected scalar type ",
              a.scalar_type(), " but found ", scales.scalar_type());
}

void check_group(const char* kernel, int64_t group_size, const at::Tensor& scales_and_zeros,
                 int64_t n) {
  TORCH_CHECK(group_size == 32 || group_size == 64 || group_size == 128 || group_size == 256,
              kernel, ": expect qGroupSize to be 32, 64, 128 or 256, got ", group_size);
  TORCH_CHECK(scales_and_zeros.dim() == 3 && scales_and_zeros.size(1) == n &&
                  scales_and_zeros.size(2) == 2,
              kernel, ": expect qScaleAndZeros to be 3d tensor with sizes [:, ", n, ", 2]");
}

at::Tensor int4pack_for_cpu_meta(const at::Tensor& self, int64_t /*inner_k_tiles*/) {
  constexpr const char* kernel = "_convert_weight_to_int4pack_cpu";
  TORCH_CHECK(self.dim() == 2, kernel, " : expect weight to be 2D tensor.");
  TORCH_CHECK(self.scalar_type() == at::kInt, kernel, " : expect weight to be kInt.");
  TORCH_CHECK(self.size(0) % 16 == 0, kernel, " : expect N to be dividable by 16");
  TORCH_CHECK(self.size(1) % 2 == 0, "_convert_weight_to_int4pack: expect K to be dividable by 2");
  return at::empty({self.size(0), self.size(1) / 2}, self.options().dtype(at::kByte));
}

at::Tensor int4pack_mm_for_cpu_meta(const at::Tensor& a, const at::Tensor& b, int64_t group_size,
                                    const at::Tensor& scales_and_zeros) {
  constexpr const char* kernel = "_weight_int4pack_mm_cpu";
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  TORCH_CHECK(is_half_or_float(a), kernel, " : expect A to be either 32-bit or 16-bit float tensor.");
  TORCH_CHECK(a.is_contiguous(), kernel, " : expect A to be contiguous.");
  TORCH_CHECK(a.dim() == 2, kernel, " : expect A to be 2D tensor.");
  TORCH_CHECK(b.scalar_type() == at::kByte, kernel, " : expect B to be uint8 tensor.");
  TORCH_CHECK(b.is_contiguous(), kernel, " : expect B to be contiguous.");
  TORCH_CHECK(b.size(1) == k / 2, kernel, " : expect B.size(1) to be K/2, got ", b.size(1));
  check_group(kernel, group_size, scales_and_zeros, n);
  TORCH_CHECK(k % group_size == 0, kernel, ": expect K to be divisible by qGroupSize, got K:", k,
              ", qGroupSize:", group_size);
  check_scales_dtype(a, scales_and_zeros);
  return at::empty({m, n}, a.options());
}

at::Tensor int4pack_meta(const at::Tensor& self, int64_t inner_k_tiles) {
  constexpr const char* kernel = "_convert_weight_to_int4pack";
  TORCH_CHECK(self.dim() == 2, kernel, " : expect weight to be 2D tensor.");
  TORCH_CHECK(self.scalar_type() == at::kByte, kernel, " : expect weight to be kByte.");
  TORCH_CHECK(inner_k_tiles == 2 || inner_k_tiles == 4 || inner_k_tiles == 8, kernel,
              " : innerKTiles need to be 2, 4, or 8, got ", inner_k_tiles);
  const int64_t n = self.size(0), k = self.size(1) * 2;
  TORCH_CHECK(n % 8 == 0, kernel, " : expect N to be dividable by 8, got ", n);
  TORCH_CHECK(k % (inner_k_tiles * 16) == 0, kernel, " : expect K to be dividable by ",
              inner_k_tiles * 16, ", got ", k);
  return at::empty({n / 8, k / (inner_k_tiles * 16), 32, inner_k_tiles / 2},
                   self.options().dtype(at::kInt));
}

at::Tensor int4pack_mm_meta(const at::Tensor& a, const at::Tensor& b, int64_t group_size,
                            const at::Tensor& scales_and_zeros) {
  constexpr const char* kernel = "_weight_int4pack_mm";
  TORCH_CHECK(is_half_or_float(a), kernel, " : expect A to be either 32-bit or 16-bit float tensor.");
  TORCH_CHECK(a.is_contiguous(), kernel, " : expect A to be contiguous.");
  TORCH_CHECK(a.dim() == 2, kernel, " : expect A to be 2D tensor.");
  TORCH_CHECK(b.scalar_type() == at::kInt, kernel, " : expect B to be int32 tensor.");
  TORCH_CHECK(b.is_contiguous(), kernel, " : expect B to be contiguous.");
  TORCH_CHECK(b.dim() == 4, kernel, " : expect B to 4d tensor.");
  const int64_t n = b.size(0) * 8, k = a.size(1);
  TORCH_CHECK(b.size(2) == 32 && b.size(1) * b.size(3) * 32 == k, kernel,
              " : expect B to be packed for K = ", k, ", got sizes ", b.sizes());
  check_group(kernel, group_size, scales_and_zeros, n);
  TORCH_CHECK(k % group_size == 0, kernel, ": expect K to be divisible by qGroupSize, got K:", k,
              ", qGroupSize:", group_size);
  check_scales_dtype(a, scales_and_zeros);
  return at::empty({a.size(0), n}, a.options());
}

at::Tensor int8pack_mm_meta(const at::Tensor& a, const at::Tensor& b, const at::Tensor& scales) {
  constexpr const char* kernel = "_weight_int8pack_mm_cpu";
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  TORCH_CHECK(is_half_or_float(a), kernel, " : expect A to be either 32-bit or 16-bit float tensor.");
  TORCH_CHECK(a.dim() == 2, kernel, " : expect A to be 2D tensor.");
  TORCH_CHECK(a.stride(1) == 1, kernel, " : A must be contiguous on the last dimension.");
  TORCH_CHECK(b.scalar_type() == at::kChar, kernel, " : expect B to be int8 tensor.");
  TORCH_CHECK(b.is_contiguous(), kernel, " : expect B to be contiguous.");
  TORCH_CHECK(b.size(1) == k, kernel, " : expect B.size(1) == ", k);
  TORCH_CHECK(scales.dim() == 1 && scales.size(0) == n, kernel,
              " : expect scales to be 1d tensor with size ", n);
  check_scales_dtype(a, scales);
  return at::empty({m, n}, a.options());
}

template <typename Fn>
c10::KernelFunction typed(Fn fn) {
  return c10::KernelFunction::makeFromUnboxedFunction(fn);
}

using Registry = std::unordered_map<std::string, c10::KernelFunction>;

Registry make_registry() {
  Registry r;
  r.emplace("geqrf", typed(TORCH_FN(geqrf_meta)));
  r.emplace("geqrf.a", typed(TORCH_FN(geqrf_out_meta)));
  r.emplace("cat.out", typed(TORCH_FN(cat_out_meta)));
  constexpr auto multi_margin = &zero_dim_loss_meta<5, 6, 1>;
  constexpr auto multilabel_margin = &zero_dim_loss_meta<2, 3, 2>;
  r.emplace("multi_margin_loss", c10::KernelFunction::makeFromBoxedFunction<multi_margin>());
  r.emplace("multi_margin_loss.out", c10::KernelFunction::makeFromBoxedFunction<multi_margin>());
  r.emplace("multilabel_margin_loss_forward",
            c10::KernelFunction::makeFromBoxedFunction<multilabel_margin>());
  r.emplace("multilabel_margin_loss_forward.output",
            c10::KernelFunction::makeFromBoxedFunction<multilabel_margin>());
  r.emplace("multi_margin_loss_backward", typed(TORCH_FN(multi_margin_loss_backward_meta)));
  r.emplace("multilabel_margin_loss_backward", typed(TORCH_FN(multilabel_margin_loss_backward_meta)));
  r.emplace("_cummax_helper", typed(TORCH_FN(cum_extreme_helper_meta)));
  r.emplace("_cummin_helper", typed(TORCH_FN(cum_extreme_helper_meta)));
  r.emplace("_logcumsumexp", typed(TORCH_FN(logcumsumexp_meta)));
  r.emplace("_logcumsumexp.out", typed(TORCH_FN(logcumsumexp_out_meta)));
  r.emplace("_ctc_loss_backward", typed(TORCH_FN(ctc_loss_backward_meta)));
  r.emplace("linalg_lstsq.out", typed(TORCH_FN(linalg_lstsq_out_meta)));
  r.emplace("fractional_max_pool3d_backward", typed(TORCH_FN(fmp3d_backward_meta)));
  r.emplace("fractional_max_pool3d_backward.grad_input", typed(TORCH_FN(fmp3d_backward_out_meta)));
  r.emplace("_unique2.out", typed(TORCH_FN(unique2_out_meta)));
  r.emplace("unique_consecutive.out", typed(TORCH_FN(unique_consecutive_out_meta)));
  r.emplace("unique_dim.out", typed(TORCH_FN(unique_dim_out_meta)));
  r.emplace("unique_dim_consecutive.out", typed(TORCH_FN(unique_dim_consecutive_out_meta)));
  r.emplace("histogram.bin_ct", typed(TORCH_FN(bin_ct_meta)));
  r.emplace("histogram.bin_ct_out", typed(TORCH_FN(bin_ct_out_meta)));
  r.emplace("histogram.bins_tensor", typed(TORCH_FN(bins_tensor_meta)));
  r.emplace("histogram.bins_tensor_out", typed(TORCH_FN(bins_tensor_out_meta)));
  r.emplace("_histogramdd_bin_edges", typed(TORCH_FN(histogramdd_bin_edges_meta)));
  r.emplace("_histogramdd_from_bin_cts", typed(TORCH_FN(histogramdd_from_bin_cts_meta)));
  r.emplace("_histogramdd_from_bin_tensors", typed(TORCH_FN(histogramdd_from_bin_tensors_meta)));
  r.emplace("bincount", typed(TORCH_FN(bincount_meta)));
  r.emplace("_convert_weight_to_int4pack_for_cpu", typed(TORCH_FN(int4pack_for_cpu_meta)));
  r.emplace("_weight_int4pack_mm_for_cpu", typed(TORCH_FN(int4pack_mm_for_cpu_meta)));
  r.emplace("_convert_weight_to_int4pack", typed(TORCH_FN(int4pack_meta)));
  r.emplace("_weight_int4pack_mm", typed(TORCH_FN(int4pack_mm_meta)));
  r.emplace("_weight_int8pack_mm", typed(TORCH_FN(int8pack_mm_meta)));
  r.emplace("_thnn_fused_lstm_cell", typed(TORCH_FN(fused_lstm_cell_meta)));
  r.emplace("_thnn_fused_gru_cell", typed(TORCH_FN(fused_gru_cell_meta)));
  r.emplace("_thnn_fused_gru_cell_backward", typed(TORCH_FN(fused_gru_cell_backward_meta)));
  r.emplace("_native_multi_head_attention", typed(TORCH_FN(native_multi_head_attention_meta)));
  r.emplace("_transformer_encoder_layer_fwd", typed(TORCH_FN(transformer_encoder_layer_fwd_meta)));
  return r;
}

}  // namespace

const c10::KernelFunction* find_meta_shape(const std::string& name) {
  static const Registry registry = make_registry();
  auto found = registry.find(name);
  return found == registry.end() ? nullptr : &found->second;
}

}  // namespace torchtpu
