#include "allocator.h"

#include "runtime.h"

#include <c10/util/Exception.h>

namespace torchtpu {

namespace {

void release_buffer(void* context) {
  ttpu_buffer_release(static_cast<ttpu_buffer*>(context));
}

struct TpuAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    return allocate_on(current_device(), nbytes);
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &release_buffer;
  }

  // Storage-to-storage copies of whole buffers (e.g. copy-on-write
  // materialization). The handles are buffers, so copy buffer content.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count == 0) {
      return;
    }
    auto* dst_buffer = static_cast<ttpu_buffer*>(dest);
    auto* src_buffer = static_cast<ttpu_buffer*>(const_cast<void*>(src));
    TORCH_CHECK(
        ttpu_buffer_nbytes(dst_buffer) == count &&
            ttpu_buffer_nbytes(src_buffer) == count,
        "tpu storages can only be copied whole");
    check(ttpu_buffer_copy(dst_buffer, src_buffer), "copying a tpu storage");
  }
};

TpuAllocator allocator_instance;

}  // namespace

c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes) {
  const c10::Device tpu = tpu_device(device);
  if (nbytes == 0) {
    return c10::DataPtr(nullptr, nullptr, &release_buffer, tpu);
  }
  ttpu_buffer* buffer = nullptr;
  check(ttpu_buffer_create(runtime(), device, nbytes, &buffer),
        "allocating tpu memory");
  return c10::DataPtr(buffer, buffer, &release_buffer, tpu);
}

c10::Allocator* tpu_allocator() {
  return &allocator_instance;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator_instance)

}  // namespace torchtpu
