// The meta pre-run of meta_geometry.h: meta copies of the arguments, the
// op's meta kernel (PyTorch's, or ours from meta_shapes.h), the checks
// some meta kernels leave out, and the cache of the answers.
#include "aten/meta_geometry.h"

#include "aten/call_args.h"
#include "aten/cpu_replay.h"

#include <ATen/core/List.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>
#include <torch/csrc/Exceptions.h>

#include <ATen/Context.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace torchtpu {

namespace {

// A CPU 0-d tensor (a scalar operand, see DeviceCheck in engine_kernel.cpp)
// becomes a 0-d meta tensor too: meta kernels compare devices against the
// other operands (masked_fill's "Expected `value` to be on same device"),
// and those are meta here where on CUDA they would be cuda. Dtype and dimension are
// kept, so type promotion is unchanged. A wrapped number (a Python number
// passed for a Tensor) stays on the CPU: that is where PyTorch expects one
// (Python meta kernels receive it as a number, asserting it is on the CPU;
// TensorIterator accepts it next to any device).
at::Tensor to_meta(const at::Tensor& tensor) {
  if (!tensor.defined() ||
      (is_cpu_scalar(tensor) &&
       tensor.unsafeGetTensorImpl()->is_wrapped_number())) {
    return tensor;
  }
  c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
  // A meta storage as large as the real one, so as_strided-style bounds
  // checks in meta kernels see what the CPU kernels would see.
  c10::Storage storage(c10::Storage::use_byte_size_t(),
                       impl->unsafe_storage().nbytes(),
                       c10::DataPtr(nullptr, c10::Device(c10::DeviceType::Meta)),
                       c10::GetAllocator(c10::DeviceType::Meta),
                       /*resizable=*/true);
  at::Tensor meta = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::Meta),
      tensor.dtype());
  meta.unsafeGetTensorImpl()->set_sizes_and_strides(
      tensor.sizes(), tensor.strides(), tensor.storage_offset());
  return meta;
}

c10::IValue to_meta(const c10::IValue& value) {
  return map_tensors(
      value, [](const at::Tensor& t) { return to_meta(t); },
      c10::Device(c10::DeviceType::Meta));
}

TensorGeometry geometry_of(const at::Tensor& tensor) {
  TensorGeometry geometry;
  if (tensor.defined()) {
    geometry.defined = true;
    geometry.sizes = tensor.sizes().vec();
    geometry.strides = tensor.strides().vec();
    geometry.offset = tensor.storage_offset();
    geometry.dtype = tensor.scalar_type();
  }
  return geometry;
}

// The meta kernel's answer depends only on the call's signature: tensor
// geometry and dtypes, every non-tensor argument's value, the default
// dtype and the deterministic-algorithms flag. A signature that succeeded
// once succeeds again with the same geometry, so it is cached; errors are
// never cached, so they are raised by the meta kernel every time. Most
// meta kernels are Python functions (torch._meta_registrations overrides
// the C++ ones), so the cache removes most of the per-op host cost.
//
// The key is built in a per-thread buffer that keeps its capacity, so a
// cache hit allocates nothing; it is valid until the next SignatureKey of
// the thread is made.
class SignatureKey {
 public:
  explicit SignatureKey(const c10::OperatorHandle& op) : bytes_(scratch()) {
    bytes_.clear();
    put(std::hash<c10::OperatorHandle>{}(op));
    put(static_cast<int8_t>(c10::typeMetaToScalarType(c10::get_default_dtype())));
    put(at::globalContext().deterministicAlgorithms());
  }

  // False when a value cannot be keyed: the call is then not cached.
  bool add(const c10::IValue& value) {
    if (value.isNone()) {
      put('N');
    } else if (value.isTensor()) {
      put_tensor(value.toTensor());
    } else if (value.isTensorList()) {
      put('L');
      put(value.toTensorList().size());
      for (const at::Tensor& tensor : value.toTensorList()) {
        put_tensor(tensor);
      }
    } else if (value.isInt()) {
      put('i');
      put(value.toInt());
    } else if (value.isDouble()) {
      put('d');
      put(value.toDouble());
    } else if (value.isBool()) {
      put('b');
      put(value.toBool());
    } else if (value.isSymInt()) {
      put('i');
      put(value.toSymInt().guard_int(__FILE__, __LINE__));
    } else if (value.isIntList()) {
      put('I');
      put(value.toIntList().size());
      for (int64_t element : value.toIntVector()) {
        put(element);
      }
    } else if (value.isDoubleList()) {
      put('D');
      put(value.toDoubleList().size());
      for (double element : value.toDoubleVector()) {
        put(element);
      }
    } else if (value.isBoolList()) {
      put('B');
      put(value.toBoolList().size());
      for (bool element : value.toBoolList()) {
        put(element);
      }
    } else if (value.isString()) {
      put('s');
      const std::string& text = value.toStringRef();
      put(text.size());
      bytes_.append(text);
    } else if (value.isDevice()) {
      put('v');
      put(static_cast<int16_t>(value.toDevice().type()));
      put(static_cast<int16_t>(value.toDevice().index()));
    } else if (value.isGenerator()) {
      put('g');
    } else if (value.isList()) {
      return add_list(value, &SignatureKey::add);
    } else {
      return false;
    }
    return true;
  }

  // A Scalar (or a list of them) by its kind alone, for meta kernels
  // whose answer does not depend on the values (OpInfo's
  // meta_scalar_kinds_only); false when it is not a Scalar.
  bool add_kind(const c10::IValue& value) {
    if (value.isList()) {
      return add_list(value, &SignatureKey::add_kind);
    }
    if (value.isDoubleList()) {
      put('D');
      put(value.toDoubleList().size());
      return true;
    }
    if (value.isIntList()) {
      put('I');
      put(value.toIntList().size());
      return true;
    }
    if (value.isBool()) {
      put('b');
    } else if (value.isInt() || value.isSymInt()) {
      put('i');
    } else if (value.isDouble()) {
      put('d');
    } else if (value.isComplexDouble()) {
      put('c');
    } else {
      return add(value);  // not a Scalar: keyed as ever
    }
    return true;
  }

  const std::string& bytes() const {
    return bytes_;
  }

 private:
  // A generic list, each element keyed by add_one (add or add_kind).
  bool add_list(const c10::IValue& value,
                bool (SignatureKey::*add_one)(const c10::IValue&)) {
    put('[');
    put(value.toListRef().size());
    for (const c10::IValue& element : value.toListRef()) {
      if (!(this->*add_one)(element)) {
        return false;
      }
    }
    put(']');
    return true;
  }

  template <typename T>
  void put(const T& value) {
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }

  void put_tensor(const at::Tensor& tensor) {
    put('T');
    if (!tensor.defined()) {
      put('u');
      return;
    }
    put(static_cast<int8_t>(tensor.scalar_type()));
    put(static_cast<int16_t>(tensor.device().type()));
    put(static_cast<int16_t>(tensor.device().index()));
    put(tensor.unsafeGetTensorImpl()->is_wrapped_number());
    put(static_cast<int64_t>(tensor.dim()));
    for (int64_t size : tensor.sizes()) {
      put(size);
    }
    for (int64_t stride : tensor.strides()) {
      put(stride);
    }
    put(tensor.storage_offset());
    put(tensor.unsafeGetTensorImpl()->unsafe_storage().nbytes());
  }

  static std::string& scratch() {
    thread_local std::string buffer;
    return buffer;
  }

  std::string& bytes_;
};

bool meta_cache_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("TORCHTPU_META_CACHE");
    return value == nullptr || std::string(value) != "0";
  }();
  return enabled;
}

// Python meta functions (torch._meta_registrations, torch._refs) can fail
// with whatever Python raises on arguments the C++ kernels reject with a
// RuntimeError: conv2d with stride=0 divides by zero in the meta function
// (ZeroDivisionError) where CPU says "non-positive stride is not
// supported". The meta pre-run is our implementation detail, so such an
// exception becomes the RuntimeError a CPU kernel would raise, its Python
// type kept in the message. Exceptions PyTorch's C++ errors already map to
// (RuntimeError and subclasses such as NotImplementedError, IndexError,
// ValueError, TypeError) pass unchanged, as do MemoryError, warnings made
// errors, and BaseExceptions that are not Exceptions (KeyboardInterrupt).
// Returns the message for the RuntimeError, or nothing to rethrow as is.
// Takes the GIL.
std::optional<std::string> foreign_python_error(PyObject* type,
                                                PyObject* value) {
  if (type == nullptr || Py_IsInitialized() == 0) {
    return std::nullopt;
  }
  pybind11::gil_scoped_acquire gil;
  for (PyObject* kept : {PyExc_RuntimeError, PyExc_IndexError,
                         PyExc_ValueError, PyExc_TypeError, PyExc_MemoryError,
                         PyExc_Warning}) {
    if (PyErr_GivenExceptionMatches(type, kept) != 0) {
      return std::nullopt;
    }
  }
  if (PyErr_GivenExceptionMatches(type, PyExc_Exception) == 0) {
    return std::nullopt;
  }
  std::string message = PyType_Check(type) != 0
                            ? reinterpret_cast<PyTypeObject*>(type)->tp_name
                            : "exception";
  if (value != nullptr) {
    PyObject* text = PyObject_Str(value);
    if (text != nullptr) {
      const char* utf8 = PyUnicode_AsUTF8(text);
      if (utf8 != nullptr && *utf8 != '\0') {
        message += std::string(": ") + utf8;
      }
      Py_DECREF(text);
    }
    PyErr_Clear();
  }
  return message;
}

// PyTorch's Python meta kernels take a meta tensor for a CUDA one
// (torch._meta_registrations.device_hint), and some raise CUDA's own
// nondeterminism alerts under torch.use_deterministic_algorithms (median
// and mode with indices, histc of floats: OpHooks::cuda_only_alert);
// tpu's programs for them are deterministic, as the CPU's kernels that
// raise none, so the alerts are off while those meta kernels run (alerts
// that every device raises, max_unpool's or put_'s, stay). The mutex keeps
// two threads from restoring each other's setting.
class NoCudaDeterminismAlerts {
 public:
  NoCudaDeterminismAlerts() {
    at::Context& ctx = at::globalContext();
    if (!ctx.deterministicAlgorithms()) {
      return;
    }
    static std::mutex mutex;
    lock_ = std::unique_lock<std::mutex>(mutex);
    if (ctx.deterministicAlgorithms()) {
      warn_only_ = ctx.deterministicAlgorithmsWarnOnly();
      ctx.setDeterministicAlgorithms(false, false);
      restore_ = true;
    }
  }
  NoCudaDeterminismAlerts(const NoCudaDeterminismAlerts&) = delete;
  NoCudaDeterminismAlerts& operator=(const NoCudaDeterminismAlerts&) = delete;
  ~NoCudaDeterminismAlerts() {
    if (restore_) {
      at::globalContext().setDeterministicAlgorithms(true, warn_only_);
    }
  }

 private:
  std::unique_lock<std::mutex> lock_;
  bool warn_only_ = false;
  bool restore_ = false;
};

// The op's meta kernel on `stack` (meta copies of the arguments): ours
// from the meta-shape registry when PyTorch ships none, else the
// dispatcher's.
void call_meta_kernel(const OpInfo& info, const c10::OperatorHandle& op,
                      torch::jit::Stack* stack) {
  std::optional<std::string> translated;
  try {
    std::optional<NoCudaDeterminismAlerts> no_cuda_alerts;
    if (info.hooks->cuda_only_alert) {
      no_cuda_alerts.emplace();
    }
    if (info.meta_shape != nullptr) {
      info.meta_shape->callBoxed(
          op, c10::DispatchKeySet(c10::DispatchKey::Meta), stack);
    } else {
      op.callBoxed(stack);
    }
    return;
  } catch (python_error& error) {
    error.persist();  // a bare `throw python_error()` left it in Python
    translated = foreign_python_error(error.type, error.value);
    if (!translated) {
      throw;
    }
  } catch (pybind11::error_already_set& error) {
    translated = foreign_python_error(error.type().ptr(), error.value().ptr());
    if (!translated) {
      throw;
    }
  }
  // Thrown here, outside the handlers, once the Python exception is freed.
  TORCH_CHECK(false, *translated);
}

ttpu_dtype common_dtype_of(const OpInfo& info,
                           c10::ArrayRef<c10::IValue> args) {
  at::native::ResultTypeState promotion{};
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& value = args[i];
    if (!info.promotes[i] || value.isNone()) {
      continue;
    }
    if (info.roles[i] == ArgRole::kScalar && !value.isTensor()) {
      promotion = at::native::update_result_type_state(value.toScalar(),
                                                       promotion);
    } else if (value.isTensor()) {
      if (value.toTensor().defined()) {
        promotion =
            at::native::update_result_type_state(value.toTensor(), promotion);
      }
    } else {
      for (const at::Tensor& tensor : tensors_of(value)) {
        if (tensor.defined()) {
          promotion = at::native::update_result_type_state(tensor, promotion);
        }
      }
    }
  }
  return to_ttpu_dtype(at::native::result_type(promotion));
}

// True when meta's sizes are real's with size-1 dims grown: the broadcast
// an in-place op's self cannot take, invisible to the numel comparison when
// another dim is 0. In-place view ops (transpose_, squeeze_) permute or
// drop sizes instead.
bool broadcast_grown(const at::Tensor& real, const at::Tensor& meta) {
  if (real.dim() != meta.dim() || real.sizes() == meta.sizes()) {
    return false;
  }
  for (int64_t d = 0; d < real.dim(); ++d) {
    if (real.size(d) != meta.size(d) &&
        !(real.size(d) == 1 && meta.size(d) > 1)) {
      return false;
    }
  }
  return true;
}

// An in-place pointwise op writes its result into self, which must be able
// to hold the result's dtype: on the CPU, TensorIterator refuses an int64
// self for a float result (`x.mul_(1.5)`, `x.logit_()`). Some meta kernels
// do not check it (mul_.Scalar, logit_; div_ and true_divide_ in torch
// 2.11), so the functional form's meta kernel gives the result dtype and
// the check is the CPU's, with its message.
void check_inplace_result_type(const OpInfo& info, c10::ArrayRef<c10::IValue> args) {
  if (!info.functional || args.empty() || !args[0].isTensor()) {
    return;
  }
  const at::Tensor& self = args[0].toTensor();
  torch::jit::Stack stack;
  stack.reserve(args.size());
  for (const c10::IValue& value : args) {
    stack.push_back(to_meta(value));
  }
  try {
    info.functional->callBoxed(&stack);
  } catch (const std::exception&) {
    return;  // the in-place form was accepted: its own verdict stands
  }
  if (stack.size() != 1 || !stack[0].isTensor()) {
    return;
  }
  const c10::ScalarType result = stack[0].toTensor().scalar_type();
  TORCH_CHECK(at::canCast(result, self.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", self.scalar_type());
}

// An op with several outs takes each in its result's dtype exactly, as
// every CPU kernel of such an op checks (sort, kthvalue, mode, frexp,
// lu_factor...) and some meta kernels do not: the functional overload's
// meta kernel gives the results' dtypes.
void check_outs_dtypes(const c10::OperatorHandle& op, const OpInfo& info,
                       c10::ArrayRef<c10::IValue> args) {
  if (!info.functional_of_outs) {
    return;
  }
  const size_t num_in = args.size() - info.out_positions.size();
  torch::jit::Stack stack;
  stack.reserve(num_in);
  for (size_t i = 0; i < num_in; ++i) {
    stack.push_back(to_meta(args[i]));
  }
  try {
    info.functional_of_outs->callBoxed(&stack);
  } catch (const std::exception&) {
    return;  // the out= form was accepted: its own verdict stands
  }
  if (stack.size() != info.out_positions.size()) {
    return;
  }
  for (size_t k = 0; k < stack.size(); ++k) {
    const c10::IValue& out = args[info.out_positions[k]];
    if (!stack[k].isTensor() || !out.isTensor() || !out.toTensor().defined()) {
      continue;
    }
    const c10::ScalarType want = stack[k].toTensor().scalar_type();
    const c10::ScalarType got = out.toTensor().scalar_type();
    if (want != got) {
      throw_cpu_verdict(op, args);  // the CPU kernel's own words, where it has them
      TORCH_CHECK(false, "Expected out tensor to have dtype ", c10::scalarTypeToTypeMeta(want),
                  ", but got ", out.toTensor().dtype(), " instead");
    }
  }
}

// The dtype check of OpHooks::same_dtype_as_self_arg, in the CPU's words.
void check_same_dtype_as_self(const c10::OperatorHandle& op, const OpInfo& info,
                              c10::ArrayRef<c10::IValue> args) {
  const int other = info.hooks->same_dtype_as_self_arg;
  if (other < 0 || static_cast<size_t>(other) >= args.size() || !args[0].isTensor() ||
      !args[other].isTensor()) {
    return;
  }
  const c10::ScalarType self = args[0].toTensor().scalar_type();
  const c10::ScalarType given = args[other].toTensor().scalar_type();
  std::string name = op.schema().operator_name().name;
  name = name.substr(name.find("::") == std::string::npos ? 0 : name.find("::") + 2);
  TORCH_CHECK(self == given, name, "(): self (", self, ") and ",
              op.schema().arguments()[other].name(), " (", given,
              ") must have the same scalar type");
}

std::shared_ptr<const MetaGeometry> run_meta(const c10::OperatorHandle& op,
                                             const OpInfo& info,
                                             c10::ArrayRef<c10::IValue> args) {
  torch::jit::Stack meta_stack;
  meta_stack.reserve(args.size());
  const bool keeps_numel = info.hooks->out_keeps_numel_geometry;
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& value = args[i];
    // An out that keeps its geometry is given to the meta kernel empty (at
    // its storage offset, which a resize keeps), so that it does not warn
    // of a resize the call does not make, nor in other words than the
    // CPU's (OpHooks::warns_when_count_differs).
    if (keeps_numel && info.is_mutable[i] && value.isTensor() &&
        value.toTensor().defined() && op.schema().arguments()[i].kwarg_only()) {
      const at::Tensor& out = value.toTensor();
      meta_stack.emplace_back(to_meta(out).as_strided({0}, {1}, out.storage_offset()));
      continue;
    }
    meta_stack.push_back(to_meta(value));
  }
  // The boxed call replaces the arguments by the returns; mutable ones are
  // needed afterwards to see how the meta kernel resized them.
  std::vector<std::pair<size_t, at::Tensor>> mutable_metas;
  for (size_t i = 0; i < args.size(); ++i) {
    if (info.is_mutable[i] && args[i].isTensor() &&
        args[i].toTensor().defined()) {
      mutable_metas.emplace_back(i, meta_stack[i].toTensor());
    }
  }
  try {
    call_meta_kernel(info, op, &meta_stack);
  } catch (const std::exception&) {
    throw_cpu_verdict(op, args);
    throw;
  }
  check_inplace_result_type(info, args);
  check_outs_dtypes(op, info, args);
  check_same_dtype_as_self(op, info, args);

  auto geometry = std::make_shared<MetaGeometry>();
  for (const auto& [i, meta] : mutable_metas) {
    const at::Tensor& real = args[i].toTensor();
    // An out= of the right sizes keeps its strides on the CPU (a kernel
    // writes through it, or through a copy), where some Python meta
    // functions restride it contiguous (sort, msort): follow the CPU.
    const bool is_out = op.schema().arguments()[i].kwarg_only();
    if (is_out && (real.sizes() == meta.sizes() ||
                   (keeps_numel && real.numel() == meta.numel()))) {
      continue;
    }
    if (is_out && info.hooks->warns_when_count_differs && real.numel() > 0) {
      geometry->warning = c10::str(
          "The number of elements in the out tensor of shape ", real.sizes(), " is ",
          real.numel(), " which does not match the computed number of elements ",
          meta.numel(), ". Note that this may occur as a result of rounding error. "
          "The out tensor will be resized to a tensor of shape (", meta.numel(), ",).");
    }
    if (real.sizes() != meta.sizes() || real.strides() != meta.strides() ||
        real.storage_offset() != meta.storage_offset()) {
      // Only out= tensors may grow: Python meta functions resize an
      // in-place op's self to the broadcast shape where the CPU fails.
      TORCH_CHECK(is_out ||
                      (real.numel() == meta.numel() &&
                       !broadcast_grown(real, meta)),
                  "output with shape ", real.sizes(),
                  " doesn't match the broadcast shape ", meta.sizes());
      geometry->restrided.emplace_back(i, geometry_of(meta));
      if (is_out && real.numel() > 0 && real.sizes() != meta.sizes() && !keeps_numel) {
        geometry->nonempty_resized.emplace_back(i, meta.sizes().vec());
      }
    }
  }
  for (const c10::IValue& result : meta_stack) {
    ReturnGeometry ret;
    if (result.isTensor()) {
      ret.kind = ReturnGeometry::kTensor;
      ret.tensors.push_back(geometry_of(result.toTensor()));
    } else if (result.isTensorList()) {
      ret.kind = ReturnGeometry::kTensorList;
      for (const at::Tensor& tensor : result.toTensorList()) {
        ret.tensors.push_back(geometry_of(tensor));
      }
    } else {
      ret.other = result;
    }
    geometry->returns.push_back(std::move(ret));
  }
  if (info.hooks->unbatched_as_batch_of_one && !args.empty() && args[0].isTensor() &&
      args[0].toTensor().dim() == 4 &&
      args[0].toTensor().unsqueeze(0).is_contiguous(c10::MemoryFormat::ChannelsLast3d)) {
    for (ReturnGeometry& ret : geometry->returns) {
      for (TensorGeometry& t : ret.tensors) {
        if (t.defined && t.sizes.size() == 4) {
          // channels_last_3d strides of (1, C, D, H, W), without the 1
          const int64_t c = t.sizes[0], h = t.sizes[2], w = t.sizes[3];
          t.strides = {1, c * w * h, c * w, c};
        }
      }
    }
  }
  geometry->common_dtype = common_dtype_of(info, args);
  return geometry;
}

}  // namespace

std::shared_ptr<const MetaGeometry> meta_geometry(
    const c10::OperatorHandle& op, const OpInfo& info,
    c10::ArrayRef<c10::IValue> args) {
  if (!meta_cache_enabled()) {
    return run_meta(op, info, args);
  }
  SignatureKey key(op);
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& value = args[i];
    const bool kind_only =
        info.meta_scalar_kinds_only && i < info.roles.size() &&
        (info.roles[i] == ArgRole::kScalar || info.roles[i] == ArgRole::kScalarList);
    if (!(kind_only ? key.add_kind(value) : key.add(value))) {
      return run_meta(op, info, args);
    }
  }
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const MetaGeometry>>
      cache;
  std::shared_ptr<const MetaGeometry> cached;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = cache.find(key.bytes());
    if (found != cache.end()) {
      cached = found->second;
    }
  }
  if (cached) {
    for (const auto& [index, sizes] : cached->nonempty_resized) {
      at::native::resize_output_check(args[index].toTensor(), sizes);  // warns
    }
    return cached;
  }
  // The key's buffer is reused by the next key this thread makes.
  std::string key_bytes = key.bytes();
  std::shared_ptr<const MetaGeometry> geometry = run_meta(op, info, args);
  std::lock_guard<std::mutex> lock(mutex);
  // Bounded: a program with ever-new shapes must not grow it forever.
  if (cache.size() >= 65536) {
    cache.clear();
  }
  cache.emplace(std::move(key_bytes), geometry);
  return geometry;
}

}  // namespace torchtpu
