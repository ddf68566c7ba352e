#include "guard.h"

#include "runtime.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <chrono>
#include <vector>

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

// An event is the moment its device's queue was drained after record():
// correct for every ordering question because record/query/synchronize
// all wait for the device, and it gives real times for elapsed_time.
struct TpuEvent {
  c10::DeviceIndex device = -1;
  bool recorded = false;
  bool completed = false;
  std::chrono::steady_clock::time_point completed_at;
};

void complete(TpuEvent* event) {
  if (!event->recorded || event->completed) {
    return;
  }
  synchronize_device(event->device);
  event->completed = true;
  event->completed_at = std::chrono::steady_clock::now();
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
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", static_cast<int>(device_index),
                " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    auto* tpu_event = static_cast<TpuEvent*>(*event);
    if (tpu_event == nullptr) {
      tpu_event = new TpuEvent();
      *event = tpu_event;
    }
    tpu_event->device = stream.device_index();
    tpu_event->recorded = true;
    tpu_event->completed = false;
    // Timing events need the time the queued work finished, so they wait
    // now; plain events wait lazily when queried or synchronized.
    if (flag == c10::EventFlag::BACKEND_DEFAULT) {
      complete(tpu_event);
    }
  }

  void block(void* event, const c10::Stream& stream) const override {
    auto* tpu_event = static_cast<TpuEvent*>(event);
    // Streams of one device share the engine's ordered queue, so only a
    // cross-device wait needs the host to wait for the event's device.
    if (tpu_event != nullptr && tpu_event->recorded &&
        tpu_event->device != stream.device_index()) {
      complete(tpu_event);
    }
  }

  bool queryEvent(void* event) const override {
    auto* tpu_event = static_cast<TpuEvent*>(event);
    if (tpu_event != nullptr) {
      complete(tpu_event);
    }
    return true;
  }

  void synchronizeEvent(void* event) const override {
    auto* tpu_event = static_cast<TpuEvent*>(event);
    if (tpu_event != nullptr) {
      complete(tpu_event);
    }
  }

  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/)
      const noexcept override {
    delete static_cast<TpuEvent*>(event);
  }

  double elapsedTime(void* start, void* end,
                     const c10::DeviceIndex /*device_index*/) const override {
    auto* start_event = static_cast<TpuEvent*>(start);
    auto* end_event = static_cast<TpuEvent*>(end);
    TORCH_CHECK(start_event != nullptr && end_event != nullptr &&
                    start_event->recorded && end_event->recorded,
                "Both events must be recorded before calculating elapsed time.");
    complete(start_event);
    complete(end_event);
    std::chrono::duration<double, std::milli> elapsed =
        end_event->completed_at - start_event->completed_at;
    return elapsed.count();
  }

  bool queryStream(const c10::Stream& stream) const override {
    synchronize_device(stream.device_index());
    return true;
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    synchronize_device(stream.device_index());
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    synchronize_device(resolve(device_index));
  }
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
