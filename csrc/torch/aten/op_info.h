// What the boxed engine kernel (engine_kernel.cpp) knows about an op before
// any call: its engine id, how each argument is packed, what it writes and
// returns, its hooks and its shape function. Built once per op from the
// schema, so a call reads it and parses nothing.
#pragma once

#include "aten/op_hooks.h"

#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace torchtpu {

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
  // The meta kernel's answer depends on its Scalar arguments' kinds (bool,
  // integer, floating, complex), not their values: a pointwise op or a
  // foreach op (an optimizer's step sizes change every step, and keyed by
  // value each step would run the meta kernel again). See meta_geometry.
  bool meta_scalar_kinds_only = false;
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

// The op's info, built on its first call and kept for the process (the
// reference stays valid; any thread may call).
const OpInfo& info_for(const c10::OperatorHandle& op);

}  // namespace torchtpu
