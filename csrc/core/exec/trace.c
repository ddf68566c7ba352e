/* trace.c - the trace hook: compiles and program launches reported to a
 * profiler (ttpu_runtime_set_trace_hook).
 *
 * A launch's device time comes from its completion event: the plugin calls
 * us back when the program is done, and that moment, with the moment its
 * launch began, is all a profiler needs to place the program on its
 * device's timeline. The callback carries its own copy of the hook, so it
 * never touches the runtime (which may have changed its hook, or be gone,
 * by then). */
#include <stdlib.h>
#include <time.h>

#include "runtime.h"

static int64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

ttpu_status* ttpu_runtime_set_trace_hook(ttpu_runtime* rt, ttpu_trace_fn fn,
                                         void* user, unsigned what) {
  if (!rt) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "runtime is NULL");
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  what &= TTPU_TRACE_COMPILES | TTPU_TRACE_LAUNCHES;
  rt->trace_fn = what ? fn : NULL;
  rt->trace_user = rt->trace_fn ? user : NULL;
  rt->trace_what = rt->trace_fn ? what : 0;
  pthread_mutex_unlock(&rt->mu);
  return NULL;
}

/* What the hook answered from COMPILE_END or LAUNCH. */
static void keep_only(ttpu_runtime* rt, unsigned what) {
  what &= TTPU_TRACE_COMPILES | TTPU_TRACE_LAUNCHES;
  rt->trace_what = what;
  if (!what) {
    rt->trace_fn = NULL;
    rt->trace_user = NULL;
  }
}

static unsigned report_compile(ttpu_runtime* rt, ttpu_trace_kind kind,
                               int device, const char* what, int n_ops,
                               int from_disk, int failed) {
  ttpu_trace_event ev = {0};
  ev.kind = kind;
  ev.device = device;
  ev.what = what;
  ev.n_ops = n_ops;
  ev.from_disk = from_disk;
  ev.failed = failed;
  return rt->trace_fn(rt->trace_user, &ev);
}

void ttpu_rt_trace_compile_begin(ttpu_runtime* rt, int device,
                                 const char* what, int n_ops) {
  if (!(rt->trace_what & TTPU_TRACE_COMPILES)) return;
  report_compile(rt, TTPU_TRACE_COMPILE_BEGIN, device, what, n_ops, 0, 0);
  rt->trace_open_compiles++;
}

void ttpu_rt_trace_compile_end(ttpu_runtime* rt, int device, const char* what,
                               int n_ops, int from_disk, int failed) {
  /* Ends the BEGIN reported before, even when the hook has asked for
   * fewer kinds since (a LAUNCH cannot come in between, but keep the pair
   * whatever happens). */
  if (!rt->trace_open_compiles) return;
  rt->trace_open_compiles--;
  if (!rt->trace_fn) return;
  keep_only(rt, report_compile(rt, TTPU_TRACE_COMPILE_END, device, what, n_ops,
                               from_disk, failed));
}

int64_t ttpu_rt_trace_clock(const ttpu_runtime* rt) {
  return (rt->trace_what & TTPU_TRACE_LAUNCHES) ? monotonic_ns() : 0;
}

typedef struct {
  ttpu_trace_fn fn;
  void* user;
  int device;
  uint64_t launch;
} launch_done_ctx;

static void report_done(const launch_done_ctx* c, int failed) {
  ttpu_trace_event ev = {0};
  ev.kind = TTPU_TRACE_DONE;
  ev.device = c->device;
  ev.failed = failed;
  ev.launch = c->launch;
  ev.time_ns = monotonic_ns();
  c->fn(c->user, &ev);
}

static void on_launch_done(void* arg, int failed) {
  launch_done_ctx* c = arg;
  report_done(c, failed);
  free(c);
}

void ttpu_rt_trace_launch(ttpu_runtime* rt, int device, const char* what,
                          int n_ops, int64_t began_ns, ttpu_pjrt_event* done) {
  if (!(rt->trace_what & TTPU_TRACE_LAUNCHES)) return;
  launch_done_ctx local = {rt->trace_fn, rt->trace_user, device,
                           ++rt->trace_launches};
  ttpu_trace_event ev = {0};
  ev.kind = TTPU_TRACE_LAUNCH;
  ev.device = device;
  ev.what = what;
  ev.n_ops = n_ops;
  ev.launch = local.launch;
  ev.time_ns = began_ns ? began_ns : monotonic_ns();
  keep_only(rt, local.fn(local.user, &ev));
  launch_done_ctx* c = done ? malloc(sizeof(*c)) : NULL;
  ttpu_status* s = NULL;
  if (c) {
    *c = local;
    s = ttpu_pjrt_event_on_ready(rt->client, done, on_launch_done, c);
    if (!s) return;
    free(c);
  }
  /* No event to wait on (or no way to): the launch still gets its DONE,
   * marked untimed, so a profiler never waits for it. */
  ttpu_status_free(s);
  report_done(&local, 1);
}
