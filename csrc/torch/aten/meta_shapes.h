// The registry of meta shapes for engine ops PyTorch ships no meta kernel
// for, or one whose shapes differ from the CPU kernel's (meta_shapes.cpp). Each entry is a kernel with the op's boxed calling
// convention, called on meta copies of the arguments: it sizes the outputs
// and raises the CPU kernel's argument errors. Nothing here is registered
// with the dispatcher.
#pragma once

#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>

namespace torchtpu {

// The shape function for the lowering table's op `name` ("geqrf",
// "_unique2.out"), or nullptr when PyTorch's own meta kernel serves. The
// registry is built on first use and never changes: the pointer stays
// valid, and callers on any thread may use it.
const c10::KernelFunction* find_meta_shape(const std::string& name);

}  // namespace torchtpu
