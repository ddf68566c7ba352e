// Packing a dispatcher call into the engine's ttpu_op_call (ttpu_op.h):
// the CallPacker owns everything the call's pointers refer to, and
// pack_argument turns one argument into its ttpu_arg by its role.
#pragma once

#include "aten/call_args.h"
#include "aten/op_info.h"
#include "aten/ops.h"
#include "runtime/runtime.h"

#include <ATen/Context.h>
#include <ATen/Tensor.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/graph_task.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <list>
#include <string>
#include <vector>

namespace torchtpu {

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
    } else if (scalar.type() == c10::ScalarType::UInt64) {
      // beyond int64 (uint64's largest values): its bits, marked unsigned
      const uint64_t value = scalar.toUInt64();
      arg.i = static_cast<int64_t>(value);
      arg.f = static_cast<double>(value);
      dtype = TTPU_U64;
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
    call.autograd_task = torch::autograd::get_current_graph_task_id() + 1;
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

// Packs `value`, an argument of the given role, for a call on `device`
// (CPU scalars in tensor lists are uploaded there).
void pack_argument(CallPacker& packer, ArgRole role, const c10::IValue& value,
                   c10::DeviceIndex device);

// Packs the tensors of a returned (or written) value as outputs.
void push_outputs(CallPacker& packer, const c10::IValue& value);

}  // namespace torchtpu
