// out= overloads from their functional ops: an ATen overload that writes
// into `out` tensors (sum.IntList_out, max.dim_max, cumsum.out, ...) and has
// no tpu kernel of its own, but whose functional counterpart has one or
// decomposes (same arguments without the outs, one return per out), runs that op and
// writes its results into the outs the way the CPU's out= kernels do:
//
//   - an out must be on the result's device;
//   - its dtype: for ops with a `dtype=` argument left None, the out's
//     dtype is the dtype asked for, as on the CPU (sum(out=double) sums in
//     double); otherwise any dtype the result type can be cast to, into
//     which the result is cast, as PyTorch's reference out= wrapper (and
//     so its meta kernels, which size the engine ops' outs) does. Some CPU
//     kernels are stricter and refuse any other dtype (mm, index_select,
//     ...): there tpu casts where the CPU raises. An op with several outs
//     (sort, mode, max.dim_max, ...) takes each in its result's dtype
//     exactly, as every CPU kernel of such an op does;
//   - its shape: resized as at::native::resize_output does (a warning
//     when a non-empty out is resized), taking the result's memory format
//     when it had to be resized;
//   - the values are copied in, through views and strides.
//
// The registration runs once, after every other tpu kernel is registered,
// so an out= overload with a kernel of its own keeps it.
#include "aten/cpu_replay.h"
#include "aten/ops.h"

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torchtpu {

namespace {

struct OutForm {
  c10::OperatorHandle functional;
  size_t num_in = 0;                 // the functional's arguments
  std::vector<size_t> out_args;      // positions of the outs in the out= schema
  std::optional<size_t> dtype_arg;   // the functional's `ScalarType? dtype`
};


bool same_argument(const c10::Argument& a, const c10::Argument& b) {
  return a.name() == b.name() && *a.real_type() == *b.real_type() && a.kwarg_only() == b.kwarg_only();
}

// `functional` as the counterpart of out= schema `schema`, if the two
// line up.
std::optional<OutForm> match_with(const c10::FunctionSchema& schema, const c10::OperatorHandle& functional) {
  // a tpu kernel, or a decomposition into ops that may have one
  if (!functional.hasSchema() || !(functional.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
                                   functional.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
                                   functional.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd))) {
    return std::nullopt;
  }
  const c10::OperatorHandle* handle = &functional;
  const c10::FunctionSchema& f = handle->schema();
  OutForm form{*handle, 0, {}, std::nullopt};
  std::vector<const c10::Argument*> ins;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::Argument& a = schema.arguments()[i];
    if (a.is_out()) {
      form.out_args.push_back(i);
    } else {
      if (!form.out_args.empty()) {
        return std::nullopt;  // outs come last
      }
      ins.push_back(&a);
    }
  }
  if (form.out_args.empty() || ins.size() != f.arguments().size() ||
      form.out_args.size() != f.returns().size() || schema.returns().size() != form.out_args.size()) {
    return std::nullopt;
  }
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!same_argument(*ins[i], f.arguments()[i])) {
      return std::nullopt;
    }
    if (f.arguments()[i].name() == "dtype" &&
        *f.arguments()[i].real_type() == *c10::OptionalType::create(c10::ScalarTypeType::get())) {
      form.dtype_arg = i;
    }
  }
  for (const c10::Argument& r : f.returns()) {
    if (r.real_type()->kind() != c10::TypeKind::TensorType || r.alias_info() != nullptr) {
      return std::nullopt;
    }
  }
  form.num_in = ins.size();
  return form;
}

// The functional counterpart of out= schema `schema`: the overload its
// name points to ("dim_values" -> "dim"), else any overload of the op
// whose arguments are the out= form's without the outs (mean.out ->
// mean.dim). `overloads` lists every overload by op name.
std::optional<OutForm> match(const c10::FunctionSchema& schema,
                             const std::map<std::string, std::vector<c10::OperatorHandle>>& overloads) {
  const std::string functional_ov = overload_of_functional(schema.overload_name());
  if (functional_ov != "-") {
    if (const auto handle = c10::Dispatcher::singleton().findSchema({schema.name(), functional_ov})) {
      if (auto form = match_with(schema, *handle)) {
        return form;
      }
    }
  }
  const auto found = overloads.find(schema.name());
  if (found != overloads.end()) {
    for (const c10::OperatorHandle& handle : found->second) {
      if (handle.schema().overload_name() == schema.overload_name()) {
        continue;
      }
      bool has_out = false;
      for (const c10::Argument& a : handle.schema().arguments()) {
        has_out = has_out || a.is_out() || (a.alias_info() != nullptr && a.alias_info()->isWrite());
      }
      if (has_out) {
        continue;
      }
      if (auto form = match_with(schema, handle)) {
        return form;
      }
    }
  }
  return std::nullopt;
}

class OutKernel final : public c10::OperatorKernel {
 public:
  explicit OutKernel(OutForm form) : form_(std::move(form)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/, torch::jit::Stack* stack) {
    const size_t n = op.schema().arguments().size();
    std::vector<c10::IValue> args(stack->end() - n, stack->end());
    torch::jit::drop(*stack, n);
    std::vector<at::Tensor> outs;
    for (size_t i : form_.out_args) {
      outs.push_back(args[i].toTensor());
    }
    torch::jit::Stack call(args.begin(), args.begin() + form_.num_in);
    if (form_.dtype_arg && outs.size() == 1) {
      c10::IValue& dtype = call[*form_.dtype_arg];
      if (dtype.isNone()) {
        dtype = outs[0].scalar_type();
      } else {
        TORCH_CHECK(dtype.toScalarType() == outs[0].scalar_type(), "Expected out tensor to have dtype ",
                    dtype.toScalarType(), ", but got ", outs[0].scalar_type(), " instead");
      }
    }
    {
      // A decomposition that calls this out= form again would recurse.
      thread_local std::vector<const OutKernel*> active;
      for (const OutKernel* k : active) {
        TORCH_CHECK_NOT_IMPLEMENTED(k != this, "The operator 'aten::", op.schema().name(), ".",
                                    op.schema().overload_name(), "' is not implemented for device 'tpu'");
      }
      active.push_back(this);
      struct Pop {
        ~Pop() { active.pop_back(); }
      } pop;
      form_.functional.callBoxed(&call);
    }
    TORCH_INTERNAL_ASSERT(call.size() == outs.size());
    // Every out is checked before any is written. An out the rules below
    // refuse raises the CPU kernel's own error where it has one (its words
    // name the op: "torch.linalg.eigvals: Expected eigenvalues to be
    // safely castable ..."), else the rule's.
    for (size_t k = 0; k < outs.size(); ++k) {
      const at::Tensor result = call[k].toTensor();
      const at::Tensor& out = outs[k];
      if (out.device() != result.device() ||
          (outs.size() != 1 && out.scalar_type() != result.scalar_type()) ||
          !at::canCast(result.scalar_type(), out.scalar_type())) {
        throw_cpu_verdict(op, args);
      }
      TORCH_CHECK(out.device() == result.device(), "Expected out tensor to have device ", result.device(),
                  ", but got ", out.device(), " instead");
      TORCH_CHECK(outs.size() == 1 || out.scalar_type() == result.scalar_type(),
                  "Expected out tensor to have dtype ", result.dtype(), ", but got ", out.dtype(),
                  " instead");
      TORCH_CHECK(at::canCast(result.scalar_type(), out.scalar_type()), "result type ", result.scalar_type(),
                  " can't be cast to the desired output type ", out.scalar_type());
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      const at::Tensor result = call[k].toTensor();
      at::Tensor& out = outs[k];
      if (at::native::resize_output(out, result.sizes())) {
        const c10::MemoryFormat format = result.suggest_memory_format();
        if (format != c10::MemoryFormat::Contiguous) {
          out.resize_(result.sizes(), format);
        }
      }
      out.copy_(result);
    }
    for (const at::Tensor& out : outs) {
      stack->emplace_back(out);
    }
  }

 private:
  OutForm form_;
};

}  // namespace

std::string overload_of_functional(const std::string& ov) {
  if (ov == "out" || ov == "values") {
    return "";
  }
  if (ov == "dim_max" || ov == "dim_min") {
    return "dim";
  }
  for (const char* suffix : {"_out", "_values"}) {
    const std::string s(suffix);
    if (ov.size() > s.size() && ov.compare(ov.size() - s.size(), s.size(), s) == 0) {
      return ov.substr(0, ov.size() - s.size());
    }
  }
  return "-";  // no functional counterpart by name
}

std::vector<std::string> register_out_forms() {
  std::vector<std::string> registered;
  static auto* library =
      new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  const std::vector<c10::OperatorName> names = c10::Dispatcher::singleton().getAllOpNames();
  std::map<std::string, std::vector<c10::OperatorHandle>> overloads;
  for (const c10::OperatorName& name : names) {
    if (name.name.rfind("aten::", 0) == 0) {
      if (const auto handle = c10::Dispatcher::singleton().findSchema(name)) {
        overloads[name.name].push_back(*handle);
      }
    }
  }
  for (const c10::OperatorName& name : names) {
    if (name.name.rfind("aten::", 0) != 0) {
      continue;
    }
    const auto handle = c10::Dispatcher::singleton().findSchema(name);
    if (!handle || !handle->hasSchema() || handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) {
      continue;
    }
    std::optional<OutForm> form = match(handle->schema(), overloads);
    if (!form) {
      continue;
    }
    std::string full = name.name.substr(6);
    if (!name.overload_name.empty()) {
      full += "." + name.overload_name;
    }
    library->impl(full.c_str(),
                  torch::CppFunction::makeFromBoxedFunctor(std::make_unique<OutKernel>(std::move(*form))));
    registered.push_back(full);
  }
  return registered;
}

}  // namespace torchtpu
