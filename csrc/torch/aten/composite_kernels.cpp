// Ops composed from other ops on the tpu tensors: results that are not
// tensors (the engine's programs return tensors only), and in-place forms
// whose CPU kernel checks what PyTorch's composite form does not.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/addr_native.h>
#include <ATen/ops/einsum_native.h>
#include <ATen/ops/isclose_native.h>

#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "aten/ops.h"
#include "runtime/runtime.h"

#include <algorithm>
#include <bitset>
#include <iterator>
#include <optional>
#include <string>
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

// Whether every tensor argument on the stack's last n values is a plain
// tpu tensor (no subclass or tracing mode: no Python key), and there is one.
bool plain_tpu_arguments(const torch::jit::Stack& stack, size_t n) {
  bool any = false;
  auto plain = [&](const at::Tensor& t) {
    if (!t.defined()) {
      return true;
    }
    any = true;
    return t.device().type() == c10::DeviceType::PrivateUse1 &&
           !t.key_set().has(c10::DispatchKey::Python);
  };
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const c10::IValue& value = stack[i];
    if (value.isTensor()) {
      if (!plain(value.toTensor())) {
        return false;
      }
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorVector()) {
        if (!plain(t)) {
          return false;
        }
      }
    }
  }
  return any;
}

// einsum's labels: A-Z as 0-25, a-z as 26-51, the dims an ellipsis
// stands for (aligned from the right over every operand) from 52 on.
constexpr int kEllipsisLabel = 52;
using LabelSet = std::bitset<kEllipsisLabel + 64>;

// The contraction order tpu's einsum uses for three operands or more:
// greedy, as opt_einsum's greedy strategy, the pair whose result is
// smallest first (then the one with fewer products, then the first pair),
// in the path format PyTorch's einsum takes (each step's two positions in
// the list of what is left, its result appended). It depends on the
// equation and the shapes alone, so a call compiles one program whatever
// torch.backends.opt_einsum says. nullopt where the equation does not
// parse: PyTorch's composite form then raises its error.
std::optional<std::vector<int64_t>> einsum_greedy_path(const std::string& equation,
                                                       const std::vector<at::Tensor>& tensors) {
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  const size_t n = tensors.size();
  std::vector<std::vector<int>> labels(n);  // per operand, -1 for an ellipsis
  size_t k = 0;
  for (size_t i = 0; i < lhs.size(); ++i) {
    const char ch = lhs[i];
    if (ch == ',') {
      if (++k >= n) {
        return std::nullopt;
      }
    } else if (ch == '.') {
      if (lhs.compare(i, 3, "...") != 0) {
        return std::nullopt;
      }
      labels[k].push_back(-1);
      i += 2;
    } else if (ch >= 'A' && ch <= 'Z') {
      labels[k].push_back(ch - 'A');
    } else if (ch >= 'a' && ch <= 'z') {
      labels[k].push_back(26 + (ch - 'a'));
    } else if (ch != ' ') {
      return std::nullopt;
    }
  }
  if (k + 1 != n) {
    return std::nullopt;
  }
  // Each operand's labels by dim, and the size of each label.
  int64_t ellipsis = 0;
  std::vector<int64_t> ell_dims(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t named = static_cast<int64_t>(labels[i].size()) -
                          std::count(labels[i].begin(), labels[i].end(), -1);
    const bool has_ell = named != static_cast<int64_t>(labels[i].size());
    ell_dims[i] = tensors[i].dim() - named;
    if (ell_dims[i] < 0 || (!has_ell && ell_dims[i] != 0) ||
        named + (has_ell ? 1 : 0) != static_cast<int64_t>(labels[i].size())) {
      return std::nullopt;
    }
    ellipsis = std::max(ellipsis, ell_dims[i]);
  }
  if (ellipsis > 64) {
    return std::nullopt;
  }
  std::vector<int64_t> size(kEllipsisLabel + 64, 1);
  std::vector<int> count(kEllipsisLabel + 64, 0);
  std::vector<LabelSet> sets(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t dim = 0;
    for (int label : labels[i]) {
      if (label < 0) {
        for (int64_t e = 0; e < ell_dims[i]; ++e, ++dim) {
          const int id = kEllipsisLabel + static_cast<int>(ellipsis - ell_dims[i] + e);
          size[id] = std::max(size[id], tensors[i].size(dim));
          sets[i].set(id);
        }
        continue;
      }
      size[label] = std::max(size[label], tensors[i].size(dim++));
      sets[i].set(label);
      ++count[label];
    }
  }
  LabelSet out;  // an ellipsis left out of an explicit output is summed
  if (arrow == std::string::npos || equation.find("...", arrow + 2) != std::string::npos) {
    for (int64_t e = 0; e < ellipsis; ++e) {
      out.set(kEllipsisLabel + e);
    }
  }
  if (arrow == std::string::npos) {
    for (int label = 0; label < kEllipsisLabel; ++label) {
      if (count[label] == 1) {
        out.set(label);
      }
    }
  } else {
    LabelSet named;
    for (const char ch : equation.substr(arrow + 2)) {
      if (ch >= 'A' && ch <= 'Z') {
        named.set(ch - 'A');
      } else if (ch >= 'a' && ch <= 'z') {
        named.set(26 + (ch - 'a'));
      }
    }
    for (int label = 0; label < kEllipsisLabel; ++label) {
      out[label] = named[label];
    }
  }
  auto elements = [&](const LabelSet& set) {
    double e = 1.0;
    for (size_t id = 0; id < set.size(); ++id) {
      if (set[id]) {
        e *= static_cast<double>(size[id]);
      }
    }
    return e;
  };
  std::vector<int64_t> path;
  while (sets.size() > 1) {
    size_t best_i = 0, best_j = 1;
    double best_size = -1.0, best_products = 0.0;
    LabelSet best;
    for (size_t i = 0; i < sets.size(); ++i) {
      for (size_t j = i + 1; j < sets.size(); ++j) {
        LabelSet kept = out;
        for (size_t o = 0; o < sets.size(); ++o) {
          if (o != i && o != j) {
            kept |= sets[o];
          }
        }
        const LabelSet result = (sets[i] | sets[j]) & kept;
        const double result_size = elements(result);
        const double products = elements(sets[i] | sets[j]);
        if (best_size < 0 || result_size < best_size ||
            (result_size == best_size && products < best_products)) {
          best_size = result_size;
          best_products = products;
          best_i = i;
          best_j = j;
          best = result;
        }
      }
    }
    path.push_back(static_cast<int64_t>(best_i));
    path.push_back(static_cast<int64_t>(best_j));
    sets.erase(sets.begin() + static_cast<std::ptrdiff_t>(best_j));
    sets.erase(sets.begin() + static_cast<std::ptrdiff_t>(best_i));
    sets.push_back(best);
  }
  return path;
}

// einsum(equation, tensors, path): PyTorch's composite form (its parsing,
// broadcasting, diagonals, autograd through the ops it runs, autocast of
// those ops) in tpu's contraction order, with those ops run as
// one program in strict mode, where each of its permutes, products and
// sums was a program per shape: one compile and one launch per call.
// Tensors of a subclass or a tracing mode (Python key) take the composite
// form alone.
void einsum_kernel(const c10::OperatorHandle& /*op*/, torch::jit::Stack* stack) {
  const size_t base = stack->size() - 3;
  const std::string equation((*stack)[base].toStringRef());
  const std::vector<at::Tensor> tensors = (*stack)[base + 1].toTensorVector();
  // Three operands or more are contracted in tpu's order
  // (einsum_greedy_path), where the equation parses.
  std::optional<std::vector<int64_t>> path;
  if (!(*stack)[base + 2].isNone()) {
    path = (*stack)[base + 2].toIntVector();
  }
  if (tensors.size() > 2) {
    if (std::optional<std::vector<int64_t>> greedy = einsum_greedy_path(equation, tensors)) {
      path = std::move(greedy);
    }
  }
  const at::OptionalIntArrayRef path_ref =
      path ? at::OptionalIntArrayRef(*path) : at::OptionalIntArrayRef(std::nullopt);
  at::Tensor result;
  if (plain_tpu_arguments(*stack, 3)) {
    StrictGroup group("einsum");
    result = at::native::einsum(equation, tensors, path_ref);
    group.end();
  } else {
    result = at::native::einsum(equation, tensors, path_ref);
  }
  torch::jit::drop(*stack, 3);
  torch::jit::push(*stack, std::move(result));
}

// A CompositeImplicitAutograd op whose decomposition runs several
// programs (scaled_dot_product_attention's math form: nine in strict mode):
// its composite kernel, with autograd and autocast through the ops it runs
// as always, those ops grouped into one program in strict mode.
void grouped_composite_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  if (plain_tpu_arguments(*stack, n)) {
    StrictGroup group(op.schema().name().c_str());
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
    group.end();
    return;
  }
  op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
}

// CompositeImplicitAutograd ops whose decomposition is a poor way to run
// them on tpu, each with an engine op that replaces it on the backend key.
// silu_backward: PyTorch's form for devices without a kernel of their own
// builds a tensor of ones of the input's size and runs six ops over it
// (seven programs in strict mode; in fused mode the ones are a program of
// their own each backward pass, and the window reads them from memory).
constexpr const char* kEngineOverComposite[] = {"silu_backward"};

// tpu's autograd key for those ops: the engine op, below autograd. The
// decomposition, as on any device without a kernel, where autograd must
// record the call (grad mode on and an input that requires grad: the op
// called directly inside a differentiable computation; silu's own double
// backward uses another formula) or an argument is not a plain tpu tensor
// (a subclass, a tracing mode).
void engine_over_composite_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  bool record = false;
  if (c10::GradMode::is_enabled()) {
    for (size_t i = stack->size() - n; i < stack->size(); ++i) {
      const c10::IValue& value = (*stack)[i];
      record = record || (value.isTensor() && value.toTensor().requires_grad());
    }
  }
  if (record || !plain_tpu_arguments(*stack, n)) {
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
    return;
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
}

}  // namespace

bool engine_op_replaces_composite(const std::string& name) {
  return std::find(std::begin(kEngineOverComposite), std::end(kEngineOverComposite), name) !=
         std::end(kEngineOverComposite);
}

std::vector<std::string> register_grouped_composites() {
  // Kept for the life of the process: dropping them would deregister.
  static auto* backend = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                            __FILE__, __LINE__);
  static auto* autograd = new torch::Library(torch::Library::IMPL, "aten",
                                             c10::DispatchKey::AutogradPrivateUse1, __FILE__, __LINE__);
  std::vector<std::string> registered;
  for (const char* name : {"scaled_dot_product_attention", "cosine_similarity", "pairwise_distance",
                           "cosine_embedding_loss", "triplet_margin_loss", "margin_ranking_loss",
                           "kl_div", "cross_entropy_loss"}) {
    const std::optional<c10::OperatorHandle> handle =
        c10::Dispatcher::singleton().findSchema({std::string("aten::") + name, ""});
    // a composite only, and one that has no tpu kernel of its own
    if (!handle || !handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
      continue;
    }
    backend->impl(name, torch::CppFunction::makeFromBoxedFunction<&grouped_composite_kernel>());
    autograd->impl(name, torch::CppFunction::makeFromBoxedFunction<&grouped_composite_kernel>());
    registered.emplace_back(name);
  }
  return registered;
}

// einsum is CompositeImplicitAutograd: a kernel for tpu's autograd key runs
// it with autograd (einsum_kernel's composite form records the gradients
// of the ops it runs), the one for the backend key in inference mode.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("einsum", torch::CppFunction::makeFromBoxedFunction<&einsum_kernel>());
  for (const char* name : kEngineOverComposite) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&engine_over_composite_kernel>());
  }
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
