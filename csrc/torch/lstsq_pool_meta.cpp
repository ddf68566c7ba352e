// Meta kernels for linalg_lstsq.out and fractional_max_pool3d_backward,
// which PyTorch ships without one. The engine kernel runs each op on meta
// tensors first to size its outputs and to raise the CPU's argument
// errors; these reproduce the CPU kernels' checks (in their order) and
// output shapes, no math.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace torchtpu {

namespace {

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
  const std::string driver = driver_opt.has_value() ? std::string(*driver_opt) : "gelsy";
  TORCH_CHECK(driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss",
              "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");

  const int64_t m = input.size(-2), n = input.size(-1);
  const int64_t k = vector_case ? 1 : other.size(-1);
  std::vector<int64_t> in_batch(in_sizes.begin(), in_sizes.end() - 2);
  const auto o_sizes = other.sizes();
  std::vector<int64_t> o_batch(o_sizes.begin(), o_sizes.end() - (vector_case ? 1 : 2));
  std::vector<int64_t> batch = at::infer_size(in_batch, o_batch);
  TORCH_CHECK(input.scalar_type() == at::kFloat || input.scalar_type() == at::kDouble,
              "This function doesn't handle types other than float and double");

  std::vector<int64_t> sol = batch;
  sol.push_back(n);
  if (!vector_case) sol.push_back(k);
  solution.resize_(sol);
  if (m > n && driver != "gelsy") {
    std::vector<int64_t> res = batch;
    res.push_back(k);
    residuals.resize_(res);
  } else {
    residuals.resize_({0});
  }
  if (driver == "gels") {
    rank.resize_({0});
  } else {
    rank.resize_(in_batch);
  }
  if (driver == "gelsd" || driver == "gelss") {
    std::vector<int64_t> sv = in_batch;
    sv.push_back(std::min(m, n));
    singular_values.resize_(sv);
  } else {
    singular_values.resize_({0});
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("linalg_lstsq.out", linalg_lstsq_out_meta);
  m.impl("fractional_max_pool3d_backward", fmp3d_backward_meta);
  m.impl("fractional_max_pool3d_backward.grad_input", fmp3d_backward_out_meta);
}

}  // namespace torchtpu
