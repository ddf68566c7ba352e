// Reading the values of a boxed call: which are tensors (alone, in a list,
// in a list of optional tensors) and which are CPU scalars. Shared by the
// parts of the boxed engine kernel, so each reads a call the same way.
#pragma once

#include <ATen/Tensor.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <optional>
#include <vector>

namespace torchtpu {

inline bool is_cpu_scalar(const at::Tensor& tensor) {
  return tensor.defined() && tensor.is_cpu() && tensor.dim() == 0;
}

inline bool is_optional_tensor_list(const c10::IValue& value) {
  return value.isList() && !value.isTensorList() &&
         value.toList().elementType()->kind() == c10::TypeKind::OptionalType;
}

inline std::vector<at::Tensor> tensors_of(const c10::IValue& value) {
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

}  // namespace torchtpu
