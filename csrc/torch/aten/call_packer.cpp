// Arguments and outputs into a CallPacker (call_packer.h).
#include "aten/call_packer.h"

namespace torchtpu {

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

void push_outputs(CallPacker& packer, const c10::IValue& value) {
  if (value.isTensor()) {
    packer.add_output(value.toTensor());
    return;
  }
  for (const at::Tensor& tensor : tensors_of(value)) {
    packer.add_output(tensor);
  }
}

}  // namespace torchtpu
