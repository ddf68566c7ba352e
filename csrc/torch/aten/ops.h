// Kernels shared between the registration files.
#pragma once

#include <ATen/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Storage.h>

#include <map>
#include <string>
#include <vector>

namespace torchtpu {

// ---------------------------------------------------------------- engine ops

// Runs `op` through the engine (its lowering table entry), with the
// dispatcher's boxed calling convention: arguments on `stack` are replaced
// by the returns. Output geometry, errors and promotion come from PyTorch's
// own meta kernels. When the engine cannot run it and the CPU fallback is
// enabled (and allowed here), the op runs on the CPU instead.
void run_engine_op(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                   bool allow_cpu_fallback = true);

// Engine-side copy between two tpu tensors on one device (the engine op
// "copy_": broadcasting, dtype conversion, strided destination).
void engine_copy(const at::Tensor& dst, const at::Tensor& src);

// Registers the boxed engine kernel for every dispatcher op the engine's
// lowering table has (once; later calls return the first result).
struct KernelRegistration {
  std::vector<std::string> registered;
  // Op name -> why it was not registered.
  std::map<std::string, std::string> skipped;
};
const KernelRegistration& register_engine_kernels();

// Registers a kernel for every ATen out= overload without a tpu kernel
// whose functional counterpart has one (out_forms.cpp); returns their
// names. Called once, by register_engine_kernels, after the engine ops.
std::vector<std::string> register_out_forms();

// Registers, for tpu's backend and autograd keys, a kernel that runs a
// CompositeImplicitAutograd op's decomposition as one program in strict
// mode (composite_kernels.cpp), for the ops whose decomposition runs
// several; returns their names. Called once, by register_engine_kernels.
std::vector<std::string> register_grouped_composites();

// Whether a CompositeImplicitAutograd op has an engine op of its own that
// replaces its decomposition on tpu's backend key (silu_backward): tpu's
// autograd key then runs the decomposition only where autograd must record
// its ops (composite_kernels.cpp). Asked by register_engine_kernels.
bool engine_op_replaces_composite(const std::string& name);

// The overload name of an out= overload's functional counterpart by ATen's
// naming ("out"/"values" -> "", "dim_max"/"dim_min" -> "dim", "<ov>_out"
// and "<ov>_values" -> "<ov>"), "-" when the name gives none.
std::string overload_of_functional(const std::string& out_overload);

// Ops that have their own kernels (tensor_kernels.cpp); the engine
// registration leaves these alone.
bool has_direct_kernel(const std::string& op_name);

// ---------------------------------------------------------------- tensors

at::Tensor empty_strided_tpu(c10::IntArrayRef sizes, c10::IntArrayRef strides,
                             c10::ScalarType dtype, c10::DeviceIndex device);
at::Tensor empty_contiguous_tpu(c10::IntArrayRef sizes, c10::ScalarType dtype,
                                c10::DeviceIndex device);

// Grows or shrinks a tpu storage to nbytes, keeping its content (prefix).
void resize_storage_bytes(const c10::Storage& storage, size_t nbytes);

// Makes `tensor` view `sizes`/`strides`/`offset` of its storage, growing the
// storage when the view does not fit (the out= resize of CPU kernels).
void restride_tpu(const at::Tensor& tensor, c10::IntArrayRef sizes,
                  c10::IntArrayRef strides, int64_t offset);

// dst.copy_(src) where at least one side is on tpu (any devices).
void copy_tensor(const at::Tensor& dst, const at::Tensor& src);

// ---------------------------------------------------------------- fallback

// The boxed fallback for ops without a tpu kernel.
void fallback_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Runs `op` on the CPU if TORCHTPU_CPU_FALLBACK allows it (warn once,
// count); otherwise returns false and leaves the stack alone.
bool try_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
bool cpu_fallback_enabled();
void set_cpu_fallback_enabled(bool enabled);
std::map<std::string, int64_t> fallback_counts();

// ---------------------------------------------------------------- CPU replays

// Calls asked of the CPU's own kernel on stand-ins (cpu_replay.h), since
// the process started: "error_text" (a meta kernel's error replaced by the
// CPU's words), "alias_checks" (writes through shared memory; of them
// "alias_checks_shrunk" on shrunk stand-ins) and "skipped" (beyond what a
// replay may cost, so not asked).
std::map<std::string, int64_t> cpu_replay_counts();

}  // namespace torchtpu
