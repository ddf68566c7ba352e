// Output geometry from PyTorch's meta kernels: what the boxed engine kernel
// (engine_kernel.cpp) allocates and returns, and the CPU's argument errors,
// for a call before the engine sees it. The answers are cached by the
// call's signature, so a repeated call does not run a meta kernel again.
#pragma once

#include "aten/op_info.h"
#include "runtime/runtime.h"

#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace torchtpu {

struct TensorGeometry {
  bool defined = false;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};

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

// The geometry of the call `args` of `op` (its arguments, in place on the
// stack): the cache's answer for its signature, else the meta kernel's,
// which raises the CPU's error for a call the op refuses. A cached answer
// still gives the warnings every such call gives.
std::shared_ptr<const MetaGeometry> meta_geometry(
    const c10::OperatorHandle& op, const OpInfo& info,
    c10::ArrayRef<c10::IValue> args);

}  // namespace torchtpu
