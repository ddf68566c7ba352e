// CPU replays: a call of the boxed engine kernel asked of the op's own CPU
// kernel, on CPU stand-ins for its tpu tensors, for what only that kernel
// knows: the words of its argument errors, and whether it refuses a write
// through memory the call shares. What a replay may cost is the rule at the
// top of cpu_replay.cpp; torchtpu.debug.metrics()["cpu_replays"] counts
// them (cpu_replay_counts in ops.h).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

namespace torchtpu {

// Where a meta kernel rejects a call, the exception a user sees should be
// the one the CPU raises for it (same type, same message): Python meta
// functions and torch._refs word their checks differently from the C++
// kernels ("alpha argument of type float cannot be safely cast" where the
// CPU says "argument alpha must not be a floating point number"). So the
// call is replayed on the CPU, on zero-filled tensors of the same sizes,
// strides and dtypes, and the CPU's exception, if it raises one, is thrown
// in place of the meta kernel's. Calls whose tensors' storages hold more
// than the replay bound, and ops without a CPU kernel, keep the meta
// kernel's exception, as do calls with neither a tensor nor a list among
// their arguments. Returns when the CPU accepts the call.
void throw_cpu_verdict(const c10::OperatorHandle& op,
                       c10::ArrayRef<c10::IValue> args);

// Asks the CPU kernel the call on stand-ins that share storages as the
// arguments do, and throws its "unsupported operation:" error where it
// refuses a write through shared memory; any other answer (success, or an
// error of another kind, which the meta kernel words) returns true. Returns
// false where the CPU's answer tells nothing of the overlaps: a call not
// asked (beyond what a replay may cost), or one whose shrunk stand-ins it
// refused for another reason.
bool ask_cpu_about_aliasing(const c10::OperatorHandle& op,
                            c10::ArrayRef<c10::IValue> args);

}  // namespace torchtpu
