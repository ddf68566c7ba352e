#include "runtime/allocator.h"

#include "runtime/runtime.h"

#include <c10/core/impl/COW.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

namespace torchtpu {

namespace {

namespace cda = c10::CachingDeviceAllocator;

void release_buffer(void* context) {
  ttpu_buffer_release_owner(static_cast<ttpu_buffer*>(context));
}

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  return device < 0 ? current_device() : device;
}

void fill(cda::StatArray& stats, int64_t current, int64_t peak,
          int64_t allocated, int64_t freed) {
  auto& all = stats[static_cast<size_t>(cda::StatType::AGGREGATE)];
  all.current = current;
  all.peak = peak;
  all.allocated = allocated;
  all.freed = freed;
}

struct TpuAllocator final : public c10::DeviceAllocator {
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

  // c10::DeviceAllocator: what torch.accelerator's memory functions call.

  bool initialized() override {
    return runtime_if_created() != nullptr;
  }

  // A freed storage's buffer goes back to the plugin at once; on the CPU
  // plugin the process heap keeps freed memory for reuse, and this gives
  // it back to the system.
  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {
    if (ttpu_runtime* rt = runtime_if_created()) ttpu_runtime_release_host_heap(rt);
  }

  // A storage freed while programs using it are still queued cannot be
  // reused early: the plugin keeps a buffer until its last use is over,
  // which is what recording the stream would ensure.
  void recordStream(const c10::DataPtr& /*ptr*/,
                    c10::Stream /*stream*/) override {}

  cda::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return device_stats(device);
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    ttpu_runtime_reset_accumulated(runtime(), resolve(device));
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    ttpu_runtime_reset_peak(runtime(), resolve(device));
  }

// getMemoryInfo joined DeviceAllocator in PyTorch 2.10.
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 10)
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    return memory_info(device);
  }
#endif
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

cda::DeviceStats device_stats(c10::DeviceIndex device) {
  ttpu_memory_stats m{};
  ttpu_runtime_memory_stats(runtime(), resolve(device), &m);
  cda::DeviceStats out;
  // One storage is one allocation, one segment and one active block.
  fill(out.allocation, m.buffers_in_use, m.peak_buffers_in_use, m.allocations,
       m.frees);
  out.segment = out.allocation;
  out.active = out.allocation;
  fill(out.allocated_bytes, m.bytes_in_use, m.peak_bytes_in_use,
       m.allocated_bytes, m.freed_bytes);
  out.reserved_bytes = out.allocated_bytes;
  out.active_bytes = out.allocated_bytes;
  out.requested_bytes = out.allocated_bytes;
  out.num_device_alloc = m.allocations;
  out.num_device_free = m.frees;
  return out;
}

std::pair<size_t, size_t> memory_info(c10::DeviceIndex device) {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
  check(ttpu_runtime_memory_info(runtime(), resolve(device), &free_bytes,
                                 &total_bytes),
        "tpu memory info");
  return {static_cast<size_t>(free_bytes), static_cast<size_t>(total_bytes)};
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator_instance)

namespace {

// Storages that torch's storage code makes on tpu. A slice of a storage
// (UntypedStorage[a:b]) points into another storage's memory at a byte
// offset, but a tpu storage is a whole engine buffer, addressed by its
// handle: such a slice is refused here, where it is made, instead of
// failing (or worse) wherever it is used later.
c10::intrusive_ptr<c10::StorageImpl> make_storage(c10::StorageImpl::use_byte_size_t use_byte_size,
                                                  c10::SymInt size_bytes, c10::DataPtr data_ptr,
                                                  c10::Allocator* allocator, bool resizable) {
  if (data_ptr) {
    // A copy-on-write storage (torch._lazy_clone's) shares a whole buffer.
    TORCH_CHECK_NOT_IMPLEMENTED(
        data_ptr.get() == data_ptr.get_context() || c10::impl::cow::is_cow_data_ptr(data_ptr),
        "a slice of a tpu storage (UntypedStorage[start:stop]) is not supported: "
        "tpu storages are addressed whole; slice a tensor over the storage instead");
    return c10::make_intrusive<c10::StorageImpl>(use_byte_size, std::move(size_bytes),
                                                 std::move(data_ptr), allocator, resizable);
  }
  return c10::make_intrusive<c10::StorageImpl>(use_byte_size, std::move(size_bytes), allocator,
                                               resizable);
}

const bool storage_maker_registered = [] {
  c10::SetStorageImplCreate(c10::DeviceType::PrivateUse1, &make_storage);
  return true;
}();

}  // namespace

}  // namespace torchtpu
