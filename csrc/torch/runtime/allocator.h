#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <utility>

namespace torchtpu {

// The PrivateUse1 allocator: each allocation is one engine buffer on the
// current tpu device. The DataPtr's data is the ttpu_buffer* handle, never
// host memory; PyTorch only stores it and hands it back to the glue. It is
// a c10::DeviceAllocator, so torch.accelerator's memory functions reach the
// engine's storage counts through it.
c10::Allocator* tpu_allocator();

// Allocates storage of `nbytes` on `device` (independent of the current one).
c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes);

// The storage memory figures of `device` (-1: the current one) in
// PyTorch's allocator terms. Nothing is cached: every allocation is one
// device allocation (a segment), reserved memory is allocated memory, and
// only the "all" pool is counted.
c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device);

// (free, total) bytes of `device`'s memory; NotImplementedError where the
// plugin cannot say.
std::pair<size_t, size_t> memory_info(c10::DeviceIndex device);

}  // namespace torchtpu
