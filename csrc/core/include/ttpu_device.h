/* ttpu_device.h - events, device information and memory statistics.
 * Part of the public C API: ttpu.h includes every part, and its opening
 * comment states the conventions. */
#ifndef TTPU_DEVICE_H_
#define TTPU_DEVICE_H_

#include <stddef.h>
#include <stdint.h>

#include "ttpu_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------- events, devices and memory */

/* An event marks a point in a device's work (PyTorch's Event). It
 * completes once every program enqueued on its device before it was
 * recorded has finished, and never before an event recorded earlier on the
 * same device. The plugin tells it when that work is done, so asking
 * whether it has completed neither waits nor takes the runtime's lock.
 * Once ttpu_runtime_synchronize returns, the events recorded on the
 * devices it waited for have completed. Ref-counted.
 * Thread-safe: every call, from any thread. */
typedef struct ttpu_event ttpu_event;

/* Records a new event on `device`; a fused window's recorded ops are
 * enqueued first (they are work before the event). *out: refcount 1. */
ttpu_status* ttpu_event_record(ttpu_runtime* rt, int device, ttpu_event** out);
void ttpu_event_retain(ttpu_event* ev);
void ttpu_event_release(ttpu_event* ev);
int ttpu_event_device(const ttpu_event* ev);
/* *done = 1 once the event has completed; never waits. */
ttpu_status* ttpu_event_query(ttpu_event* ev, int* done);
/* Waits until the event has completed. Returns an error when a program
 * it waited for failed (the program's own error is reported by
 * ttpu_runtime_synchronize). */
ttpu_status* ttpu_event_wait(ttpu_event* ev);
/* Milliseconds from start's completion to end's (negative when end
 * completed first). Both must have completed (else FAILED_PRECONDITION). */
ttpu_status* ttpu_event_elapsed_ms(ttpu_event* start, ttpu_event* end,
                                   double* ms);

/* *idle = 1 when every program enqueued on `device` has finished (a fused
 * window's ops are enqueued first); never waits for the device. */
ttpu_status* ttpu_runtime_query(ttpu_runtime* rt, int device, int* idle);
/* Thread-safe: the device and memory queries below take the runtime's lock
 * or ask only the plugin or the host. */

/* What the plugin says about a device. */
typedef struct {
  char kind[128];       /* the device's kind: "cpu", "TPU v5 lite", ... */
  int id;               /* its global id */
  int64_t bytes_limit;  /* memory its programs may use; -1: not reported */
  int64_t bytes_in_use; /* the plugin's own count in use; -1: not reported */
} ttpu_device_info;
ttpu_status* ttpu_runtime_device_info(ttpu_runtime* rt, int device,
                                      ttpu_device_info* out);
/* Free and total bytes of a device's memory: the plugin's limit and use
 * where it reports them; on the CPU plugin, whose devices' memory is the
 * host's, the host's available and total memory. UNIMPLEMENTED otherwise. */
ttpu_status* ttpu_runtime_memory_info(ttpu_runtime* rt, int device,
                                      int64_t* free_bytes,
                                      int64_t* total_bytes);

/* Storage memory of a device, as the engine allocates it: one device
 * buffer per storage, nothing cached, so every allocation is one device
 * allocation. */
typedef struct {
  int64_t bytes_in_use, peak_bytes_in_use;     /* live storages' bytes */
  int64_t buffers_in_use, peak_buffers_in_use; /* live storages */
  /* Since the runtime started or ttpu_runtime_reset_accumulated: */
  int64_t allocations, frees;
  int64_t allocated_bytes, freed_bytes;
} ttpu_memory_stats;
/* device -1: the sum over devices. */
void ttpu_runtime_memory_stats(ttpu_runtime* rt, int device,
                               ttpu_memory_stats* out);
/* Zeroes the accumulated counts (ttpu_runtime_reset_peak resets the
 * peaks, of bytes and of storages). device -1: every device. */
void ttpu_runtime_reset_accumulated(ttpu_runtime* rt, int device);

#ifdef __cplusplus
}
#endif

#endif /* TTPU_DEVICE_H_ */
