// The one boxed kernel behind every op of the engine's lowering table. It
// translates a dispatcher call into a ttpu_op_call: PyTorch's meta kernels
// give output geometry and CPU-identical errors, the engine does the math.
// Its parts, one concept each: op_info.h (what an op is, built once),
// write_overlap.h (writes through shared memory), meta_geometry.h (output
// geometry and errors from the meta kernels), cpu_replay.h (the CPU's own
// answers, where only it has them), call_packer.h (the ttpu_op_call).
#include "aten/call_args.h"
#include "aten/call_packer.h"
#include "aten/host_layout.h"
#include "aten/meta_geometry.h"
#include "aten/op_info.h"
#include "aten/ops.h"
#include "aten/matrix_operands.h"
#include "aten/write_overlap.h"
#include "runtime/generator.h"
#include "runtime/runtime.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/core/List.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <memory>
#include <optional>

namespace torchtpu {

namespace {

// The device every tensor of the call must be on; CPU 0-d tensors that
// are read are scalars and exempt, as on CUDA (TensorIterator's
// allow_cpu_scalars covers inputs only: a written one is a mismatch).
class DeviceCheck {
 public:
  void see(const at::Tensor& tensor, bool written) {
    if (!tensor.defined() || (!written && is_cpu_scalar(tensor))) {
      return;
    }
    see(tensor.device());
  }

  void see(const c10::Device& device) {
    if (!first_) {
      first_ = device;
      return;
    }
    TORCH_CHECK(*first_ == device,
                "Expected all tensors to be on the same device, but found at "
                "least two devices, ", *first_, " and ", device, "!");
  }

  // The tpu device index of the call (current device if nothing says).
  c10::DeviceIndex device(std::optional<c10::DeviceIndex> requested) const {
    if (first_) {
      TORCH_CHECK(first_->type() == c10::DeviceType::PrivateUse1,
                  "Expected all tensors to be on the same device, but found "
                  "at least two devices, ", *first_, " and ",
                  tpu_device(requested.value_or(current_device())), "!");
      return first_->has_index() ? first_->index() : current_device();
    }
    return requested.value_or(current_device());
  }

 private:
  std::optional<c10::Device> first_;
};

at::Tensor allocate_like(const TensorGeometry& geometry,
                         c10::DeviceIndex device) {
  if (!geometry.defined) {
    return at::Tensor();
  }
  return empty_strided_tpu(geometry.sizes, geometry.strides, geometry.dtype,
                           device);
}

void run_engine_op_with(const OpInfo& info, const c10::OperatorHandle& op,
                        torch::jit::Stack* stack, bool allow_cpu_fallback) {
  TORCH_CHECK_NOT_IMPLEMENTED(info.unsupported.empty(), "aten::", info.name,
                              " cannot run on the tpu engine: ",
                              info.unsupported);
  if (info.engine_id < 0) {
    if (allow_cpu_fallback && try_cpu_fallback(op, stack)) {
      return;
    }
    TORCH_CHECK_NOT_IMPLEMENTED(false, "The operator 'aten::", info.name,
                                "' is not implemented for device 'tpu'. Set "
                                "TORCHTPU_CPU_FALLBACK=1 to run it on the CPU "
                                "(slow).");
  }
  const size_t num_args = info.num_args;
  TORCH_INTERNAL_ASSERT(stack->size() >= num_args);
  // A written tensor with a lazy conjugate or negative bit (out=z.conj()):
  // the ops PyTorch counts as handling those bits themselves (mm,
  // solve_triangular, ...) reach here without the Conjugate fallback. Run
  // on a resolved copy, then write it back through copy_, which honours
  // the bit, and return the tensor that was passed.
  std::vector<std::pair<at::Tensor, at::Tensor>> lazy;  // (passed, resolved)
  const size_t base = stack->size() - num_args;
  for (size_t i = 0; i < num_args; ++i) {
    const c10::IValue& value = (*stack)[base + i];
    if (info.is_mutable[i] && value.isTensor() && value.toTensor().defined() &&
        (value.toTensor().is_conj() || value.toTensor().is_neg())) {
      const at::Tensor passed = value.toTensor();
      at::Tensor resolved = passed.resolve_conj().resolve_neg();
      (*stack)[base + i] = resolved;
      lazy.emplace_back(passed, std::move(resolved));
    }
  }
  if (!lazy.empty()) {
    const size_t n_returns = op.schema().returns().size();
    run_engine_op_with(info, op, stack, allow_cpu_fallback);
    for (auto& [passed, resolved] : lazy) {
      if (passed.sizes() != resolved.sizes()) {
        passed.resize_(resolved.sizes());
      }
      passed.copy_(resolved);
    }
    for (size_t r = stack->size() - n_returns; r < stack->size(); ++r) {
      for (const auto& [passed, resolved] : lazy) {
        if ((*stack)[r].isTensor() && (*stack)[r].toTensor().is_same(resolved)) {
          (*stack)[r] = passed;
        }
      }
    }
    return;
  }
  // The arguments, in place on the stack (nothing is pushed onto it before
  // they are dropped).
  const c10::ArrayRef<c10::IValue> args(
      stack->data() + (stack->size() - num_args), num_args);
  if (info.complex_by_composite) {
    auto complex_value = [](const c10::IValue& v) {
      return v.isComplexDouble() || (v.isTensor() && v.toTensor().defined() && v.toTensor().is_complex());
    };
    bool any_complex = false;
    for (const c10::IValue& value : args) {
      any_complex = any_complex || complex_value(value);
      if (value.isList()) {
        for (const c10::IValue& element : value.toListRef()) {
          any_complex = any_complex || complex_value(element);
        }
      }
    }
    if (any_complex) {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CompositeExplicitAutograd), stack);
      return;
    }
  }
  if (info.hooks->byte_mask_arg >= 0) {
    // as at::native's expandTensors, which the CPU's kernel runs
    for (const at::Tensor& t : tensors_of(args[static_cast<size_t>(info.hooks->byte_mask_arg)])) {
      if (t.defined() && t.scalar_type() == at::kByte) {
        TORCH_WARN("indexing with dtype torch.uint8 is now deprecated,"
                   " please use a dtype torch.bool instead.");
      }
    }
  }

  // A uint8 class index read as int64 (op_hooks.h); other dtypes are
  // refused below, after the meta kernel's own checks, as the CPU orders
  // them.
  const at::Tensor* target = nullptr;
  if (info.hooks->long_or_byte_target_arg >= 0) {
    const size_t index = static_cast<size_t>(info.hooks->long_or_byte_target_arg);
    c10::IValue& value = (*stack)[stack->size() - num_args + index];
    if (value.isTensor() && value.toTensor().defined()) {
      if (value.toTensor().scalar_type() == at::kByte) {
        value = value.toTensor().to(at::kLong);
      }
      target = &value.toTensor();
    }
  }

  // The CPU's nondeterminism alert, before its checks (op_hooks.h).
  if (info.hooks->deterministic_when_arg >= 0 && at::globalContext().deterministicAlgorithms()) {
    const c10::IValue& flag = args[static_cast<size_t>(info.hooks->deterministic_when_arg)];
    if (!(flag.isBool() && flag.toBool())) {
      at::globalContext().alertNotDeterministic(info.hooks->nondeterministic_name);
    }
  }

  // Devices: every tensor on one tpu device (CPU scalars exempt).
  DeviceCheck devices;
  std::optional<c10::DeviceIndex> requested_device;
  at::Generator generator;
  bool has_index_list = false;
  for (size_t i = 0; i < num_args; ++i) {
    const c10::IValue& value = args[i];
    if (value.isTensor()) {
      devices.see(value.toTensor(), info.is_mutable[i]);
    } else if (value.isTensorList()) {
      for (const at::Tensor& tensor : value.toTensorList()) {
        // CPU scalars that are read are exempt in lists too, as in the
        // per-tensor path other backends take for them (an optimizer's
        // step counts under torch.compile); they are uploaded to pack.
        devices.see(tensor, info.is_mutable[i]);
      }
    } else if (is_optional_tensor_list(value)) {
      has_index_list = true;
      for (const c10::IValue& element : value.toListRef()) {
        if (element.isTensor() && !element.toTensor().is_cpu()) {
          devices.see(element.toTensor(), info.is_mutable[i]);
        }
      }
    } else if (value.isDevice() &&
               value.toDevice().type() == c10::DeviceType::PrivateUse1) {
      requested_device = value.toDevice().has_index()
                             ? value.toDevice().index()
                             : current_device();
    } else if (value.isGenerator()) {
      generator = value.toGenerator();
    }
  }
  const c10::DeviceIndex device = devices.device(requested_device);
  // Index lists (Tensor?[]) may hold CPU tensors, as on CUDA: move them
  // (on the stack: a CPU fallback then sees them on tpu, which it handles).
  if (has_index_list) {
    for (size_t i = 0; i < num_args; ++i) {
      c10::IValue& value = (*stack)[stack->size() - num_args + i];
      if (!is_optional_tensor_list(value)) {
        continue;
      }
      c10::List<std::optional<at::Tensor>> moved;
      for (const c10::IValue& element : value.toListRef()) {
        if (element.isTensor()) {
          const at::Tensor& tensor = element.toTensor();
          moved.push_back(tensor.is_cpu() ? tensor.to(tpu_device(device))
                                          : tensor);
        } else {
          moved.push_back(std::nullopt);
        }
      }
      value = moved;
    }
  }

  // Writes through memory the call shares: the CPU's refusal, if it has one.
  check_write_overlap(info, op, args);

  // Output geometry and CPU-identical errors from the meta kernel (or from
  // the cache of its earlier answers for the same call signature).
  const std::shared_ptr<const MetaGeometry> geometry =
      meta_geometry(op, info, args);
  if (!geometry->warning.empty()) {
    TORCH_WARN(geometry->warning);
  }
  if (info.hooks->scalar_fits_self_arg >= 0 && args[0].isTensor()) {
    const c10::IValue& value = args[static_cast<size_t>(info.hooks->scalar_fits_self_arg)];
    // (a uint64 beyond int64's range is no isScalar() IValue)
    if (!value.isTensor() && !value.isNone()) {
      const c10::Scalar scalar = value.toScalar();
      AT_DISPATCH_V2(args[0].toTensor().scalar_type(), "scalar_fits_self",
                     AT_WRAP([&] { (void)scalar.to<scalar_t>(); }),
                     AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool,
                     at::kComplexHalf, AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
                     AT_EXPAND(AT_FLOAT8_TYPES));
    }
  }
  if (target != nullptr) {
    TORCH_CHECK(target->scalar_type() == at::kLong,
                "expected target dtype to be Long or Byte, but got ", target->scalar_type());
  }

  // out= tensors take the geometry the meta kernel resized them to.
  for (const auto& [index, resized] : geometry->restrided) {
    restride_tpu(args[index].toTensor(), resized.sizes, resized.strides,
                 resized.offset);
  }

  // A matrix op's operands in few layouts (matrix_operands.h), after the
  // checks above saw the tensors the caller passed: (argument, passed)
  // for each one replaced on the stack, and (passed, stand-in) for each
  // written one, copied into place once the op ran.
  std::vector<std::pair<size_t, c10::IValue>> replaced;
  std::vector<std::pair<at::Tensor, at::Tensor>> written;
  if (info.hooks->matrix_operands != MatrixOperands::kAsPassed) {
    const bool product = info.hooks->matrix_operands == MatrixOperands::kProduct;
    for (size_t i = 0; i < num_args; ++i) {
      c10::IValue& value = (*stack)[base + i];
      if (!value.isTensor()) {
        continue;
      }
      const at::Tensor t = value.toTensor();
      if (!t.defined() || t.is_cpu() || t.numel() == 0 || t.is_conj() || t.is_neg()) {
        continue;
      }
      at::Tensor use;
      if (info.is_mutable[i]) {
        if (dense_ignoring_unit_dims(t)) {
          continue;
        }
        use = empty_contiguous_tpu(t.sizes(), t.scalar_type(), device);
        if (!op.schema().arguments()[i].is_out()) {
          engine_copy(use, t);  // an in-place self is read too
        }
        written.emplace_back(t, use);
      } else if (product ? matrix_layout_direct(t) : dense_ignoring_unit_dims(t)) {
        use = with_canonical_unit_strides(t);
        if (use.is_same(t)) {
          continue;
        }
      } else {
        use = empty_contiguous_tpu(t.sizes(), t.scalar_type(), device);
        engine_copy(use, t);
      }
      replaced.emplace_back(i, value);
      value = use;
    }
  }
  // The caller's tensors back on the stack (for the CPU fallback).
  auto restore_passed = [&] {
    for (const auto& [index, passed] : replaced) {
      (*stack)[base + index] = passed;
    }
  };

  CallPacker packer;
  c10::SmallVector<c10::IValue, 4> results;
  for (size_t r = 0; r < geometry->returns.size(); ++r) {
    const int aliased = info.return_alias[r];
    if (aliased >= 0) {
      results.push_back(args[static_cast<size_t>(aliased)]);
      push_outputs(packer, results.back());
      continue;
    }
    const ReturnGeometry& ret = geometry->returns[r];
    if (ret.kind == ReturnGeometry::kTensor) {
      // An undefined return (a backward's output_mask left it out) stays
      // undefined.
      at::Tensor fresh = allocate_like(ret.tensors.front(), device);
      packer.add_output(fresh);
      results.emplace_back(std::move(fresh));
    } else if (ret.kind == ReturnGeometry::kTensorList) {
      c10::List<at::Tensor> fresh_list;
      for (const TensorGeometry& element : ret.tensors) {
        at::Tensor fresh = allocate_like(element, device);
        packer.add_output(fresh);
        fresh_list.push_back(std::move(fresh));
      }
      results.emplace_back(std::move(fresh_list));
    } else {
      packer.add_output(at::Tensor());
      results.push_back(ret.other);
    }
  }
  for (int index : info.extra_mutable) {
    push_outputs(packer, args[static_cast<size_t>(index)]);
  }

  for (size_t i = 0; i < num_args; ++i) {
    std::optional<double> stands_for;
    if (args[i].isNone() && info.hooks->none_float_means) {
      stands_for = info.hooks->none_float_means(static_cast<int>(i), &args[0]);
    }
    pack_argument(packer, info.roles[i], stands_for ? c10::IValue(*stands_for) : args[i], device);
  }
  if (info.hooks->appends_cpu_int4_layout) {
    packer.add_int(TTPU_ARG_INT, cpu_int4_layout());
  }

  if (!packer.nothing_to_compute()) {
    const ttpu_op_call call =
        packer.call(info.engine_id, geometry->common_dtype, device);
    ttpu_status* status = nullptr;
    with_generator_state(generator, device, [&] {
      status = ttpu_op_run(runtime(), &call);
    });
    if (status != nullptr) {
      if (ttpu_status_code(status) == TTPU_UNIMPLEMENTED && allow_cpu_fallback) {
        restore_passed();
        if (try_cpu_fallback(op, stack)) {
          ttpu_status_free(status);
          return;
        }
      }
      throw_status(status, ("aten::" + info.name).c_str());
    }
    char warning[1024];
    if (ttpu_runtime_take_warning(runtime(), warning, sizeof(warning))) {
      TORCH_WARN(warning);
    }
    for (const auto& [passed, stand_in] : written) {
      engine_copy(passed, stand_in);
      for (c10::IValue& result : results) {
        if (result.isTensor() && result.toTensor().is_same(stand_in)) {
          result = passed;
        }
      }
    }
  } else {
    // Nothing runs, but a call the op refuses (its dtype) fails as on the CPU.
    const ttpu_op_call call = packer.call(info.engine_id, geometry->common_dtype, device);
    if (ttpu_status* status = ttpu_op_refusal(&call)) {
      restore_passed();
      if (allow_cpu_fallback && try_cpu_fallback(op, stack)) {
        ttpu_status_free(status);
        return;
      }
      throw_status(status, ("aten::" + info.name).c_str());
    }
  }

  torch::jit::drop(*stack, num_args);
  for (c10::IValue& result : results) {
    stack->push_back(std::move(result));
  }
}

// The boxed kernel registered for each engine op; it holds the op's
// OpInfo, so a call looks nothing up.
class EngineKernel final : public c10::OperatorKernel {
 public:
  explicit EngineKernel(const OpInfo& info) : info_(info) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/,
                  torch::jit::Stack* stack) {
    run_engine_op_with(info_, op, stack, /*allow_cpu_fallback=*/true);
  }

 private:
  const OpInfo& info_;  // owned by info_for's map, never freed
};

std::pair<std::string, std::string> split_table_name(const std::string& name) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos) {
    return {"aten::" + name, ""};
  }
  return {"aten::" + name.substr(0, dot), name.substr(dot + 1)};
}

}  // namespace

void run_engine_op(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                   bool allow_cpu_fallback) {
  run_engine_op_with(info_for(op), op, stack, allow_cpu_fallback);
}

void engine_copy(const at::Tensor& dst, const at::Tensor& src) {
  static const c10::OperatorHandle copy_op =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::copy_", "");
  static const OpInfo& copy_info = info_for(copy_op);
  torch::jit::Stack stack{dst, src, false};
  // No CPU fallback: the fallback itself moves data with copies.
  run_engine_op_with(copy_info, copy_op, &stack, /*allow_cpu_fallback=*/false);
}

const KernelRegistration& register_engine_kernels() {
  static const KernelRegistration registration = [] {
    KernelRegistration result;
    // Kept for the life of the process: dropping it would deregister.
    static auto* library = new torch::Library(
        torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__,
        __LINE__);
    const int count = ttpu_op_count();
    for (int id = 0; id < count; ++id) {
      const std::string name = ttpu_op_name(id);
      const auto [op_name, overload] = split_table_name(name);
      const std::optional<c10::OperatorHandle> handle =
          c10::Dispatcher::singleton().findSchema({op_name, overload});
      if (!handle) {
        result.skipped[name] = "no such ATen operator";
        continue;
      }
      if (has_direct_kernel(name)) {
        // copy_, _to_copy, ...: their own kernels use the engine op.
        result.skipped[name] = "has a dedicated tpu kernel that calls it";
        continue;
      }
      if (handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
        result.skipped[name] = "already has a PrivateUse1 kernel";
        continue;
      }
      if (handle->hasKernelForDispatchKey(
              c10::DispatchKey::CompositeImplicitAutograd) &&
          !engine_op_replaces_composite(name)) {
        // A backend kernel for a CompositeImplicitAutograd op would replace
        // its decomposition and silently lose autograd.
        result.skipped[name] =
            "CompositeImplicitAutograd (decomposes into other ops)";
        continue;
      }
      const OpInfo& info = info_for(*handle);
      if (!info.unsupported.empty()) {
        result.skipped[name] = info.unsupported;
        continue;
      }
      library->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                      std::make_unique<EngineKernel>(info)));
      result.registered.push_back(name);
    }
    for (std::string& name : register_out_forms()) {
      result.registered.push_back(std::move(name));
    }
    for (std::string& name : register_grouped_composites()) {
      result.registered.push_back(std::move(name));
    }
    return result;
  }();
  return registration;
}

}  // namespace torchtpu
