// Writes through memory a call shares: with itself (a broadcast view) or
// with another argument (a shifted view of the same storage). What the
// boxed engine kernel (engine_kernel.cpp) checks before it runs a call
// that writes; write_overlap.cpp says why and how.
#pragma once

#include "aten/op_info.h"

#include <ATen/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

namespace torchtpu {

// The byte range [lo, hi) a tpu tensor reaches in its storage (false if
// none: undefined, on the CPU, or empty).
bool byte_span(const at::Tensor& t, int64_t* lo, int64_t* hi);

// Raises what the CPU raises for a call whose writes go through memory it
// shares (its "unsupported operation" error), or NotImplementedError for a
// write into a broadcast view the device cannot do as the CPU does. A call
// that writes only fresh outputs costs nothing here.
void check_write_overlap(const OpInfo& info, const c10::OperatorHandle& op,
                         c10::ArrayRef<c10::IValue> args);

}  // namespace torchtpu
