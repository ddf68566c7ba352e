/* ttpu_trace.h - trace hooks for profilers.
 * Part of the public C API: ttpu.h includes every part, and its opening
 * comment states the conventions. */
#ifndef TTPU_TRACE_H_
#define TTPU_TRACE_H_

#include <stddef.h>
#include <stdint.h>

#include "ttpu_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ tracing */

/* A trace hook lets a profiler see what the engine does on the host and
 * on the devices: compiles, and every program launch with the times it
 * was enqueued and finished on its device. Nothing is reported, timed or
 * allocated while no hook is installed. */

typedef enum {
  /* A program is about to be compiled, or loaded from the persistent
   * cache, for a miss of the in-memory cache. */
  TTPU_TRACE_COMPILE_BEGIN = 0,
  /* The compile (or load) that the last BEGIN on this thread announced is
   * over; from_disk and failed say how. */
  TTPU_TRACE_COMPILE_END = 1,
  /* A program was enqueued on `device`; time_ns is when its launch began. */
  TTPU_TRACE_LAUNCH = 2,
  /* The program of LAUNCH number `launch` finished on its device (failed:
   * with an error, or it could not be timed); time_ns is when. */
  TTPU_TRACE_DONE = 3,
} ttpu_trace_kind;

typedef struct {
  ttpu_trace_kind kind;
  int device;
  /* COMPILE_*, LAUNCH: the program (an op name, "fused window (N ops)",
   * "graph NAME (N ops)", a collective); borrowed for the call. NULL for
   * DONE. */
  const char* what;
  int n_ops;          /* COMPILE_*, LAUNCH: the ops the program runs */
  int from_disk;      /* COMPILE_END: loaded from the persistent cache */
  int failed;         /* COMPILE_END, DONE */
  uint64_t launch;    /* LAUNCH, DONE: numbers launches from 1, per runtime */
  int64_t time_ns;    /* LAUNCH, DONE: CLOCK_MONOTONIC nanoseconds */
} ttpu_trace_event;

/* Returns, from COMPILE_END and LAUNCH, the TTPU_TRACE_* bits to report
 * from then on (0 removes the hook): a hook may end itself from where it
 * cannot call the engine. Other kinds' return values are ignored. */
typedef unsigned (*ttpu_trace_fn)(void* user, const ttpu_trace_event* event);

#define TTPU_TRACE_COMPILES 1u /* report COMPILE_BEGIN / COMPILE_END */
#define TTPU_TRACE_LAUNCHES 2u /* report LAUNCH / DONE (times every launch) */

/* Installs fn with `user` for the events in `what` (TTPU_TRACE_* bits);
 * fn NULL or what 0 removes the hook. COMPILE_* and LAUNCH come on the
 * thread making the call, with the runtime's lock held: fn must not call
 * into the engine, and must not throw. DONE comes once for every LAUNCH,
 * after it, on a plugin thread (or on the launching thread when the
 * program finished at once), without the lock; it reaches the fn and
 * user in force at the LAUNCH even after the hook was changed, so both
 * must outlive every launch made while they were installed. A
 * COMPILE_BEGIN is always followed by its COMPILE_END. */
/* Thread-safe: installing takes the runtime's lock; the hook itself is
 * called as described above. */
ttpu_status* ttpu_runtime_set_trace_hook(ttpu_runtime* rt, ttpu_trace_fn fn,
                                         void* user, unsigned what);

#ifdef __cplusplus
}
#endif

#endif /* TTPU_TRACE_H_ */
