#pragma once

#include <c10/core/Allocator.h>

namespace torchtpu {

// The PrivateUse1 allocator: each allocation is one engine buffer on the
// current tpu device. The DataPtr's data is the ttpu_buffer* handle, never
// host memory; PyTorch only stores it and hands it back to the glue.
c10::Allocator* tpu_allocator();

// Allocates storage of `nbytes` on `device` (independent of the current one).
c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes);

}  // namespace torchtpu
