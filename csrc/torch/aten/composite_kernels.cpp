// Ops composed from other ops on the tpu tensors: results that are not
// tensors (the engine's programs return tensors only), and in-place forms
// whose CPU kernel checks what PyTorch's composite form does not.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/addr_native.h>
#include <ATen/ops/einsum_native.h>
#include <ATen/ops/isclose_native.h>

#include <c10/util/Exception.h>
#include <torch/library.h>

#include "aten/ops.h"
#include "runtime/runtime.h"

#include <vector>

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

// addr and addr.out: the CPU kernel's checks of beta and alpha against the
// result's dtype (the promotion of all three operands, self expanded to
// 2-d), which PyTorch's composite form (math_addr) leaves out: a Boolean
// scalar for a non-Boolean result, a float one for an integral result, and
// one the dtype cannot hold (a complex scalar for a real result), refused
// by the same conversion the CPU kernel makes.
void check_addr_scalars(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                        const at::Scalar& beta, const at::Scalar& alpha) {
  const at::ScalarType dtype =
      at::promote_types(at::promote_types(self.scalar_type(), vec1.scalar_type()), vec2.scalar_type());
  for (const auto& [scalar, name] : {std::pair<const at::Scalar&, const char*>{beta, "beta"},
                                     std::pair<const at::Scalar&, const char*>{alpha, "alpha"}}) {
    TORCH_CHECK(!scalar.isBoolean() || dtype == at::kBool, "Boolean ", name,
                " only supported for Boolean results.");
    TORCH_CHECK(at::isFloatingType(dtype) || at::isComplexType(dtype) || scalar.isIntegral(true),
                "For integral input tensors, argument ", name,
                " must not be a floating point number.");
  }
  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(at::kBFloat16, at::kHalf, at::kBool, dtype, "addr_cpu", [&] {
    (void)beta.to<scalar_t>();
    (void)alpha.to<scalar_t>();
  });
}

at::Tensor addr_kernel(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                       const at::Scalar& beta, const at::Scalar& alpha) {
  check_addr_scalars(self, vec1, vec2, beta, alpha);
  return at::native::math_addr(self, vec1, vec2, beta, alpha);
}

at::Tensor& addr_out_kernel(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                            const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  check_addr_scalars(self, vec1, vec2, beta, alpha);
  return at::native::math_addr_out(self, vec1, vec2, beta, alpha, out);
}

// addr_: the CPU kernel writes self as its own out= and so takes only a
// 2-d self, where the composite form would broadcast a smaller self (and
// then resize it, a shape change an in-place op never makes on the CPU).
at::Tensor& addr_inplace_kernel(at::Tensor& self, const at::Tensor& vec1,
                                const at::Tensor& vec2, const at::Scalar& beta,
                                const at::Scalar& alpha) {
  TORCH_CHECK(self.dim() == 2, "2D tensor expected, got ", self.dim(),
              "D tensor for input");
  TORCH_CHECK(vec1.dim() != 1 || vec2.dim() != 1 ||
                  (self.size(0) == vec1.size(0) && self.size(1) == vec2.size(0)),
              "size mismatch, input: ", self.sizes(), ", v1: ", vec1.sizes(),
              ", v2: ", vec2.sizes());
  at::Tensor result = at::addr(self, vec1, vec2, beta, alpha);
  TORCH_CHECK(at::canCast(result.scalar_type(), self.scalar_type()),
              "result type ", result.scalar_type(),
              " can't be cast to the desired output type ", self.scalar_type());
  return self.copy_(result);
}

// _compute_linear_combination(input, coefficients): out[i] = sum_j
// coefficients[i, j] * input[j], input (n, *) and coefficients (m, n)
// (matrix_exp's helper for its polynomials). One matrix product over
// input's trailing dims flattened, computed in input's dtype (the CPU's
// kernel reads the coefficients in that dtype too); Booleans as the CPU's
// += of products: any of the ANDs.
at::Tensor linear_combination(const at::Tensor& input, const at::Tensor& coefficients) {
  TORCH_CHECK(input.dim() > 0 && input.numel() > 0, "Empty tensor not supported");
  TORCH_CHECK(coefficients.dim() == 2 && coefficients.size(1) == input.size(0),
              "_compute_linear_combination: expected coefficients of shape (m, ", input.size(0), "), got ",
              coefficients.sizes());
  std::vector<int64_t> sizes = input.sizes().vec();
  sizes[0] = coefficients.size(0);
  const at::Tensor flat = input.reshape({input.size(0), -1});
  if (input.scalar_type() == at::kBool) {
    const at::Tensor c = coefficients.to(at::kBool).unsqueeze(2);
    return at::logical_and(c, flat.unsqueeze(0)).any(1).reshape(sizes);
  }
  return at::mm(coefficients.to(input.scalar_type()), flat).reshape(sizes);
}

at::Tensor linear_combination_kernel(const at::Tensor& input, const at::Tensor& coefficients) {
  return linear_combination(input, coefficients).contiguous();
}

// The out= form adds into out, as the CPU's kernel does (its functional
// form is this on zeros); out must already have the result's shape.
at::Tensor& linear_combination_out_kernel(const at::Tensor& input, const at::Tensor& coefficients,
                                          at::Tensor& out) {
  const at::Tensor r = linear_combination(input, coefficients);
  TORCH_CHECK(out.sizes() == r.sizes(), "_compute_linear_combination: out has shape ", out.sizes(),
              " where the result has shape ", r.sizes());
  if (out.scalar_type() == at::kBool) {
    return out.logical_or_(r);
  }
  return out.add_(r.to(out.scalar_type()));
}

// isclose(self, other, rtol, atol, equal_nan): floating and complex
// operands of one dtype on one device run the engine's isclose, one
// program where PyTorch's composite form (which stays its definition:
// the meta kernel that sizes the result and raises its errors is that
// form) runs a dozen, one per shape each: the comparisons of every
// assertEqual in PyTorch's tests. Other dtypes, mixed operands and
// negative tolerances take the composite form, errors included.
void isclose_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t base = stack->size() - 5;
  const at::Tensor& self = (*stack)[base].toTensor();
  const at::Tensor& other = (*stack)[base + 1].toTensor();
  const double rtol = (*stack)[base + 2].toDouble();
  const double atol = (*stack)[base + 3].toDouble();
  const bool equal_nan = (*stack)[base + 4].toBool();
  const at::ScalarType dt = self.scalar_type();
  const bool engine = dt == other.scalar_type() && self.device() == other.device() &&
                      (dt == at::kHalf || dt == at::kBFloat16 || dt == at::kFloat ||
                       dt == at::kDouble || dt == at::kComplexFloat || dt == at::kComplexDouble) &&
                      rtol >= 0 && atol >= 0;
  if (engine) {
    // the CPU's words for shapes that do not broadcast (the meta kernel's
    // are another message)
    (void)at::infer_size(self.sizes(), other.sizes());
    run_engine_op(op, stack);
    return;
  }
  at::Tensor r = at::native::isclose(self, other, rtol, atol, equal_nan);
  torch::jit::drop(*stack, 5);
  torch::jit::push(*stack, std::move(r));
}

// The ops of one composite call run as one program in strict mode
// (ttpu_runtime_group_begin); a no-op in the other modes.
class StrictGroup {
 public:
  explicit StrictGroup(const char* what) : what_(what) {
    check(ttpu_runtime_group_begin(runtime(), &grouped_), what_);
  }
  StrictGroup(const StrictGroup&) = delete;
  StrictGroup& operator=(const StrictGroup&) = delete;
  // Runs the group's program (enqueued); its error, if any, is raised.
  void end() {
    const int grouped = grouped_;
    grouped_ = 0;
    check(ttpu_runtime_group_end(runtime(), grouped), what_);
  }
  // Left by an exception: back to strict mode, the group's ops run, and
  // the exception already in flight is the one raised.
  ~StrictGroup() {
    if (grouped_ != 0) {
      if (ttpu_status* status = ttpu_runtime_group_end(runtime(), grouped_)) {
        ttpu_status_free(status);
      }
    }
  }

 private:
  const char* what_;
  int grouped_ = 0;
};

// einsum(equation, tensors, path): PyTorch's composite form (its parsing,
// broadcasting, diagonals, the contraction order `path` gives, autograd
// through the ops it runs, autocast of those ops), with those ops run as
// one program in strict mode, where each of its permutes, products and
// sums was a program per shape: one compile and one launch per call.
// Tensors of a subclass or a tracing mode (Python key) take the composite
// form alone.
void einsum_kernel(const c10::OperatorHandle& /*op*/, torch::jit::Stack* stack) {
  const size_t base = stack->size() - 3;
  const std::string equation((*stack)[base].toStringRef());
  const std::vector<at::Tensor> tensors = (*stack)[base + 1].toTensorVector();
  const std::optional<std::vector<int64_t>> path =
      (*stack)[base + 2].isNone() ? std::nullopt
                                  : std::optional<std::vector<int64_t>>((*stack)[base + 2].toIntVector());
  const at::OptionalIntArrayRef path_ref =
      path ? at::OptionalIntArrayRef(*path) : at::OptionalIntArrayRef(std::nullopt);
  bool plain = !tensors.empty();
  for (const at::Tensor& t : tensors) {
    plain = plain && t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 &&
            !t.key_set().has(c10::DispatchKey::Python);
  }
  at::Tensor result;
  if (plain) {
    StrictGroup group("einsum");
    result = at::native::einsum(equation, tensors, path_ref);
    group.end();
  } else {
    result = at::native::einsum(equation, tensors, path_ref);
  }
  torch::jit::drop(*stack, 3);
  torch::jit::push(*stack, std::move(result));
}

}  // namespace

// einsum is CompositeImplicitAutograd: a kernel for tpu's autograd key runs
// it with autograd (einsum_kernel's composite form records the gradients
// of the ops it runs), the one for the backend key in inference mode.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("einsum", torch::CppFunction::makeFromBoxedFunction<&einsum_kernel>());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("einsum", torch::CppFunction::makeFromBoxedFunction<&einsum_kernel>());
  m.impl("equal", equal_kernel);
  m.impl("isclose", torch::CppFunction::makeFromBoxedFunction<&isclose_kernel>());
  m.impl("addr", addr_kernel);
  m.impl("addr.out", addr_out_kernel);
  m.impl("addr_", addr_inplace_kernel);
  m.impl("_compute_linear_combination", linear_combination_kernel);
  m.impl("_compute_linear_combination.out", linear_combination_out_kernel);
}

}  // namespace torchtpu
