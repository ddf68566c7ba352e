// Process-wide access to the engine: the lazily created runtime, status to
// exception translation, dtype mapping and the tpu tensor <-> engine buffer
// correspondence. Everything else in the glue builds on this header.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

extern "C" {
#include "ttpu.h"
}

namespace torchtpu {

// The runtime, created on first use. Throws a RuntimeError naming what to
// install when the plugin cannot be loaded; a later call retries, so the
// process stays usable after fixing the environment.
ttpu_runtime* runtime();
// The runtime if it was already created, else nullptr. Never creates it.
ttpu_runtime* runtime_if_created();
// Directories (Python's sys.path) the engine searches for a plugin package
// when TORCHTPU_PLUGIN is not set. Used by the next runtime creation.
void set_plugin_search_dirs(const std::vector<std::string>& dirs);

// The seed every device's random state starts from when the runtime is
// created (PyTorch's default seed unless set before creation), so that
// torch.manual_seed works without starting the runtime.
uint64_t initial_seed();
// Sets it if the runtime does not exist yet; returns false if it does.
bool set_initial_seed_if_not_created(uint64_t seed);

// Number of devices; 0 (no exception) when the runtime cannot be created.
int device_count_noexcept();
// The error message of the last failed runtime creation ("" if none).
std::string runtime_error_message();

// Throws the PyTorch exception matching the status (and frees it).
// `what` prefixes the message so errors say which step failed.
void throw_status(ttpu_status* status, const char* what);

inline void check(ttpu_status* status, const char* what) {
  if (status != nullptr) {
    throw_status(status, what);
  }
}

// PyTorch dtype -> engine dtype; TTPU_DTYPE_NONE when the engine has none.
ttpu_dtype to_ttpu_dtype(c10::ScalarType type);
// Same, but throws NotImplementedError naming the dtype.
ttpu_dtype to_ttpu_dtype_checked(c10::ScalarType type);

// The engine buffer behind a tpu tensor's storage (nullptr for an empty
// storage). The DataPtr's data pointer is the handle itself.
ttpu_buffer* buffer_of(const at::Tensor& tensor);
// The same for a tensor about to be written: a copy-on-write storage
// (torch._lazy_clone's) first gets a buffer of its own, a copy of the
// shared one, as PyTorch's mutable_data_ptr() does on the CPU.
ttpu_buffer* writable_buffer_of(const at::Tensor& tensor);
// Makes the tensor's storage its own if it is copy-on-write (the step
// writable_buffer_of takes first).
void materialize_if_cow(const at::Tensor& tensor);
// Whether the tensor is all of its storage: contiguous, offset 0, and its
// bytes are the storage's.
bool covers_whole_storage(const at::Tensor& tensor);
// The engine's view of a defined tpu tensor (storage, dtype, geometry),
// borrowing the tensor's sizes and strides; NotImplementedError beyond the
// engine's rank limit or for a dtype it has not.
ttpu_tensor engine_tensor(const at::Tensor& tensor);

// The current tpu device index of this thread.
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
void check_device_index(c10::DeviceIndex index);

inline c10::Device tpu_device(c10::DeviceIndex index) {
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

}  // namespace torchtpu
