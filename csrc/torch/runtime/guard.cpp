#include "runtime/guard.h"

#include "runtime/runtime.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <vector>

// torch.accelerator.get_device_capability() reaches the guard's
// getDeviceCapability, compiled where the torch built against has
// c10::DeviceCapability.
#if __has_include(<c10/core/DeviceCapability.h>)
#include <c10/core/DeviceCapability.h>
#define TTPU_HAS_DEVICE_CAPABILITY 1
#else
#define TTPU_HAS_DEVICE_CAPABILITY 0
#endif

namespace torchtpu {

namespace {

constexpr c10::DeviceType kTpu = c10::DeviceType::PrivateUse1;

std::atomic<c10::StreamId> next_stream_id{1};
// Current stream id per device for this thread; missing entries mean the
// default stream (id 0).
thread_local std::vector<c10::StreamId> thread_current_streams;

c10::StreamId& current_stream_slot(c10::DeviceIndex device) {
  if (thread_current_streams.size() <= static_cast<size_t>(device)) {
    thread_current_streams.resize(static_cast<size_t>(device) + 1, 0);
  }
  return thread_current_streams[static_cast<size_t>(device)];
}

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  return device < 0 ? current_device() : device;
}

void synchronize_device(c10::DeviceIndex device) {
  check(ttpu_runtime_synchronize(runtime(), device), "tpu synchronize");
}

// A recorded event is an engine event: it completes when the programs
// enqueued on its device before record() have finished, which the plugin
// reports as it happens, so query() never waits and elapsed_time() is the
// time between the two completions on the device. Re-recording replaces
// it with a new one.
struct TpuEvent {
  ttpu_event* event = nullptr;  // nullptr until recorded
};

ttpu_event* recorded(void* event) {
  auto* tpu_event = static_cast<TpuEvent*>(event);
  return tpu_event != nullptr ? tpu_event->event : nullptr;
}

void wait_event(ttpu_event* event) {
  if (event != nullptr) {
    check(ttpu_event_wait(event), "waiting for a tpu event");
  }
}

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override {
    return kTpu;
  }

  c10::Device exchangeDevice(c10::Device device) const override {
    TORCH_INTERNAL_ASSERT(device.type() == kTpu);
    c10::Device old = getDevice();
    if (old.index() != device.index()) {
      set_current_device(device.index());
    }
    return old;
  }

  c10::Device getDevice() const override {
    return tpu_device(current_device());
  }

  void setDevice(c10::Device device) const override {
    TORCH_INTERNAL_ASSERT(device.type() == kTpu);
    set_current_device(device.index());
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    try {
      set_current_device(device.index());
    } catch (const std::exception&) {
      // Restoring a device that was valid when saved cannot fail; if it
      // does, the guard is unwinding anyway and must not throw.
    }
  }

  c10::Stream getStream(c10::Device device) const override {
    return current_stream(resolve(device.index()));
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return default_stream(resolve(device.index()));
  }

  // Streams of a device share its one ordered work queue: there is one
  // priority level, 0 (torch.tpu.Stream.priority_range() is (0, 0)), and
  // a requested priority maps to it, as CUDA clamps to its range.
  c10::Stream getStreamFromGlobalPool(c10::Device device,
                                      bool /*high_priority*/) const override {
    return new_stream(resolve(device.index()));
  }

  c10::Stream getNewStream(c10::Device device, int /*priority*/) const override {
    return new_stream(resolve(device.index()));
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    return exchange_stream(stream);
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count_noexcept());
  }

  void record(void** event, const c10::Stream& stream,
              const c10::DeviceIndex device_index,
              const c10::EventFlag /*flag*/) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", static_cast<int>(device_index),
                " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    // Timing and plain events are the same: every engine event knows when
    // its work finished.
    ttpu_event* fresh = nullptr;
    check(ttpu_event_record(runtime(), stream.device_index(), &fresh),
          "recording a tpu event");
    auto* tpu_event = static_cast<TpuEvent*>(*event);
    if (tpu_event == nullptr) {
      tpu_event = new TpuEvent();
      *event = tpu_event;
    }
    ttpu_event_release(tpu_event->event);
    tpu_event->event = fresh;
  }

  void block(void* event, const c10::Stream& stream) const override {
    ttpu_event* waited = recorded(event);
    // Streams of one device share the engine's ordered queue, so only a
    // cross-device wait needs the host to wait for the event's device.
    if (waited != nullptr &&
        ttpu_event_device(waited) != stream.device_index()) {
      wait_event(waited);
    }
  }

  bool queryEvent(void* event) const override {
    ttpu_event* queried = recorded(event);
    if (queried == nullptr) {
      return true;  // never recorded: nothing to wait for
    }
    int done = 0;
    check(ttpu_event_query(queried, &done), "querying a tpu event");
    return done != 0;
  }

  void synchronizeEvent(void* event) const override {
    wait_event(recorded(event));
  }

  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/)
      const noexcept override {
    auto* tpu_event = static_cast<TpuEvent*>(event);
    if (tpu_event != nullptr) {
      ttpu_event_release(tpu_event->event);
      delete tpu_event;
    }
  }

  double elapsedTime(void* start, void* end,
                     const c10::DeviceIndex /*device_index*/) const override {
    ttpu_event* start_event = recorded(start);
    ttpu_event* end_event = recorded(end);
    TORCH_CHECK(start_event != nullptr && end_event != nullptr,
                "Both events must be recorded before calculating elapsed time.");
    double ms = 0;
    check(ttpu_event_elapsed_ms(start_event, end_event, &ms),
          "elapsed time of tpu events");
    return ms;
  }

  bool queryStream(const c10::Stream& stream) const override {
    int idle = 0;
    check(ttpu_runtime_query(runtime(), stream.device_index(), &idle),
          "querying a tpu stream");
    return idle != 0;
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    synchronize_device(stream.device_index());
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    synchronize_device(resolve(device_index));
  }

#if TTPU_HAS_DEVICE_CAPABILITY
  // torch.accelerator.get_device_capability(): the dtypes a tpu tensor can
  // have (the engine's storage dtypes).
  c10::DeviceCapability getDeviceCapability(
      c10::Device /*device*/) const override {
    c10::DeviceCapability capability;
    capability.capability_data.capability_bits = 0;
#define TTPU_CAPABILITY_BIT(_, name)                                         \
  capability.capability_data.supported_scalar_types.has_##name =            \
      to_ttpu_dtype(c10::ScalarType::name) != TTPU_DTYPE_NONE ? 1 : 0;
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(TTPU_CAPABILITY_BIT)
#undef TTPU_CAPABILITY_BIT
    return capability;
  }
#endif
};

}  // namespace

c10::Stream current_stream(c10::DeviceIndex device) {
  return c10::Stream(c10::Stream::UNSAFE, tpu_device(device),
                     current_stream_slot(device));
}

c10::Stream default_stream(c10::DeviceIndex device) {
  return c10::Stream(c10::Stream::UNSAFE, tpu_device(device), 0);
}

c10::Stream new_stream(c10::DeviceIndex device) {
  return c10::Stream(c10::Stream::UNSAFE, tpu_device(device),
                     next_stream_id.fetch_add(1));
}

c10::Stream exchange_stream(c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kTpu, "expected a tpu stream, got ",
              stream);
  c10::StreamId& slot = current_stream_slot(stream.device_index());
  c10::Stream old(c10::Stream::UNSAFE, stream.device(), slot);
  slot = stream.id();
  return old;
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace torchtpu
