// The one boxed kernel behind every op of the engine's lowering table. It
// translates a dispatcher call into a ttpu_op_call: PyTorch's meta kernels
// give output geometry and CPU-identical errors, the engine does the math.
#include "aten/meta_shapes.h"
#include "aten/op_hooks.h"
#include "aten/ops.h"
#include "runtime/generator.h"
#include "runtime/runtime.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/core/List.h>
#include <ATen/core/enum_tag.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Exceptions.h>
#include <torch/library.h>

#include <ATen/Context.h>

#include <algorithm>
#include <cstdlib>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace torchtpu {

namespace {

// How an argument is packed beyond what its runtime value tells: a Python
// number is an IValue Int/Double for both `int` and `Scalar` parameters.
enum class ArgRole : uint8_t { kValue, kScalar, kScalarList, kScalarType };

struct OpInfo {
  std::string name;  // the lowering table's spelling: "add.Tensor", "relu"
  int engine_id = -1;
  size_t num_args = 0;
  std::vector<ArgRole> roles;
  std::vector<bool> is_mutable;
  std::vector<bool> promotes;       // takes part in result_type
  std::vector<int> return_alias;    // per return: mutable arg it is, or -1
  std::vector<int> extra_mutable;   // mutable args no return aliases
  std::string unsupported;          // why the engine path cannot serve it
  const OpHooks* hooks = nullptr;   // per-op packing attributes
  // Our shape function when PyTorch ships no meta kernel (meta_shapes.h),
  // else nullptr: the dispatcher's Meta kernel serves.
  const c10::KernelFunction* meta_shape = nullptr;
  // A foreach op: the engine's lowerings of these are real-valued, and
  // PyTorch's own composite kernel (what the CPU runs: one op per tensor)
  // serves calls with complex tensors or Scalars.
  bool complex_by_composite = false;
  // An in-place pointwise op (mul_.Scalar): its functional form (mul.Scalar),
  // whose result dtype self must be able to hold (see
  // check_inplace_result_type).
  std::optional<c10::OperatorHandle> functional;
  // An out= overload with several outs (sort.values, kthvalue.values): its
  // functional overload, whose results' dtypes the outs must have (see
  // check_outs_dtypes), and the outs' argument positions.
  std::optional<c10::OperatorHandle> functional_of_outs;
  std::vector<size_t> out_positions;
};

std::string table_name(const c10::OperatorName& name) {
  std::string base = name.name;
  const size_t colons = base.find("::");
  if (colons != std::string::npos) {
    base = base.substr(colons + 2);
  }
  if (!name.overload_name.empty()) {
    base += "." + name.overload_name;
  }
  return base;
}

c10::TypePtr unwrap_optional(const c10::TypePtr& type) {
  if (auto optional = type->cast<c10::OptionalType>()) {
    return optional->getElementType();
  }
  return type;
}

bool is_tensor_like(const c10::TypePtr& type) {
  const c10::TypePtr element = unwrap_optional(type);
  if (element->kind() == c10::TypeKind::TensorType) {
    return true;
  }
  if (auto list = element->cast<c10::ListType>()) {
    return unwrap_optional(list->getElementType())->kind() ==
           c10::TypeKind::TensorType;
  }
  return false;
}

// The functional overload of an out= overload with several outs, found
// by ATen's naming, whose arguments are the out= overload's inputs and
// which returns one result per out.
void find_functional_of_outs(const c10::OperatorHandle& op, OpInfo* info) {
  const c10::FunctionSchema& schema = op.schema();
  std::vector<size_t> outs;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (schema.arguments()[i].is_out()) {
      outs.push_back(i);
    }
  }
  if (outs.size() < 2) {
    return;
  }
  // Candidates: the out= forms' naming rule, then "values_<ov>" -> "<ov>"
  // (sort.values_stable), then the default overload (linalg_eigh.eigvals).
  const std::string& ov = schema.overload_name();
  std::vector<std::string> candidates;
  if (std::string by_name = overload_of_functional(ov); by_name != "-") {
    candidates.push_back(std::move(by_name));
  }
  if (ov.rfind("values_", 0) == 0) {
    candidates.push_back(ov.substr(7));
  }
  candidates.emplace_back("");
  for (const std::string& name : candidates) {
    auto functional = c10::Dispatcher::singleton().findOp({schema.operator_name().name, name});
    if (!functional || !functional->hasSchema()) {
      continue;
    }
    const c10::FunctionSchema& f = functional->schema();
    bool lines_up = f.arguments().size() + outs.size() == schema.arguments().size() &&
                    f.returns().size() == outs.size();
    for (size_t i = 0; lines_up && i < f.arguments().size(); ++i) {
      lines_up = f.arguments()[i].name() == schema.arguments()[i].name() &&
                 !schema.arguments()[i].is_out();
    }
    if (lines_up) {
      info->functional_of_outs = functional;
      info->out_positions = std::move(outs);
      return;
    }
  }
}

std::unique_ptr<OpInfo> make_op_info(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  auto info = std::make_unique<OpInfo>();
  info->name = table_name(schema.operator_name());
  info->engine_id = ttpu_op_lookup(info->name.c_str());
  info->hooks = &op_hooks_for(info->name);
  info->meta_shape = find_meta_shape(info->name);
  info->complex_by_composite =
      info->name.rfind("_foreach_", 0) == 0 &&
      op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
  const auto& arguments = schema.arguments();
  info->num_args = arguments.size();
  const std::string& qualified = schema.operator_name().name;
  if (op.hasTag(at::Tag::pointwise) && !arguments.empty() && !arguments[0].is_out() &&
      arguments[0].alias_info() != nullptr && arguments[0].alias_info()->isWrite() &&
      qualified.size() > 1 && qualified.back() == '_' &&
      qualified.compare(qualified.size() - 2, 2, "__") != 0) {
    info->functional = c10::Dispatcher::singleton().findOp(
        {qualified.substr(0, qualified.size() - 1), schema.overload_name()});
  }
  find_functional_of_outs(op, info.get());
  for (const c10::Argument& argument : arguments) {
    const c10::TypePtr type = unwrap_optional(argument.real_type());
    ArgRole role = ArgRole::kValue;
    if (type->kind() == c10::TypeKind::NumberType) {
      role = ArgRole::kScalar;
    } else if (type->kind() == c10::TypeKind::ScalarTypeType) {
      role = ArgRole::kScalarType;
    } else if (auto list = type->cast<c10::ListType>()) {
      if (list->getElementType()->kind() == c10::TypeKind::NumberType) {
        role = ArgRole::kScalarList;
      }
    }
    info->roles.push_back(role);
    const c10::AliasInfo* alias = argument.alias_info();
    info->is_mutable.push_back(alias != nullptr && alias->isWrite());
    // result_type covers the operands; `out=` tensors only receive, and
    // `alpha` only scales an operand (ATen never wraps it into the
    // promotion), so neither takes part.
    info->promotes.push_back(
        !argument.is_out() && argument.name() != "alpha" &&
        (role == ArgRole::kScalar || is_tensor_like(argument.real_type())));
  }
  for (const c10::Argument& ret : schema.returns()) {
    if (!is_tensor_like(ret.real_type())) {
      info->unsupported = "it returns a non-tensor value";
    }
    const c10::AliasInfo* alias = ret.alias_info();
    int aliased = -1;
    if (alias != nullptr) {
      if (!alias->isWrite()) {
        info->unsupported = "it returns a view of an input";
      }
      for (size_t i = 0; i < arguments.size(); ++i) {
        const c10::AliasInfo* arg_alias = arguments[i].alias_info();
        if (arg_alias != nullptr && arg_alias->isWrite() &&
            arg_alias->beforeSets() == alias->beforeSets()) {
          aliased = static_cast<int>(i);
          break;
        }
      }
      if (aliased < 0 && info->unsupported.empty()) {
        info->unsupported = "a return aliases no argument";
      }
    }
    info->return_alias.push_back(aliased);
  }
  for (int written : info->hooks->also_written) {
    if (written >= 0 && static_cast<size_t>(written) < arguments.size()) {
      info->is_mutable[static_cast<size_t>(written)] = true;
    }
  }
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (!info->is_mutable[i]) {
      continue;
    }
    bool returned = false;
    for (int aliased : info->return_alias) {
      returned = returned || aliased == static_cast<int>(i);
    }
    if (!returned) {
      info->extra_mutable.push_back(static_cast<int>(i));
    }
  }
  return info;
}

const OpInfo& info_for(const c10::OperatorHandle& op) {
  static std::mutex mutex;
  static std::unordered_map<c10::OperatorHandle, std::unique_ptr<OpInfo>> infos;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = infos.find(op);
  if (found == infos.end()) {
    found = infos.emplace(op, make_op_info(op)).first;
  }
  return *found->second;
}

bool is_cpu_scalar(const at::Tensor& tensor) {
  return tensor.defined() && tensor.is_cpu() && tensor.dim() == 0;
}

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

// A CPU 0-d tensor (a scalar operand, see DeviceCheck) becomes a 0-d meta
// tensor too: meta kernels compare devices against the other operands
// (masked_fill's "Expected `value` to be on same device"), and those are
// meta here where on CUDA they would be cuda. Dtype and dimension are
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

// value with each tensor in it (alone, in a list, in a list of optional
// tensors) replaced by f(tensor), and a tpu device by `device`.
template <typename F>
c10::IValue map_tensors(const c10::IValue& value, F f, c10::Device device) {
  if (value.isTensor()) {
    return f(value.toTensor());
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> mapped;
    for (const at::Tensor& tensor : value.toTensorList()) {
      mapped.push_back(f(tensor));
    }
    return mapped;
  }
  if (value.isList()) {
    c10::List<c10::IValue> elements = value.toList();
    if (!elements.empty() && elements.elementType()->kind() ==
                                 c10::TypeKind::OptionalType) {
      c10::List<std::optional<at::Tensor>> mapped;
      for (const c10::IValue& element : elements) {
        if (element.isTensor()) {
          mapped.push_back(f(element.toTensor()));
        } else {
          mapped.push_back(std::nullopt);
        }
      }
      return mapped;
    }
    return value;
  }
  if (value.isDevice() &&
      value.toDevice().type() == c10::DeviceType::PrivateUse1) {
    return device;
  }
  return value;
}

c10::IValue to_meta(const c10::IValue& value) {
  return map_tensors(
      value, [](const at::Tensor& t) { return to_meta(t); },
      c10::Device(c10::DeviceType::Meta));
}

bool is_optional_tensor_list(const c10::IValue& value) {
  return value.isList() && !value.isTensorList() &&
         value.toList().elementType()->kind() == c10::TypeKind::OptionalType;
}

// The ttpu_op_call under construction, with storage for everything its
// pointers refer to.
class CallPacker {
 public:
  void add_none() {
    args_.push_back(make_arg(TTPU_ARG_NONE));
  }

  void add_tensor(const at::Tensor& tensor) {
    if (tensor.defined() && !tensor.is_cpu() &&
        (tensor.is_conj() || tensor.is_neg())) {
      // A lazy conjugate/negative view reaches ops the dispatcher lets
      // through (clone): the engine reads storages, so pass the values.
      at::Tensor values = empty_contiguous_tpu(
          tensor.sizes(), tensor.scalar_type(), tensor.device().index());
      copy_tensor(values, tensor);
      add_tensor(hold(std::move(values)));
      return;
    }
    if (!tensor.defined()) {
      add_none();
    } else if (is_cpu_scalar(tensor)) {
      add_scalar(tensor.item(), to_ttpu_dtype_checked(tensor.scalar_type()));
    } else {
      ttpu_arg arg = make_arg(TTPU_ARG_TENSOR);
      arg.tensor = static_cast<int>(tensors_.size());
      tensors_.push_back(describe(tensor));
      args_.push_back(arg);
    }
  }

  // Keeps a temporary tensor (an uploaded CPU scalar) alive as long as
  // the call that refers to its storage.
  const at::Tensor& hold(at::Tensor tensor) {
    held_.push_back(std::move(tensor));
    return held_.back();
  }

  void add_tensors(const std::vector<at::Tensor>& list) {
    ttpu_arg arg = make_arg(TTPU_ARG_TENSORS);
    arg.tensor = static_cast<int>(tensors_.size());
    arg.n = static_cast<int>(list.size());
    for (const at::Tensor& tensor : list) {
      tensors_.push_back(describe(tensor));
    }
    args_.push_back(arg);
  }

  void add_scalar(const c10::Scalar& scalar, ttpu_dtype dtype) {
    ttpu_arg arg = make_arg(TTPU_ARG_SCALAR);
    if (scalar.isComplex()) {
      const c10::complex<double> value = scalar.toComplexDouble();
      arg.f = value.real();
      arg.fi = value.imag();
    } else if (scalar.isFloatingPoint()) {
      arg.f = scalar.toDouble();
      arg.i = 0;
    } else if (scalar.isBoolean()) {
      arg.i = scalar.toBool() ? 1 : 0;
      arg.f = static_cast<double>(arg.i);
    } else {
      arg.i = scalar.toLong();
      arg.f = static_cast<double>(arg.i);
    }
    arg.scalar_dtype = dtype;
    args_.push_back(arg);
  }

  void add_scalar(const c10::Scalar& scalar) {
    add_scalar(scalar, scalar.isComplex()         ? TTPU_C128
                       : scalar.isFloatingPoint() ? TTPU_F64
                       : scalar.isBoolean()     ? TTPU_BOOL
                                                : TTPU_I64);
  }

  void add_scalars(const c10::IValue& list) {
    ttpu_arg arg = make_arg(TTPU_ARG_SCALARS);
    std::vector<double>& values = floats_.emplace_back();
    bool any_float = false;
    bool all_bool = true;
    for (const c10::IValue& element : list.toListRef()) {
      const c10::Scalar scalar = element.toScalar();
      TORCH_CHECK_NOT_IMPLEMENTED(!scalar.isComplex(),
                                  "complex scalars are not supported on tpu");
      any_float = any_float || scalar.isFloatingPoint();
      all_bool = all_bool && scalar.isBoolean();
      values.push_back(scalar.isBoolean() ? (scalar.toBool() ? 1.0 : 0.0)
                                          : scalar.toDouble());
    }
    arg.n = static_cast<int>(values.size());
    arg.floats = values.data();
    arg.scalar_dtype = any_float                   ? TTPU_F64
                       : (all_bool && arg.n > 0) ? TTPU_BOOL
                                                 : TTPU_I64;
    args_.push_back(arg);
  }

  void add_int(ttpu_arg_kind kind, int64_t value) {
    ttpu_arg arg = make_arg(kind);
    arg.i = value;
    args_.push_back(arg);
  }

  void add_float(double value) {
    ttpu_arg arg = make_arg(TTPU_ARG_FLOAT);
    arg.f = value;
    args_.push_back(arg);
  }

  void add_ints(std::vector<int64_t> values) {
    ttpu_arg arg = make_arg(TTPU_ARG_INTS);
    std::vector<int64_t>& stored = ints_.emplace_back(std::move(values));
    arg.n = static_cast<int>(stored.size());
    arg.ints = stored.data();
    args_.push_back(arg);
  }

  void add_floats(std::vector<double> values) {
    ttpu_arg arg = make_arg(TTPU_ARG_FLOATS);
    std::vector<double>& stored = floats_.emplace_back(std::move(values));
    arg.n = static_cast<int>(stored.size());
    arg.floats = stored.data();
    args_.push_back(arg);
  }

  void add_string(std::string value) {
    ttpu_arg arg = make_arg(TTPU_ARG_STR);
    arg.str = strings_.emplace_back(std::move(value)).c_str();
    args_.push_back(arg);
  }

  // Outputs are packed before the inputs: a copy-on-write output gets its
  // own buffer first, so an in-place self reads and writes that one.
  void add_output(const at::Tensor& tensor) {
    materialize_if_cow(tensor);
    outputs_.push_back(describe(tensor));
    all_outputs_empty_ = all_outputs_empty_ && tensor.numel() == 0;
  }

  bool nothing_to_compute() const {
    return !outputs_.empty() && all_outputs_empty_;
  }

  ttpu_op_call call(int op, ttpu_dtype common_dtype, int device) const {
    ttpu_op_call call{};
    call.op = op;
    call.n_args = static_cast<int>(args_.size());
    call.args = args_.data();
    call.n_tensors = static_cast<int>(tensors_.size());
    call.tensors = tensors_.data();
    call.n_outputs = static_cast<int>(outputs_.size());
    call.outputs = outputs_.data();
    call.common_dtype = common_dtype;
    call.device = device;
    call.matmul_precision =
        static_cast<int>(at::globalContext().float32MatmulPrecision());
    return call;
  }

 private:
  static ttpu_arg make_arg(ttpu_arg_kind kind) {
    ttpu_arg arg{};
    arg.kind = kind;
    arg.scalar_dtype = TTPU_DTYPE_NONE;
    arg.tensor = -1;
    return arg;
  }

  static ttpu_tensor describe(const at::Tensor& tensor) {
    ttpu_tensor desc{};
    if (!tensor.defined()) {
      desc.dtype = TTPU_DTYPE_NONE;
      return desc;
    }
    return engine_tensor(tensor);
  }

  // Inline room for a typical call: packing one allocates nothing.
  c10::SmallVector<ttpu_arg, 8> args_;
  c10::SmallVector<ttpu_tensor, 8> tensors_;
  c10::SmallVector<ttpu_tensor, 4> outputs_;
  // Lists: growing them never moves the elements the args point into, and
  // (unlike a deque) an empty one allocates nothing.
  std::list<at::Tensor> held_;
  std::list<std::vector<int64_t>> ints_;
  std::list<std::vector<double>> floats_;
  std::list<std::string> strings_;
  bool all_outputs_empty_ = true;
};

std::vector<at::Tensor> tensors_of(const c10::IValue& value) {
  std::vector<at::Tensor> tensors;
  if (value.isTensor()) {
    tensors.push_back(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& tensor : value.toTensorList()) {
      tensors.push_back(tensor);
    }
  } else if (value.isList()) {
    for (const c10::IValue& element : value.toListRef()) {
      tensors.push_back(element.isTensor() ? element.toTensor() : at::Tensor());
    }
  }
  return tensors;
}

// ------------------------------------------------------- overlapping writes
// A write through memory that overlaps itself (a broadcast view) or another
// argument (a shifted view of the same storage) is refused by most CPU
// kernels ("unsupported operation: more than one element of the written-to
// tensor refers to a single memory location"), and meta kernels never check
// it. Which ops refuse is each CPU kernel's choice (fill_, index_put_ and
// the reductions accept), so such a call is asked of the CPU itself, on
// zero-filled storages with the same geometry and aliasing, and only its
// overlap error is raised; anything else is left to the meta kernel. The
// check is on every call, outside the meta cache, whose key does not see
// aliasing.

// The byte range [lo, hi) a tensor reaches in its storage (false if none).
bool byte_span(const at::Tensor& t, int64_t* lo, int64_t* hi) {
  if (!t.defined() || t.is_cpu() || t.numel() == 0) {
    return false;
  }
  int64_t first = t.storage_offset();
  int64_t last = first;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t step = (t.size(d) - 1) * t.stride(d);
    (step < 0 ? first : last) += step;
  }
  *lo = first * static_cast<int64_t>(t.element_size());
  *hi = (last + 1) * static_cast<int64_t>(t.element_size());
  return true;
}

bool same_view(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.storage_offset() == b.storage_offset() && a.dtype() == b.dtype();
}

// What a call's writes share with its arguments.
struct WriteOverlap {
  // A written tensor overlaps itself, or another argument partly (or as
  // another view): the CPU is asked on every such call.
  bool partial = false;
  // Written tensors that are also passed whole, as the same view, in
  // another argument ("arg.element=arg.element;..."), empty for none. Most
  // CPU kernels accept that (x.add_(x)); those that check for any overlap
  // (scatter_, index_fill_, index_copy_) refuse it whatever the sizes, so
  // the CPU's answer is kept per op and pattern.
  std::string full_alias;
};

WriteOverlap writes_overlap(const OpInfo& info, c10::ArrayRef<c10::IValue> args) {
  WriteOverlap overlap;
  // A functional op writes only the fresh outputs the glue allocates: no
  // work (and no allocation) on the common path.
  if (std::find(info.is_mutable.begin(), info.is_mutable.end(), true) ==
      info.is_mutable.end()) {
    return overlap;
  }
  struct Seen {
    at::Tensor tensor;
    size_t arg;
    size_t element;
  };
  // Tensors by storage, so a long list (a _foreach_ op's) costs O(n).
  std::unordered_map<const c10::StorageImpl*, std::vector<Seen>> by_storage;
  std::vector<Seen> written;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::vector<at::Tensor> tensors = tensors_of(args[i]);
    for (size_t j = 0; j < tensors.size(); ++j) {
      const at::Tensor& t = tensors[j];
      if (!t.defined() || t.is_cpu()) {
        continue;
      }
      by_storage[t.storage().unsafeGetStorageImpl()].push_back({t, i, j});
      if (info.is_mutable[i]) {
        written.push_back({t, i, j});
      }
    }
  }
  for (const Seen& w : written) {
    int64_t wlo = 0, whi = 0;
    if (!byte_span(w.tensor, &wlo, &whi)) {
      continue;
    }
    if (at::has_internal_overlap(w.tensor) == at::MemOverlap::Yes) {
      overlap.partial = true;
      return overlap;
    }
    for (const Seen& t : by_storage[w.tensor.storage().unsafeGetStorageImpl()]) {
      int64_t lo = 0, hi = 0;
      if ((t.arg == w.arg && t.element == w.element) || !byte_span(t.tensor, &lo, &hi)) {
        continue;
      }
      if (t.tensor.is_same(w.tensor) || same_view(t.tensor, w.tensor)) {
        overlap.full_alias += std::to_string(w.arg) + "." + std::to_string(w.element) +
                              "=" + std::to_string(t.arg) + "." +
                              std::to_string(t.element) + ";";
      } else if (lo < whi && wlo < hi) {
        overlap.partial = true;
        return overlap;
      }
    }
  }
  return overlap;
}


void raise_cpu_overlap_error(const OpInfo& info, const c10::OperatorHandle& op,
                             c10::ArrayRef<c10::IValue> args) {
  std::unordered_map<const c10::StorageImpl*, c10::Storage> storages;
  auto on_cpu = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || t.is_cpu()) {
      return t;
    }
    const c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    auto found = storages.find(impl);
    if (found == storages.end()) {
      at::Tensor bytes = at::zeros(
          {static_cast<int64_t>(t.storage().nbytes())}, at::kByte);
      found = storages.emplace(impl, bytes.storage()).first;
    }
    const int64_t n = static_cast<int64_t>(found->second.nbytes()) /
                      static_cast<int64_t>(t.element_size());
    return at::empty({0}, t.options().device(at::kCPU))
        .set_(found->second, 0, {n}, {1})
        .as_strided(t.sizes(), t.strides(), t.storage_offset());
  };
  torch::jit::Stack stack;
  for (const c10::IValue& value : args) {
    if (value.isTensor()) {
      stack.emplace_back(on_cpu(value.toTensor()));
    } else if (value.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : value.toTensorList()) list.push_back(on_cpu(t));
      stack.emplace_back(std::move(list));
    } else if (is_optional_tensor_list(value)) {
      c10::List<std::optional<at::Tensor>> list;
      for (const c10::IValue& e : value.toListRef()) {
        list.push_back(e.isTensor() ? std::optional<at::Tensor>(on_cpu(e.toTensor()))
                                    : std::nullopt);
      }
      stack.emplace_back(std::move(list));
    } else if (value.isDevice() &&
               value.toDevice().type() == c10::DeviceType::PrivateUse1) {
      stack.emplace_back(c10::Device(c10::DeviceType::CPU));
    } else if (value.isGenerator()) {
      stack.emplace_back();  // the CPU's default generator
    } else {
      stack.push_back(value);
    }
  }
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
  } catch (const c10::Error& e) {
    if (std::string(e.what_without_backtrace()).find("unsupported operation:") !=
        std::string::npos) {
      throw;
    }
  }
  // Where the CPU kernel accepts a write into a broadcast view, each
  // memory location keeps the last of the results written to it. The
  // engine writes a view back with one scatter, which keeps an unspecified
  // one of them, so only ops that write one value everywhere (an op hook)
  // are exact; any other such write refuses rather than give another
  // answer.
  if (info.hooks->writes_one_value) {
    return;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    for (const at::Tensor& t : tensors_of(args[i])) {
      TORCH_CHECK_NOT_IMPLEMENTED(
          !info.is_mutable[i] || !t.defined() || t.is_cpu() ||
              at::has_internal_overlap(t) != at::MemOverlap::Yes,
          "aten::", info.name, " on tpu cannot write into a tensor whose "
          "elements share memory (a broadcast view): which of the results "
          "lands there is not defined on the device; clone() it first");
    }
  }
}

// A call whose written tensors are also passed whole in other arguments
// (WriteOverlap::full_alias): the CPU is asked once per op and pattern,
// and again only to raise its refusal.
void check_full_alias(const OpInfo& info, const c10::OperatorHandle& op,
                      c10::ArrayRef<c10::IValue> args, const std::string& pattern) {
  static std::mutex mutex;
  // op and pattern -> whether the CPU refused it (absent: not asked yet)
  static auto* refused = new std::unordered_map<std::string, bool>();
  const std::string key = info.name + " " + pattern;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = refused->find(key);
    if (found != refused->end() && !found->second) {
      return;
    }
  }
  try {
    raise_cpu_overlap_error(info, op, args);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex);
    (*refused)[key] = true;
    throw;
  }
  std::lock_guard<std::mutex> lock(mutex);
  (*refused)[key] = false;
}

void pack_argument(CallPacker& packer, ArgRole role, const c10::IValue& value,
                   c10::DeviceIndex device) {
  if (value.isNone()) {
    packer.add_none();
  } else if (role == ArgRole::kScalar) {
    if (value.isTensor()) {
      packer.add_tensor(value.toTensor());
    } else {
      packer.add_scalar(value.toScalar());
    }
  } else if (role == ArgRole::kScalarList) {
    packer.add_scalars(value);
  } else if (role == ArgRole::kScalarType) {
    packer.add_int(TTPU_ARG_INT, to_ttpu_dtype_checked(static_cast<c10::ScalarType>(
                                     value.toInt())));
  } else if (value.isTensor()) {
    packer.add_tensor(value.toTensor());
  } else if (value.isTensorList()) {
    std::vector<at::Tensor> tensors = tensors_of(value);
    for (at::Tensor& tensor : tensors) {
      if (is_cpu_scalar(tensor)) {
        tensor = packer.hold(tensor.to(tpu_device(device)));
      }
    }
    packer.add_tensors(tensors);
  } else if (is_optional_tensor_list(value)) {
    packer.add_tensors(tensors_of(value));
  } else if (value.isBool()) {
    packer.add_int(TTPU_ARG_BOOL, value.toBool() ? 1 : 0);
  } else if (value.isInt()) {
    packer.add_int(TTPU_ARG_INT, value.toInt());
  } else if (value.isSymInt()) {
    packer.add_int(TTPU_ARG_INT,
                   value.toSymInt().guard_int(__FILE__, __LINE__));
  } else if (value.isDouble()) {
    packer.add_float(value.toDouble());
  } else if (value.isIntList()) {
    packer.add_ints(value.toIntVector());
  } else if (value.isDoubleList()) {
    packer.add_floats(value.toDoubleVector());
  } else if (value.isBoolList()) {
    std::vector<int64_t> flags;
    for (bool flag : value.toBoolList()) {
      flags.push_back(flag ? 1 : 0);
    }
    packer.add_ints(std::move(flags));
  } else if (value.isList()) {
    // SymInt[] that holds SymInts rather than plain ints.
    std::vector<int64_t> ints;
    for (const c10::IValue& element : value.toListRef()) {
      ints.push_back(element.isSymInt()
                         ? element.toSymInt().guard_int(__FILE__, __LINE__)
                         : element.toInt());
    }
    packer.add_ints(std::move(ints));
  } else if (value.isString()) {
    packer.add_string(value.toStringRef());
  } else if (value.isDevice()) {
    packer.add_int(TTPU_ARG_INT, value.toDevice().index());
  } else if (value.isGenerator()) {
    // The engine keeps the device's random state; a custom generator's
    // state is swapped in around the call (see with_generator_state).
    packer.add_none();
  } else {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "torchtpu cannot pass an argument of ",
                                "type ", value.tagKind(), " to the engine");
  }
}

// ------------------------------------------------------------ meta geometry

struct TensorGeometry {
  bool defined = false;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};

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

at::Tensor allocate_like(const TensorGeometry& geometry,
                         c10::DeviceIndex device) {
  if (!geometry.defined) {
    return at::Tensor();
  }
  return empty_strided_tpu(geometry.sizes, geometry.strides, geometry.dtype,
                           device);
}

struct ReturnGeometry {
  enum Kind : uint8_t { kTensor, kTensorList, kOther };
  Kind kind = kOther;
  std::vector<TensorGeometry> tensors;
  c10::IValue other;  // a non-tensor return, as the meta kernel gave it
};

// What running an op on meta tensors tells: the returns' geometry and the
// new geometry of mutable arguments it resized (out=).
// The common dtype (result_type of the operands) is keyed by the same
// signature, so it is kept here too.
struct MetaGeometry {
  std::vector<ReturnGeometry> returns;
  std::vector<std::pair<size_t, TensorGeometry>> restrided;
  ttpu_dtype common_dtype = TTPU_DTYPE_NONE;
  // A warning the CPU kernel gives on every such call (a range factory's
  // resized out), raised by each call, cached or not; empty for none.
  std::string warning;
  // Outs of elements the call resizes (argument, new sizes): the CPU warns
  // of each on every call, the meta kernel only when it runs, so a call
  // answered from the cache warns here.
  std::vector<std::pair<size_t, std::vector<int64_t>>> nonempty_resized;
};

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
      put('[');
      put(value.toListRef().size());
      for (const c10::IValue& element : value.toListRef()) {
        if (!add(element)) {
          return false;
        }
      }
      put(']');
    } else {
      return false;
    }
    return true;
  }

  const std::string& bytes() const {
    return bytes_;
  }

 private:
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

// The op's meta kernel on `stack` (meta copies of the arguments): ours
// from the meta-shape registry when PyTorch ships none, else the
// dispatcher's.
void call_meta_kernel(const OpInfo& info, const c10::OperatorHandle& op,
                      torch::jit::Stack* stack) {
  std::optional<std::string> translated;
  try {
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

// Where a meta kernel rejects a call, the exception a user sees should be
// the one the CPU raises for it (same type, same message): Python meta
// functions and torch._refs word their checks differently from the C++
// kernels ("alpha argument of type float cannot be safely cast" where the
// CPU says "argument alpha must not be a floating point number"). So the
// call is replayed on the CPU, on zero-filled tensors of the same sizes,
// strides and dtypes, and the CPU's exception, if it raises one, is thrown
// in place of the meta kernel's. Calls whose tensors hold more than
// kCpuReplayElements elements, and ops without a CPU kernel, keep the meta
// kernel's exception, as do calls with neither a tensor nor a list among
// their arguments. Returns when the CPU accepts the call.
constexpr int64_t kCpuReplayElements = int64_t{1} << 24;

void throw_cpu_verdict(const c10::OperatorHandle& op,
                       c10::ArrayRef<c10::IValue> args) {
  if (!op.hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
      !op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) {
    return;
  }
  int64_t budget = kCpuReplayElements;
  bool fits = true;
  auto to_cpu_zeros = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1) {
      return t;
    }
    const int64_t item = static_cast<int64_t>(t.dtype().itemsize());
    const int64_t count =
        item > 0 ? static_cast<int64_t>(t.unsafeGetTensorImpl()->unsafe_storage().nbytes()) / item : 0;
    budget -= count;
    if (budget < 0) {
      fits = false;
      return t;
    }
    return at::zeros({count}, t.options().device(c10::kCPU))
        .as_strided(t.sizes(), t.strides(), t.storage_offset());
  };
  torch::jit::Stack cpu_stack;
  cpu_stack.reserve(args.size());
  bool any_tensor = false;
  for (const c10::IValue& value : args) {
    any_tensor = any_tensor || value.isTensor() || value.isTensorList() || value.isList();
    cpu_stack.push_back(map_tensors(value, to_cpu_zeros, c10::Device(c10::kCPU)));
  }
  if (!fits || !any_tensor) {
    return;
  }
  op.callBoxed(&cpu_stack);  // throws the CPU's exception, if any
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

std::shared_ptr<const MetaGeometry> meta_geometry(
    const c10::OperatorHandle& op, const OpInfo& info,
    c10::ArrayRef<c10::IValue> args) {
  if (!meta_cache_enabled()) {
    return run_meta(op, info, args);
  }
  SignatureKey key(op);
  for (const c10::IValue& value : args) {
    if (!key.add(value)) {
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

void push_outputs(CallPacker& packer, const c10::IValue& value) {
  if (value.isTensor()) {
    packer.add_output(value.toTensor());
    return;
  }
  for (const at::Tensor& tensor : tensors_of(value)) {
    packer.add_output(tensor);
  }
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

  const WriteOverlap overlap = writes_overlap(info, args);
  if (overlap.partial) {
    raise_cpu_overlap_error(info, op, args);
  } else if (!overlap.full_alias.empty()) {
    check_full_alias(info, op, args, overlap.full_alias);
  }

  // Output geometry and CPU-identical errors from the meta kernel (or from
  // the cache of its earlier answers for the same call signature).
  const std::shared_ptr<const MetaGeometry> geometry =
      meta_geometry(op, info, args);
  if (!geometry->warning.empty()) {
    TORCH_WARN(geometry->warning);
  }

  // out= tensors take the geometry the meta kernel resized them to.
  for (const auto& [index, resized] : geometry->restrided) {
    restride_tpu(args[index].toTensor(), resized.sizes, resized.strides,
                 resized.offset);
  }

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
    pack_argument(packer, info.roles[i], args[i], device);
  }

  if (!packer.nothing_to_compute()) {
    const ttpu_op_call call =
        packer.call(info.engine_id, geometry->common_dtype, device);
    ttpu_status* status = nullptr;
    with_generator_state(generator, device, [&] {
      status = ttpu_op_run(runtime(), &call);
    });
    if (status != nullptr) {
      if (ttpu_status_code(status) == TTPU_UNIMPLEMENTED &&
          allow_cpu_fallback && try_cpu_fallback(op, stack)) {
        ttpu_status_free(status);
        return;
      }
      throw_status(status, ("aten::" + info.name).c_str());
    }
    char warning[1024];
    if (ttpu_runtime_take_warning(runtime(), warning, sizeof(warning))) {
      TORCH_WARN(warning);
    }
  } else {
    // Nothing runs, but a call the op refuses (its dtype) fails as on the CPU.
    const ttpu_op_call call = packer.call(info.engine_id, geometry->common_dtype, device);
    if (ttpu_status* status = ttpu_op_refusal(&call)) {
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
              c10::DispatchKey::CompositeImplicitAutograd)) {
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
    return result;
  }();
  return registration;
}

}  // namespace torchtpu
