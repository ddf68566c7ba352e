// PrivateUse1 hooks: what PyTorch asks a backend about itself
// (torch.accelerator, generators, lazy init).
#include "runtime/allocator.h"
#include "runtime/generator.h"
#include "aten/ops.h"
#include "runtime/runtime.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/util/Exception.h>

namespace torchtpu {

namespace {

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  void init() const override {
    // Creating a tensor on tpu lazily initialises the device; a missing
    // plugin must surface here as the runtime's clear error.
    runtime();
  }

  bool isBuilt() const override {
    return true;
  }

  bool isAvailable() const override {
    return device_count_noexcept() > 0;
  }

  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return runtime_if_created() != nullptr && device_index >= 0 &&
           device_index < ttpu_runtime_device_count(runtime_if_created());
  }

  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(device_count_noexcept());
  }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_current_device(device);
  }

  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex old = current_device();
    if (device >= 0 && device != old) {
      set_current_device(device);
    }
    return old;
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(
      c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }

  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return new_generator(device_index);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    TORCH_CHECK(data != nullptr, "no tpu device for a null pointer");
    return tpu_device(static_cast<c10::DeviceIndex>(
        ttpu_buffer_device(static_cast<ttpu_buffer*>(data))));
  }

  bool isPinnedPtr(const void* /*data*/) const override {
    return false;
  }

  // Storage.resize_() on a tpu storage.
  void resizePrivateUse1Bytes(const c10::Storage& storage,
                              size_t newsize) const override {
    resize_storage_bytes(storage, newsize);
  }

  c10::Allocator* getPinnedMemoryAllocator() const override {
    // No pinned host memory: uploads copy from any host memory.
    return c10::GetAllocator(c10::DeviceType::CPU);
  }
};

// Registered at load time, before Python can ask torch.accelerator.
[[maybe_unused]] const bool hooks_registered = [] {
  static TpuHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  return true;
}();

}  // namespace

}  // namespace torchtpu
