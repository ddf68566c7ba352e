#pragma once

#include <c10/core/Stream.h>

namespace torchtpu {

// Streams are labels over the engine's per-device ordered queue: id 0 is a
// device's default stream, created streams get fresh ids. Work on any stream
// of a device runs in issue order, which is a valid (if conservative)
// implementation of stream semantics.
c10::Stream current_stream(c10::DeviceIndex device);
c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream new_stream(c10::DeviceIndex device);
// Makes `stream` current on its device for this thread; returns the old one.
c10::Stream exchange_stream(c10::Stream stream);

}  // namespace torchtpu
